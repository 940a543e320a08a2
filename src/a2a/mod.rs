//! The A2A surface: agent cards (the registry's own, hosted agents', published agents').

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::domain::AgentDraft;
use crate::signing::CardSigner;
use crate::store::Agent;
use crate::timestamp::Timestamp;

pub mod card;
pub mod fetch;
pub mod jsonrpc;
pub mod legacy;
pub mod skills;
pub mod utility;

/// How long clients may cache a card.
const CARD_MAX_AGE_SECS: u32 = 300;

/// The A2A card of a registered agent: the card its owner published, or one built from the record.
///
/// Once the agent has been probed, the card carries its health in the registry's health
/// extension, unless the publisher signed their card: adding to it would break their
/// signatures, so the record alone shows it then.
pub fn card_of(agent: &Agent) -> Value {
    let mut card = card_of_draft(&agent.draft);
    let signed_by_publisher = card.get("signatures").is_some_and(|s| !s.is_null());
    if let (Some(health), false) = (&agent.health, signed_by_publisher) {
        if let Some(capabilities) = card.get_mut("capabilities").and_then(Value::as_object_mut) {
            let extension = card::health_extension(health);
            match capabilities
                .get_mut("extensions")
                .and_then(Value::as_array_mut)
            {
                Some(extensions) => extensions.push(extension),
                None => {
                    capabilities.insert("extensions".to_owned(), Value::Array(vec![extension]));
                }
            }
        }
    }
    card
}

/// The card of an agent's writable fields: the published card, or one built from them.
pub fn card_of_draft(draft: &AgentDraft) -> Value {
    if let Some(card) = &draft.card {
        return card.clone();
    }
    let mut card = card::agent_card(&card::CardInput {
        name: &draft.name,
        description: &draft.description,
        version: draft.version.as_deref().unwrap_or("1.0.0"),
        url: draft.url.as_deref(),
        documentation_url: None,
        provider: None,
        capabilities: &draft.capabilities,
        tags: &draft.tags,
        payment: draft.payment.as_ref(),
        representative_queries: &draft.representative_queries,
        extensions: Vec::new(),
    });
    // Every A2A interface the publisher listed, the first being `url`.
    if !draft.reach.interfaces.is_empty() {
        card["supportedInterfaces"] = serde_json::json!(draft.reach.interfaces);
    }
    card
}

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

/// The registry's own card: A2A v1.0, or the registry's own shape with `?format=registry`.
#[utoipa::path(get, path = "/.well-known/agent-card.json", tag = "a2a",
    params(CardQuery,
           ("If-None-Match" = Option<String>, Header, description = "ETags already held; a match is 304"),
           ("If-Modified-Since" = Option<String>, Header, description = "HTTP date; without If-None-Match, no change since is 304")),
    responses((status = 200, description = "The registry's agent card", body = crate::openapi::AgentCard,
                headers(("ETag" = String, description = "Of the card's content"), ("Cache-Control" = String))),
              (status = 304, description = "Not modified"),
              (status = 400, body = crate::error::Problem, description = "`invalid_parameter`: an unknown format")))]
pub async fn registry_card(
    axum::extract::State(state): axum::extract::State<crate::state::AppState>,
    crate::extract::Query(query): crate::extract::Query<CardQuery>,
    headers: HeaderMap,
) -> crate::error::ApiResult<Response> {
    let version = env!("CARGO_PKG_VERSION");
    let (card, signer) = match query.format.as_deref() {
        None | Some("" | "a2a") => (
            card::registry_card(&state.base_url, &state.base_url, version),
            Some(state.signer.as_ref()),
        ),
        Some("registry") => (
            card::registry_card_legacy(&state.base_url, &state.base_url, version),
            None,
        ),
        Some(other) => {
            return Err(crate::error::ApiError::invalid_parameter(format!(
                "format: unknown '{}'; allowed: a2a, registry",
                crate::domain::truncate(other, 40)
            )));
        }
    };
    Ok(card_response(
        signer,
        &headers,
        &card,
        Some(state.started_at),
    ))
}

/// The public keys that check the signatures on every card the registry serves (current key
/// first, then earlier keys not yet retired).
#[utoipa::path(get, path = "/.well-known/jwks.json", tag = "a2a",
    responses((status = 200, description = "A JWK set (RFC 7517): `{keys: [{kty, crv, x, (y), kid, alg, use}]}`", body = Object, content_type = "application/jwk-set+json",
                headers(("Cache-Control" = String)))))]
pub async fn jwks(
    axum::extract::State(state): axum::extract::State<crate::state::AppState>,
) -> Response {
    let body = serde_json::to_vec(&state.signer.jwks()).unwrap_or_default();
    (
        [
            (header::CONTENT_TYPE, "application/jwk-set+json"),
            (header::CACHE_CONTROL, "public, max-age=300"),
        ],
        body,
    )
        .into_response()
}

/// The registry card's query string.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CardQuery {
    /// `registry` for the registry's own shape (agent_id, name, description, capabilities);
    /// `a2a` or empty for the A2A card.
    pub format: Option<String>,
}

/// The card of a hosted utility agent.
#[utoipa::path(get, path = "/a2a/utility/{name}/.well-known/agent-card.json", tag = "a2a",
    params(("name" = String, Path, description = "`wiki`, `finance` or `reader`"),
           ("If-None-Match" = Option<String>, Header, description = "ETags already held; a match is 304"),
           ("If-Modified-Since" = Option<String>, Header, description = "HTTP date; without If-None-Match, no change since is 304")),
    responses((status = 200, description = "A2A v1.0 AgentCard", body = crate::openapi::AgentCard,
                headers(("ETag" = String, description = "Of the card's content"), ("Cache-Control" = String))),
              (status = 304, description = "Not modified"),
              (status = 404, body = crate::error::Problem, description = "`agent_not_found`: no hosted agent of that name")))]
pub async fn utility_card(
    axum::extract::State(state): axum::extract::State<crate::state::AppState>,
    crate::extract::PathParam(slug): crate::extract::PathParam,
    headers: HeaderMap,
) -> crate::error::ApiResult<Response> {
    let hosted = state
        .hosted
        .by_slug(&slug)
        .ok_or_else(|| crate::error::ApiError::agent_not_found(&slug))?;
    let card = hosted.card(&state.base_url).map_err(|errors| {
        crate::error::ApiError::internal(format!("hosted agent card is invalid: {errors:?}"))
    })?;
    Ok(card_response(
        Some(&state.signer),
        &headers,
        &card,
        Some(state.started_at),
    ))
}
