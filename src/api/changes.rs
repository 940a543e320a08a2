//! The public change feed: what happened to public agents since a sequence number, so mirrors
//! and caches can follow the registry without re-listing it (docs/changes.md).

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::auth::Viewer;
use crate::error::{ApiError, ApiResult};
use crate::extract::Query;
use crate::registry::Registry;
use crate::search::clamp_limit;
use crate::state::AppState;
use crate::store::ChangeKind;
use crate::timestamp::Timestamp;

use crate::wire::AgentRecord;

/// Changes per page unless `limit` says otherwise.
pub const DEFAULT_LIMIT: usize = 100;
/// Largest page; larger `limit`s are clamped.
pub const MAX_LIMIT: usize = 1000;

/// One change to a public agent.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChangeEntry {
    /// Position in the change log; strictly increasing through the feed.
    pub seq: i64,
    /// `created`, `published`, `updated`, `verified`, `unpublished` or `deleted`.
    pub kind: ChangeKind,
    /// The agent's id.
    pub id: String,
    /// The agent's package name.
    pub package_name: String,
    /// When the change happened.
    pub at: Timestamp,
    /// The agent's version after the change; for `deleted`, its last version. Absent on
    /// changes made before the registry recorded versions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The agent left the public registry (`unpublished` or `deleted`): drop it.
    pub tombstone: bool,
    /// The agent's public record as it is now, on entries that are not tombstones while it is
    /// still ACTIVE. Absent when it is no longer public: a later tombstone follows in the feed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentRecord>,
}

/// A page of the change feed.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChangePage {
    /// Oldest first.
    pub changes: Vec<ChangeEntry>,
    /// Pass back as `since` for the next page; equals the request's `since` when nothing is new.
    pub next_since: i64,
    /// The page size used (after clamping). A page shorter than this is the end of the feed
    /// for now.
    pub limit: usize,
}

/// Changes to public agents after `since`, oldest first; with credentials, also those of the
/// private agents the caller may see.
#[utoipa::path(get, path = "/public/changes", tag = "public",
    params(FeedQuery),
    responses((status = 200, body = ChangePage)),
    security((), ("bearer" = [])))]
pub async fn list_changes(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(query): Query<FeedQuery>,
) -> ApiResult<Json<ChangePage>> {
    let since = match query.since {
        Some(since) if since < 0 => {
            return Err(ApiError::invalid_parameter("since: must not be negative"));
        }
        since => since.unwrap_or(0),
    };
    let limit = clamp_limit(query.limit, DEFAULT_LIMIT, MAX_LIMIT);
    Ok(Json(
        feed_page(&state.registry, since, limit, &viewer).await?,
    ))
}

/// The feed's query string.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FeedQuery {
    /// Sequence number of the last change seen (`next_since`); 0 or absent: from the start.
    #[serde(default, deserialize_with = "crate::extract::integer")]
    #[param(value_type = Option<i64>)]
    pub since: Option<i64>,
    /// Page size, default 100, max 1000.
    #[serde(default, deserialize_with = "crate::extract::integer")]
    #[param(value_type = Option<i64>)]
    pub limit: Option<i64>,
}

/// One page of the feed: public changes after `since`, each with the agent's current public
/// record when it is still ACTIVE.
pub async fn feed_page(
    registry: &Registry,
    since: i64,
    limit: usize,
    viewer: &Viewer,
) -> ApiResult<ChangePage> {
    let page_size = u32::try_from(limit).unwrap_or(u32::MAX);
    let entries: Vec<ChangeEntry> = registry
        .public_changes(since, page_size, viewer)
        .await?
        .into_iter()
        .map(|(change, agent)| ChangeEntry {
            seq: change.seq,
            tombstone: matches!(change.kind, ChangeKind::Unpublished | ChangeKind::Deleted),
            kind: change.kind,
            id: change.agent_id,
            package_name: change.package_name,
            at: change.at,
            version: change.version,
            agent: agent.as_ref().map(AgentRecord::public),
        })
        .collect();
    Ok(ChangePage {
        next_since: entries.last().map_or(since, |entry| entry.seq),
        changes: entries,
        limit,
    })
}
