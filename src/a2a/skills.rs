//! The registry's own skills, shared by every transport that reaches them (JSON-RPC,
//! `/a2a/message`, `/a2a/discover`): one implementation, so the answers cannot drift.

use serde_json::{Value, json};

use crate::api::wire::AgentPage;
use crate::error::ApiResult;
use crate::search::SearchRequest;
use crate::state::AppState;

pub const SEARCH_AGENTS: &str = "search_agents";
pub const RESOLVE_PACKAGE: &str = "resolve_package";

/// "Found 3 agents matching 'bitcoin price'" (or "Found 3 agents" without query text).
pub fn found_summary(shown: usize, total: usize, query: &str) -> String {
    let noun = if total == 1 { "agent" } else { "agents" };
    let matching = if query.trim().is_empty() {
        String::new()
    } else {
        format!(" matching '{}'", crate::domain::truncate(query.trim(), 100))
    };
    if shown < total {
        format!("Found {total} {noun}{matching}; showing {shown}.")
    } else {
        format!("Found {total} {noun}{matching}.")
    }
}

/// Run the one search function and answer in the wire shape.
pub async fn search(state: &AppState, request: &SearchRequest) -> ApiResult<AgentPage> {
    let page = state.registry.search(request).await?;
    Ok(AgentPage::of(&page, &state.base_url))
}

/// A page as a JSON object: `{agents, total, limit, next_cursor}`.
pub fn page_json(page: &AgentPage) -> Value {
    serde_json::to_value(page).unwrap_or_else(|_| json!({"agents": []}))
}

/// The card of an ACTIVE agent by package name (or id); 404 `agent_not_found` otherwise.
pub async fn resolve(state: &AppState, package: &str) -> ApiResult<Value> {
    let agent = state.registry.find_active(package).await?;
    Ok(state.signer.sign(&super::card_of(&agent)))
}
