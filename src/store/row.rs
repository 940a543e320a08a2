//! Rows as the databases return them, and their conversion to the model (shared by backends).

use sqlx::encode::Encode;
use sqlx::query::Query;
use sqlx::{Database, Type};

use crate::domain::Scope;
use crate::domain::{AgentDraft, AirUrn, DEFAULT_VERSION, Health, PackageName, Reach};
use crate::timestamp::Timestamp;

use super::StoreError;
use super::model::{
    Agent, AgentState, AgentVersion, BindingRecord, Change, ChangeKind, MirrorRecord, MirrorSkip,
    NamespaceRecord, PlaygroundSession, SessionStep, StepKind, StoredEmbedding, TokenRecord,
    VerificationLevel, VersionSnapshot,
};

/// The columns of a draft that `agents` and `agent_versions` both hold, in the order
/// `DraftRow::bind` binds them. Beside them, `agents` keeps the draft's `version` (optional
/// there, required in `agent_versions`) and `probe_message` (not kept per version).
pub const DRAFT_COLUMNS: &str = "name, description, manifest_url, url, target, category, tags, \
    capabilities, payment, card, card_signature, reach, representative_queries";

/// A draft's `DRAFT_COLUMNS` as stored: its texts, and its lists and objects as JSON. Read as
/// part of `AgentRow` and `SnapshotRow`, written by `bind`.
#[derive(Debug, sqlx::FromRow)]
pub struct DraftRow {
    pub name: String,
    pub description: String,
    pub manifest_url: Option<String>,
    pub url: Option<String>,
    pub target: Option<String>,
    pub category: Option<String>,
    pub tags: String,
    pub capabilities: String,
    pub payment: Option<String>,
    pub card: Option<String>,
    pub card_signature: Option<String>,
    pub reach: Option<String>,
    pub representative_queries: Option<String>,
}

impl DraftRow {
    /// The columns of `draft`, serialised once for any backend.
    pub fn of(draft: &AgentDraft) -> Result<Self, StoreError> {
        Ok(Self {
            name: draft.name.clone(),
            description: draft.description.clone(),
            manifest_url: draft.manifest_url.clone(),
            url: draft.url.clone(),
            target: draft.target.clone(),
            category: draft.category.clone(),
            tags: to_json(&draft.tags)?,
            capabilities: to_json(&draft.capabilities)?,
            payment: draft.payment.as_ref().map(to_json).transpose()?,
            card: draft.card.as_ref().map(to_json).transpose()?,
            card_signature: draft.card_signature.as_ref().map(to_json).transpose()?,
            reach: (!draft.reach.is_empty())
                .then(|| to_json(&draft.reach))
                .transpose()?,
            representative_queries: (!draft.representative_queries.is_empty())
                .then(|| to_json(&draft.representative_queries))
                .transpose()?,
        })
    }

    /// `query` with these columns bound next, in the order of `DRAFT_COLUMNS`.
    pub fn bind<'q, DB: Database>(
        &'q self,
        query: Query<'q, DB, DB::Arguments<'q>>,
    ) -> Query<'q, DB, DB::Arguments<'q>>
    where
        String: Encode<'q, DB> + Type<DB>,
        Option<String>: Encode<'q, DB>,
    {
        query
            .bind(&self.name)
            .bind(&self.description)
            .bind(&self.manifest_url)
            .bind(&self.url)
            .bind(&self.target)
            .bind(&self.category)
            .bind(&self.tags)
            .bind(&self.capabilities)
            .bind(&self.payment)
            .bind(&self.card)
            .bind(&self.card_signature)
            .bind(&self.reach)
            .bind(&self.representative_queries)
    }

    /// The draft these columns hold, with the columns of it they do not: its package name,
    /// version and probe message.
    fn into_draft(
        self,
        package_name: &str,
        version: Option<String>,
        probe_message: Option<String>,
    ) -> Result<AgentDraft, StoreError> {
        let mut reach: Reach = optional_json("reach", self.reach)?.unwrap_or_default();
        // Rows written before agents listed interfaces: the url is the one interface.
        if let (true, Some(url)) = (reach.interfaces.is_empty(), &self.url) {
            reach.lead_with(url);
        }
        Ok(AgentDraft {
            package_name: PackageName::parse(package_name)
                .map_err(|err| corrupt("package_name", err))?,
            name: self.name,
            description: self.description,
            // Agents published before versions were kept may have none: they are at 1.0.0.
            version: Some(version.unwrap_or_else(|| DEFAULT_VERSION.to_owned())),
            manifest_url: self.manifest_url,
            url: self.url,
            target: self.target,
            category: self.category,
            tags: from_json("tags", &self.tags)?,
            capabilities: from_json("capabilities", &self.capabilities)?,
            payment: optional_json("payment", self.payment)?,
            card: optional_json("card", self.card)?,
            card_signature: optional_json("card_signature", self.card_signature)?,
            reach,
            probe_message,
            representative_queries: optional_json(
                "representative_queries",
                self.representative_queries,
            )?
            .unwrap_or_default(),
            // The agent's identifier is its own column (`Agent::urn`), not a draft field.
            identifier: None,
            visibility: None,
            inspect_tools: None,
        })
    }
}

