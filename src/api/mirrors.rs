//! `GET /api/mirrors`: the mirror sources and how each is doing (scope `mirrors:read`).

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::{Caller, Scope};
use crate::error::ApiResult;
use crate::mirror::Source;
use crate::state::AppState;
use crate::store::{MirrorRecord, MirrorSkip};
use crate::timestamp::Timestamp;

/// The mirror sources of this registry.
#[derive(Debug, Serialize, ToSchema)]
pub struct MirrorList {
    /// Every configured source, in the order configured, then those that ran before and are no
    /// longer configured.
    pub mirrors: Vec<MirrorView>,
    /// Seconds between two passes of a source.
    pub interval_secs: u64,
    /// New mirrored agents stay in STAGE.
    pub stage: bool,
}

/// One mirror source.
#[derive(Debug, Serialize, ToSchema)]
pub struct MirrorView {
    /// `{kind}:{host}`; its agents are owned by `mirror:{id}`.
    pub id: String,
    /// `mcp-registry`, `agent-registry` or `ard`.
    pub kind: String,
    pub url: String,
    /// `pending` (no pass yet), `walking` (the first full walk has not ended), `ok` (the last
    /// pass succeeded), `failing` (the last pass failed: see `last_error`; it resumes where it
    /// stopped).
    pub state: MirrorState,
    /// Agents the source holds here now.
    pub entries: i64,
    /// Upstream entries not readable as agents, since the source was first configured.
    pub skipped: i64,
    /// Upstream entries left out because a local agent holds their package name or identifier.
    pub collisions: i64,
    /// The latest entries left out (skipped or colliding), newest first: the last 20, kept with
    /// the source in the database.
    pub recent_skips: Vec<MirrorSkip>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_success: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_attempt: Option<Timestamp>,
    /// Seconds since the last successful pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lag_secs: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Failed passes in a row; each doubles the wait before the next (up to eight intervals).
    pub failures: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_pass: Option<Timestamp>,
    /// A pass is under way (in some process).
    pub syncing: bool,
    /// Configured in this process; a source that ran before and no longer is keeps its agents
    /// until an operator removes them.
    pub configured: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MirrorState {
    Pending,
    Walking,
    Ok,
    Failing,
}

impl MirrorView {
    pub fn of(
        source: &Source,
        record: Option<&MirrorRecord>,
        configured: bool,
        now: Timestamp,
    ) -> Self {
        let state = match record {
            None => MirrorState::Pending,
            Some(record) if record.last_error.is_some() => MirrorState::Failing,
            // The first walk runs, or has written its last page and is finishing.
            Some(record) if !record.walked || record.last_success.is_none() => MirrorState::Walking,
            Some(_) => MirrorState::Ok,
        };
        let last_success = record.and_then(|r| r.last_success);
        Self {
            id: source.id.clone(),
            kind: source.kind.as_str().to_owned(),
            url: source.url.to_string(),
            state,
            entries: record.map_or(0, |r| r.entries),
            skipped: record.map_or(0, |r| r.skipped),
            collisions: record.map_or(0, |r| r.collisions),
            recent_skips: record.map(|r| r.recent_skips.clone()).unwrap_or_default(),
            last_success,
            last_attempt: record.and_then(|r| r.last_attempt),
            lag_secs: last_success.map(|at| (now.micros() - at.micros()).max(0) / 1_000_000),
            last_error: record.and_then(|r| r.last_error.clone()),
            failures: record.map_or(0, |r| r.failures),
            next_pass: record.map(|r| r.next_at),
            syncing: record.is_some_and(|r| {
                r.lease_owner.is_some() && r.lease_until.is_some_and(|until| until > now)
            }),
            configured,
        }
    }
}

/// The mirror sources, each with its state, entry count, last success, lag, skipped entries
/// (counted, and the latest with their reasons) and last error.
#[utoipa::path(get, path = "/api/mirrors", tag = "operations",
    responses((status = 200, body = MirrorList),
              (status = 401, body = crate::error::Problem, description = "`unauthorized`"),
              (status = 403, body = crate::error::Problem, description = "`forbidden`: the token lacks scope `mirrors:read`")),
    security(("bearer" = [])))]
pub async fn list_mirrors(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<MirrorList>> {
    caller.require(Scope::MirrorsRead)?;
    let now = Timestamp::now();
    let status = state.mirrors.status().await?;
    let settings = state.mirrors.settings();
    Ok(Json(MirrorList {
        mirrors: status
            .iter()
            .map(|(source, record)| {
                let configured = state.mirrors.is_configured(source);
                MirrorView::of(source, record.as_ref(), configured, now)
            })
            .collect(),
        interval_secs: settings.interval.as_secs(),
        stage: settings.stage,
    }))
}
