//! One entry per agent: agents that share a repository or an endpoint form a group, and a
//! search shows each group's representative only (unless asked for every agent).
//!
//! The representative does not depend on the query, so collapsing is a filter like any other:
//! pages and cursors stay exact. It is the member a client would want: one published here
//! before a mirror's copy, then domain-verified, then one that says how to reach it, then the
//! first published, then the lowest id.

use std::collections::HashMap;

use url::Url;

use super::facets::SlotSet;
use crate::store::{Agent, VerificationLevel};

/// Most listings of one server that are collapsed: a larger group is many servers behind one
/// address. Chosen from the public data set, where real duplicates come two to five times and
/// monorepo roots are shared by dozens.
pub const MAX_GROUP: usize = 8;

/// What a group member is ranked by; lower is better.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rank {
    /// A mirror's copy: a local record leads its group.
    mirrored: bool,
    unverified: bool,
    unreachable: bool,
    published_micros: i64,
    /// Shared with the index's document (one allocation of the id per agent).
    id: std::sync::Arc<str>,
}

impl Rank {
    /// `agent`'s rank; `id` is its id, shared.
    pub fn of(agent: &Agent, id: std::sync::Arc<str>) -> Self {
        let reach = &agent.draft.reach;
        Self {
            mirrored: crate::domain::access::is_mirror_owner(&agent.owner),
            unverified: agent.verification_level != VerificationLevel::DomainVerified,
            unreachable: reach.interfaces.is_empty()
                && reach.remotes.is_empty()
                && reach.packages.is_empty(),
            published_micros: agent.published_at.map_or(i64::MAX, |t| t.micros()),
            id,
        }
    }
}

/// The key an agent is grouped by: its repository (or a repository-like manifest URL), else its
/// first MCP remote, else its first A2A interface; `None` when it names none of them.
pub fn group_key(agent: &Agent) -> Option<String> {
    let draft = &agent.draft;
    let reach = &draft.reach;
    if let Some(repository) = &reach.repository
        && let Some(key) = repository_key(&repository.url)
    {
        return Some(key);
    }
    if let Some(key) = draft.manifest_url.as_deref().and_then(repository_key) {
        return Some(key);
    }
    reach
        .remotes
        .first()
        .map(|remote| remote.url.as_str())
        .or_else(|| reach.interfaces.first().map(|i| i.url.as_str()))
        .and_then(endpoint_key)
}

/// `github.com/owner/repo[/subfolder]` for a repository URL on a known forge: case, scheme,
/// `www.`, `.git`, trailing slashes and the `tree/{branch}` or `blob/{branch}` of a browsing URL
/// are ignored; a subfolder is kept, since a monorepo's folders hold different servers.
fn repository_key(raw: &str) -> Option<String> {
    let url = Url::parse(raw.trim()).ok()?;
    let host = url.host_str()?.to_ascii_lowercase();
    let host = host.strip_prefix("www.").unwrap_or(&host);
    if !matches!(
        host,
        "github.com" | "gitlab.com" | "bitbucket.org" | "codeberg.org"
    ) {
        return None;
    }
    let mut segments = url.path_segments()?.filter(|s| !s.is_empty());
    let owner = segments.next()?.to_ascii_lowercase();
    let repo = segments.next()?.to_ascii_lowercase();
    let repo = repo.strip_suffix(".git").unwrap_or(&repo);
    let mut rest: Vec<String> = segments.map(str::to_ascii_lowercase).collect();
    if rest.first().is_some_and(|s| s == "tree" || s == "blob") {
        rest.drain(..rest.len().min(2));
    }
    if rest.is_empty() {
        Some(format!("repo:{host}/{owner}/{repo}"))
    } else {
        Some(format!("repo:{host}/{owner}/{repo}/{}", rest.join("/")))
    }
}

/// An endpoint without scheme, case of the host, query, fragment or trailing slash.
fn endpoint_key(raw: &str) -> Option<String> {
    let url = Url::parse(raw.trim()).ok()?;
    let host = url.host_str()?.to_ascii_lowercase();
    let port = url
        .port()
        .map(|port| format!(":{port}"))
        .unwrap_or_default();
    Some(format!(
        "endpoint:{host}{port}{}",
        url.path().trim_end_matches('/')
    ))
}

