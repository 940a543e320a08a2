//! What the store keeps: agent records, changes, token records, and playground sessions.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::Scope;
use crate::domain::access::Viewer;
use crate::domain::agent::Visibility;
use crate::domain::{AgentDraft, AirUrn, DEFAULT_VERSION, Health};
use crate::timestamp::Timestamp;

/// Lifecycle state of an agent entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
pub enum AgentState {
    /// Created or unpublished: visible to its owner only.
    #[serde(rename = "STAGE")]
    Stage,
    /// Live: listed, searchable, resolvable.
    #[serde(rename = "ACTIVE")]
    Active,
}

impl AgentState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stage => "STAGE",
            Self::Active => "ACTIVE",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "STAGE" => Some(Self::Stage),
            "ACTIVE" => Some(Self::Active),
            _ => None,
        }
    }
}

/// How far the registry has verified who controls an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum VerificationLevel {
    Unverified,
    DomainVerified,
}

impl VerificationLevel {
    pub const ALL: [Self; 2] = [Self::Unverified, Self::DomainVerified];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unverified => "unverified",
            Self::DomainVerified => "domain_verified",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|level| level.as_str() == s)
    }
}

/// One agent as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Agent {
    /// `agt_` + ULID.
    pub id: String,
    pub owner: String,
    pub state: AgentState,
    pub verification_level: VerificationLevel,
    /// The secret the owner publishes in DNS or on their site to verify the domain.
    pub verification_token: String,
    /// Incremented by every write; the `ETag` of the owner's view and the `If-Match` check.
    pub revision: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub published_at: Option<Timestamp>,
    pub draft: AgentDraft,
    /// What the prober last found (`None`: not probed yet), or `not_probed` when the record
    /// lists no endpoint (`Health::shown`). Not part of the draft: the registry derives it, and
    /// writing it changes neither `revision` nor `updated_at`.
    pub health: Option<Health>,
    /// The discovery identifier (`urn:air:…`): the publisher's, or derived from the package
    /// name at publish; it never changes afterwards.
    pub urn: AirUrn,
    /// Where a mirrored agent came from; `None` for an agent published here.
    pub provenance: Option<Provenance>,
    /// What the prober last read from the agent's endpoint (its tools or skills, what the
    /// scanner finds in them, the last change); `None` before the first read. Written by the
    /// prober only, like `health`.
    pub inspection: Option<crate::domain::surface::Inspection>,
    /// The publisher's deprecation of the agent, if any: it stays listed and resolvable, ranked
    /// below its equals, with the message and successor shown wherever it is.
    pub deprecation: Option<crate::domain::deprecation::Deprecation>,
}

impl Agent {
    /// Whether lists show it: ACTIVE and public. An unlisted agent is resolvable by whoever
    /// knows it, and listed nowhere (search, facets, feeds, manifests, catalogues).
    pub fn is_listed(&self) -> bool {
        self.state == AgentState::Active && self.visibility() == Visibility::Public
    }

    /// The agent's visibility (public when it never said).
    pub fn visibility(&self) -> Visibility {
        self.draft.visibility.unwrap_or_default()
    }

    /// Whether the search index holds it: ACTIVE and public or private (a private agent is
    /// listed to those who may see it). Unlisted agents are in no list for anyone.
    pub fn is_indexed(&self) -> bool {
        self.state == AgentState::Active && self.visibility() != Visibility::Unlisted
    }

    /// Whether `viewer` finds it in lists: ACTIVE, and public or a private agent it sees.
    pub fn is_listed_to(&self, viewer: &Viewer) -> bool {
        self.is_indexed() && self.is_visible_to(viewer)
    }

    /// Whether `viewer` may see it at all (a private agent is seen by its owners only).
    pub fn is_visible_to(&self, viewer: &Viewer) -> bool {
        viewer.sees(&self.owner, self.visibility())
    }

