//! Organisations: a team that owns agents together. An organisation `acme` owns agents as the
//! owner `org:acme` (no person's owner name holds a `:`), and each member has a role.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What owner names of organisations start with.
pub const ORG_PREFIX: &str = "org:";

/// A member's role in an organisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OrgRole {
    /// Manages the members, and writes the organisation's agents.
    Admin,
    /// Writes the organisation's agents (publish, update, go live, unpublish, delete, transfer).
    Publisher,
    /// Reads the organisation's agents, including those not public.
    Viewer,
}

impl OrgRole {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::Publisher => "publisher",
            Self::Viewer => "viewer",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "admin" => Some(Self::Admin),
            "publisher" => Some(Self::Publisher),
            "viewer" => Some(Self::Viewer),
            _ => None,
        }
    }

    /// Whether this role writes the organisation's agents.
    pub fn writes(self) -> bool {
        matches!(self, Self::Admin | Self::Publisher)
    }
}

/// An organisation's name: 1 to 39 lowercase letters, digits and hyphens, not starting or
/// ending with one (so a GitHub organisation's name always fits).
/// The GitHub organisations (or users) a caller's granted namespaces say it belongs to:
/// `io.github.<name>`, lowercase, one label.
pub fn github_names(granted: &[String]) -> Vec<String> {
    let mut names: Vec<String> = granted
        .iter()
        .filter_map(|namespace| namespace.strip_prefix("io.github."))
        .filter(|name| !name.is_empty() && !name.contains('.'))
        .map(str::to_ascii_lowercase)
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

pub fn parse_org_name(text: &str) -> Result<String, String> {
    let name = text.trim();
    let valid = !name.is_empty()
        && name.len() <= 39
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if valid {
        Ok(name.to_owned())
    } else {
        Err("an organisation's name is 1 to 39 lowercase letters, digits and hyphens, not starting or ending with a hyphen".to_owned())
    }
}

/// The owner name of organisation `org`.
pub fn org_owner(org: &str) -> String {
    format!("{ORG_PREFIX}{org}")
}

/// The organisation an owner name stands for, if it is one.
pub fn org_of_owner(owner: &str) -> Option<&str> {
    owner.strip_prefix(ORG_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn organisation_names_follow_githubs_rule() {
        assert_eq!(parse_org_name(" acme-labs ").as_deref(), Ok("acme-labs"));
        assert_eq!(parse_org_name("a1").as_deref(), Ok("a1"));
        assert_eq!(parse_org_name("ac--me").as_deref(), Ok("ac--me"));
        for bad in [
            "",
            "Acme",
            "-acme",
            "acme-",
            "ac me",
            "org:acme",
            &"a".repeat(40),
        ] {
            assert!(parse_org_name(bad).is_err(), "{bad}");
        }
        assert_eq!(org_owner("acme"), "org:acme");
        assert_eq!(org_of_owner("org:acme"), Some("acme"));
        assert_eq!(org_of_owner("acme"), None);
        for role in [OrgRole::Admin, OrgRole::Publisher, OrgRole::Viewer] {
            assert_eq!(OrgRole::parse(role.as_str()), Some(role));
        }
        assert!(OrgRole::Publisher.writes() && !OrgRole::Viewer.writes());
    }
}
