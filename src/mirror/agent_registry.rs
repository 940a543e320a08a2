//! `agent-registry=URL`: another instance of this registry, followed through its public change
//! feed (`GET {URL}/public/changes?since=`). The feed's position is the source's cursor: the
//! first pass reads it from the start, later ones from where the last page ended. A change
//! carries the agent's public record as it is now, which reads as a publish body; a tombstone
//! (unpublished, deleted) removes the agent.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::AgentDraft;
use crate::timestamp::Timestamp;

use super::Pass;
use super::fetch::{self, MirrorError};
use super::plan::{Entry, Read, Skip, Status};

#[derive(Debug, Default, Serialize, Deserialize)]
struct Position {
    since: i64,
}

pub(super) async fn pass(pass: &mut Pass<'_>) -> Result<(), MirrorError> {
    let mut position: Position = pass.stored_position();
    loop {
        let mut url = super::endpoint(pass.source, "/public/changes")?;
        url.query_pairs_mut()
            .append_pair("since", &position.since.to_string())
            .append_pair("limit", &pass.page_size().to_string());
        let page = fetch::json(pass.outbound(), url.clone()).await?;
        let changes = page
            .get("changes")
            .and_then(Value::as_array)
            .ok_or_else(|| MirrorError::Malformed(format!("{url}: no `changes` array")))?;
        let next = page
            .get("next_since")
            .and_then(Value::as_i64)
            .ok_or_else(|| MirrorError::Malformed(format!("{url}: no `next_since`")))?;
        let limit = page.get("limit").and_then(Value::as_u64).unwrap_or(1);
        if next < position.since {
            return Err(MirrorError::Malformed(format!(
                "{url}: next_since {next} goes back from {}",
                position.since
            )));
        }
        let reads: Vec<Read> = changes.iter().filter_map(read_change).collect();
        let done = (changes.len() as u64) < limit.max(1) || next == position.since;
        position.since = next;
        let text = serde_json::to_string(&position).unwrap_or_default();
        pass.write(reads, Some(text), pass.walked || done).await?;
        if done {
            return Ok(());
        }
    }
}

/// One change of the feed; `None` for a change that says nothing to apply (the agent is no
/// longer public, and a tombstone follows).
fn read_change(change: &Value) -> Option<Read> {
    let upstream_id = change.get("id").and_then(Value::as_str).unwrap_or_default();
    if change.get("tombstone").and_then(Value::as_bool) == Some(true) {
        let package = change.get("package_name").and_then(Value::as_str)?;
        return Some(Read::Gone {
            package_name: package.to_ascii_lowercase(),
        });
    }
    let record = change.get("agent")?;
    let draft = match AgentDraft::parse(record) {
        Ok(draft) => draft,
        Err(errors) => return Some(Read::Skipped(Skip::fields(upstream_id, &errors))),
    };
    let published_at = record
        .get("published_at")
        .cloned()
        .and_then(|value| serde_json::from_value::<Timestamp>(value).ok());
    Some(Read::Entry(Box::new(Entry {
        upstream_id: upstream_id.to_owned(),
        draft,
        // Deprecated upstream (by its publisher, or at the upstream's own source): deprecated here.
        status: if record.get("deprecation").is_some_and(|d| !d.is_null()) {
            Status::Deprecated
        } else {
            Status::Active
        },
        is_latest: true,
        published_at,
    })))
}