    /// A new STAGE agent owned by `owner`, at version `1.0.0` when the draft names none.
    pub fn new(mut draft: AgentDraft, owner: &str, at: Timestamp) -> Self {
        draft
            .version
            .get_or_insert_with(|| DEFAULT_VERSION.to_owned());
        // A stored agent always has a visibility: public unless the draft said otherwise.
        draft.visibility.get_or_insert_default();
        draft.inspect_tools.get_or_insert(true);
        // The identifier lives on the agent, not in its versions.
        let urn = draft
            .identifier
            .take()
            .unwrap_or_else(|| AirUrn::of_package(&draft.package_name));
        Self {
            id: format!("agt_{}", ulid::Ulid::new()),
            owner: owner.to_owned(),
            state: AgentState::Stage,
            verification_level: VerificationLevel::Unverified,
            verification_token: crate::domain::access::random_secret("arv_"),
            revision: 1,
            created_at: at,
            updated_at: at,
            published_at: None,
            health: Health::shown(&draft, None),
            draft,
            urn,
            provenance: None,
            inspection: None,
            deprecation: None,
        }
    }

    pub fn package_name(&self) -> &str {
        self.draft.package_name.as_str()
    }

    /// What the scanner finds in the agent: in its record's texts (scanned as of its last
    /// write), in its deprecation message, and in what the prober last read from its endpoint
    /// (unless the publisher opted out of that).
    pub fn security(&self) -> crate::domain::scan::Report {
        self.security_given(None)
    }

    /// `security`, given the agent's worst severity when the index knows it: texts it knows to
    /// be clean (`Some(none)`) are not scanned again.
    pub fn security_given(
        &self,
        worst: Option<crate::domain::scan::Severity>,
    ) -> crate::domain::scan::Report {
        use crate::domain::scan::{self, Report, Severity};
        let mut report = if worst == Some(Severity::None) {
            Report::clean()
        } else {
            let mut deprecation = Vec::new();
            scan::scan_deprecation(self.deprecation.as_ref(), &mut deprecation);
            scan::scan(&self.draft).with_findings(deprecation)
        };
        report.scanned_at = Some(self.updated_at);
        if self.draft.inspect_tools == Some(false) {
            // The publisher opted out: whatever was read before no longer stands for the
            // endpoint.
            return report.not_inspected();
        }
        report.with_live(self.inspection.as_ref())
    }

    /// The deprecation every path shows: the publisher's, or for a mirrored agent its source's
    /// (`status: deprecated`), which names no successor.
    pub fn shown_deprecation(&self) -> Option<crate::domain::deprecation::Deprecation> {
        if let Some(deprecation) = &self.deprecation {
            return Some(deprecation.clone());
        }
        let provenance = self.provenance.as_ref()?;
        (provenance.status.as_deref() == Some("deprecated")).then(|| {
            crate::domain::deprecation::Deprecation {
                message: format!("Deprecated at its source ({}).", provenance.source),
                successor: None,
                deprecated_at: provenance.fetched_at,
            }
        })
    }

    /// The agent's current version.
    pub fn version(&self) -> &str {
        self.draft.version.as_deref().unwrap_or(DEFAULT_VERSION)
    }
}

/// Where a mirrored agent came from: the source that wrote it, the entry there, and when it was
/// last fetched with a change. Not part of the draft: the mirror writes it with every change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Provenance {
    /// The mirror source (`mcp-registry:registry.modelcontextprotocol.io`); the agent's owner
    /// is `mirror:` followed by it.
    pub source: String,
    /// The source's URL as configured.
    pub source_url: String,
    /// The entry's identifier at the source: an MCP server name, an agent id, an ARD identifier.
    pub upstream_id: String,
    /// When the entry was fetched as it is stored now.
    pub fetched_at: Timestamp,
    /// The source's status for the entry when it is not plain active (`deprecated`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// One version of an agent, as its history lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentVersion {
    /// The version string.
    pub version: String,
    /// The agent's revision when this version was written.
    pub revision: i64,
    /// When this version was written.
    pub published_at: Timestamp,
    /// The publisher's deprecation of this version, if any.
    pub deprecation: Option<crate::domain::deprecation::Deprecation>,
}

