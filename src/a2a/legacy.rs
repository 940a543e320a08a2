//! The legacy A2A paths: `/a2a/discover` and `/a2a/message`.

use axum::Json;
use axum::extract::State;
use axum::http::request::Parts;
use serde_json::{Value, json};

use crate::auth::{self, Scope};
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::extract::JsonBody;
use crate::hosted::{self, Invocation};
use crate::search::request::{self, DISCOVER_LIMITS, SEARCH_LIMITS};
use crate::state::AppState;

use super::skills;

/// Semantic discovery from natural-language intent (scope `a2a`).
#[utoipa::path(post, path = "/a2a/discover", tag = "a2a",
    request_body(content = crate::wire::schema::SearchRequest, description = "`{query, limit (default 5, max 20), cursor, sort, filters: {target, category, tags, verification_level, payment_*}}`"),
    responses((status = 200, description = "`{success, agents, summary, total, limit, next_cursor}`", body = crate::wire::schema::DiscoverAnswer)),
    security(("bearer" = [])))]
pub async fn discover(
    State(state): State<AppState>,
    caller: auth::Caller,
    JsonBody(body): JsonBody,
) -> ApiResult<Json<Value>> {
    caller.require(Scope::A2a)?;
    let mut request = request::from_json(&body, DISCOVER_LIMITS)?;
    request.viewer = state.auth.viewer_of(&caller).await?;
    let page = skills::search(&state, &request).await?;
    let mut answer = crate::wire::page_json(&page);
    if let Value::Object(map) = &mut answer {
        map.insert("success".to_owned(), Value::Bool(true));
        map.insert(
            "summary".to_owned(),
            Value::String(crate::wire::found_summary(
                page.agents.len(),
                page.total,
                &request.text,
            )),
        );
    }
    Ok(Json(answer))
}

/// A message to the registry (`to: "registry"`, no authentication) or to a hosted agent
/// (`to: "registry.utility.finance"`, scope `a2a`).
#[utoipa::path(post, path = "/a2a/message", tag = "a2a",
    request_body(content = crate::wire::schema::LegacyMessage, description = r#"`{"to": "registry", "action": "search", "params": {"query", "limit", payment filters…}}`, `{"to": "registry", "action": "resolve_package", "params": {"package_name"}}`, or to a hosted agent (scope `a2a`): `{"to": "registry.utility.finance", "action": "get_current_price", "params": {"symbol": "BTC"}}`"#),
    responses((status = 200, description = "A search page, `{card: {...}}`, or a hosted agent's `{agent, capability, output}`", body = crate::wire::schema::LegacyMessageAnswer),
              (status = 401, body = crate::error::Problem, description = "`unauthorized`: a message to a hosted agent without a valid token"),
              (status = 403, body = crate::error::Problem, description = "`forbidden`: the token lacks scope `a2a`"),
              (status = 404, body = crate::error::Problem, description = "`agent_not_found` or `resource_not_found`"),
              (status = 502, body = crate::error::Problem, description = "`upstream_error`: the hosted agent's upstream failed"),
              (status = 504, body = crate::error::Problem, description = "`upstream_timeout`")),
    security((), ("bearer" = [])))]
pub async fn message(
    State(state): State<AppState>,
    viewer: auth::Viewer,
    parts: Parts,
    JsonBody(body): JsonBody,
) -> ApiResult<Json<Value>> {
    let body = body
        .as_object()
        .ok_or_else(|| ApiError::invalid_parameter("the body must be a JSON object"))?;
    let text = |key: &str| -> ApiResult<Option<&str>> {
        match body.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.trim())),
            Some(_) => Err(ApiError::invalid_parameter(format!(
                "{key} must be a string"
            ))),
        }
    };
    let to = text("to")?.unwrap_or("registry");
    let action = text("action")?;
    let params = match body.get("params") {
        None | Some(Value::Null) => json!({}),
        Some(params @ Value::Object(_)) => params.clone(),
        Some(_) => return Err(ApiError::invalid_parameter("params must be an object")),
    };
    if !to.eq_ignore_ascii_case("registry") {
        return message_to_agent(&state, &parts, to, action, &params).await;
    }
    let action = action.ok_or_else(|| ApiError::invalid_parameter("action is required"))?;
    match action {
        "search" | skills::SEARCH_AGENTS
            if params.as_object().is_some_and(skills::asks_for_ard) =>
        {
            let params = params.as_object().cloned().unwrap_or_default();
            let (answer, _) = skills::ard_search(&state, params, "", &viewer).await?;
            Ok(Json(answer))
        }
        "search" | skills::SEARCH_AGENTS => {
            let mut request = request::from_json(&params, SEARCH_LIMITS)?;
            request.viewer = viewer;
            let page = skills::search(&state, &request).await?;
            Ok(Json(crate::wire::page_json(&page)))
        }
        skills::RESOLVE_PACKAGE | "resolve" => {
            let package = params
                .get("package_name")
                .and_then(Value::as_str)
                .filter(|p| !p.trim().is_empty())
                .ok_or_else(|| ApiError::invalid_parameter("params.package_name is required"))?;
            let card = skills::resolve(&state, package, &viewer).await?;
            Ok(Json(json!({"card": card})))
        }
        other => Err(ApiError::invalid_parameter(format!(
            "unknown action '{}'; the registry understands search and resolve_package",
            crate::domain::truncate(other, 60)
        ))),
    }
}

/// A message addressed to a hosted agent: needs scope `a2a`; `action` names the capability and
/// `params` is its input. Answers like `POST /a2a/utility/{name}`.
async fn message_to_agent(
    state: &AppState,
    parts: &Parts,
    to: &str,
    action: Option<&str>,
    params: &Value,
) -> ApiResult<Json<Value>> {
    let hosted = state.hosted.by_package(to).ok_or_else(|| {
        ApiError::new(
            ErrorCode::AgentNotFound,
            format!(
                "no agent '{}' answers here; address 'registry' or a hosted agent",
                crate::domain::truncate(to, 100)
            ),
        )
    })?;
    // A bearer token was authenticated before the handler (`auth::resolve_viewer`).
    let caller = match parts.extensions.get::<auth::Caller>() {
        Some(caller) => caller.clone(),
        None => state.auth.authenticate(auth::bearer_secret(parts)?).await?,
    };
    caller.require(Scope::A2a)?;
    let invocation = Invocation {
        capability: action.map(str::to_owned),
        input: Invocation::input_from(params, hosted.about().text_field)?,
    };
    let (capability, output) = hosted::invoke(hosted.as_ref(), &invocation).await?;
    Ok(Json(hosted::response_body(
        hosted.as_ref(),
        &capability,
        &output,
    )))
}
