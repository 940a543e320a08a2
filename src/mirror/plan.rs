//! What one page of upstream entries does to the registry: which agents to create, update or
//! delete, which earlier versions to keep, and which entries to leave out, decided against the
//! agents the registry holds now. Deciding from what is stored (not from what the mirror
//! remembers) makes a page safe to apply twice: a page replayed after a crash writes nothing
//! new.

use std::collections::HashMap;

use crate::domain::{AgentDraft, FieldError, Health};
use crate::store::{Agent, AgentState, MirrorPage, MirrorSkip, MirrorUpdate};
use crate::timestamp::Timestamp;

use super::Source;

/// An entry's status at its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Active,
    /// Kept, and marked so in its provenance.
    Deprecated,
    /// Removed from the registry.
    Deleted,
}

impl Status {
    /// The MCP Registry's `status` (absent: active); `None` for a value it does not define.
    pub fn parse(status: Option<&str>) -> Option<Self> {
        match status.unwrap_or("active") {
            "active" => Some(Self::Active),
            "deprecated" => Some(Self::Deprecated),
            "deleted" => Some(Self::Deleted),
            _ => None,
        }
    }
}

/// One upstream entry, read.
#[derive(Debug, Clone)]
pub enum Read {
    /// An agent as the source describes it.
    Entry(Box<Entry>),
    /// The source no longer lists the agent of this package name.
    Gone { package_name: String },
    /// Not readable as an agent: left out and counted.
    Skipped(Skip),
}

/// An entry left out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    pub upstream_id: String,
    /// One of a few values, so that it can label a metric: see [`MirrorSkip::class`].
    pub class: String,
    /// Why, with the details.
    pub reason: String,
}

impl Skip {
    /// No package name can be made from the entry's name or identifier.
    pub const IDENTIFIER: &str = "identifier";
    /// The source gives the entry a status it does not define.
    pub const STATUS: &str = "status";
    /// Another owner holds the entry's package name or identifier.
    pub const COLLISION: &str = "collision";
    /// The entry's package name is one of the registry's own (`registry.*`).
    pub const RESERVED_NAME: &str = "reserved_name";
    /// The scanner finds something at `high` or above in it, and the policy is `block`.
    pub const SECURITY_FINDING: &str = "security_finding";

    pub fn new(upstream_id: &str, class: &str, reason: impl Into<String>) -> Self {
        Self {
            upstream_id: upstream_id.to_owned(),
            class: class.to_owned(),
            reason: reason.into(),
        }
    }

    /// An entry whose fields do not make an agent, classed by the first field at fault
    /// (`invalid_field:description`), with every error as its reason.
    pub fn fields(upstream_id: &str, errors: &[FieldError]) -> Self {
        let field = errors
            .first()
            .map_or("", |error| error.field.as_str())
            .split(['.', '['])
            .next()
            .unwrap_or_default();
        // The fields of a publish body are few and named by this registry; anything else is
        // not let into a label.
        let known = !field.is_empty()
            && field.len() <= 40
            && field
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        let reasons: Vec<String> = errors
            .iter()
            .map(|error| format!("{}: {}", error.field, error.message))
            .collect();
        Self::new(
            upstream_id,
            &format!("invalid_field:{}", if known { field } else { "other" }),
            reasons.join("; "),
        )
    }
}

/// An agent as its source describes it.
#[derive(Debug, Clone)]
pub struct Entry {
    pub upstream_id: String,
    pub draft: AgentDraft,
    pub status: Status,
    /// The source's latest version of the agent; an earlier one is kept in its history.
    pub is_latest: bool,
    /// When the source published it, if it says.
    pub published_at: Option<Timestamp>,
}

impl Entry {
    /// The status a provenance records: only what is not plain active.
    pub(super) fn status_text(&self) -> Option<String> {
        (self.status == Status::Deprecated).then(|| "deprecated".to_owned())
    }
}

/// `reads` without the entries the scanner finds something at `high` or above in: each is
/// skipped, with its findings as the reason, and (its latest version) read as gone, so a copy
/// written before it changed is removed.
pub fn without_blocked(reads: Vec<Read>) -> Vec<Read> {
    let mut kept = Vec::with_capacity(reads.len());
    for read in reads {
        let Read::Entry(entry) = read else {
            kept.push(read);
            continue;
        };
        let report = crate::domain::scan::scan(&entry.draft);
        if report.max_severity < crate::domain::scan::Severity::High {
            kept.push(Read::Entry(entry));
            continue;
        }
        let reason = report
            .findings
            .iter()
            .filter(|finding| finding.severity >= crate::domain::scan::Severity::High)
            .map(|finding| format!("{} in {}", finding.rule, finding.field))
            .collect::<Vec<_>>()
            .join("; ");
        kept.push(Read::Skipped(Skip::new(
            &entry.upstream_id,
            Skip::SECURITY_FINDING,
            format!("the scanner blocks it: {reason}"),
        )));
        if entry.is_latest {
            kept.push(Read::Gone {
                package_name: entry.draft.package_name.as_str().to_owned(),
            });
        }
    }
    kept
}