/// One version of an agent with its writable fields as they were at that version.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionSnapshot {
    pub version: AgentVersion,
    pub draft: AgentDraft,
}

/// What happened to an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Created,
    Updated,
    Published,
    Unpublished,
    Verified,
    Deleted,
    /// A probe found that what the agent's endpoint shows (an MCP server's tools, an A2A card's
    /// skills) changed since the last probe; public when the agent is listed.
    Drift,
    /// The publisher deprecated the agent, or one of its versions (`version` says which).
    Deprecated,
    /// The publisher took a deprecation back.
    Undeprecated,
    /// The prober found a different health status. Never public: the record's fields did not
    /// change; serving processes re-read the agent's health. (`skip_deserializing` only keeps
    /// it out of the OpenAPI enum, which describes the public feed; it still serialises.)
    #[serde(skip_deserializing)]
    Health,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Updated => "updated",
            Self::Published => "published",
            Self::Unpublished => "unpublished",
            Self::Verified => "verified",
            Self::Deleted => "deleted",
            Self::Health => "health",
            Self::Drift => "drift",
            Self::Deprecated => "deprecated",
            Self::Undeprecated => "undeprecated",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Created,
            Self::Updated,
            Self::Published,
            Self::Unpublished,
            Self::Verified,
            Self::Deleted,
            Self::Health,
            Self::Drift,
            Self::Deprecated,
            Self::Undeprecated,
        ]
        .into_iter()
        .find(|kind| kind.as_str() == s)
    }
}

/// One entry of the change log: a monotonic sequence of agent writes.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub seq: i64,
    pub agent_id: String,
    pub package_name: String,
    pub kind: ChangeKind,
    pub at: Timestamp,
    /// The agent was ACTIVE before or after this change: the public change feed serves these.
    pub public: bool,
    /// The agent's version after the change (before it, for a delete); `None` on changes logged
    /// before versions were recorded.
    pub version: Option<String>,
}

impl Change {
    /// Whether a change from state `before` to state `after` (`None`: no agent) is public.
    pub fn is_public(before: Option<AgentState>, after: Option<AgentState>) -> bool {
        before == Some(AgentState::Active) || after == Some(AgentState::Active)
    }
}

/// An API token as stored: never the secret, only its SHA-256.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenRecord {
    /// `tok_` + ULID.
    pub id: String,
    pub owner: String,
    pub scopes: Vec<Scope>,
    pub secret_hash: String,
    pub created_at: Timestamp,
    pub expires_at: Option<Timestamp>,
    pub revoked_at: Option<Timestamp>,
}

/// What restricts a token minted by trusted publishing: the namespaces it may write and the
/// identity it came from (stored beside the token; tokens without one are not restricted).
#[derive(Debug, Clone, PartialEq)]
pub struct TokenGrant {
    pub namespaces: Vec<String>,
    /// A JSON object: the issuer's kind and the claims that name the identity.
    pub issuer: serde_json::Value,
    /// Whether the token writes only in `namespaces` (trusted publishing), or may write
    /// anywhere its owner may and counts them as held (a token a signed-in person minted).
    pub restricted: bool,
}

/// An owner's claim on a namespace (`com.example`: every package name that is it or starts
/// with `com.example.`), and whether it is proven.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceRecord {
    pub namespace: String,
    pub owner: String,
    /// What the owner publishes at the namespace's domain to prove it.
    pub token: String,
    pub created_at: Timestamp,
    /// When the proof was found (or the master key assigned the namespace).
    pub verified_at: Option<Timestamp>,
    /// How it was proven: the file's URL, `dns:<domain>`, `agent:<id>` or `assigned`.
    pub proof: Option<String>,
}

/// A publishing binding as stored (see `domain::binding`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingRecord {
    /// `bnd_…`.
    pub id: String,
    /// Who made it.
    pub owner: String,
    /// The package name or namespace it covers.
    pub scope: String,
    pub rule: crate::domain::binding::BindingRule,
    pub created_at: Timestamp,
}

