//! Agent management: publish (also from a card URL), update,
//! go-live, unpublish, delete, domain verification, and the owner's own listing.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::{Caller, Scope};
use crate::domain::{AgentDraft, FieldError};
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::extract::{JsonBody, Page, PathParam, Query};
use crate::state::AppState;
use crate::store::{Agent, AgentState};
use crate::wire::fetch::{self, Completed};

use crate::wire::AgentRecord;

/// The owner's agents, one page.
#[derive(Debug, Serialize, ToSchema)]
pub struct OwnAgentsPage {
    pub agents: Vec<AgentRecord>,
    pub limit: usize,
    pub next_cursor: Option<String>,
}

/// Create an agent in state STAGE.
#[utoipa::path(post, path = "/api/agents/publish", tag = "management",
    request_body(content = crate::wire::schema::PublishRequest, description = "The writable fields of an agent record, optionally with a full A2A `card`. With a `manifest_url` and no `name`/`description`, the A2A v1.0 card there is fetched and fills the record; when the document there is an AI Catalog, each of its A2A card entries is published instead (at most 100)."),
    responses((status = 201, body = AgentRecord, description = "Created in STAGE; the owner's view",
                headers(("Location" = String, description = "The agent's management URL"), ("ETag" = String, description = "The revision, quoted"))),
              (status = 200, body = super::catalog::CatalogPublished, description = "`manifest_url` held an AI Catalog: each entry's result (`created` in STAGE, `rejected` with its errors, or `skipped` with the reason)"),
              (status = 403, body = crate::error::Problem, description = "`forbidden`: a token without `agents:write`, or `org` names an organisation the caller does not write for; `namespace_not_granted`: a token restricted to namespaces (trusted publishing) and a package name outside them"),
              (status = 404, body = crate::error::Problem, description = "`org_not_found`: `org` names no organisation"),
              (status = 409, body = crate::error::Problem, description = "`conflict`: the package name is taken"),
              (status = 422, body = crate::error::Problem, description = "`validation_failed`, with every invalid field"),
              (status = 502, body = crate::error::Problem, description = "`upstream_error`: the card at `manifest_url` could not be fetched"),
              (status = 504, body = crate::error::Problem, description = "`upstream_timeout`: fetching the card at `manifest_url` took too long")),
    security(("bearer" = [])))]
pub async fn publish_agent(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    caller.require(Scope::AgentsWrite)?;
    let body = match fetch::complete_from_card(&state.outbound, body).await? {
        Completed::Body(body) => body,
        Completed::Catalog { url, catalog } => {
            let published = super::catalog::publish_entries(&state, &caller, &url, &catalog).await;
            return Ok(Json(published).into_response());
        }
    };
    // `"org"`: publish for an organisation the caller writes for (not part of the draft).
    let org = match body.get("org") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(org)) => Some(
            crate::domain::org::parse_org_name(org)
                .map_err(|message| ApiError::validation(vec![FieldError::new("org", message)]))?,
        ),
        Some(_) => {
            return Err(ApiError::validation(vec![FieldError::new(
                "org",
                "must be a string",
            )]));
        }
    };
    let draft = parse_draft(&state, &body).await?;
    let agent = state
        .registry
        .publish_for(draft, &caller.actor(), org.as_deref())
        .await?;
    tracing::info!(agent.id = %agent.id, agent.package = agent.package_name(), owner = %agent.owner, "agent published");
    let location = format!("{}/api/agents/{}", state.base_url, agent.id);
    let mut response = (StatusCode::CREATED, owned_response(&agent)).into_response();
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    Ok(response)
}

/// Replace the writable fields of an agent; its state is unchanged. A change gets a new
/// version: the one the body names, or (naming none, or the current one) the next patch of a
/// semantic version; a version that is not semantic stays as it is. A body that changes
/// nothing writes nothing: the record comes back as it was.
#[utoipa::path(put, path = "/api/agents/{id}", tag = "management",
    params(("id" = String, Path, description = "Agent id or package name"),
           ("If-Match" = Option<String>, Header, description = "The `revision` (ETag) last read, or `*`; another revision, or a value that is not one, is 412")),
    request_body(content = crate::wire::schema::PublishRequest, description = "Same body as publish; `package_name` must be the agent's own"),
    responses((status = 200, body = AgentRecord, description = "The owner's view", headers(("ETag" = String, description = "The new revision, quoted"))),
              (status = 404, body = crate::error::Problem, description = "`agent_not_found`"),
              (status = 403, body = crate::error::Problem, description = "`forbidden`: another owner's agent, or a token without `agents:write`; `mirrored_read_only`: a mirror's copy of an agent listed elsewhere, which changes at its source; `namespace_not_granted`: a token restricted to namespaces (trusted publishing) and an agent outside them"),
              (status = 409, body = crate::error::Problem, description = "`version_conflict`: `version` is a semantic version lower than the current one, or a version the agent had before"),
              (status = 412, body = crate::error::Problem, description = "`precondition_failed`: `If-Match` names an older revision"),
              (status = 422, body = crate::error::Problem, description = "`validation_failed`, with every invalid field"),
              (status = 502, body = crate::error::Problem, description = "`upstream_error`: the card at `manifest_url` could not be fetched"),
              (status = 504, body = crate::error::Problem, description = "`upstream_timeout`: fetching the card at `manifest_url` took too long")),
    security(("bearer" = [])))]
