//! The playground's REST handlers: create, read and end a session, discover, execute.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::auth::{Caller, Scope};
use crate::error::ApiResult;
use crate::extract::{JsonBody, PathParam};
use crate::playground::{self, wire::SessionView};
use crate::state::AppState;

/// Start a session; it expires after 24 h without use (configurable).
#[utoipa::path(post, path = "/api/playground/session", tag = "playground",
    request_body(content = crate::wire::schema::CreateSessionRequest, description = r#"`{}` or `{"name": "…"}` (at most 100 characters)"#),
    responses((status = 201, body = SessionView, description = "The new session",
                headers(("Location" = String, description = "The session's URL")))),
    security(("bearer" = [])))]
pub async fn create_session(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    caller.require(Scope::Playground)?;
    let name = playground::parse_name(&body)?;
    let session = playground::create(&state, &caller, name).await?;
    let view = SessionView::of(&state, &session).await?;
    let location = format!("{}/api/playground/session/{}", state.base_url, session.id);
    let mut response = (StatusCode::CREATED, Json(view)).into_response();
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    Ok(response)
}

/// The session with its ordered history of discover and execute steps. Reading it counts as use.
#[utoipa::path(get, path = "/api/playground/session/{id}", tag = "playground",
    params(("id" = String, Path, description = "Session id, `pgs_…`")),
    responses((status = 200, body = SessionView),
              (status = 404, body = crate::error::Problem, description = "Unknown, expired, or another owner's")),
    security(("bearer" = [])))]
pub async fn get_session(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
) -> ApiResult<Json<SessionView>> {
    caller.require(Scope::Playground)?;
    let session = playground::find_owned(&state, &caller, &id).await?;
    let session = playground::touch(&state, session).await?;
    Ok(Json(SessionView::of(&state, &session).await?))
}

/// End a session and forget its history.
#[utoipa::path(delete, path = "/api/playground/session/{id}", tag = "playground",
    params(("id" = String, Path, description = "Session id, `pgs_…`")),
    responses((status = 204, description = "Ended"), (status = 404, body = crate::error::Problem, description = "`session_not_found`: unknown, expired, or another owner's")),
    security(("bearer" = [])))]
pub async fn delete_session(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
) -> ApiResult<StatusCode> {
    caller.require(Scope::Playground)?;
    let session = playground::find_owned(&state, &caller, &id).await?;
    playground::delete(&state, &session).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Discover agents with the shared search (same body and answers as `/a2a/discover`); the
/// session records them as a `discover` step.
#[utoipa::path(post, path = "/api/playground/session/{id}/discover", tag = "playground",
    params(("id" = String, Path, description = "Session id, `pgs_…`")),
    request_body(content = crate::wire::schema::SearchRequest, description = "`{query, limit (default 5, max 20), cursor, sort, filters: {target, category, tags, verification_level, payment_*}}`"),
    responses((status = 200, description = "The page with a summary and the recorded step", body = crate::wire::schema::PlaygroundDiscoverAnswer),
              (status = 404, body = crate::error::Problem, description = "`session_not_found`"),
              (status = 409, body = crate::error::Problem, description = "The session is full")),
    security(("bearer" = [])))]
pub async fn discover(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
    JsonBody(body): JsonBody,
) -> ApiResult<Json<Value>> {
    caller.require(Scope::Playground)?;
    let session = playground::find_owned(&state, &caller, &id).await?;
    let viewer = state.auth.viewer_of(&caller).await?;
    let (page, step) = playground::discover(&state, &session, &body, viewer).await?;
    let mut answer = crate::wire::page_json(&page);
    if let Value::Object(map) = &mut answer {
        let query = step.data.get("query").and_then(Value::as_str).unwrap_or("");
        let summary = crate::wire::found_summary(page.agents.len(), page.total, query);
        map.insert("summary".to_owned(), Value::String(summary));
        map.insert("step".to_owned(), playground::wire::step_json(&step));
    }
    Ok(Json(answer))
}

/// Execute a capability of an ACTIVE agent: hosted agents run in-process, others are called
/// over A2A (`SendMessage`, legacy `{action, params}` fallback). A slow or broken agent is a
/// `failed` step, not an HTTP error.
#[utoipa::path(post, path = "/api/playground/session/{id}/execute", tag = "playground",
    params(("id" = String, Path, description = "Session id, `pgs_…`")),
    request_body(content = crate::wire::schema::ExecuteRequest, description = r#"`{"agent": "registry.utility.finance", "capability": "get_current_price", "input": {"symbol": "BTC"}}`; `agent` is an id or package name"#),
    responses((status = 200, description = "The recorded step: `{seq, type, at, duration_ms, status, output, error, agent, capability, input, summary, transport, endpoint}`", body = crate::wire::schema::SessionStep),
              (status = 400, body = crate::error::Problem, description = "Malformed body or unknown capability"),
              (status = 404, body = crate::error::Problem, description = "Unknown session or agent"),
              (status = 409, body = crate::error::Problem, description = "The session is full"),
              (status = 422, body = crate::error::Problem, description = "Input refused by the capability's input_schema")),
    security(("bearer" = [])))]
pub async fn execute(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
    JsonBody(body): JsonBody,
) -> ApiResult<Json<Value>> {
    caller.require(Scope::Playground)?;
    let session = playground::find_owned(&state, &caller, &id).await?;
    let viewer = state.auth.viewer_of(&caller).await?;
    let step = playground::execute(&state, &session, &body, &viewer).await?;
    Ok(Json(playground::wire::step_json(&step)))
}