impl TokenRecord {
    /// Usable now: not revoked and not expired.
    pub fn is_live(&self, now: Timestamp) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|expiry| now < expiry)
    }
}

/// An agent's embedding vector as one embedder made it from one version of its text.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEmbedding {
    pub agent_id: String,
    /// SHA-256 (hex) of the text that was embedded.
    pub content_hash: String,
    pub vector: Vec<f32>,
}

impl StoredEmbedding {
    /// Little-endian `f32`s, the stored form.
    pub fn vector_bytes(&self) -> Vec<u8> {
        self.vector.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// The inverse of `vector_bytes`; `None` when the length is not a multiple of 4.
    pub fn vector_from_bytes(bytes: &[u8]) -> Option<Vec<f32>> {
        bytes.len().is_multiple_of(4).then(|| {
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        })
    }
}

/// A playground session as stored, with its history in order.
#[derive(Debug, Clone, PartialEq)]
pub struct PlaygroundSession {
    /// `pgs_` + ULID.
    pub id: String,
    pub owner: String,
    pub name: Option<String>,
    pub created_at: Timestamp,
    pub last_active_at: Timestamp,
    /// When the session expires unless it is used again.
    pub expires_at: Timestamp,
    /// Oldest first.
    pub steps: Vec<SessionStep>,
}

impl PlaygroundSession {
    /// Usable at `now`: not yet expired.
    pub fn is_live(&self, now: Timestamp) -> bool {
        now < self.expires_at
    }
}

/// What a playground step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    Discover,
    Execute,
}

impl StepKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Discover => "discover",
            Self::Execute => "execute",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::Discover, Self::Execute]
            .into_iter()
            .find(|kind| kind.as_str() == s)
    }
}

/// One step of a session's history. `data` is the step's detail as the playground wrote it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionStep {
    /// 1, 2, 3… within the session.
    pub seq: i64,
    pub kind: StepKind,
    pub at: Timestamp,
    pub duration_ms: i64,
    pub data: serde_json::Value,
}

/// A mirror source as stored: where it has read to, how it went, who syncs it.
#[derive(Debug, Clone, PartialEq)]
pub struct MirrorRecord {
    /// `{kind}:{host}`: the agents it writes are owned by `mirror:{id}`.
    pub id: String,
    pub kind: String,
    pub url: String,
    /// The source's own position (JSON), as of the last page written.
    pub position: Option<String>,
    /// The first full walk has ended.
    pub walked: bool,
    /// Entries the source could not map to an agent, since it was first configured.
    pub skipped: i64,
    /// Entries not written because a local agent holds their package name or identifier.
    pub collisions: i64,
    pub last_success: Option<Timestamp>,
    pub last_attempt: Option<Timestamp>,
    pub last_error: Option<String>,
    /// Failed passes in a row.
    pub failures: i64,
    /// When the next pass is due.
    pub next_at: Timestamp,
    pub lease_owner: Option<String>,
    pub lease_until: Option<Timestamp>,
    /// Agents the source owns now.
    pub entries: i64,
    /// The latest entries left out (skipped or colliding), newest first, at most
    /// [`MirrorRecord::RECENT_SKIPS`].
    pub recent_skips: Vec<MirrorSkip>,
}

impl MirrorRecord {
    /// How many left-out entries a source keeps.
    pub const RECENT_SKIPS: usize = 20;
}

/// An upstream entry a mirror left out, and why. Its texts come from the upstream, so each is
/// cut to a bound.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MirrorSkip {
    /// The entry's identifier at the source (an MCP server name, a change id, an ARD
    /// identifier; a package name for a collision), at most 200 characters.
    pub upstream_id: String,
    /// What kind of reason, one of a few: `identifier`, `status`, `invalid_field:{field}`
    /// (`{field}` a top-level field of a publish body), `collision`, `reserved_name`,
    /// `security_finding` (the scanner blocks it under `--scan-policy block`).
    pub class: String,
    /// Why, in full, at most 500 characters.
    pub reason: String,
    /// When the entry was left out.
    pub at: Timestamp,
}

