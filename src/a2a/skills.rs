//! The registry's own skills, shared by every transport that reaches them (JSON-RPC,
//! `/a2a/message`, `/a2a/discover`): one implementation, so the answers cannot drift.

use serde_json::Value;

use crate::auth::Viewer;
use crate::error::{ApiError, ApiResult};
use crate::search::SearchRequest;
use crate::state::AppState;
use crate::wire::AgentPage;

pub const SEARCH_AGENTS: &str = "search_agents";
pub const RESOLVE_PACKAGE: &str = "resolve_package";

/// Run the one search function and answer in the wire shape.
pub async fn search(state: &AppState, request: &SearchRequest) -> ApiResult<AgentPage> {
    let page = state.registry.search(request).await?;
    Ok(AgentPage::of(&page, &state.base_url))
}

/// Whether a `search_agents` request asks for ARD's answer: its `query` is ARD's query object
/// (`{"text", "filter", "@context"}`) rather than text.
pub fn asks_for_ard(data: &serde_json::Map<String, Value>) -> bool {
    data.get("query").is_some_and(Value::is_object)
}

/// An ARD search request answered as `POST /ard/search` answers it (ARD's entry model,
/// federation included). Text sent beside the data fills `query.text` when it has none.
pub async fn ard_search(
    state: &AppState,
    mut body: serde_json::Map<String, Value>,
    text: &str,
    viewer: &Viewer,
) -> ApiResult<(Value, String)> {
    if let Some(query) = body.get_mut("query").and_then(Value::as_object_mut)
        && !text.trim().is_empty()
        && query.get("text").is_none_or(Value::is_null)
    {
        query.insert("text".to_owned(), Value::String(text.to_owned()));
    }
    let answer = crate::ard::search::run(&state.ard, &Value::Object(body), None, viewer)
        .await
        .map_err(ApiError::from)?;
    let answer: Value = answer
        .to_json()
        .and_then(|json| serde_json::from_slice(&json))
        .map_err(ApiError::internal)?;
    let count = answer["results"].as_array().map_or(0, Vec::len);
    let noun = if count == 1 { "entry" } else { "entries" };
    Ok((answer, format!("{count} ARD {noun}.")))
}

/// The card of an ACTIVE agent `viewer` may see by package name (or id); 404
/// `agent_not_found` otherwise.
pub async fn resolve(state: &AppState, package: &str, viewer: &Viewer) -> ApiResult<Value> {
    let agent = state.registry.find_active(package, viewer).await?;
    let worst = state.registry.worst_severity(&agent);
    Ok(state
        .signer
        .sign(&crate::wire::card::card_of(&agent, worst)))
}
