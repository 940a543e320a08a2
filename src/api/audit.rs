//! Reading the audit log (`GET /api/audit`): every row for the master key; for anyone else,
//! the rows of their own writes and those concerning what they own or administer.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::domain::org::{OrgRole, org_owner};
use crate::error::{ApiError, ApiResult};
use crate::extract::Query;
use crate::state::AppState;
use crate::store::{AuditEntry, AuditQuery};
use crate::timestamp::Timestamp;

/// Rows per page when `limit` is not given, and at most.
const DEFAULT_LIMIT: u32 = 50;
const MAX_LIMIT: u32 = 500;

/// One row of the audit log.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditView {
    /// Its place in the log; pages go from the newest down.
    pub seq: i64,
    pub at: Timestamp,
    /// The owner the actor acted as (`admin` for the master key, `anonymous` without one).
    pub actor: String,
    /// `master`, `token`, `session` or `anonymous`.
    pub actor_kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The client's address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// `agent.created`, `agent.updated`, `agent.published`, `agent.unpublished`,
    /// `agent.verified`, `agent.deleted`, `agent.transferred`, `transfer.requested`,
    /// `transfer.declined`, `token.created`, `token.minted`, `token.revoked`, `org.created`,
    /// `org.member_set`, `org.member_removed`, `signin`, `signout`; for a refused write, the
    /// request (`DELETE /api/agents/…`).
    pub action: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package_name: Option<String>,
    /// Whose thing it concerns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// `ok` or `refused`.
    pub outcome: String,
    /// Why it was refused (the error's code and detail), or what it changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl From<AuditEntry> for AuditView {
    fn from(entry: AuditEntry) -> Self {
        Self {
            seq: entry.seq,
            at: entry.at,
            actor: entry.actor,
            actor_kind: entry.actor_kind,
            token_id: entry.token_id,
            session_id: entry.session_id,
            client: entry.client,
            action: entry.action,
            target: entry.target,
            agent_id: entry.agent_id,
            package_name: entry.package_name,
            owner: entry.owner,
            version: entry.version,
            outcome: entry.outcome,
            reason: entry.reason,
        }
    }
}

/// A page of the audit log, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditPage {
    pub entries: Vec<AuditView>,
    /// Pass as `cursor` for the next (older) page; absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct AuditParams {
    /// Rows about this agent (its id or package name).
    agent: Option<String>,
    /// Rows of this actor (an owner name, `admin` for the master key).
    actor: Option<String>,
    /// Rows concerning this organisation's agents and members.
    org: Option<String>,
    /// Rows at or after this time (RFC 3339).
    #[param(format = DateTime)]
    since: Option<String>,
    /// 1 to 500 (default 50).
    limit: Option<i64>,
    /// The `next_cursor` of the page before.
    cursor: Option<String>,
}

/// The audit log, newest first: who wrote what, when, from where, and each refused write with
/// its reason. The master key reads every row; anyone else the rows of their own writes and
/// those concerning their agents, the namespaces their identity grants, and the organisations
/// they administer.
#[utoipa::path(get, path = "/api/audit", tag = "management",
    params(AuditParams),
    responses((status = 200, body = AuditPage)),
    security(("bearer" = [])))]
pub async fn list_audit(
    State(state): State<AppState>,
    caller: Caller,
    Query(params): Query<AuditParams>,
) -> ApiResult<Json<AuditPage>> {
    let limit = match params.limit {
        None => DEFAULT_LIMIT,
        Some(n) => u32::try_from(n.clamp(1, i64::from(MAX_LIMIT))).unwrap_or(DEFAULT_LIMIT),
    };
    let since = params
        .since
        .as_deref()
        .map(|text| {
            serde_json::from_value::<Timestamp>(serde_json::json!(text.trim())).map_err(|_| {
                ApiError::invalid_parameter("since: an RFC 3339 time, such as 2026-11-29T00:00:00Z")
            })
        })
        .transpose()?;
    let before = params
        .cursor
        .as_deref()
        .map(|cursor| {
            cursor
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|seq| *seq > 0)
                .ok_or_else(|| {
                    ApiError::invalid_parameter("cursor: malformed; start again without it")
                })
        })
        .transpose()?;
    // An agent named by package name is looked up; an unknown one has no rows.
    let agent_id = match params
        .agent
        .as_deref()
        .map(str::trim)
        .filter(|a| !a.is_empty())
    {
        Some(agent) => Some(
            state
                .registry
                .find(agent)
                .await?
                .map_or_else(|| agent.to_owned(), |found| found.id),
        ),
        None => None,
    };
    let owner = params
        .org
        .as_deref()
        .map(str::trim)
        .filter(|org| !org.is_empty())
        .map(org_owner);
    let visible_to = if caller.is_master {
        None
    } else {
        let mut owners = vec![caller.owner.clone()];
        owners.extend(caller.granted.iter().cloned());
        for member in state
            .store
            .memberships_of(&caller.owner, &caller.granted)
            .await?
        {
            if member.role == OrgRole::Admin {
                owners.push(org_owner(&member.org));
            }
        }
        Some((caller.owner.clone(), owners))
    };
    let query = AuditQuery {
        agent_id,
        actor: params.actor.map(|actor| actor.trim().to_owned()),
        owner,
        since,
        before,
        limit: limit + 1,
        visible_to,
    };
    let mut entries = state.store.audit_page(&query).await?;
    let next_cursor = if entries.len() > limit as usize {
        entries.truncate(limit as usize);
        entries.last().map(|entry| entry.seq.to_string())
    } else {
        None
    };
    Ok(Json(AuditPage {
        entries: entries.into_iter().map(AuditView::from).collect(),
        next_cursor,
    }))
}