impl MirrorSkip {
    pub const MAX_UPSTREAM_ID_CHARS: usize = 200;
    pub const MAX_CLASS_CHARS: usize = 64;
    pub const MAX_REASON_CHARS: usize = 500;

    /// A left-out entry, its texts cut to their bounds (a cut text ends with `…`).
    pub fn new(upstream_id: &str, class: &str, reason: &str, at: Timestamp) -> Self {
        Self {
            upstream_id: cut(upstream_id, Self::MAX_UPSTREAM_ID_CHARS),
            class: cut(class, Self::MAX_CLASS_CHARS),
            reason: cut(reason, Self::MAX_REASON_CHARS),
            at,
        }
    }

    /// `recent` (newest first) with `skips` (in the order they happened) in front, kept to
    /// [`MirrorRecord::RECENT_SKIPS`].
    pub fn merge(recent: Vec<MirrorSkip>, skips: &[MirrorSkip]) -> Vec<MirrorSkip> {
        let mut merged: Vec<MirrorSkip> = skips
            .iter()
            .rev()
            .take(MirrorRecord::RECENT_SKIPS)
            .cloned()
            .collect();
        merged.extend(recent);
        merged.truncate(MirrorRecord::RECENT_SKIPS);
        merged
    }
}

/// `text` cut to at most `max` characters, the last of them `…` when it was longer.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut kept: String = text.chars().take(max.saturating_sub(1)).collect();
    kept.push('…');
    kept
}

/// An update of a mirrored agent: its new fields and provenance, written over `revision` only.
#[derive(Debug, Clone)]
pub struct MirrorUpdate {
    pub id: String,
    pub revision: i64,
    pub draft: AgentDraft,
    pub provenance: Provenance,
}

/// One page of a mirror source, written in one transaction with the source's new position.
#[derive(Debug, Clone, Default)]
pub struct MirrorPage {
    pub source: String,
    /// The lease the writer holds: a page of a process whose lease was taken over is refused.
    pub lease_owner: String,
    /// The lease is extended to this time with the page (`None`: left as it is).
    pub lease_until: Option<Timestamp>,
    /// New agents (owned by the source, with their provenance).
    pub inserts: Vec<Agent>,
    pub updates: Vec<MirrorUpdate>,
    /// Earlier versions of agents of this page or of the source: (agent id, the version's
    /// fields, when it was published). A version the history has already is left as it is.
    pub history: Vec<(String, AgentDraft, Timestamp)>,
    /// Ids of the source's agents to delete.
    pub deletes: Vec<String>,
    /// The source's new position; `None` leaves it as it is.
    pub position: Option<String>,
    pub walked: bool,
    /// Added to the source's counters.
    pub skipped: i64,
    pub collisions: i64,
    /// The entries the page left out (`skipped` and `collisions` of them), in the order read:
    /// added to the source's recent ones.
    pub skips: Vec<MirrorSkip>,
    pub at: Option<Timestamp>,
}

/// What a page wrote: the agents as stored now, and the agents deleted.
#[derive(Debug, Clone, Default)]
pub struct MirrorWritten {
    pub written: Vec<Agent>,
    pub deleted: Vec<Agent>,
    /// The scanner's verdict on each written agent's texts, by id, as the write stored it: the
    /// index takes it instead of scanning the texts again.
    pub severities: std::collections::HashMap<String, crate::domain::scan::Severity>,
}

/// A signed-in browser's session as stored: found by the hash of its cookie's secret.
#[derive(Debug, Clone, PartialEq)]
pub struct WebSessionRecord {
    /// `ses_…`.
    pub id: String,
    pub secret_hash: String,
    pub owner: String,
    /// A JSON object: who signed in and what they may do (see `signin::SessionData`).
    pub data: String,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
}

