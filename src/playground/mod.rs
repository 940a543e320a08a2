//! The playground: sessions, owned by a token owner and expiring when idle, in
//! which agents are discovered with the shared search and their capabilities executed. Each
//! discover and execute is recorded as a step of the session's history; `http.rs` serves it over
//! REST. See `docs/playground.md`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::auth::{Caller, Viewer};
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::search::request::{self, DISCOVER_LIMITS};
use crate::state::AppState;
use crate::store::{PlaygroundSession, SessionStep, StepKind};
use crate::timestamp::Timestamp;
use crate::wire::AgentPage;

mod execute;
pub mod http;
mod remote;
pub mod schema;
pub mod wire;

pub use execute::{Execution, StepError, Transport};

/// Steps one session may hold; a longer exploration starts a new session.
pub const MAX_STEPS: usize = 200;
/// Longest session name, in characters.
const MAX_NAME_CHARS: usize = 100;
/// Longest query text kept in a discover step, in characters.
const MAX_RECORDED_QUERY_CHARS: usize = 1_000;

/// Idle lifetime and call timeout, from the configuration.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub idle_ttl: Duration,
    pub call_timeout: Duration,
}

impl Settings {
    pub fn of(state: &AppState) -> Self {
        let config = &state.config.playground;
        Self {
            idle_ttl: Duration::from_secs(config.playground_idle_ttl_secs.max(1)),
            call_timeout: Duration::from_secs(config.playground_call_timeout_secs.max(1)),
        }
    }

    fn expiry_after(&self, at: Timestamp) -> Timestamp {
        at.plus_secs(self.idle_ttl.as_secs())
    }
}

/// The optional `name` of a create body (`{}` or `{"name": "…"}`); a missing body is refused.
pub fn parse_name(body: &Value) -> ApiResult<Option<String>> {
    let name = match body {
        Value::Object(object) => object.get("name"),
        _ => {
            return Err(ApiError::invalid_parameter(
                "the body must be a JSON object: {} or {\"name\": \"…\"}",
            ));
        }
    };
    match name {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(name)) => {
            let name = name.trim();
            if name.chars().any(char::is_control) {
                Err(ApiError::invalid_parameter(
                    "name must not contain control characters",
                ))
            } else if name.chars().count() > MAX_NAME_CHARS {
                Err(ApiError::invalid_parameter(format!(
                    "name must be at most {MAX_NAME_CHARS} characters"
                )))
            } else {
                Ok((!name.is_empty()).then(|| name.to_owned()))
            }
        }
        Some(_) => Err(ApiError::invalid_parameter("name must be a string")),
    }
}

/// Start a session for `caller`. Expired sessions are purged on the way (lazily, by anyone).
pub async fn create(
    state: &AppState,
    caller: &Caller,
    name: Option<String>,
) -> ApiResult<PlaygroundSession> {
    let settings = Settings::of(state);
    let now = Timestamp::now();
    let purged = state.store.purge_expired_sessions(now).await?;
    if purged > 0 {
        tracing::debug!(purged, "expired playground sessions purged");
    }
    let session = PlaygroundSession {
        id: format!("pgs_{}", ulid::Ulid::new()),
        owner: caller.owner.clone(),
        name,
        created_at: now,
        last_active_at: now,
        expires_at: settings.expiry_after(now),
        steps: Vec::new(),
    };
    state.store.insert_session(&session).await?;
    tracing::info!(session.id = %session.id, owner = %session.owner, "playground session created");
    Ok(session)
}

