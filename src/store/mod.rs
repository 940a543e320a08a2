//! Persistence behind one small `Store` trait: agents, their change log, API tokens, and
//! playground sessions. `sqlite` is the embedded default, `postgres` serves several processes
//! on one database; both run the SQL of `sql` and pass `conformance`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::config::StorageConfig;
use crate::domain::AgentDraft;
use crate::domain::Health;
use crate::domain::health::ProbeOutcome;
use crate::timestamp::Timestamp;

pub mod model;
pub mod postgres;
mod row;
mod sql;
pub mod sqlite;

#[cfg(test)]
mod conformance;
#[cfg(test)]
#[path = "../../tests/support/pg_schema.rs"]
mod pg_schema;

pub use model::{
    Agent, AgentState, AgentVersion, AuditEntry, AuditQuery, BindingRecord, Change, ChangeKind,
    MemberRecord, MirrorPage, MirrorRecord, MirrorSkip, MirrorUpdate, MirrorWritten,
    NamespaceRecord, OrgRecord, PlaygroundSession, Provenance, SessionStep, StepKind,
    StoredEmbedding, TokenGrant, TokenRecord, TransferRecord, TransferStatus, VerificationLevel,
    VersionSnapshot, WebSessionRecord,
};

/// What can go wrong in storage, as the caller needs to tell it apart.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A unique key (package name, token hash) is taken.
    #[error("{0}")]
    Conflict(String),
    /// The agent is not in the state the transition starts from.
    #[error("{0}")]
    InvalidTransition(String),
    /// An optimistic-concurrency check failed (`If-Match`).
    #[error("version mismatch")]
    VersionMismatch,
    #[error("not found")]
    NotFound,
    /// Another agent holds this discovery identifier (compared ignoring case).
    #[error("identifier '{0}' is already registered")]
    IdentifierTaken(String),
    /// A mirror page's writer no longer holds its source's lease: another process took over.
    #[error("the lease on mirror source '{0}' is held by another process now")]
    LeaseLost(String),
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// The storage seam. Handlers and the search index see only this trait.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Cheap round trip to the database, for `/readyz`.
    async fn ping(&self) -> StoreResult<()>;

    /// Insert a new agent, with its version as the first of its history; `Conflict` when its
    /// package name is taken.
    async fn insert_agent(&self, agent: &Agent) -> StoreResult<()>;

    /// An agent by `id`, by (lowercase) package name, or by discovery identifier
    /// (`urn:air:…`, ignoring case).
    async fn find_agent(&self, identifier: &str) -> StoreResult<Option<Agent>>;

    /// Agents written before they had a discovery identifier (id, package name), oldest
    /// first, at most `limit`.
    async fn agents_missing_urn(&self, limit: u32) -> StoreResult<Vec<(String, String)>>;

    /// Give an agent without one its discovery identifier; `IdentifierTaken` when another
    /// agent holds it. Changes neither `revision` nor `updated_at`, and nothing when the agent
    /// has one already.
    async fn set_urn(&self, id: &str, urn: &str) -> StoreResult<()>;

    /// The agents with these ids (any state), in no particular order, in one round trip per
    /// 500 ids; ids of no agent are left out.
    async fn find_agents_by_id(&self, ids: &[String]) -> StoreResult<Vec<Agent>>;

    /// The worst severity the current scanner (`scan::SCANNER`) found in each of these agents'
    /// texts, as written with them; agents without one (written before it was stored, or
    /// scanned by another version) are left out. One round trip per 500 ids.
    async fn scan_severities(
        &self,
        ids: &[String],
    ) -> StoreResult<Vec<(String, crate::domain::scan::Severity)>>;

    /// Store the severities of agents scanned outside a write (those `scan_severities` left
    /// out), unless the agent is gone.
    async fn record_scan_severities(
        &self,
        found: &[(String, crate::domain::scan::Severity)],
    ) -> StoreResult<()>;

    /// Replace the writable fields, and record the draft as its version in the agent's history
    /// (replacing what that version held, if the history has it). With `expected_revision`,
    /// fail with `VersionMismatch` when the stored revision differs. `NotFound` when the agent
    /// is gone.
    async fn update_agent(
        &self,
        id: &str,
        draft: &AgentDraft,
        expected_revision: Option<i64>,
        at: Timestamp,
    ) -> StoreResult<Agent>;

    /// Move an agent from state `from` to `to` atomically; `InvalidTransition` when it is not in
    /// `from`, `NotFound` when it is gone.
    async fn transition(
        &self,
        id: &str,
        from: AgentState,
        to: AgentState,
        at: Timestamp,
    ) -> StoreResult<Agent>;

    /// Deprecate agent `id` (or, with `version`, one of its versions), or undo it with `None`:
    /// a new revision, a `Deprecated` or `Undeprecated` change and an audit row. `NotFound`
    /// when the agent, or that version of it, does not exist.
    async fn set_deprecation(
        &self,
        id: &str,
        version: Option<&str>,
        deprecation: Option<&crate::domain::deprecation::Deprecation>,
        at: Timestamp,
    ) -> StoreResult<Agent>;

    /// Set the verification level of an agent.
    async fn set_verification(
        &self,
        id: &str,
        level: VerificationLevel,
        at: Timestamp,
    ) -> StoreResult<Agent>;

    /// Delete an agent and its history; `false` when there was none.
    async fn delete_agent(&self, id: &str, at: Timestamp) -> StoreResult<bool>;

    /// The versions in an agent's history, the most recently written first. Empty for an
    /// unknown agent, and possibly without the current version when another program wrote the
    /// agent: the agent row is the truth about its current version.
    async fn agent_versions(&self, agent_id: &str) -> StoreResult<Vec<AgentVersion>>;

    /// One version of an agent's history with its fields as they were.
    async fn find_agent_version(
        &self,
        agent_id: &str,
        version: &str,
    ) -> StoreResult<Option<VersionSnapshot>>;

    /// Agents of some owners (of everyone with `None`), by id, after `after_id`, at most
    /// `limit`.
    async fn list_agents(
        &self,
        owners: Option<&[&str]>,
        after_id: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<Agent>>;

    /// Every agent in `state` (all agents with `None`), by id (export).
    async fn all_agents(&self, state: Option<AgentState>) -> StoreResult<Vec<Agent>>;

    /// Agents in `state` (all agents with `None`), by id, after `after_id`, at most `limit`: the
    /// search index loads the catalogue page by page, indexing one page while the next is read.
    async fn agents_page(
        &self,
        state: Option<AgentState>,
        after_id: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<Agent>>;

    /// Changes with a sequence number above `since`, oldest first, at most `limit`.
    async fn changes_since(&self, since: i64, limit: u32) -> StoreResult<Vec<Change>>;

    /// Public changes (`Change::public`) above `since`, oldest first, at most `limit`, and the
    /// changes of the private agents `viewer` sees: the change feed.
    async fn public_changes_since(
        &self,
        since: i64,
        limit: u32,
        viewer: &crate::domain::access::Viewer,
    ) -> StoreResult<Vec<Change>>;

    /// The highest change sequence number, 0 when there is none.
    async fn latest_change(&self) -> StoreResult<i64>;

    /// Return when a change may have been logged (by any process), or after `timeout`. Spurious
    /// returns are allowed: followers re-read `changes_since` either way. The default just
    /// sleeps, so followers poll.
    async fn wait_for_change(&self, timeout: Duration) {
        tokio::time::sleep(timeout).await;
    }

    /// Up to `limit` stored vectors of one embedder, by agent id (bytewise), of the agents
    /// after `after_agent_id` (from the first when `None`): reads every stored vector a page at
    /// a time, where all at once would hold gigabytes of them at a million agents.
    async fn embeddings_page(
        &self,
        embedder_id: &str,
        after_agent_id: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<StoredEmbedding>>;

    /// One agent's stored vector of one embedder.
    async fn find_embedding(
        &self,
        agent_id: &str,
        embedder_id: &str,
    ) -> StoreResult<Option<StoredEmbedding>>;

    /// Store (or replace) vectors of one embedder. Vectors of agents deleted meanwhile are
    /// dropped silently.
    async fn save_embeddings(
        &self,
        embedder_id: &str,
        embeddings: &[StoredEmbedding],
    ) -> StoreResult<()>;

    /// Give each agent in `due` a probe schedule, first due at the time given, unless it has
    /// one already (its existing schedule is kept).
    async fn schedule_probes(&self, due: &[(String, Timestamp)]) -> StoreResult<()>;

    /// Claim at most `limit` probes due at `now` whose lease is free or expired, leasing them
    /// to `owner` until `lease_until`; returns the agent ids, earliest due first. Concurrent
    /// claims (other processes) never get the same agent while its lease holds.
    async fn claim_probes(
        &self,
        owner: &str,
        now: Timestamp,
        lease_until: Timestamp,
        limit: u32,
    ) -> StoreResult<Vec<String>>;

    /// Release every probe lease `owner` holds: what a restarted process does with the leases
    /// its earlier run took and never finished, so their probes are due again at once instead
    /// of when the leases run out. Returns how many it released.
    async fn release_probe_leases(&self, owner: &str) -> StoreResult<u64>;

    /// Record one probe of `agent_id`: count it in the day's uptime, write the agent's new
    /// health (from `Health::after`), schedule the next probe at `next_at` and release the
    /// lease, and log a `Health` change when the status changed. Returns the new health and
    /// whether the status changed; `None` (and no schedule) when the agent is gone.
    async fn record_probe(
        &self,
        agent_id: &str,
        outcome: &ProbeOutcome,
        next_at: Timestamp,
    ) -> StoreResult<Option<(Health, bool)>>;

    /// Stop probing `agent_id` (it is no longer ACTIVE or lists no endpoint), or, with
    /// `Some(at)`, make its next probe due at `at` with its health reset to never probed (its
    /// endpoint changed). Its uptime history goes with it either way.
    async fn reset_probe(&self, agent_id: &str, due_at: Option<Timestamp>) -> StoreResult<()>;

    /// What the prober last read from `agent_id`'s endpoint (its inspection, and the snapshot
    /// it was made from); `None` before the first read, or after the endpoint changed.
    async fn surface_of(
        &self,
        agent_id: &str,
    ) -> StoreResult<
        Option<(
            crate::domain::surface::Inspection,
            crate::domain::surface::Surface,
        )>,
    >;

    /// Store what a probe read from `agent_id`'s endpoint: the inspection on the agent (shown
    /// on its record) and the snapshot beside it; when `changed`, log a `Drift` change, public
    /// when the agent is listed. `false` when the agent is gone.
    async fn record_inspection(
        &self,
        agent_id: &str,
        inspection: &crate::domain::surface::Inspection,
        surface: &crate::domain::surface::Surface,
        changed: bool,
    ) -> StoreResult<bool>;

    /// The agents with these package names (any state, any owner); names of no agent are left
    /// out.
    async fn find_agents_by_name(&self, names: &[String]) -> StoreResult<Vec<Agent>>;

    // ---- mirror sources ----

    /// Every mirror source that has ever run, by id, with how many agents each owns now.
    async fn mirror_sources(&self) -> StoreResult<Vec<MirrorRecord>>;

    /// Lease source `id` (created on first use with `kind` and `url`) to `owner` until
    /// `lease_until`, if its lease is free, expired or `owner`'s already, and its next pass is
    /// due at `now` (or `force`). `None` when another process holds it or it is not due.
    #[allow(clippy::too_many_arguments)]
    async fn claim_mirror(
        &self,
        id: &str,
        kind: &str,
        url: &str,
        owner: &str,
        now: Timestamp,
        lease_until: Timestamp,
        force: bool,
    ) -> StoreResult<Option<MirrorRecord>>;

    /// Write one page of a source: its inserts, updates, earlier versions and deletes (each
    /// logged in the change log as any write is) and its new position and counters, in one
    /// transaction, under the lease `page.lease_owner` holds, which it extends to
    /// `page.lease_until`. `Conflict` (nothing written) when a package name or identifier is
    /// taken or an agent changed since it was read; `LeaseLost` when the lease is no longer the
    /// writer's.
    async fn write_mirror_page(&self, page: &MirrorPage) -> StoreResult<MirrorWritten>;

    /// End a pass of source `id` held by `owner`: record its outcome (`error` `None`: a
    /// success at `at`), schedule the next at `next_at`, and release the lease.
    async fn end_mirror_pass(
        &self,
        id: &str,
        owner: &str,
        at: Timestamp,
        error: Option<&str>,
        next_at: Timestamp,
    ) -> StoreResult<()>;

    async fn insert_token(&self, token: &TokenRecord) -> StoreResult<()>;

    async fn find_token_by_hash(&self, secret_hash: &str) -> StoreResult<Option<TokenRecord>>;

    /// Tokens of one owner (or all with `None`), newest first.
    async fn list_tokens(&self, owner: Option<&str>) -> StoreResult<Vec<TokenRecord>>;

    /// Revoke a token now; `false` when there is no such unrevoked token.
    async fn revoke_token(&self, id: &str, at: Timestamp) -> StoreResult<bool>;

    /// Insert a token restricted by `grant`, in one statement: it is never stored without it.
    async fn insert_granted_token(
        &self,
        token: &TokenRecord,
        grant: &TokenGrant,
    ) -> StoreResult<()>;

    /// Delete the tokens minted by trusted publishing (restricted to their grant's namespaces)
    /// that expired before `before`; how many. Tokens made by the operator or a signed-in
    /// person are kept, expired or not.
    async fn purge_expired_minted_tokens(&self, before: Timestamp) -> StoreResult<u64>;

    /// The grant stored with token `id`; `None` for a token without one (or an unknown one).
    async fn find_token_grant(&self, id: &str) -> StoreResult<Option<TokenGrant>>;

    // ---- the audit log ----

    /// Append `entry` on its own (a refused write, which changed nothing).
    async fn insert_audit(&self, entry: &AuditEntry) -> StoreResult<()>;

    /// The rows `query` selects, newest first.
    async fn audit_page(&self, query: &AuditQuery) -> StoreResult<Vec<AuditEntry>>;

    /// Delete the rows older than `before`; how many.
    async fn purge_audit(&self, before: Timestamp) -> StoreResult<u64>;

    // ---- organisations and transfers ----

    /// Create an organisation with its creator as its first admin, in one transaction;
    /// `Conflict` when the name is taken.
    async fn create_org(&self, org: &OrgRecord) -> StoreResult<()>;

    async fn find_org(&self, name: &str) -> StoreResult<Option<OrgRecord>>;

    /// The members of `org`, by owner.
    async fn org_members(&self, org: &str) -> StoreResult<Vec<MemberRecord>>;

    /// The organisations `owner` is a member of, by name.
    async fn memberships(&self, owner: &str) -> StoreResult<Vec<MemberRecord>>;

    /// The organisations a caller is a member of: those it was added to, and those linked to a
    /// GitHub organisation its identity grants (`granted`'s `io.github.<name>`), with the
    /// link's role where it was not added itself. By name.
    async fn memberships_of(
        &self,
        owner: &str,
        granted: &[String],
    ) -> StoreResult<Vec<MemberRecord>> {
        let mut members = self.memberships(owner).await?;
        let github = crate::domain::org::github_names(granted);
        if !github.is_empty() {
            for (org, role, linked_at) in self.orgs_linked_to(&github).await? {
                if !members.iter().any(|member| member.org == org) {
                    members.push(MemberRecord {
                        org,
                        owner: owner.to_owned(),
                        role,
                        added_at: linked_at,
                    });
                }
            }
            members.sort_by(|a, b| a.org.cmp(&b.org));
        }
        Ok(members)
    }

    /// Whose private agents `actor` sees: its own, the namespaces its identity grants and its
    /// organisations' (by name or through a GitHub link); every agent for the master key.
    async fn viewer_of(
        &self,
        actor: &crate::domain::access::Actor,
    ) -> StoreResult<crate::domain::access::Viewer> {
        use crate::domain::access::Viewer;
        if actor.is_master {
            return Ok(Viewer::Everyone);
        }
        let orgs = self.memberships_of(&actor.owner, &actor.granted).await?;
        Ok(Viewer::of_owners(
            actor.owners_with(orgs.into_iter().map(|member| member.org)),
        ))
    }

    /// The registry organisations linked to any of these GitHub organisations (lowercase), with
    /// the role the link gives and when it was made.
    async fn orgs_linked_to(
        &self,
        github: &[String],
    ) -> StoreResult<Vec<(String, crate::domain::org::OrgRole, Timestamp)>>;

    /// The GitHub organisation `org` is linked to, with the role it gives.
    async fn github_link(
        &self,
        org: &str,
    ) -> StoreResult<Option<(String, crate::domain::org::OrgRole)>>;

    /// Link `org` to a GitHub organisation (lowercase) whose members get `role`, or unlink it
    /// (`None`); audited. `Conflict` when that GitHub organisation is linked to another one.
    async fn set_github_link(
        &self,
        org: &str,
        link: Option<(&str, crate::domain::org::OrgRole)>,
        at: Timestamp,
    ) -> StoreResult<()>;

    /// Add a member or change their role; `Conflict` when that would leave the organisation
    /// without an admin (nothing is written then).
    async fn set_member(&self, member: &MemberRecord) -> StoreResult<()>;

    /// Remove a member; whether there was one. `Conflict` when they are its last admin.
    async fn remove_member(&self, org: &str, owner: &str) -> StoreResult<bool>;

    /// Record a pending transfer; `Conflict` when the agent has one pending already.
    async fn insert_transfer(&self, transfer: &TransferRecord) -> StoreResult<()>;

    async fn find_transfer(&self, id: &str) -> StoreResult<Option<TransferRecord>>;

    /// The pending transfers from or to any of `owners`, oldest first.
    async fn pending_transfers(&self, owners: &[&str]) -> StoreResult<Vec<TransferRecord>>;

    /// Settle pending transfer `id` as `status` (accepted or declined) at `at`. Accepted: the
    /// agent moves to the receiver in the same transaction (its versions, verification and
    /// identifier with it), and the move is in the change log. `NotFound` when no transfer
    /// `id` is pending; `Conflict` when the agent changed owner meanwhile.
    async fn settle_transfer(
        &self,
        id: &str,
        status: TransferStatus,
        at: Timestamp,
    ) -> StoreResult<(TransferRecord, Option<Agent>)>;

    /// Move the agent at once (the master key) and record `transfer` (status `forced`); a
    /// pending transfer of the agent is declined. `NotFound` when the agent is gone.
    async fn force_transfer(&self, transfer: &TransferRecord) -> StoreResult<Agent>;

    // ---- sign-in (people) ----

    /// Store a sign-in under way (`data`, a JSON object) under `key_hash` until `expires_at`,
    /// dropping those that expired before `now`.
    async fn insert_signin_state(
        &self,
        key_hash: &str,
        data: &str,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> StoreResult<()>;

    /// Take (read and delete) the sign-in under `key_hash`: its data and expiry.
    async fn take_signin_state(&self, key_hash: &str) -> StoreResult<Option<(String, Timestamp)>>;

    /// Store a signed-in browser's session, dropping those that expired before `created_at`.
    async fn insert_web_session(&self, session: &WebSessionRecord) -> StoreResult<()>;

    /// The live session (`expires_at` after `now`) whose secret hashes to `secret_hash`.
    async fn find_web_session(
        &self,
        secret_hash: &str,
        now: Timestamp,
    ) -> StoreResult<Option<WebSessionRecord>>;

    /// Delete session `id`; whether there was one.
    async fn delete_web_session(&self, id: &str) -> StoreResult<bool>;

    /// The owner name of the person `subject` at `issuer`: the one recorded at their first
    /// sign-in, or else the first of `candidates` no other person holds (recorded now);
    /// `None` when every candidate is held by someone else.
    async fn person_owner(
        &self,
        issuer: &str,
        subject: &str,
        candidates: &[String],
        now: Timestamp,
    ) -> StoreResult<Option<String>>;

    /// Record `claim` unless its owner claimed the namespace already; either way, the owner's
    /// claim as stored (a second claim keeps the first one's token).
    async fn claim_namespace(&self, claim: &NamespaceRecord) -> StoreResult<NamespaceRecord>;

    /// Every claim of `owner`, proven or not, by namespace.
    async fn namespaces_of(&self, owner: &str) -> StoreResult<Vec<NamespaceRecord>>;

    /// The proven claim on `namespace`, whoever holds it.
    async fn namespace_holder(&self, namespace: &str) -> StoreResult<Option<NamespaceRecord>>;

    /// Mark `owner`'s claim on `namespace` proven by `proof` (kept proven if it was).
    /// `NotFound` without such a claim; `Conflict` when another owner holds it proven.
    async fn verify_namespace(
        &self,
        namespace: &str,
        owner: &str,
        proof: &str,
        at: Timestamp,
    ) -> StoreResult<NamespaceRecord>;

    /// Drop `owner`'s claim on `namespace` (every claim on it for `None`); whether there was one.
    async fn delete_namespace(&self, namespace: &str, owner: Option<&str>) -> StoreResult<bool>;

    /// Store a binding; `Conflict` when the same rule covers the same scope already.
    async fn insert_binding(&self, binding: &BindingRecord) -> StoreResult<()>;

    /// The bindings whose scope is one of `scopes` (a package name's prefixes).
    async fn bindings_for(&self, scopes: &[String]) -> StoreResult<Vec<BindingRecord>>;

    /// The bindings `owner` made (every binding for `None`), by scope and id.
    async fn bindings_of(&self, owner: Option<&str>) -> StoreResult<Vec<BindingRecord>>;

    /// Delete binding `id` (only `owner`'s unless `None`); whether there was one.
    async fn delete_binding(&self, id: &str, owner: Option<&str>) -> StoreResult<bool>;

    /// Insert a new playground session (its `steps` are not written: a new session has none).
    async fn insert_session(&self, session: &PlaygroundSession) -> StoreResult<()>;

    /// A session with its steps in order, expired or not: callers judge expiry.
    async fn find_session(&self, id: &str) -> StoreResult<Option<PlaygroundSession>>;

    /// Append `step` after the session's last one (its `seq` is ignored and assigned) and mark the
    /// session used at `step.at`, expiring at `expires_at`. Returns the step as stored;
    /// `NotFound` when the session is gone.
    async fn append_session_step(
        &self,
        session_id: &str,
        step: &SessionStep,
        expires_at: Timestamp,
    ) -> StoreResult<SessionStep>;

    /// Mark a session used at `at`, expiring at `expires_at`; `false` when there is none.
    async fn touch_session(
        &self,
        id: &str,
        at: Timestamp,
        expires_at: Timestamp,
    ) -> StoreResult<bool>;

    /// Delete a session and its steps; `false` when there was none.
    async fn delete_session(&self, id: &str) -> StoreResult<bool>;

    /// Delete every session that expired at or before `now`; returns how many.
    async fn purge_expired_sessions(&self, now: Timestamp) -> StoreResult<u64>;
}

/// Open the store the configuration names: PostgreSQL for a `postgres://` URL, else SQLite in
/// the data directory. Migrations run before this returns.
pub async fn open(config: &StorageConfig) -> anyhow::Result<Arc<dyn Store>> {
    match &config.database_url {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            Ok(Arc::new(postgres::PgStore::connect(url).await?))
        }
        Some(url) if url.starts_with("sqlite:") => {
            Ok(Arc::new(sqlite::SqliteStore::connect(url).await?))
        }
        Some(other) => anyhow::bail!(
            "REGISTRY_DATABASE_URL must start with postgres:// or sqlite:, got '{}'",
            other.split(':').next().unwrap_or_default()
        ),
        None => Ok(Arc::new(
            sqlite::SqliteStore::open_dir(&config.data_dir).await?,
        )),
    }
}
