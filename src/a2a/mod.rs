//! The A2A surface: agent cards (the registry's own, hosted agents', published agents').

use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};

use crate::wire::card;

pub mod jsonrpc;
pub mod legacy;
pub mod skills;
pub mod utility;

pub use crate::cached::card_response;

/// The registry's own card: A2A v1.0, or the registry's own shape with `?format=registry`.
#[utoipa::path(get, path = "/.well-known/agent-card.json", tag = "a2a",
    params(CardQuery,
           ("If-None-Match" = Option<String>, Header, description = "ETags already held; a match is 304"),
           ("If-Modified-Since" = Option<String>, Header, description = "HTTP date; without If-None-Match, no change since is 304")),
    responses((status = 200, description = "The registry's agent card", body = crate::wire::schema::AgentCard,
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
    responses((status = 200, description = "A2A v1.0 AgentCard", body = crate::wire::schema::AgentCard,
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
    // The card built for its registry entry, interface at `/v1`.
    let draft = crate::hosted::draft(hosted.as_ref(), &state.base_url).map_err(|errors| {
        crate::error::ApiError::internal(format!("hosted agent card is invalid: {errors:?}"))
    })?;
    let card = card::card_of_draft(&draft);
    Ok(card_response(
        Some(&state.signer),
        &headers,
        &card,
        Some(state.started_at),
    ))
}
