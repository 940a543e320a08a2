//! What playground clients see: a session with its history, and one step.

use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::domain::Capability;
use crate::state::AppState;
use crate::store::{AgentState, PlaygroundSession, SessionStep, StepKind};
use crate::timestamp::Timestamp;

use super::Settings;

/// Discovered agents listed with a session at most (the most recently discovered first found).
const MAX_DISCOVERED: usize = 50;

/// A playground session.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionView {
    /// `pgs_…`.
    pub session_id: String,
    /// The name given at creation, if any.
    pub name: Option<String>,
    /// The owner of the token that created it; only they can see it.
    pub owner: String,
    pub created_at: Timestamp,
    /// The last time it was used (read, discover, execute).
    pub last_active_at: Timestamp,
    /// When it expires unless used again before.
    pub expires_at: Timestamp,
    /// How long an unused session lives, in seconds.
    pub idle_ttl_secs: u64,
    /// Agents found by this session's discover steps that are still ACTIVE, with their
    /// capabilities and input schemas, in the order first found.
    pub discovered_agents: Vec<DiscoveredAgent>,
    /// Every discover and execute step, oldest first.
    #[schema(value_type = Vec<Object>)]
    pub history: Vec<Value>,
}

/// An agent a session discovered, with what it takes to execute it.
#[derive(Debug, Serialize, ToSchema)]
pub struct DiscoveredAgent {
    pub id: String,
    pub package_name: String,
    pub name: String,
    pub description: String,
    pub capabilities: Vec<Capability>,
}

impl SessionView {
    /// The view of `session`, with its discovered agents read again from the store.
    pub async fn of(
        state: &AppState,
        session: &PlaygroundSession,
    ) -> crate::error::ApiResult<Self> {
        let mut discovered = Vec::new();
        for id in discovered_ids(&session.steps) {
            if let Some(agent) = state.registry.find(&id).await?
                && agent.state == AgentState::Active
            {
                discovered.push(DiscoveredAgent {
                    package_name: agent.package_name().to_owned(),
                    id: agent.id,
                    name: agent.draft.name,
                    description: agent.draft.description,
                    capabilities: agent.draft.capabilities,
                });
            }
        }
        Ok(Self {
            session_id: session.id.clone(),
            name: session.name.clone(),
            owner: session.owner.clone(),
            created_at: session.created_at,
            last_active_at: session.last_active_at,
            expires_at: session.expires_at,
            idle_ttl_secs: Settings::of(state).idle_ttl.as_secs(),
            discovered_agents: discovered,
            history: session.steps.iter().map(step_json).collect(),
        })
    }
}

/// Agent ids in discover steps, first-seen order, distinct, at most `MAX_DISCOVERED`.
fn discovered_ids(steps: &[SessionStep]) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    let found = steps
        .iter()
        .filter(|step| step.kind == StepKind::Discover)
        .filter_map(|step| step.data.get("agents")?.as_array())
        .flatten()
        .filter_map(|agent| agent.get("id")?.as_str());
    for id in found {
        if ids.len() >= MAX_DISCOVERED {
            break;
        }
        if !ids.iter().any(|seen| seen == id) {
            ids.push(id.to_owned());
        }
    }
    ids
}

/// One step as clients see it: `{seq, type, at, duration_ms, …its detail}`.
pub fn step_json(step: &SessionStep) -> Value {
    let mut object = Map::new();
    object.insert("seq".to_owned(), Value::from(step.seq));
    object.insert("type".to_owned(), Value::from(step.kind.as_str()));
    object.insert("at".to_owned(), Value::from(step.at.to_rfc3339()));
    object.insert("duration_ms".to_owned(), Value::from(step.duration_ms));
    if let Value::Object(detail) = &step.data {
        for (key, value) in detail {
            object.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    Value::Object(object)
}