/// The groups of the indexed agents, and the members that are not their group's representative.
#[derive(Default)]
pub struct Groups {
    members: HashMap<String, Vec<(u32, Rank)>>,
    /// Slots hidden when duplicates collapse.
    hidden: SlotSet,
}

impl Groups {
    pub fn insert(&mut self, key: &str, slot: u32, rank: Rank) {
        self.members
            .entry(key.to_owned())
            .or_default()
            .push((slot, rank));
        self.settle(key);
    }

    pub fn remove(&mut self, key: &str, slot: u32) {
        self.hidden.remove(slot);
        if let Some(members) = self.members.get_mut(key) {
            members.retain(|(member, _)| *member != slot);
        }
        self.settle(key);
    }

    /// Hide every member of `key`'s group but the best. A group larger than `MAX_GROUP` is not
    /// one server listed several times but many servers behind one address (a monorepo's root,
    /// a hosting platform): nothing in it is hidden.
    fn settle(&mut self, key: &str) {
        let Some(members) = self.members.get(key) else {
            return;
        };
        if members.is_empty() {
            self.members.remove(key);
            return;
        }
        if members.len() > MAX_GROUP {
            for (slot, _) in members {
                self.hidden.remove(*slot);
            }
            return;
        }
        let best = members
            .iter()
            .min_by(|a, b| a.1.cmp(&b.1))
            .map(|(slot, _)| *slot);
        for (slot, _) in members {
            if Some(*slot) == best {
                self.hidden.remove(*slot);
            } else {
                self.hidden.insert(*slot);
            }
        }
    }

    /// Slots hidden when duplicates collapse.
    pub fn hidden(&self) -> &SlotSet {
        &self.hidden
    }

    /// The other members of `key`'s group.
    pub fn others(&self, key: &str, slot: u32) -> Vec<u32> {
        self.members
            .get(key)
            .map(|members| {
                members
                    .iter()
                    .map(|(member, _)| *member)
                    .filter(|member| *member != slot)
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repositories_and_endpoints_normalise() {
        assert_eq!(
            repository_key("https://www.GitHub.com/Acme/Weather.git/"),
            Some("repo:github.com/acme/weather".to_owned())
        );
        assert_eq!(
            repository_key("https://github.com/acme/servers/tree/main/src/weather"),
            Some("repo:github.com/acme/servers/src/weather".to_owned()),
            "a monorepo's folders are different servers"
        );
        assert_eq!(repository_key("https://example.com/acme/weather"), None);
        assert_eq!(
            endpoint_key("HTTPS://MCP.Example.com/mcp/?x=1"),
            Some("endpoint:mcp.example.com/mcp".to_owned())
        );
    }

    #[test]
    fn the_best_member_stays_visible_and_a_removal_reelects() {
        let rank = |unverified, published_micros, id: &str| Rank {
            mirrored: false,
            unverified,
            unreachable: false,
            published_micros,
            id: id.into(),
        };
        let mut groups = Groups::default();
        groups.insert("k", 1, rank(true, 10, "a"));
        groups.insert("k", 2, rank(false, 20, "b"));
        groups.insert("k", 3, rank(true, 5, "c"));
        assert!(groups.hidden().contains(1) && groups.hidden().contains(3));
        assert!(!groups.hidden().contains(2), "verified wins");
        groups.remove("k", 2);
        assert!(!groups.hidden().contains(3), "then the first published");
        assert!(groups.hidden().contains(1));
        assert_eq!(groups.others("k", 3), vec![1]);
        groups.remove("k", 1);
        groups.remove("k", 3);
        assert!(groups.hidden().iter().next().is_none());
        // A mirror's copy never leads a local record, verified or not.
        let mirrored = Rank {
            mirrored: true,
            ..rank(false, 1, "m")
        };
        groups.insert("k", 4, mirrored);
        groups.insert("k", 5, rank(true, 50, "z"));
        assert!(groups.hidden().contains(4) && !groups.hidden().contains(5));
    }

    #[test]
    fn a_crowd_behind_one_address_is_not_collapsed() {
        let mut groups = Groups::default();
        for slot in 0..=MAX_GROUP as u32 {
            groups.insert(
                "monorepo",
                slot,
                Rank {
                    mirrored: false,
                    unverified: true,
                    unreachable: false,
                    published_micros: i64::from(slot),
                    id: format!("{slot}").into(),
                },
            );
        }
        assert!(groups.hidden().iter().next().is_none());
    }
}
