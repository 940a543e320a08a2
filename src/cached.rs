//! A JSON document as clients may cache it: `ETag`, `Last-Modified`, `Cache-Control` and 304.
//! Cards, the AI Catalog, ARD manifests and entries all answer this way.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::domain::access::Viewer;
use crate::signing::CardSigner;
use crate::timestamp::Timestamp;

/// How long clients may cache a card.
const CARD_MAX_AGE_SECS: u32 = 300;

/// A card as clients may cache it, signed by the registry's `signer` (the registry's own
/// earlier card shape is not an A2A card and is not signed): `ETag` from its unsigned content and
/// the signing key (ECDSA signatures differ on every signing; the card they cover does not),
/// `Last-Modified` when the time of its last change is known, `Cache-Control`, and 304 when
/// `If-None-Match` already names it (or, without `If-None-Match`, when `If-Modified-Since` is
/// not older than the last change).
pub fn card_response(
    signer: Option<&CardSigner>,
    request_headers: &HeaderMap,
    card: &Value,
    last_modified: Option<Timestamp>,
) -> Response {
    let mut digest = Sha256::new();
    digest.update(serde_json::to_vec(card).unwrap_or_default());
    if let Some(signer) = signer {
        digest.update(signer.kid().as_bytes());
    }
    let etag = format!("\"{}\"", &hex::encode(digest.finalize())[..32]);
    let cache_control = format!("public, max-age={CARD_MAX_AGE_SECS}");
    let last_modified = last_modified.map(Timestamp::whole_secs);
    let if_none_match: Vec<&str> = request_headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|tag| tag.trim().trim_start_matches("W/"))
        .collect();
    let not_modified = if if_none_match.is_empty() {
        let since = request_headers
            .get(header::IF_MODIFIED_SINCE)
            .and_then(|v| v.to_str().ok())
            .and_then(Timestamp::from_http_date);
        matches!((last_modified, since), (Some(changed), Some(since)) if changed <= since)
    } else {
        if_none_match.iter().any(|tag| *tag == etag || *tag == "*")
    };
    let mut response = if not_modified {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let body = match signer {
            Some(signer) => serde_json::to_vec(&signer.sign(card)),
            None => serde_json::to_vec(card),
        }
        .unwrap_or_default();
        ([(header::CONTENT_TYPE, "application/json")], body).into_response()
    };
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, value);
    }
    if let Some(value) = last_modified.and_then(|t| HeaderValue::from_str(&t.to_http_date()).ok()) {
        headers.insert(header::LAST_MODIFIED, value);
    }
    if let Ok(value) = HeaderValue::from_str(&cache_control) {
        headers.insert(header::CACHE_CONTROL, value);
    }
    response
}

/// A response whose content depends on who asks (private agents are shown to their viewers):
/// shared caches keep one copy per set of credentials, and none of an authenticated answer.
pub fn per_viewer(mut response: Response, viewer: &Viewer) -> Response {
    let headers = response.headers_mut();
    headers.append(
        header::VARY,
        HeaderValue::from_static("Authorization, Cookie"),
    );
    if *viewer != Viewer::Anonymous {
        headers.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("private, no-cache"),
        );
    }
    response
}
