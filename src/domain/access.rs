//! Who may do what: token scopes, reserved owners, and the secrets tokens and verification use.

use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
pub enum Scope {
    /// The management API: publish, update, go-live, unpublish, delete, verify.
    #[serde(rename = "agents:write")]
    AgentsWrite,
    /// `/a2a/discover`, `/a2a/v1`, and the hosted utility agents.
    #[serde(rename = "a2a")]
    A2a,
    /// Playground sessions.
    #[serde(rename = "playground")]
    Playground,
    /// Operators: the mirror sources' state (`/api/mirrors`). Not in a token unless asked for.
    #[serde(rename = "mirrors:read")]
    MirrorsRead,
}

impl Scope {
    pub const ALL: [Scope; 4] = [
        Scope::AgentsWrite,
        Scope::A2a,
        Scope::Playground,
        Scope::MirrorsRead,
    ];

    /// What a token made without a scope list may do: every scope but the operators'.
    pub const DEFAULT: [Scope; 3] = [Scope::AgentsWrite, Scope::A2a, Scope::Playground];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::AgentsWrite => "agents:write",
            Self::A2a => "a2a",
            Self::Playground => "playground",
            Self::MirrorsRead => "mirrors:read",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|scope| scope.as_str() == s)
    }
}

/// The owner name the master key acts as.
pub const MASTER_OWNER: &str = "admin";

/// The owner of the hosted utility agents.
pub const SYSTEM_OWNER: &str = "registry";

/// Owners of mirrored agents start with this, then the mirror source's id. Token owners cannot
/// hold `:`, so no token owns a mirrored agent: only the master key may change one.
pub const MIRROR_PREFIX: &str = "mirror:";

/// Whether `owner` is a mirror source.
pub fn is_mirror_owner(owner: &str) -> bool {
    owner.starts_with(MIRROR_PREFIX)
}

/// A random secret: `prefix` + 32 bytes as lowercase hex.
pub fn random_secret(prefix: &str) -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    format!("{prefix}{}", hex::encode(bytes))
}

/// The stored form of a secret: hex SHA-256.
pub fn hash_secret(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Check an owner name: 1–64 characters of `[A-Za-z0-9._@-]`.
pub fn parse_owner(owner: &str) -> Result<String, String> {
    let owner = owner.trim();
    let valid_chars = owner
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | '-'));
    if owner.is_empty() || owner.chars().count() > 64 || !valid_chars {
        return Err(
            "owner must be 1-64 characters of letters, digits, '.', '_', '@' or '-'".into(),
        );
    }
    if owner == SYSTEM_OWNER || owner == MASTER_OWNER {
        return Err(format!(
            "owner '{owner}' is reserved (the registry's own agents and the master key)"
        ));
    }
    Ok(owner.to_owned())
}

/// Who is acting on agents: an owner, or the master key, which acts as `MASTER_OWNER` and
/// manages every agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    pub owner: String,
    pub is_master: bool,
    /// The namespaces this actor may write in (`domain::trusted_issuer::in_namespaces`);
    /// `None`: not restricted. A token minted by trusted publishing has some.
    pub namespaces: Option<Vec<String>>,
    /// For a token minted by trusted publishing, the CI identity it came from (the claims
    /// `domain::trusted_issuer::grant` keeps): publishing bindings are matched against it.
    pub identity: Option<serde_json::Value>,
    /// The namespaces this actor's identity grants (a GitHub sign-in's `io.github.<login>` and
    /// `io.github.<org>`, a CI identity's): they count as held under `--namespace-policy
    /// owned`, and the agents owned by one of them (those its CI publishes) are this actor's to
    /// manage too.
    pub granted: Vec<String>,
}

impl Actor {
    /// An ordinary owner.
    pub fn owner(owner: &str) -> Self {
        Self {
            owner: owner.to_owned(),
            is_master: false,
            namespaces: None,
            identity: None,
            granted: Vec::new(),
        }
    }

    /// The master key.
    pub fn master() -> Self {
        Self {
            owner: MASTER_OWNER.to_owned(),
            is_master: true,
            namespaces: None,
            identity: None,
            granted: Vec::new(),
        }
    }

    /// Whether this actor may manage a resource of `owner`.
    pub fn owns(&self, owner: &str) -> bool {
        self.is_master || self.owner == owner || self.granted.iter().any(|g| g == owner)
    }