pub async fn update_agent(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(identifier): PathParam,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    caller.require(Scope::AgentsWrite)?;
    // Ownership first: another owner's agent is 403 before its card is fetched.
    state
        .registry
        .find_owned(&identifier, &caller.actor())
        .await?;
    let expected_revision = if_match(&headers)?;
    let Completed::Body(body) = fetch::complete_from_card(&state.outbound, body).await? else {
        return Err(ApiError::validation(vec![FieldError::new(
            "manifest_url",
            "holds an AI Catalog (many agents), not this agent's card",
        )]));
    };
    let draft = parse_draft(&state, &body).await?;
    let agent = state
        .registry
        .update(&identifier, draft, expected_revision, &caller.actor())
        .await?;
    Ok(owned_response(&agent))
}

/// STAGE → ACTIVE.
#[utoipa::path(post, path = "/api/agents/{id}/go-live", tag = "management",
    params(("id" = String, Path, description = "Agent id or package name")),
    responses((status = 200, body = AgentRecord, description = "The owner's view"),
              (status = 404, body = crate::error::Problem, description = "`agent_not_found`"),
              (status = 403, body = crate::error::Problem, description = "`forbidden`: another owner's agent, or a token without `agents:write`; `mirrored_read_only`: a mirror's copy of an agent listed elsewhere, which changes at its source; `namespace_not_granted`: a token restricted to namespaces (trusted publishing) and an agent outside them"),
              (status = 409, body = crate::error::Problem, description = "`invalid_state_transition`: not in STAGE")),
    security(("bearer" = [])))]
pub async fn go_live(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(identifier): PathParam,
) -> ApiResult<Response> {
    transition(
        state,
        caller,
        &identifier,
        AgentState::Stage,
        AgentState::Active,
    )
    .await
}

/// ACTIVE → STAGE.
#[utoipa::path(post, path = "/api/agents/{id}/unpublish", tag = "management",
    params(("id" = String, Path, description = "Agent id or package name")),
    responses((status = 200, body = AgentRecord, description = "The owner's view"),
              (status = 404, body = crate::error::Problem, description = "`agent_not_found`"),
              (status = 403, body = crate::error::Problem, description = "`forbidden`: another owner's agent, or a token without `agents:write`; `mirrored_read_only`: a mirror's copy of an agent listed elsewhere, which changes at its source; `namespace_not_granted`: a token restricted to namespaces (trusted publishing) and an agent outside them"),
              (status = 409, body = crate::error::Problem, description = "`invalid_state_transition`: not ACTIVE")),
    security(("bearer" = [])))]
pub async fn unpublish(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(identifier): PathParam,
) -> ApiResult<Response> {
    transition(
        state,
        caller,
        &identifier,
        AgentState::Active,
        AgentState::Stage,
    )
    .await
}

/// Deprecate an agent, or one of its versions: it stays listed and resolvable, shown with the
/// message and the successor everywhere it appears, and ranked below its equals.
#[utoipa::path(post, path = "/api/agents/{id}/deprecate", tag = "management",
    params(("id" = String, Path, description = "Agent id or package name")),
    request_body(content = crate::wire::schema::DeprecateRequest, description = "`{\"message\": \"Use com.example.weather2\", \"successor\": \"com.example.weather2\"}`; with `version`, only that version"),
    responses((status = 200, body = AgentRecord, description = "The owner's view, with `deprecation` (or, for a version, its entry in the version history)"),
              (status = 404, body = crate::error::Problem, description = "`agent_not_found`: no such agent, or the successor names no other listed agent; `version_not_found`: the agent never had this version"),
              (status = 403, body = crate::error::Problem, description = "`forbidden`: another owner's agent, or a token without `agents:write`; `mirrored_read_only`: a mirror's copy, which changes at its source; `namespace_not_granted`: a token restricted to namespaces and an agent outside them"),
              (status = 422, body = crate::error::Problem, description = "`validation_failed`: the message is empty, longer than 500 characters or holds control characters")),
    security(("bearer" = [])))]