/// The columns of `agents`, in both backends.
#[derive(Debug, sqlx::FromRow)]
pub struct AgentRow {
    pub id: String,
    pub package_name: String,
    pub owner: String,
    pub state: String,
    pub verification_level: String,
    pub verification_token: String,
    pub revision: i64,
    pub version: Option<String>,
    pub probe_message: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    pub published_at: Option<i64>,
    pub health: Option<String>,
    pub surface: Option<String>,
    pub deprecation: Option<String>,
    pub urn: Option<String>,
    pub provenance: Option<String>,
    pub visibility: String,
    pub inspect_tools: bool,
    #[sqlx(flatten)]
    pub draft: DraftRow,
}

/// A source's recent skips as stored (JSON, newest first); none when absent or unreadable.
pub(super) fn recent_skips(text: Option<&str>) -> Vec<MirrorSkip> {
    text.and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

pub(super) fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|err| StoreError::Database(sqlx::Error::Encode(err.into())))
}

pub(super) fn from_json<T: serde::de::DeserializeOwned>(
    column: &str,
    text: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|err| corrupt(column, err))
}

/// A nullable JSON column read: `None` when it is NULL.
fn optional_json<T: serde::de::DeserializeOwned>(
    column: &str,
    text: Option<String>,
) -> Result<Option<T>, StoreError> {
    text.map(|text| from_json(column, &text)).transpose()
}

fn corrupt(column: &str, err: impl std::fmt::Display) -> StoreError {
    StoreError::Database(sqlx::Error::Decode(
        format!("column {column} holds an unreadable value: {err}").into(),
    ))
}

impl TryFrom<AgentRow> for Agent {
    type Error = StoreError;

    fn try_from(row: AgentRow) -> Result<Self, StoreError> {
        let mut draft = row
            .draft
            .into_draft(&row.package_name, row.version, row.probe_message)?;
        draft.visibility = Some(
            crate::domain::agent::Visibility::parse(&row.visibility)
                .ok_or_else(|| corrupt("visibility", &row.visibility))?,
        );
        draft.inspect_tools = Some(row.inspect_tools);
        let stored = optional_json("health", row.health)?;
        let health = Health::shown(&draft, stored);
        // A row an older program wrote has no identifier yet: the one it will be given.
        let urn = match row.urn.as_deref() {
            Some(urn) => AirUrn::parse(urn).map_err(|err| corrupt("urn", err))?,
            None => AirUrn::of_package(&draft.package_name),
        };
        Ok(Agent {
            state: AgentState::parse(&row.state).ok_or_else(|| corrupt("state", &row.state))?,
            verification_level: VerificationLevel::parse(&row.verification_level)
                .ok_or_else(|| corrupt("verification_level", &row.verification_level))?,
            id: row.id,
            owner: row.owner,
            verification_token: row.verification_token,
            revision: row.revision,
            created_at: Timestamp::from_micros(row.created_at),
            updated_at: Timestamp::from_micros(row.updated_at),
            published_at: row.published_at.map(Timestamp::from_micros),
            draft,
            health,
            urn,
            provenance: optional_json("provenance", row.provenance)?,
            inspection: optional_json("surface", row.surface)?,
            deprecation: optional_json("deprecation", row.deprecation)?,
        })
    }
}

/// A version in an agent's history, without its fields.
#[derive(Debug, sqlx::FromRow)]
pub struct VersionRow {
    pub version: String,
    pub revision: i64,
    pub published_at: i64,
    pub deprecation: Option<String>,
}

