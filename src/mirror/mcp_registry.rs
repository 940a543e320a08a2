//! `mcp-registry=URL`: the MCP Registry API (`GET {URL}/v0.1/servers`), as the official
//! registry serves it and as this registry does. The first pass walks every page by cursor;
//! later passes ask only for what changed (`updated_since`, the latest `updatedAt` seen less an
//! overlap, so a write that commits late at the upstream is not missed). Every version is
//! listed: the one marked `isLatest` is the agent, the others go to its history. Status
//! `deleted` removes the agent, `deprecated` marks it. A full walk runs again once a day, and
//! what it no longer finds is removed (an upstream that drops servers instead of marking them).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::AgentDraft;
use crate::outbound::JSON;
use crate::timestamp::Timestamp;

use super::Pass;
use super::fetch::{self, MirrorError, Validators};
use super::plan::{Entry, Read, Skip, Status};

/// The `_meta` key of registry-managed metadata.
const OFFICIAL_META: &str = "io.modelcontextprotocol.registry/official";
/// How far back an incremental pass asks before the latest change it saw: an upstream whose
/// servers stamp `updatedAt` with clocks a little apart, or commit a write stamped earlier after
/// a later one, still has it read.
const OVERLAP_SECS: i64 = 60;
/// How often a full walk runs again.
const REWALK_SECS: i64 = 24 * 3600;

/// Where a pass is: a cursor within a walk or a poll, and what the next poll asks from.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Position {
    /// Within a pass: the next page's cursor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cursor: Option<String>,
    /// The pass under way (or the next) asks for changes since this time; `None`: a full walk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    updated_since: Option<Timestamp>,
    /// The latest `updatedAt` seen so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    high: Option<Timestamp>,
    /// When the last full walk started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    walk_started: Option<Timestamp>,
}

pub(super) async fn pass(pass: &mut Pass<'_>) -> Result<(), MirrorError> {
    let mut position: Position = pass.stored_position();
    let now = Timestamp::now();
    if position.cursor.is_none() {
        // A new pass: a full walk when none ran yet or the last is a day old, else a poll.
        let rewalk = position
            .walk_started
            .is_none_or(|started| now.micros() - started.micros() > REWALK_SECS * 1_000_000);
        if rewalk || !pass.walked {
            position.updated_since = None;
            position.walk_started = Some(now);
            pass.track_seen();
        } else {
            position.updated_since = position
                .high
                .map(|high| Timestamp::from_micros(high.micros() - OVERLAP_SECS * 1_000_000));
        }
    }
    // Cursors asked with in this pass: one that comes back would loop for ever.
    let mut cursors = std::collections::HashSet::new();
    loop {
        let mut url = super::endpoint(pass.source, "/v0.1/servers")?;
        {
            let mut query = url.query_pairs_mut();
            query.append_pair("limit", &pass.page_size().to_string());
            if let Some(cursor) = &position.cursor {
                query.append_pair("cursor", cursor);
            }
            if let Some(since) = position.updated_since {
                query.append_pair("updated_since", &since.to_rfc3339());
            }
        }
        let fetched =
            fetch::get(pass.outbound(), url.clone(), JSON, &Validators::default()).await?;
        let page: Value = fetched
            .json()
            .map_err(|err| MirrorError::Malformed(format!("{url}: {err}")))?;
        let servers = page
            .get("servers")
            .and_then(Value::as_array)
            .ok_or_else(|| MirrorError::Malformed(format!("{url}: no `servers` array")))?;
        let mut reads = Vec::with_capacity(servers.len());
        for item in servers {
            let (read, updated) = read_server(item);
            if let Some(updated) = updated {
                position.high = Some(position.high.map_or(updated, |high| high.max(updated)));
            }
            reads.push(read);
        }
        let next = page
            .pointer("/metadata/nextCursor")
            .and_then(Value::as_str)
            .filter(|cursor| !cursor.is_empty())
            .map(str::to_owned);
        if let Some(cursor) = &position.cursor {
            cursors.insert(cursor.clone());
        }
        if next.as_ref().is_some_and(|next| cursors.contains(next)) {
            return Err(MirrorError::Malformed(format!(
                "{url}: the next cursor is one this pass asked with already"
            )));
        }
        let done = next.is_none();
        position.cursor = next;
        let text = serde_json::to_string(&position).unwrap_or_default();
        pass.write(reads, Some(text.clone()), pass.walked || done)
            .await?;
        if done {
            return pass.sweep(text).await;
        }
    }
}