    /// Who owns `package` when this actor publishes it: the most specific namespace its
    /// identity grants that covers the package, when that is not the actor's own (a GitHub
    /// organisation's agents belong to the organisation's namespace, whichever member or CI
    /// job published them); otherwise the actor.
    pub fn owner_for(&self, package: &str) -> &str {
        if self.is_master {
            return &self.owner;
        }
        self.granted
            .iter()
            .filter(|namespace| super::namespace::covers(namespace, package))
            .max_by_key(|namespace| namespace.len())
            .map_or(&self.owner, |namespace| namespace)
    }

    /// Every owner whose agents this actor sees as its own: itself, the namespaces its identity
    /// grants, and the organisations `orgs` it is a member of (`org:<name>`), sorted.
    pub fn owners_with(&self, orgs: impl IntoIterator<Item = String>) -> Vec<String> {
        let mut owners = vec![self.owner.clone()];
        owners.extend(self.granted.iter().cloned());
        owners.extend(orgs.into_iter().map(|org| super::org::org_owner(&org)));
        owners.sort_unstable();
        owners.dedup();
        owners
    }

    /// Whether this actor may write package `package`: always, unless it is restricted to
    /// namespaces that do not hold it.
    pub fn may_write(&self, package: &str) -> bool {
        self.namespaces
            .as_deref()
            .is_none_or(|namespaces| super::trusted_issuer::in_namespaces(package, namespaces))
    }
}

/// Whose private agents a read may show: what every read path (lists, searches, lookups,
/// feeds) asks of an agent that is not public. Unlisted agents are never listed, whoever asks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Viewer {
    /// No credentials: public agents only.
    #[default]
    Anonymous,
    /// A person or token: the private agents of these owners too (the caller's own owner name,
    /// the namespaces its identity grants, `org:<name>` for each of its organisations), sorted
    /// and distinct (`Viewer::of_owners` makes them so).
    Owners(std::sync::Arc<[String]>),
    /// The master key: every agent.
    Everyone,
}

impl Viewer {
    /// A viewer who sees the private agents of `owners` (in any order).
    pub fn of_owners(mut owners: Vec<String>) -> Self {
        owners.sort_unstable();
        owners.dedup();
        Self::Owners(owners.into())
    }

    /// Whether this viewer may see an agent of `owner` with `visibility` at all.
    pub fn sees(&self, owner: &str, visibility: super::agent::Visibility) -> bool {
        visibility != super::agent::Visibility::Private || self.sees_private_of(owner)
    }

    /// Whether this viewer sees the private agents of `owner`.
    pub fn sees_private_of(&self, owner: &str) -> bool {
        match self {
            Self::Anonymous => false,
            Self::Owners(owners) => owners.binary_search_by(|o| o.as_str().cmp(owner)).is_ok(),
            Self::Everyone => true,
        }
    }

    /// The owners whose private agents this viewer sees (`None`: every owner's).
    pub fn owners(&self) -> Option<&[String]> {
        match self {
            Self::Anonymous => Some(&[]),
            Self::Owners(owners) => Some(owners),
            Self::Everyone => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn person(granted: &[&str]) -> Actor {
        Actor {
            granted: granted.iter().map(|g| (*g).to_owned()).collect(),
            ..Actor::owner("io.github.octocat")
        }
    }

    #[test]
    fn an_organisations_package_belongs_to_its_namespace_and_its_members_manage_it() {
        let octocat = person(&["io.github.acme", "io.github.acme.labs", "io.github.octocat"]);
        assert_eq!(
            octocat.owner_for("io.github.acme.weather"),
            "io.github.acme"
        );
        // The most specific grant wins.
        assert_eq!(
            octocat.owner_for("io.github.acme.labs.x"),
            "io.github.acme.labs"
        );
        assert_eq!(
            octocat.owner_for("io.github.octocat.notes"),
            "io.github.octocat"
        );
        // Not under a grant (a proven domain, or an open registry): the person's own.
        assert_eq!(octocat.owner_for("com.example.x"), "io.github.octocat");
        // Label boundaries: `io.github.acmecorp` is not `io.github.acme`'s.
        assert_eq!(
            octocat.owner_for("io.github.acmecorp.x"),
            "io.github.octocat"
        );
        assert!(octocat.owns("io.github.acme"));
        assert!(octocat.owns("io.github.octocat"));
        assert!(!octocat.owns("io.github.other"));
        assert_eq!(Actor::master().owner_for("io.github.acme.x"), MASTER_OWNER);
        // Grants restrict nothing: only `namespaces` does.
        assert!(octocat.may_write("com.example.x"));
    }
}