/// An organisation as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrgRecord {
    pub name: String,
    pub display_name: Option<String>,
    /// The owner who created it (its first admin).
    pub created_by: String,
    pub created_at: Timestamp,
}

/// One member of an organisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRecord {
    pub org: String,
    pub owner: String,
    pub role: crate::domain::org::OrgRole,
    pub added_at: Timestamp,
}

/// Where a transfer stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TransferStatus {
    /// Waiting for the receiver.
    Pending,
    /// The receiver took the agent.
    Accepted,
    /// The receiver (or the sender, withdrawing it) said no.
    Declined,
    /// The master key moved the agent at once.
    Forced,
}

impl TransferStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Accepted => "accepted",
            Self::Declined => "declined",
            Self::Forced => "forced",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Self::Pending, Self::Accepted, Self::Declined, Self::Forced]
            .into_iter()
            .find(|status| status.as_str() == text)
    }
}

/// A transfer of an agent from one owner to another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferRecord {
    /// `trf_…`.
    pub id: String,
    pub agent_id: String,
    pub package_name: String,
    pub from_owner: String,
    /// A person's owner name, or `org:<name>`.
    pub to_owner: String,
    /// Who asked for it (the sender's owner, or `admin`).
    pub requested_by: String,
    pub status: TransferStatus,
    pub created_at: Timestamp,
    pub resolved_at: Option<Timestamp>,
}

/// One row of the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    /// Its place in the log (0 before it is stored).
    pub seq: i64,
    pub at: Timestamp,
    /// The owner the actor acted as (`admin` for the master key, `anonymous` without one).
    pub actor: String,
    /// `master`, `token`, `session` or `anonymous`.
    pub actor_kind: String,
    pub token_id: Option<String>,
    pub session_id: Option<String>,
    /// The client's address.
    pub client: Option<String>,
    /// What was done (`agent.published`, `token.created`, …), or for a refused write the
    /// request (`POST /api/agents/publish`).
    pub action: String,
    /// What it was done to (an agent, token, organisation or transfer id; a path).
    pub target: Option<String>,
    pub agent_id: Option<String>,
    pub package_name: Option<String>,
    /// Whose thing it concerns (the agent's owner, the organisation `org:<name>`): who may read
    /// the row besides the master key and the actor.
    pub owner: Option<String>,
    pub version: Option<String>,
    /// `ok` or `refused`.
    pub outcome: String,
    /// Why it was refused (the error's code and detail), or what changed hands.
    pub reason: Option<String>,
}

impl AuditEntry {
    /// A row of `action` at `at` by `actor` (anonymous without one) from `client`, about
    /// nothing yet: the caller names the target.
    pub fn by(
        actor: Option<&crate::audit::AuditActor>,
        client: Option<String>,
        action: &str,
        at: Timestamp,
    ) -> Self {
        Self {
            seq: 0,
            at,
            actor: actor.map_or_else(|| "anonymous".to_owned(), |actor| actor.owner.clone()),
            actor_kind: actor.map_or("anonymous", |actor| actor.kind).to_owned(),
            token_id: actor.and_then(|actor| actor.token_id.clone()),
            session_id: actor.and_then(|actor| actor.session_id.clone()),
            client,
            action: action.to_owned(),
            target: None,
            agent_id: None,
            package_name: None,
            owner: None,
            version: None,
            outcome: "ok".to_owned(),
            reason: None,
        }
    }
}

/// Which audit rows to read: newest first, before `before` (a `seq`), at most `limit`.
#[derive(Debug, Clone, Default)]
pub struct AuditQuery {
    /// Rows of this agent (its id).
    pub agent_id: Option<String>,
    pub actor: Option<String>,
    /// Rows concerning this owner (`org:<name>` for an organisation).
    pub owner: Option<String>,
    pub since: Option<Timestamp>,
    pub before: Option<i64>,
    pub limit: u32,
    /// Only rows whose `owner` is one of these or whose `actor` is `viewer`: what a caller
    /// other than the master key may read. `None`: every row.
    pub visible_to: Option<(String, Vec<String>)>,
}
