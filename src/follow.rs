//! Keeps this process's search index in step with the change log, so writes made through any
//! other process (another server on the same PostgreSQL, the CLI on the same SQLite file) show
//! up in searches here. Woken by the store (`NOTIFY` on PostgreSQL) and polling as the safety net.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::search::SearchIndex;
use crate::store::{Agent, Store, StoreResult};
use crate::task::AbortOnDrop;

/// The longest a follower sleeps without a wake-up: the bound on propagation delay when a
/// notification is lost.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// Changes read per round trip.
const BATCH: u32 = 500;

/// Follow the change log from `cursor` (the last change already reflected in `index`) for as
/// long as the returned guard lives.
pub fn spawn(store: Arc<dyn Store>, index: Arc<SearchIndex>, cursor: i64) -> AbortOnDrop {
    AbortOnDrop::new(tokio::spawn(follow(store, index, cursor)))
}

async fn follow(store: Arc<dyn Store>, index: Arc<SearchIndex>, mut cursor: i64) {
    loop {
        match catch_up(store.as_ref(), &index, cursor).await {
            Ok((next, more)) => {
                cursor = next;
                if more {
                    continue;
                }
            }
            Err(err) => tracing::warn!(error = %err, cursor, "cannot follow the change log"),
        }
        store.wait_for_change(POLL_INTERVAL).await;
    }
}

/// Apply one batch of changes after `cursor`; the new cursor, and whether more may be waiting.
/// Each changed agent is re-read once and applied as it is now: the index ignores anything
/// older than a revision it already has, so replaying a change is harmless.
async fn catch_up(store: &dyn Store, index: &SearchIndex, cursor: i64) -> StoreResult<(i64, bool)> {
    let changes = store.changes_since(cursor, BATCH).await?;
    let Some(last) = changes.last().map(|change| change.seq) else {
        return Ok((cursor, false));
    };
    let mut ids: Vec<String> = changes.iter().map(|c| c.agent_id.clone()).collect();
    ids.sort_unstable();
    ids.dedup();
    // The batch's agents in one query, not one per change.
    let mut current: HashMap<String, Agent> = store
        .find_agents_by_id(&ids)
        .await?
        .into_iter()
        .map(|agent| (agent.id.clone(), agent))
        .collect();
    let mut changed = Vec::new();
    let mut deleted = Vec::new();
    for id in ids {
        match current.remove(&id) {
            // Indexed at this revision already; only its health (which the prober writes
            // without a new revision) may be news. A row without health was read before a
            // probe landed: it says nothing newer than what this process's prober applied, and
            // must not clear it (clearing follows a new endpoint, which is a new revision).
            // A probe elsewhere found new findings in what its endpoint shows: the same
            // revision, indexed again with its new worst severity.
            Some(agent) if index.holds(&agent) && index.live_severity_moved(&agent) => {
                changed.push(agent);
            }
            Some(agent) if index.holds(&agent) => {
                if agent.health.is_some() {
                    index.set_health(&agent.id, agent.health);
                }
            }
            Some(agent) => changed.push(agent),
            None => deleted.push(id),
        }
    }
    // One index commit for the whole batch: a bulk import elsewhere is searchable here in
    // seconds, not one commit per agent.
    index.apply_batch(&changed, &deleted).await;
    Ok((last, changes.len() == BATCH as usize))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::health::{ProbeKind, ProbeOutcome, Uptime};
    use crate::domain::{AgentDraft, Health, HealthStatus};
    use crate::store::AgentState;
    use crate::store::sqlite::SqliteStore;
    use crate::timestamp::Timestamp;

    #[tokio::test]
    async fn a_row_read_before_a_probe_landed_does_not_clear_its_health() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open_dir(dir.path()).await.expect("store"));
        let draft = AgentDraft::parse(&serde_json::json!({"package_name": "com.example.probed",
            "name": "Probed", "description": "Answers.", "url": "https://probed.example.com/a2a"}))
        .expect("draft");
        let mut agent = Agent::new(draft, "alice", Timestamp::now());
        agent.state = AgentState::Active;
        agent.published_at = Some(Timestamp::now());
        store.insert_agent(&agent).await.expect("insert");
        let index = SearchIndex::new(Arc::clone(&store), None).expect("index");
        index.apply(&agent).await;
        // This process's prober found it up; the row the follower reads was read before.
        let outcome = ProbeOutcome {
            status: HealthStatus::Up,
            kind: ProbeKind::A2aCard,
            target: "https://probed.example.com/a2a".to_owned(),
            at: Timestamp::now(),
            latency_ms: 5,
            detail: None,
        };
        let up = Health::after(None, &outcome, Uptime::default());
        index.set_health(&agent.id, Some(up));
        catch_up(store.as_ref(), &index, 0).await.expect("catch up");
        let counts: HashMap<HealthStatus, usize> = index.health_counts().into_iter().collect();
        assert_eq!(counts.get(&HealthStatus::Up), Some(&1), "{counts:?}");
    }
}
