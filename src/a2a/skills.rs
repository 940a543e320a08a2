//! The registry's own skills, shared by every transport that reaches them (JSON-RPC,
//! `/a2a/message`, `/a2a/discover`): one implementation, so the answers cannot drift.

use serde_json::{Value, json};

use crate::api::wire::AgentPage;
use crate::error::ApiResult;
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

/// A page as a JSON object: `{agents, total, limit, next_cursor}`.
pub fn page_json(page: &AgentPage) -> Value {
    serde_json::to_value(page).unwrap_or_else(|_| json!({"agents": []}))
}

/// The card of an ACTIVE agent by package name (or id); 404 `agent_not_found` otherwise.
pub async fn resolve(state: &AppState, package: &str) -> ApiResult<Value> {
    let agent = crate::api::public::find_active(state, package).await?;
    Ok(super::card_of(&agent))
}