pub async fn deprecate(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(identifier): PathParam,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    caller.require(Scope::AgentsWrite)?;
    let text = |name: &str| super::string_field(&body, name);
    let message = text("message")?
        .ok_or_else(|| ApiError::validation(vec![FieldError::new("message", "is required")]))?;
    let successor = text("successor")?;
    let version = text("version")?;
    let agent = state
        .registry
        .set_deprecation(
            &identifier,
            &caller.actor(),
            version,
            Some((message, successor)),
        )
        .await?;
    tracing::info!(agent.id = %agent.id, version, "agent deprecated");
    Ok(owned_response(&agent))
}

/// Which version an undo names.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
pub struct UndeprecateQuery {
    /// Only this version's deprecation; absent: the agent's.
    pub version: Option<String>,
}

/// Take a deprecation back (the agent's, or with `version`, that version's).
#[utoipa::path(delete, path = "/api/agents/{id}/deprecate", tag = "management",
    params(("id" = String, Path, description = "Agent id or package name"), UndeprecateQuery),
    responses((status = 200, body = AgentRecord, description = "The owner's view, without the deprecation"),
              (status = 404, body = crate::error::Problem, description = "`agent_not_found`; `version_not_found`: the agent never had this version"),
              (status = 403, body = crate::error::Problem, description = "`forbidden`: another owner's agent, or a token without `agents:write`; `mirrored_read_only`: a mirror's copy, which changes at its source; `namespace_not_granted`: a token restricted to namespaces and an agent outside them")),
    security(("bearer" = [])))]
pub async fn undeprecate(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(identifier): PathParam,
    Query(query): Query<UndeprecateQuery>,
) -> ApiResult<Response> {
    caller.require(Scope::AgentsWrite)?;
    let agent = state
        .registry
        .set_deprecation(&identifier, &caller.actor(), query.version.as_deref(), None)
        .await?;
    tracing::info!(agent.id = %agent.id, version = query.version.as_deref(), "agent deprecation undone");
    Ok(owned_response(&agent))
}

async fn transition(
    state: AppState,
    caller: Caller,
    identifier: &str,
    from: AgentState,
    to: AgentState,
) -> ApiResult<Response> {
    caller.require(Scope::AgentsWrite)?;
    let agent = state
        .registry
        .transition(identifier, from, to, &caller.actor())
        .await?;
    tracing::info!(agent.id = %agent.id, state = agent.state.as_str(), "agent state changed");
    Ok(owned_response(&agent))
}

/// Prove control of the package's domain: the agent's `verification_token` as a
/// line of `https://<domain>/.well-known/agent-registry-verify.txt`, or a DNS TXT record
/// `agent-registry-verify=<token>`.
#[utoipa::path(post, path = "/api/agents/{id}/verify", tag = "management",
    params(("id" = String, Path, description = "Agent id or package name")),
    responses((status = 200, description = "Verified: `verification_level` is `domain_verified`", body = AgentRecord),
              (status = 404, body = crate::error::Problem, description = "`agent_not_found`"),
              (status = 403, body = crate::error::Problem, description = "`forbidden`: another owner's agent, or a token without `agents:write`; `mirrored_read_only`: a mirror's copy of an agent listed elsewhere, which changes at its source; `namespace_not_granted`: a token restricted to namespaces (trusted publishing) and an agent outside them"),
              (status = 422, description = "`verification_failed`, saying what was checked", body = crate::error::Problem)),
    security(("bearer" = [])))]
pub async fn verify_agent(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(identifier): PathParam,
) -> ApiResult<Response> {
    caller.require(Scope::AgentsWrite)?;
    let current = state
        .registry
        .find_owned(&identifier, &caller.actor())
        .await?;
    let proof = crate::verify::verify_domain(
        &state.outbound,
        &state.config.upstreams,
        &current.draft.package_name.domain(),
        &current.verification_token,
    )
    .await?;
    let agent = state.registry.mark_domain_verified(&current).await?;
    tracing::info!(agent.id = %agent.id, proof = ?proof, "domain verified");
    Ok(owned_response(&agent))
}

