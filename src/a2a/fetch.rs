//! Fetching agent cards from the network: a publish body that names only a `manifest_url` is
//! completed from the A2A v1.0 card found there.

use serde_json::Value;
use url::Url;

use crate::domain::{A2aCard, FieldError};
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::outbound::{Fetch, JSON, Outbound, OutboundError};

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