/// A page decided: the writes, and the package names left out because another owner holds them.
#[derive(Debug, Default)]
pub struct Plan {
    pub page: MirrorPage,
    pub collisions: Vec<String>,
    /// The agents the updates and deletes were decided from, by id.
    pub before: HashMap<String, Agent>,
}

/// Decide `reads` against `existing` (the registry's agents of the page's package names).
/// New agents are ACTIVE unless `stage`.
pub fn plan(
    source: &Source,
    reads: Vec<Read>,
    existing: Vec<Agent>,
    stage: bool,
    at: Timestamp,
) -> Plan {
    let owner = source.owner();
    let mut held: HashMap<String, Agent> = existing
        .into_iter()
        .map(|agent| (agent.package_name().to_owned(), agent))
        .collect();
    let mut plan = Plan::default();
    // The last word on a package within the page wins; earlier versions come after it.
    let mut latest: Vec<(String, Option<Box<Entry>>)> = Vec::new();
    let mut earlier: Vec<Entry> = Vec::new();
    for read in reads {
        match read {
            Read::Skipped(skip) => {
                tracing::debug!(source = %source.id, entry = %skip.upstream_id,
                    reason = %skip.reason, "mirror entry skipped");
                plan.page.skipped += 1;
                plan.page.skips.push(MirrorSkip::new(
                    &skip.upstream_id,
                    &skip.class,
                    &skip.reason,
                    at,
                ));
            }
            Read::Gone { package_name } => latest.push((package_name, None)),
            Read::Entry(entry) if entry.status == Status::Deleted => {
                latest.push((entry.draft.package_name.as_str().to_owned(), None));
            }
            Read::Entry(entry) if entry.is_latest => {
                latest.push((entry.draft.package_name.as_str().to_owned(), Some(entry)));
            }
            Read::Entry(entry) => earlier.push(*entry),
        }
    }
    let mut last: HashMap<String, usize> = HashMap::new();
    for (i, (package, _)) in latest.iter().enumerate() {
        last.insert(package.clone(), i);
    }
    let mut new_ids: HashMap<String, String> = HashMap::new();
    for (i, (package, entry)) in latest.into_iter().enumerate() {
        if last.get(&package) != Some(&i) {
            continue;
        }
        // The registry's own names are never a mirror's: an upstream registry lists its own
        // hosted agents under them.
        if package.starts_with(crate::registry::RESERVED_PREFIX) {
            if let Some(entry) = entry {
                plan.page.skips.push(MirrorSkip::new(
                    &entry.upstream_id,
                    Skip::RESERVED_NAME,
                    &format!("package name {package} is one of the registry's own"),
                    at,
                ));
                plan.collisions.push(package);
            }
            continue;
        }
        let current = held.get(&package);
        match (entry, current) {
            (None, Some(agent)) if agent.owner == owner => {
                plan.page.deletes.push(agent.id.clone());
                plan.before.insert(agent.id.clone(), agent.clone());
            }
            (None, _) => {}
            (Some(entry), Some(agent)) if agent.owner != owner => {
                tracing::debug!(source = %source.id, package = %package, owner = %agent.owner,
                    upstream = %entry.upstream_id, "mirror entry collides with an agent of another owner");
                plan.page.skips.push(MirrorSkip::new(
                    &entry.upstream_id,
                    Skip::COLLISION,
                    &format!("package name {package} is held by another owner"),
                    at,
                ));
                plan.collisions.push(package);
            }
            (Some(entry), Some(agent)) => {
                let provenance = super::provenance(source, &entry, at);
                let mut draft = entry.draft;
                // The identifier is fixed once written; the source's version is kept as it is.
                draft.identifier = None;
                if draft.version.is_none() {
                    draft.version = agent.draft.version.clone();
                }
                // A source says nothing of visibility: the copy keeps its own.
                draft.visibility = draft.visibility.or(agent.draft.visibility);
                draft.inspect_tools = draft.inspect_tools.or(agent.draft.inspect_tools);
                let same_status =
                    agent.provenance.as_ref().map(|p| &p.status) == Some(&provenance.status);
                if draft == agent.draft && same_status {
                    continue;
                }
                plan.page.updates.push(MirrorUpdate {
                    id: agent.id.clone(),
                    revision: agent.revision,
                    draft,
                    provenance,
                });
                plan.before.insert(agent.id.clone(), agent.clone());
            }
            (Some(entry), None) => {
                let provenance = super::provenance(source, &entry, at);
                let mut agent = Agent::new(entry.draft, &owner, at);
                if !stage {
                    agent.state = AgentState::Active;
                    agent.published_at = Some(entry.published_at.unwrap_or(at).min(at));
                }
                agent.health = Health::shown(&agent.draft, None);
                agent.provenance = Some(provenance);
                new_ids.insert(package.clone(), agent.id.clone());
                plan.page.inserts.push(agent.clone());
                held.insert(package, agent);
            }
        }
    }
    for entry in earlier {
        let package = entry.draft.package_name.as_str();
        let Some(agent) = held.get(package).filter(|agent| agent.owner == owner) else {
            continue;
        };
        if entry.draft.version.as_deref() == Some(agent.version()) {
            continue;
        }
        let id = new_ids.get(package).unwrap_or(&agent.id).clone();
        let published = entry.published_at.unwrap_or(at);
        let mut draft = entry.draft;
        draft.identifier = None;
        plan.page.history.push((id, draft, published));
    }
    plan.page.collisions = plan.collisions.len() as i64;
    plan.page.at = Some(at);
    plan
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn source() -> Source {
        Source::parse("mcp-registry=https://up.example").expect("source")
    }

    fn entry(package: &str, version: &str, is_latest: bool, status: Status) -> Read {
        let draft = AgentDraft::parse(&json!({"package_name": package, "name": package,
            "description": "Tide tables.", "version": version}))
        .expect("draft");
        Read::Entry(Box::new(Entry {
            upstream_id: package.to_owned(),
            draft,
            status,
            is_latest,
            published_at: None,
        }))
    }

    #[test]
    fn a_page_decided_again_over_what_it_wrote_writes_nothing() {
        let at = Timestamp::from_micros(1_795_000_000_000_000);
        let reads = vec![
            entry("com.sea.tides", "1.0.0", false, Status::Active),
            entry("com.sea.tides", "1.1.0", true, Status::Active),
            entry("com.sea.swell", "2.0.0", true, Status::Deprecated),
            Read::Skipped(Skip::new("x", Skip::IDENTIFIER, "broken")),
        ];
        let first = plan(&source(), reads.clone(), Vec::new(), false, at);
        assert_eq!(first.page.inserts.len(), 2);
        assert_eq!(first.page.history.len(), 1, "1.0.0 goes to the history");
        assert_eq!(first.page.skipped, 1);
        assert_eq!(
            first.page.skips,
            vec![MirrorSkip::new("x", "identifier", "broken", at)]
        );
        let swell = first
            .page
            .inserts
            .iter()
            .find(|a| a.package_name() == "com.sea.swell")
            .expect("swell");
        assert_eq!(swell.state, AgentState::Active);
        assert_eq!(
            swell.provenance.as_ref().and_then(|p| p.status.as_deref()),
            Some("deprecated")
        );

        let again = plan(&source(), reads, first.page.inserts.clone(), false, at);
        assert!(again.page.inserts.is_empty() && again.page.updates.is_empty());
        assert!(again.page.deletes.is_empty());
    }

    #[test]
    fn a_skip_is_classed_by_its_first_top_level_field_and_only_a_plain_one() {
        let skip = |field: &str| {
            Skip::fields(
                "up",
                &[
                    FieldError::new(field, "is wrong"),
                    FieldError::new("name", "is required"),
                ],
            )
        };
        let nested = skip("payment.rails[2].asset");
        assert_eq!(nested.class, "invalid_field:payment");
        assert_eq!(
            nested.reason,
            "payment.rails[2].asset: is wrong; name: is required"
        );
        assert_eq!(skip("tags[0]").class, "invalid_field:tags");
        for odd in ["Évil label", "", "x\"}", &"a".repeat(41)] {
            assert_eq!(skip(odd).class, "invalid_field:other", "{odd}");
        }
    }

    #[test]
    fn another_owners_agent_is_a_collision_and_deleted_entries_go() {
        let at = Timestamp::from_micros(1_795_000_000_000_000);
        let local = Agent::new(
            AgentDraft::parse(&json!({"package_name": "com.sea.tides", "name": "Mine",
                "description": "Local."}))
            .expect("draft"),
            "alice",
            at,
        );
        let mirrored = Agent {
            owner: source().owner(),
            ..Agent::new(
                AgentDraft::parse(&json!({"package_name": "com.sea.swell", "name": "Swell",
                    "description": "Swell."}))
                .expect("draft"),
                "x",
                at,
            )
        };
        let reads = vec![
            entry("com.sea.tides", "1.0.0", true, Status::Active),
            entry("com.sea.swell", "1.0.0", true, Status::Deleted),
        ];
        let decided = plan(&source(), reads, vec![local, mirrored.clone()], true, at);
        assert_eq!(decided.collisions, vec!["com.sea.tides".to_owned()]);
        assert_eq!(decided.page.collisions, 1);
        assert_eq!(decided.page.skips.len(), 1);
        assert_eq!(decided.page.skips[0].class, "collision");
        assert_eq!(decided.page.skips[0].upstream_id, "com.sea.tides");
        assert_eq!(decided.page.deletes, vec![mirrored.id]);
        assert!(decided.page.inserts.is_empty());

        // An upstream registry's own agents are never written here.
        let reserved = plan(
            &source(),
            vec![entry(
                "registry.utility.wiki",
                "1.0.0",
                true,
                Status::Active,
            )],
            Vec::new(),
            false,
            at,
        );
        assert!(reserved.page.inserts.is_empty());
        assert_eq!(
            reserved.collisions,
            vec!["registry.utility.wiki".to_owned()]
        );
        assert_eq!(reserved.page.skips[0].class, "reserved_name");
    }
}
