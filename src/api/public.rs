//! Public reads: list and search, one agent, and its A2A card. Anyone may read them; a caller
//! with credentials also finds the private agents it may see.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;

use crate::auth::Viewer;
use crate::error::{ApiError, ApiResult};
use crate::extract::{JsonBody, PathParam, QueryPairs};
use crate::search::request::{self, LIST_LIMITS, SEARCH_LIMITS};
use crate::state::AppState;

use crate::wire::{AgentPage, AgentRecord, PageView, VersionList};

/// List or search ACTIVE agents.
#[utoipa::path(get, path = "/public/agents", tag = "public",
    params(
        ("q" = Option<String>, Query, description = "Keyword or natural-language query"),
        ("target" = Option<String>, Query, description = "Audience, comma-separated (OR)"),
        ("category" = Option<String>, Query, description = "Category, comma-separated (OR)"),
        ("tags" = Option<String>, Query, description = "Tags, comma-separated (OR); exact, case-insensitive"),
        ("verification_level" = Option<String>, Query, description = "`unverified` or `domain_verified`"),
        ("payment_model" = Option<String>, Query, description = "`free`, `paid`, `freemium` (OR)"),
        ("payment_protocol" = Option<String>, Query, description = "e.g. `x402`, `lightning-invoice`"),
        ("payment_rail" = Option<String>, Query, description = "Rails as `network:asset` (asset prefix), `network:`, or a bare prefix of either, comma-separated, e.g. `base:usdc`, `nano:`, `usdc`"),
        ("payment_direction" = Option<String>, Query, description = "`inbound`, `outbound`, `both`"),
        ("sort" = Option<String>, Query, description = "`relevance` (default with q), `newest` (default without), `name`"),
        ("health" = Option<String>, Query, description = "`up`, `down`, `not_conformant`, `unknown`, `not_probed` (OR): what the last liveness probe found (`not_probed`: the agent lists no endpoint)"),
        ("max_severity" = Option<String>, Query, description = "`none`, `low`, `medium`, `high` or `critical`: only agents whose worst scanner finding is at most this (`none`: clean agents only)"),
        ("include_deprecated" = Option<bool>, Query, description = "`true` (default): deprecated agents too, ranked below their equals; `false`: none"),
        ("collapse" = Option<bool>, Query, description = "`true` (default): one agent per duplicate group (agents sharing a repository or an endpoint), the group's best member; `false`: every agent"),
        ("facets" = Option<bool>, Query, description = "`true`: the answer also has `facets`, every match (not only this page) counted per category, tag (the 20 most frequent), payment model, health and worst scanner finding (`security`); `false` (default): no `facets` member"),
        ("limit" = Option<i64>, Query, description = "Page size, default 20, max 100; values below 1 are read as 1, above 100 as 100"),
        ("cursor" = Option<String>, Query, description = "`next_cursor` of the previous page"),
    ),
    responses((status = 200, body = AgentPage)),
    security((), ("bearer" = [])))]
pub async fn list_agents(
    State(state): State<AppState>,
    viewer: Viewer,
    QueryPairs(pairs): QueryPairs,
) -> ApiResult<Response> {
    let mut request = request::from_query_pairs(&pairs, LIST_LIMITS)?;
    request.viewer = viewer;
    let page = state.registry.search(&request).await?;
    PageView::of(&page, &state.base_url).response()
}

/// Semantic search with filters in a JSON body.
#[utoipa::path(post, path = "/public/agents/search", tag = "public",
    request_body(content = crate::wire::schema::SearchRequest, description = "`{query, limit (default 5, max 100), cursor, sort, collapse, facets, filters: {target, category, tags, verification_level, payment_model, payment_protocol, payment_rail, payment_direction}}`"),
    responses((status = 200, body = AgentPage)),
    security((), ("bearer" = [])))]
pub async fn search_agents(
    State(state): State<AppState>,
    viewer: Viewer,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let mut request = request::from_json(&body, SEARCH_LIMITS)?;
    request.viewer = viewer;
    let page = state.registry.search(&request).await?;
    PageView::of(&page, &state.base_url).response()
}