/// The caller's live session `id`, or 404 `session_not_found`: unknown, expired, and other
/// owners' sessions look the same.
pub async fn find_owned(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> ApiResult<PlaygroundSession> {
    let not_found = || {
        ApiError::new(
            ErrorCode::SessionNotFound,
            format!(
                "no playground session '{}' (sessions expire after {} s idle)",
                crate::domain::truncate(id, 60),
                Settings::of(state).idle_ttl.as_secs()
            ),
        )
    };
    match state.store.find_session(id.trim()).await? {
        Some(session) if session.owner == caller.owner => {
            if session.is_live(Timestamp::now()) {
                Ok(session)
            } else {
                state.store.delete_session(&session.id).await?;
                Err(not_found())
            }
        }
        _ => Err(not_found()),
    }
}

/// Mark a session used now; returns it with its new expiry.
pub async fn touch(
    state: &AppState,
    mut session: PlaygroundSession,
) -> ApiResult<PlaygroundSession> {
    let now = Timestamp::now();
    let expires_at = Settings::of(state).expiry_after(now);
    state
        .store
        .touch_session(&session.id, now, expires_at)
        .await?;
    session.last_active_at = now;
    session.expires_at = expires_at;
    Ok(session)
}

/// End a session.
pub async fn delete(state: &AppState, session: &PlaygroundSession) -> ApiResult<()> {
    state.store.delete_session(&session.id).await?;
    tracing::info!(session.id = %session.id, "playground session ended");
    Ok(())
}

/// Run the shared search for `body` (`{query, limit, filters}`, as `/a2a/discover`) and record
/// the agents found as a `discover` step.
pub async fn discover(
    state: &AppState,
    session: &PlaygroundSession,
    body: &Value,
    viewer: Viewer,
) -> ApiResult<(AgentPage, SessionStep)> {
    ensure_room(session)?;
    let mut search = request::from_json(body, DISCOVER_LIMITS)?;
    search.viewer = viewer;
    let started = Instant::now();
    let page = AgentPage::of(&state.registry.search(&search).await?, &state.base_url);
    let filters = body.get("filters").cloned().unwrap_or(Value::Null);
    let data = json!({
        "query": crate::domain::truncate(&search.text, MAX_RECORDED_QUERY_CHARS),
        "limit": search.limit,
        "filters": filters,
        "total": page.total,
        "agents": page.agents,
    });
    let step = record(state, session, StepKind::Discover, started, data).await?;
    Ok((page, step))
}

/// Execute a capability (`{agent, capability, input}`) and record it as an `execute` step.
/// Request mistakes are errors (400, 404, 422) and record nothing; anything the agent does
/// wrong is a `failed` execution, recorded.
pub async fn execute(
    state: &AppState,
    session: &PlaygroundSession,
    body: &Value,
    viewer: &Viewer,
) -> ApiResult<SessionStep> {
    ensure_room(session)?;
    let call = execute::prepare(state, body, viewer).await?;
    let started = Instant::now();
    let execution = execute::run(state, &call, Settings::of(state).call_timeout).await;
    if let Err(error) = &execution.result {
        tracing::info!(agent = call.agent.package_name(), capability = %call.capability,
            code = error.code.as_str(), "playground execution failed");
    }
    record(
        state,
        session,
        StepKind::Execute,
        started,
        execution.step_data(&call),
    )
    .await
}

fn ensure_room(session: &PlaygroundSession) -> ApiResult<()> {
    if session.steps.len() >= MAX_STEPS {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!("this session has reached {MAX_STEPS} steps; start a new session"),
        ));
    }
    Ok(())
}

async fn record(
    state: &AppState,
    session: &PlaygroundSession,
    kind: StepKind,
    started: Instant,
    data: Value,
) -> ApiResult<SessionStep> {
    let now = Timestamp::now();
    let step = SessionStep {
        seq: 0,
        kind,
        at: now,
        duration_ms: i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
        data,
    };
    let expires_at = Settings::of(state).expiry_after(now);
    match state
        .store
        .append_session_step(&session.id, &step, expires_at)
        .await
    {
        Ok(step) => Ok(step),
        // Ended (or purged) while the step ran.
        Err(crate::store::StoreError::NotFound) => Err(ApiError::new(
            ErrorCode::SessionNotFound,
            "the playground session ended while this step ran",
        )),
        Err(err) => Err(err.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_optional_trimmed_strings() {
        assert_eq!(parse_name(&json!({})).ok(), Some(None));
        assert_eq!(parse_name(&json!({"name": "  "})).ok(), Some(None));
        assert_eq!(
            parse_name(&json!({"name": " Weather "})).ok(),
            Some(Some("Weather".to_owned()))
        );
        for bad in [
            Value::Null,
            json!([]),
            json!("x"),
            json!({"name": 3}),
            json!({"name": "a\u{0}b"}),
            json!({"name": "x".repeat(101)}),
        ] {
            let err = parse_name(&bad).expect_err("invalid");
            assert_eq!(err.code, ErrorCode::InvalidParameter, "{bad}");
        }
    }
}