impl From<VersionRow> for AgentVersion {
    fn from(row: VersionRow) -> Self {
        AgentVersion {
            version: row.version,
            revision: row.revision,
            published_at: Timestamp::from_micros(row.published_at),
            // An unreadable deprecation is shown as none rather than failing the history.
            deprecation: row
                .deprecation
                .and_then(|text| serde_json::from_str(&text).ok()),
        }
    }
}

/// A version of `agent_versions` with its fields, and the package name of its agent.
#[derive(Debug, sqlx::FromRow)]
pub struct SnapshotRow {
    pub package_name: String,
    #[sqlx(flatten)]
    pub version: VersionRow,
    #[sqlx(flatten)]
    pub draft: DraftRow,
}

impl TryFrom<SnapshotRow> for VersionSnapshot {
    type Error = StoreError;

    fn try_from(row: SnapshotRow) -> Result<Self, StoreError> {
        // No probe message: it is the owner's setting for the current record, not kept per
        // version.
        let version = Some(row.version.version.clone());
        let draft = row.draft.into_draft(&row.package_name, version, None)?;
        Ok(VersionSnapshot {
            version: AgentVersion::from(row.version),
            draft,
        })
    }
}

/// The columns of `agent_changes`.
#[derive(Debug, sqlx::FromRow)]
pub struct ChangeRow {
    pub seq: i64,
    pub agent_id: String,
    pub package_name: String,
    pub kind: String,
    pub at: i64,
    pub public: bool,
    pub version: Option<String>,
}

impl TryFrom<ChangeRow> for Change {
    type Error = StoreError;

    fn try_from(row: ChangeRow) -> Result<Self, StoreError> {
        Ok(Change {
            kind: ChangeKind::parse(&row.kind).ok_or_else(|| corrupt("kind", &row.kind))?,
            seq: row.seq,
            agent_id: row.agent_id,
            package_name: row.package_name,
            at: Timestamp::from_micros(row.at),
            public: row.public,
            version: row.version,
        })
    }
}

/// The columns of `tokens`.
#[derive(Debug, sqlx::FromRow)]
pub struct TokenRow {
    pub id: String,
    pub owner: String,
    pub scopes: String,
    pub secret_hash: String,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

/// The columns of `namespaces`.
#[derive(Debug, sqlx::FromRow)]
pub struct NamespaceRow {
    pub namespace: String,
    pub owner: String,
    pub token: String,
    pub created_at: i64,
    pub verified_at: Option<i64>,
    pub proof: Option<String>,
}

/// `namespaces`' columns, in `NamespaceRow`'s order.
pub const NAMESPACE_COLUMNS: &str = "namespace, owner, token, created_at, verified_at, proof";

impl From<NamespaceRow> for NamespaceRecord {
    fn from(row: NamespaceRow) -> Self {
        Self {
            namespace: row.namespace,
            owner: row.owner,
            token: row.token,
            created_at: Timestamp::from_micros(row.created_at),
            verified_at: row.verified_at.map(Timestamp::from_micros),
            proof: row.proof,
        }
    }
}

/// The columns of `bindings`.
#[derive(Debug, sqlx::FromRow)]
pub struct BindingRow {
    pub id: String,
    pub owner: String,
    pub scope: String,
    pub kind: String,
    pub repository: String,
    pub workflow: String,
    pub created_at: i64,
}

/// `bindings`' columns, in `BindingRow`'s order.
pub const BINDING_COLUMNS: &str = "id, owner, scope, kind, repository, workflow, created_at";

impl TryFrom<BindingRow> for BindingRecord {
    type Error = StoreError;