/// The full record of one ACTIVE agent, by id or package name.
#[utoipa::path(get, path = "/public/agents/{identifier}", tag = "public",
    params(("identifier" = String, Path, description = "Agent id or package name")),
    responses((status = 200, body = AgentRecord), (status = 404, body = crate::error::Problem, description = "`agent_not_found`: unknown or not ACTIVE")),
    security((), ("bearer" = [])))]
pub async fn get_agent(
    State(state): State<AppState>,
    viewer: Viewer,
    PathParam(identifier): PathParam,
) -> ApiResult<Json<AgentRecord>> {
    let agent = state.registry.find_active(&identifier, &viewer).await?;
    let mut record = AgentRecord::public_given(&agent, state.registry.worst_severity(&agent));
    record.duplicates = state.registry.duplicates_of(&agent.id);
    Ok(Json(record))
}

/// The versions of one ACTIVE agent: the latest first, then the earlier ones, most recent first.
#[utoipa::path(get, path = "/public/agents/{identifier}/versions", tag = "public",
    params(("identifier" = String, Path, description = "Agent id or package name")),
    responses((status = 200, body = VersionList),
              (status = 404, body = crate::error::Problem, description = "`agent_not_found`: unknown or not ACTIVE")),
    security((), ("bearer" = [])))]
pub async fn list_versions(
    State(state): State<AppState>,
    viewer: Viewer,
    PathParam(identifier): PathParam,
) -> ApiResult<Json<VersionList>> {
    let (_, history) = state.registry.versions(&identifier, &viewer).await?;
    Ok(Json(VersionList::of(&history)))
}

/// One version of an ACTIVE agent's record, in the shape of `GET /public/agents/{identifier}`.
/// The latest version is that record; an earlier one has that version's fields, the
/// `revision` it was written at, and when it was written as `updated_at`.
#[utoipa::path(get, path = "/public/agents/{identifier}/versions/{version}", tag = "public",
    params(("identifier" = String, Path, description = "Agent id or package name"),
           ("version" = String, Path, description = "A version string as `/versions` lists it, matched exactly")),
    responses((status = 200, body = AgentRecord),
              (status = 404, body = crate::error::Problem, description = "`agent_not_found`: unknown or not ACTIVE; `version_not_found`: the agent never had this version")),
    security((), ("bearer" = [])))]
pub async fn get_version(
    State(state): State<AppState>,
    viewer: Viewer,
    path: Result<axum::extract::Path<(String, String)>, axum::extract::rejection::PathRejection>,
) -> ApiResult<Json<AgentRecord>> {
    let axum::extract::Path((identifier, version)) =
        path.map_err(|rejection| ApiError::invalid_parameter(rejection.body_text()))?;
    let (agent, latest) = state
        .registry
        .version(&identifier, &version, &viewer)
        .await?;
    let mut record = AgentRecord::public(&agent);
    if latest {
        record.duplicates = state.registry.duplicates_of(&agent.id);
    }
    Ok(Json(record))
}

/// The A2A v1.0 card of one ACTIVE agent.
#[utoipa::path(get, path = "/public/agents/resolve/{package_name}", tag = "public",
    params(("package_name" = String, Path, description = "Package name (or agent id)"),
           ("If-None-Match" = Option<String>, Header, description = "ETags already held; a match is 304"),
           ("If-Modified-Since" = Option<String>, Header, description = "HTTP date; without If-None-Match, no change since is 304")),
    responses((status = 200, description = "A2A v1.0 AgentCard", body = crate::wire::schema::AgentCard,
                headers(("ETag" = String, description = "Of the card's content"), ("Cache-Control" = String))),
              (status = 304, description = "Not modified"),
              (status = 404, body = crate::error::Problem, description = "`agent_not_found`: unknown or not ACTIVE")),
    security((), ("bearer" = [])))]
pub async fn resolve_card(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    PathParam(package_name): PathParam,
) -> ApiResult<Response> {
    let agent = state.registry.find_active(&package_name, &viewer).await?;
    // The card carries the agent's health, which changes without a new revision.
    let probed = agent.health.as_ref().and_then(|health| health.checked_at);
    let last_modified = probed.map_or(agent.updated_at, |at| at.max(agent.updated_at));
    let response = crate::cached::card_response(
        Some(&state.signer),
        &headers,
        &crate::wire::card::card_of(&agent, state.registry.worst_severity(&agent)),
        Some(last_modified),
    );
    Ok(crate::cached::per_viewer(response, &viewer))
}
