//! The hosted utility agents over HTTP: `POST /a2a/utility/{name}` with
//! `{input, capability?}` or the legacy `{action, params}`, and A2A `SendMessage` at
//! `POST /a2a/utility/{name}/v1`. Every path runs the same `hosted::invoke`.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::jsonrpc::{self, RpcError, Target};
use crate::auth::{Caller, Scope};
use crate::error::{ApiError, ApiResult};
use crate::extract::{JsonBody, PathParam};
use crate::hosted::{self, HostedAgent, Invocation};
use crate::state::AppState;

/// Call a hosted agent (scope `a2a`).
#[utoipa::path(post, path = "/a2a/utility/{name}", tag = "a2a",
    params(("name" = String, Path, description = "`wiki`, `finance` or `reader`")),
    request_body(content = crate::wire::schema::HostedAgentRequest, description = r#"`{"input": {"symbol": "BTC"}, "capability"?: "get_current_price"}` or the legacy `{"action": "get_current_price", "params": {"symbol": "BTC"}}`"#),
    responses((status = 200, description = r#"`{"agent": "registry.utility.finance", "capability", "output": {…}}`"#, body = crate::wire::schema::HostedAgentAnswer),
              (status = 404, body = crate::error::Problem, description = "`agent_not_found` (no such hosted agent) or `resource_not_found` (no such symbol or page)"),
              (status = 502, body = crate::error::Problem, description = "`upstream_error`"),
              (status = 504, body = crate::error::Problem, description = "`upstream_timeout`")),
    security(("bearer" = [])))]
pub async fn invoke(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(slug): PathParam,
    JsonBody(body): JsonBody,
) -> ApiResult<Json<Value>> {
    caller.require(Scope::A2a)?;
    let agent = hosted(&state, &slug)?;
    let invocation = Invocation::from_body(&body, agent.about().text_field)?;
    let (capability, output) = hosted::invoke(agent.as_ref(), &invocation).await?;
    Ok(Json(hosted::response_body(
        agent.as_ref(),
        &capability,
        &output,
    )))
}

/// A2A JSON-RPC of a hosted agent (scope `a2a`; also at `/a2a/utility/{name}/v1/`).
///
/// `SendMessage` runs one of its capabilities; every other A2A method and error is answered as on
/// `/a2a/v1`.
#[utoipa::path(post, path = "/a2a/utility/{name}/v1", tag = "a2a",
    params(("name" = String, Path, description = "`wiki`, `finance` or `reader`")),
    request_body(content = crate::wire::schema::JsonRpcRequest, description = "JSON-RPC 2.0 `SendMessage`: data parts carry the input, `metadata.skill_id` names the capability, a text part alone is the natural input"),
    responses((status = 200, description = "JSON-RPC response (errors too)", body = crate::wire::schema::JsonRpcResponse),
              (status = 204, description = "Only notifications were sent"),
              (status = 404, body = crate::error::Problem, description = "`agent_not_found`: no hosted agent of that name")),
    security(("bearer" = [])))]
pub async fn handle(
    State(state): State<AppState>,
    PathParam(slug): PathParam,
    parts: Parts,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match hosted(&state, &slug) {
        Ok(agent) => jsonrpc::serve(&state, &Target::Hosted(agent), &parts, body).await,
        Err(err) => err.into_response(),
    }
}

fn hosted(state: &AppState, slug: &str) -> ApiResult<Arc<dyn HostedAgent>> {
    state
        .hosted
        .by_slug(slug)
        .ok_or_else(|| ApiError::agent_not_found(slug))
}

/// `SendMessage` to a hosted agent: data parts are the input, a text part fills the agent's text
/// field, the skill id (or a data `capability`) names the capability.
pub async fn send_message(
    agent: &dyn HostedAgent,
    params: Option<&Value>,
) -> Result<Value, RpcError> {
    let incoming = jsonrpc::parse_send_message(params)?;
    let mut input = incoming.data;
    let named_in_data = ["capability", "action"]
        .into_iter()
        .find_map(|key| input.remove(key))
        .and_then(|value| value.as_str().map(str::to_owned));
    if !incoming.text.is_empty() && !input.contains_key(agent.about().text_field) {
        input.insert(
            agent.about().text_field.to_owned(),
            Value::String(incoming.text.clone()),
        );
    }
    let invocation = Invocation {
        capability: incoming.skill_id.or(named_in_data),
        input,
    };
    let (_, output) = hosted::invoke(agent, &invocation)
        .await
        .map_err(|err| RpcError::from(ApiError::from(err)))?;
    Ok(jsonrpc::agent_message(
        output.data,
        output.summary,
        incoming.context_id,
    ))
}