    fn try_from(row: BindingRow) -> Result<Self, StoreError> {
        let kind = crate::domain::trusted_issuer::IssuerKind::parse(&row.kind)
            .ok_or_else(|| corrupt("bindings.kind", &row.kind))?;
        let workflow = (!row.workflow.is_empty()).then_some(row.workflow);
        Ok(Self {
            id: row.id,
            owner: row.owner,
            scope: row.scope,
            rule: crate::domain::binding::BindingRule {
                kind,
                repository: row.repository,
                workflow,
            },
            created_at: Timestamp::from_micros(row.created_at),
        })
    }
}

/// Scopes are stored as a space-separated list.
pub fn scopes_column(scopes: &[Scope]) -> String {
    scopes
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

impl TryFrom<TokenRow> for TokenRecord {
    type Error = StoreError;

    fn try_from(row: TokenRow) -> Result<Self, StoreError> {
        let scopes = row
            .scopes
            .split_whitespace()
            .map(|s| Scope::parse(s).ok_or_else(|| corrupt("scopes", s)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(TokenRecord {
            id: row.id,
            owner: row.owner,
            scopes,
            secret_hash: row.secret_hash,
            created_at: Timestamp::from_micros(row.created_at),
            expires_at: row.expires_at.map(Timestamp::from_micros),
            revoked_at: row.revoked_at.map(Timestamp::from_micros),
        })
    }
}

/// The columns of `agent_embeddings` that are read back.
#[derive(Debug, sqlx::FromRow)]
pub struct EmbeddingRow {
    pub agent_id: String,
    pub content_hash: String,
    pub vector: Vec<u8>,
}

impl TryFrom<EmbeddingRow> for StoredEmbedding {
    type Error = StoreError;

    fn try_from(row: EmbeddingRow) -> Result<Self, StoreError> {
        Ok(StoredEmbedding {
            vector: StoredEmbedding::vector_from_bytes(&row.vector)
                .ok_or_else(|| corrupt("vector", "length is not a multiple of 4"))?,
            agent_id: row.agent_id,
            content_hash: row.content_hash,
        })
    }
}

/// The columns of `playground_sessions`.
#[derive(Debug, sqlx::FromRow)]
pub struct SessionRow {
    pub id: String,
    pub owner: String,
    pub name: Option<String>,
    pub created_at: i64,
    pub last_active_at: i64,
    pub expires_at: i64,
}

impl SessionRow {
    /// The session with its steps (already in order).
    pub fn with_steps(self, steps: Vec<StepRow>) -> Result<PlaygroundSession, StoreError> {
        Ok(PlaygroundSession {
            id: self.id,
            owner: self.owner,
            name: self.name,
            created_at: Timestamp::from_micros(self.created_at),
            last_active_at: Timestamp::from_micros(self.last_active_at),
            expires_at: Timestamp::from_micros(self.expires_at),
            steps: steps
                .into_iter()
                .map(SessionStep::try_from)
                .collect::<Result<_, _>>()?,
        })
    }
}

/// The columns of `playground_steps` that are read back.
#[derive(Debug, sqlx::FromRow)]
pub struct StepRow {
    pub seq: i64,
    pub kind: String,
    pub at: i64,
    pub duration_ms: i64,
    pub data: String,
}

impl TryFrom<StepRow> for SessionStep {
    type Error = StoreError;

    fn try_from(row: StepRow) -> Result<Self, StoreError> {
        Ok(SessionStep {
            kind: StepKind::parse(&row.kind).ok_or_else(|| corrupt("kind", &row.kind))?,
            seq: row.seq,
            at: Timestamp::from_micros(row.at),
            duration_ms: row.duration_ms,
            data: from_json("data", &row.data)?,
        })
    }
}

/// The columns of `mirror_sources`, with the count of the source's agents.
#[derive(Debug, sqlx::FromRow)]
pub struct MirrorRow {
    pub id: String,
    pub kind: String,
    pub url: String,
    pub position: Option<String>,
    pub walked: bool,
    pub skipped: i64,
    pub collisions: i64,
    pub last_success: Option<i64>,
    pub last_attempt: Option<i64>,
    pub last_error: Option<String>,
    pub failures: i64,
    pub next_at: i64,
    pub lease_owner: Option<String>,
    pub lease_until: Option<i64>,
    pub entries: i64,
    pub recent_skips: Option<String>,
}

impl From<MirrorRow> for MirrorRecord {
    fn from(row: MirrorRow) -> Self {
        Self {
            id: row.id,
            kind: row.kind,
            url: row.url,
            position: row.position,
            walked: row.walked,
            skipped: row.skipped,
            collisions: row.collisions,
            last_success: row.last_success.map(Timestamp::from_micros),
            last_attempt: row.last_attempt.map(Timestamp::from_micros),
            last_error: row.last_error,
            failures: row.failures,
            next_at: Timestamp::from_micros(row.next_at),
            lease_owner: row.lease_owner,
            lease_until: row.lease_until.map(Timestamp::from_micros),
            entries: row.entries,
            // What an operator reads to see why; unreadable, it is as if none were kept rather
            // than a source that cannot be listed.
            recent_skips: recent_skips(row.recent_skips.as_deref()),
        }
    }
}

/// The columns of `orgs`.
#[derive(Debug, sqlx::FromRow)]
pub struct OrgRow {
    pub name: String,
    pub display_name: Option<String>,
    pub created_by: String,
    pub created_at: i64,
}

/// `orgs`' columns, in `OrgRow`'s order.
pub const ORG_COLUMNS: &str = "name, display_name, created_by, created_at";

impl From<OrgRow> for super::OrgRecord {
    fn from(row: OrgRow) -> Self {
        Self {
            name: row.name,
            display_name: row.display_name,
            created_by: row.created_by,
            created_at: Timestamp::from_micros(row.created_at),
        }
    }
}

/// The columns of `org_members`.
#[derive(Debug, sqlx::FromRow)]
pub struct MemberRow {
    pub org: String,
    pub owner: String,
    pub role: String,
    pub added_at: i64,
}

/// `org_members`' columns, in `MemberRow`'s order.
pub const MEMBER_COLUMNS: &str = "org, owner, role, added_at";

impl TryFrom<MemberRow> for super::MemberRecord {
    type Error = StoreError;

    fn try_from(row: MemberRow) -> Result<Self, StoreError> {
        let role = crate::domain::org::OrgRole::parse(&row.role)
            .ok_or_else(|| corrupt("org_members.role", &row.role))?;
        Ok(Self {
            org: row.org,
            owner: row.owner,
            role,
            added_at: Timestamp::from_micros(row.added_at),
        })
    }
}

/// The columns of `transfers`.
#[derive(Debug, sqlx::FromRow)]
pub struct TransferRow {
    pub id: String,
    pub agent_id: String,
    pub package_name: String,
    pub from_owner: String,
    pub to_owner: String,
    pub requested_by: String,
    pub status: String,
    pub created_at: i64,
    pub resolved_at: Option<i64>,
}

/// `transfers`' columns, in `TransferRow`'s order.
pub const TRANSFER_COLUMNS: &str = "id, agent_id, package_name, from_owner, to_owner, \
    requested_by, status, created_at, resolved_at";

impl TryFrom<TransferRow> for super::TransferRecord {
    type Error = StoreError;

    fn try_from(row: TransferRow) -> Result<Self, StoreError> {
        let status = super::TransferStatus::parse(&row.status)
            .ok_or_else(|| corrupt("transfers.status", &row.status))?;
        Ok(Self {
            id: row.id,
            agent_id: row.agent_id,
            package_name: row.package_name,
            from_owner: row.from_owner,
            to_owner: row.to_owner,
            requested_by: row.requested_by,
            status,
            created_at: Timestamp::from_micros(row.created_at),
            resolved_at: row.resolved_at.map(Timestamp::from_micros),
        })
    }
}

/// The columns of `audit_log`.
#[derive(Debug, sqlx::FromRow)]
pub struct AuditRow {
    pub seq: i64,
    pub at: i64,
    pub actor: String,
    pub actor_kind: String,
    pub token_id: Option<String>,
    pub session_id: Option<String>,
    pub client: Option<String>,
    pub action: String,
    pub target: Option<String>,
    pub agent_id: Option<String>,
    pub package_name: Option<String>,
    pub owner: Option<String>,
    pub version: Option<String>,
    pub outcome: String,
    pub reason: Option<String>,
}

/// `audit_log`'s columns but `seq`, in `AuditRow`'s order.
pub const AUDIT_COLUMNS: &str = "at, actor, actor_kind, token_id, session_id, client, action, \
    target, agent_id, package_name, owner, version, outcome, reason";

impl From<AuditRow> for super::AuditEntry {
    fn from(row: AuditRow) -> Self {
        Self {
            seq: row.seq,
            at: Timestamp::from_micros(row.at),
            actor: row.actor,
            actor_kind: row.actor_kind,
            token_id: row.token_id,
            session_id: row.session_id,
            client: row.client,
            action: row.action,
            target: row.target,
            agent_id: row.agent_id,
            package_name: row.package_name,
            owner: row.owner,
            version: row.version,
            outcome: row.outcome,
            reason: row.reason,
        }
    }
}
