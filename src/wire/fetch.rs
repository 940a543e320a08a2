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

/// What a publish body becomes once its `manifest_url` is read.
pub enum Completed {
    /// The body, with the card fetched from `manifest_url` as `card` when it needed one.
    Body(Value),
    /// `manifest_url` holds an AI Catalog (many agents) rather than one card.
    Catalog { url: Url, catalog: Value },
}

/// When a publish or update body has a `manifest_url` but no `card`, and lacks `name` or
/// `description`, fetch the document there: a usable A2A v1.0 card is added as `card`, an AI
/// Catalog is returned as such; any other body is returned as is (its own validation reports
/// what is missing).
pub async fn complete_from_card(outbound: &Outbound, body: Value) -> ApiResult<Completed> {
    let Value::Object(mut object) = body else {
        return Ok(Completed::Body(body));
    };
    let absent = |key: &str| object.get(key).is_none_or(Value::is_null);
    if !absent("card") || !(absent("name") || absent("description")) {
        return Ok(Completed::Body(Value::Object(object)));
    }
    let Some(url) = object
        .get("manifest_url")
        .and_then(Value::as_str)
        .and_then(|raw| Url::parse(raw.trim()).ok())
    else {
        return Ok(Completed::Body(Value::Object(object)));
    };
    let document = fetch_document(outbound, &url, "manifest_url").await?;
    if is_catalog(&document) {
        return Ok(Completed::Catalog {
            url,
            catalog: document,
        });
    }
    let card = A2aCard::parse(document).map_err(ApiError::validation)?;
    object.insert("card".to_owned(), card.into_value());
    Ok(Completed::Body(Value::Object(object)))
}

/// Whether a document is an AI Catalog: `specVersion` and an `entries` array.
pub fn is_catalog(document: &Value) -> bool {
    document.get("specVersion").is_some_and(Value::is_string)
        && document.get("entries").is_some_and(Value::is_array)
}

/// GET an agent card (JSON, at most 64 KiB, redirects checked) and check it is a usable A2A v1.0
/// card. A card that is missing or invalid is the publisher's to fix (422); an unreachable or
/// slow host is an upstream failure (502/504).
pub async fn fetch_card(outbound: &Outbound, url: &Url) -> ApiResult<A2aCard> {
    let document = fetch_document(outbound, url, "manifest_url").await?;
    A2aCard::parse(document).map_err(ApiError::validation)
}

/// GET a JSON document (at most 64 KiB, redirects checked). Problems with the document are
/// reported on `field` (422); an unreachable or slow host is an upstream failure (502/504).
async fn fetch_document(outbound: &Outbound, url: &Url, field: &str) -> ApiResult<Value> {
    let manifest_error = |message: String| {
        ApiError::validation(vec![FieldError::new(
            field,
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
    fetched
        .json()
        .map_err(|err| manifest_error(format!("the response is not valid JSON ({err})")))
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
