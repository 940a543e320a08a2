//! Fetching agent cards from the network: a publish body that names only a `manifest_url` is
//! completed from the A2A v1.0 card found there, and the signatures a publisher put on a card
//! are checked with the keys they name.

use std::collections::HashMap;

use serde_json::Value;
use url::Url;

use crate::domain::{A2aCard, CardSignatureCheck, FieldError, SignatureStatus};
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::outbound::{Fetch, JSON, Outbound, OutboundError};
use crate::signing::{self, Jwk, Verification};
use crate::timestamp::Timestamp;

/// Cards above this are refused, as in a publish body.
pub const MAX_CARD_BYTES: usize = 64 * 1024;

/// When a publish or update body has a `manifest_url` but no `card`, and lacks `name` or
/// `description`, fetch and check the card and add it as `card`; any other body is returned as is
/// (its own validation reports what is missing).
pub async fn complete_from_card(outbound: &Outbound, body: Value) -> ApiResult<Value> {
    let Value::Object(mut object) = body else {
        return Ok(body);
    };
    let absent = |key: &str| object.get(key).is_none_or(Value::is_null);
    if !absent("card") || !(absent("name") || absent("description")) {
        return Ok(Value::Object(object));
    }
    let Some(url) = object
        .get("manifest_url")
        .and_then(Value::as_str)
        .and_then(|raw| Url::parse(raw.trim()).ok())
    else {
        return Ok(Value::Object(object));
    };
    let card = fetch_card(outbound, &url).await?;
    object.insert("card".to_owned(), card.into_value());
    Ok(Value::Object(object))
}

/// GET an agent card (JSON, at most 64 KiB, redirects checked) and check it is a usable A2A v1.0
/// card. A card that is missing or invalid is the publisher's to fix (422); an unreachable or
/// slow host is an upstream failure (502/504).
pub async fn fetch_card(outbound: &Outbound, url: &Url) -> ApiResult<A2aCard> {
    let manifest_error = |message: String| {
        ApiError::validation(vec![FieldError::new(
            "manifest_url",
            format!("cannot read an agent card there: {message}"),
        )])
    };
    let fetched = outbound
        .get(&Fetch::get(url.clone(), JSON, MAX_CARD_BYTES))
        .await
        .map_err(|err| match err {
            OutboundError::Timeout { .. } | OutboundError::Connect { .. } => {
                ApiError::new(err.code(), format!("cannot fetch the agent card: {err}"))
            }
            OutboundError::Resolve { .. } => ApiError::new(
                ErrorCode::UpstreamError,
                format!("cannot fetch the agent card: {err}"),
            ),
            other => manifest_error(other.to_string()),
        })?;
    if !fetched.status.is_success() {
        return Err(manifest_error(format!(
            "{url} answered HTTP {}",
            fetched.status.as_u16()
        )));
    }
    let value: Value = fetched
        .json()
        .map_err(|err| manifest_error(format!("the response is not valid JSON ({err})")))?;
    A2aCard::parse(value).map_err(ApiError::validation)
}

/// Key sets fetched per card at most (one per distinct `jku`).
const MAX_KEY_SETS: usize = 2;
/// Key sets above this are refused.
const MAX_KEY_SET_BYTES: usize = 64 * 1024;

/// When `card` carries signatures, check them with the keys their `jku` names (fetched through
/// the guarded outbound client, at most two key sets): `None` for an unsigned card.
pub async fn check_card_signatures(
    outbound: &Outbound,
    card: &Value,
) -> Option<CardSignatureCheck> {
    let listed = card
        .get("signatures")
        .and_then(Value::as_array)
        .is_some_and(|entries| !entries.is_empty());
    if !listed {
        return None;
    }
    let mut key_sets: HashMap<String, Result<Vec<Value>, String>> = HashMap::new();
    for signature in signing::signatures_of(card) {
        let Some(jku) = signature.jku else { continue };
        if key_sets.len() >= MAX_KEY_SETS || key_sets.contains_key(&jku) {
            continue;
        }
        let keys = fetch_key_set(outbound, &jku).await;
        key_sets.insert(jku, keys);
    }
    let outcome = signing::verify_card(card, |signature| {
        let jku = signature
            .jku
            .as_deref()
            .ok_or_else(|| "the signature names no key set (jku)".to_owned())?;
        let keys = key_sets
            .get(jku)
            .ok_or_else(|| format!("key set {jku} was not fetched"))?
            .as_ref()
            .map_err(Clone::clone)?;
        let key = match signature.kid.as_deref() {
            Some(kid) => keys.iter().find(|key| key["kid"].as_str() == Some(kid)),
            None if keys.len() == 1 => keys.first(),
            None => None,
        }
        .ok_or_else(|| format!("key set {jku} has no key of that id"))?;
        Jwk::parse(key)
    });
    let (status, kid, detail) = match outcome {
        Verification::Unsigned => return None,
        Verification::Verified { kid } => (SignatureStatus::Valid, Some(kid), None),
        Verification::Invalid { kid, reason } => (SignatureStatus::Invalid, kid, Some(reason)),
        Verification::Unverifiable { kid, reason } => {
            (SignatureStatus::Unverifiable, kid, Some(reason))
        }
    };
    Some(CardSignatureCheck {
        status,
        kid: kid.filter(|kid| !kid.is_empty()),
        checked_at: Timestamp::now(),
        detail: detail.map(|reason| crate::domain::truncate(&reason, 300)),
    })
}

/// The keys of the JWK set at `jku`, or why there are none.
async fn fetch_key_set(outbound: &Outbound, jku: &str) -> Result<Vec<Value>, String> {
    let url = Url::parse(jku)
        .map_err(|_| format!("jku '{}' is not a URL", crate::domain::truncate(jku, 100)))?;
    let fetched = outbound
        .get(&Fetch::get(url, JSON, MAX_KEY_SET_BYTES))
        .await
        .map_err(|err| format!("cannot fetch the key set: {err}"))?;
    if !fetched.status.is_success() {
        return Err(format!(
            "the key set answered HTTP {}",
            fetched.status.as_u16()
        ));
    }
    let set: Value = fetched
        .json()
        .map_err(|err| format!("the key set is not JSON ({err})"))?;
    set.get("keys")
        .and_then(Value::as_array)
        .cloned()
        .ok_or_else(|| "the key set has no 'keys' array".to_owned())
}