/// Delete an agent in either state; its package name becomes free.
#[utoipa::path(delete, path = "/api/agents/{id}", tag = "management",
    params(("id" = String, Path, description = "Agent id or package name")),
    responses((status = 204, description = "Deleted"), (status = 404, body = crate::error::Problem, description = "`agent_not_found`"),
              (status = 403, body = crate::error::Problem, description = "`forbidden`: another owner's agent, or a token without `agents:write`; `mirrored_read_only`: a mirror's copy of an agent listed elsewhere, which changes at its source; `namespace_not_granted`: a token restricted to namespaces (trusted publishing) and an agent outside them")),
    security(("bearer" = [])))]
pub async fn delete_agent(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(identifier): PathParam,
) -> ApiResult<StatusCode> {
    caller.require(Scope::AgentsWrite)?;
    let deleted = state.registry.delete(&identifier, &caller.actor()).await?;
    tracing::info!(agent.id = %deleted.id, "agent deleted");
    Ok(StatusCode::NO_CONTENT)
}

/// The caller's own agents in every state (the master key sees all).
#[utoipa::path(get, path = "/api/agents", tag = "management",
    params(Page),
    responses((status = 200, body = OwnAgentsPage, description = "Up to `limit` agents (default 20, at most 100), by id")),
    security(("bearer" = [])))]
pub async fn list_own_agents(
    State(state): State<AppState>,
    caller: Caller,
    Query(page): Query<Page>,
) -> ApiResult<Json<OwnAgentsPage>> {
    caller.require(Scope::AgentsWrite)?;
    let limit = page.size(20, 100);
    let after = match page.cursor() {
        Some(cursor)
            if cursor.starts_with("agt_") && cursor.len() <= 64 && !cursor.contains('\0') =>
        {
            Some(cursor)
        }
        Some(_) => return Err(ApiError::invalid_parameter("cursor: malformed")),
        None => None,
    };
    let fetch = u32::try_from(limit + 1).unwrap_or(u32::MAX);
    let mut agents = state
        .registry
        .list_owned(&caller.actor(), after, fetch)
        .await?;
    let next_cursor = (agents.len() > limit).then(|| agents[limit - 1].id.clone());
    agents.truncate(limit);
    Ok(Json(OwnAgentsPage {
        agents: agents.iter().map(AgentRecord::owned).collect(),
        limit,
        next_cursor,
    }))
}

/// One of the caller's agents, in any state.
#[utoipa::path(get, path = "/api/agents/{id}", tag = "management",
    params(("id" = String, Path, description = "Agent id or package name")),
    responses((status = 200, body = AgentRecord, description = "The owner's view", headers(("ETag" = String, description = "The revision, quoted"))),
              (status = 404, body = crate::error::Problem, description = "`agent_not_found`"),
              (status = 403, body = crate::error::Problem, description = "`forbidden`: another owner's agent, or a token without `agents:write`; `mirrored_read_only`: a mirror's copy of an agent listed elsewhere, which changes at its source; `namespace_not_granted`: a token restricted to namespaces (trusted publishing) and an agent outside them")),
    security(("bearer" = [])))]
pub async fn get_own_agent(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(identifier): PathParam,
) -> ApiResult<Response> {
    caller.require(Scope::AgentsWrite)?;
    let agent = state
        .registry
        .find_readable(&identifier, &caller.actor())
        .await?;
    Ok(owned_response(&agent))
}

/// The draft a body describes, with the outcome of checking its card's signatures when the
/// card carries any.
pub(super) async fn parse_draft(
    state: &AppState,
    body: &serde_json::Value,
) -> ApiResult<AgentDraft> {
    let mut draft = AgentDraft::parse(body).map_err(ApiError::validation)?;
    if let Some(card) = &draft.card {
        draft.card_signature = fetch::check_card_signatures(&state.outbound, card).await;
    }
    Ok(draft)
}

/// `If-Match: "<revision>"` → the expected revision; `*` or absent → no check.
fn if_match(headers: &HeaderMap) -> ApiResult<Option<i64>> {
    let Some(value) = headers.get(header::IF_MATCH) else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or_default().trim();
    if text == "*" {
        return Ok(None);
    }
    text.trim_start_matches("W/")
        .trim_matches('"')
        .parse::<i64>()
        .map(Some)
        .map_err(|_| {
            ApiError::new(
                ErrorCode::PreconditionFailed,
                "If-Match must be the agent's revision as returned in its ETag",
            )
        })
}

/// The owner's view of an agent with its revision as `ETag`.
fn owned_response(agent: &Agent) -> Response {
    let mut response = Json(AgentRecord::owned(agent)).into_response();
    if let Ok(value) = HeaderValue::from_str(&format!("\"{}\"", agent.revision)) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
}