/// One item of `servers` (`{server, _meta}`), and its `updatedAt`.
fn read_server(item: &Value) -> (Read, Option<Timestamp>) {
    let server = item.get("server").unwrap_or(item);
    let name = server
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let official = item
        .pointer(&format!("/_meta/{}", OFFICIAL_META.replace('/', "~1")))
        .or_else(|| server.pointer(&format!("/_meta/{}", OFFICIAL_META.replace('/', "~1"))));
    let text = |key: &str| {
        official
            .and_then(|meta| meta.get(key))
            .and_then(Value::as_str)
    };
    let time = |key: &str| {
        text(key).and_then(|value| serde_json::from_value::<Timestamp>(Value::from(value)).ok())
    };
    let updated = time("updatedAt");
    let skipped = |class: &str, reason: String| Read::Skipped(Skip::new(&name, class, reason));
    let Some(status) = Status::parse(text("status")) else {
        return (
            skipped(Skip::STATUS, format!("unknown status {:?}", text("status"))),
            updated,
        );
    };
    let Some(body) = crate::domain::server_json::publish_body(server) else {
        return (
            skipped(
                Skip::IDENTIFIER,
                "not a server.json (name is not namespace/name)".into(),
            ),
            updated,
        );
    };
    let draft = match AgentDraft::parse(&body) {
        Ok(draft) => draft,
        Err(errors) if status == Status::Deleted => {
            // A deleted server needs only its name.
            let _ = errors;
            return match body.get("package_name").and_then(Value::as_str) {
                Some(package) => (
                    Read::Gone {
                        package_name: package.to_ascii_lowercase(),
                    },
                    updated,
                ),
                None => (skipped(Skip::IDENTIFIER, "no name".into()), updated),
            };
        }
        Err(errors) => return (Read::Skipped(Skip::fields(&name, &errors)), updated),
    };
    let is_latest = official
        .and_then(|meta| meta.get("isLatest"))
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let entry = Entry {
        upstream_id: name.clone(),
        draft,
        status,
        is_latest,
        published_at: time("publishedAt"),
    };
    (Read::Entry(Box::new(entry)), updated)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_server_item_reads_as_an_entry_with_its_status() {
        let item = json!({
            "server": {"name": "io.github.acme/weather", "description": "Forecasts.",
                "version": "1.2.0", "remotes": [{"type": "streamable-http", "url": "https://mcp.acme.dev/mcp"}]},
            "_meta": {OFFICIAL_META: {"status": "deprecated", "isLatest": true,
                "publishedAt": "2025-09-01T10:00:00Z", "updatedAt": "2025-10-01T10:00:00Z"}}
        });
        let (read, updated) = read_server(&item);
        let Read::Entry(entry) = read else {
            panic!("an entry: {read:?}");
        };
        assert_eq!(entry.draft.package_name.as_str(), "io.github.acme.weather");
        assert_eq!(entry.status, Status::Deprecated);
        assert_eq!(entry.upstream_id, "io.github.acme/weather");
        assert_eq!(
            updated.map(|t| t.to_rfc3339()).as_deref(),
            Some("2025-10-01T10:00:00Z")
        );
    }

    #[test]
    fn a_deleted_server_needs_only_its_name_and_a_broken_one_is_skipped() {
        let deleted = json!({"server": {"name": "io.github.acme/old"},
            "_meta": {OFFICIAL_META: {"status": "deleted"}}});
        assert!(
            matches!(read_server(&deleted).0, Read::Gone { package_name } if package_name == "io.github.acme.old")
        );
        let broken = json!({"server": {"name": "no-namespace", "description": "x"}});
        assert!(
            matches!(read_server(&broken).0, Read::Skipped(skip) if skip.class == "identifier")
        );
        let odd = json!({"server": {"name": "a.b/c", "description": "x"},
            "_meta": {OFFICIAL_META: {"status": "paused"}}});
        assert!(matches!(read_server(&odd).0, Read::Skipped(skip) if skip.class == "status"));
        let bare = json!({"server": {"name": "a.b/c"}});
        let Read::Skipped(skip) = read_server(&bare).0 else {
            panic!("skipped");
        };
        assert_eq!(skip.class, "invalid_field:description");
        assert!(skip.reason.starts_with("description: "), "{skip:?}");
    }
}
