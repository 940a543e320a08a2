//! The SQL both backends run, written once: `SqlStore<DB>` implements `Store` for SQLite
//! (`sqlite.rs`) and PostgreSQL (`postgres.rs`), which add only what they do differently.
//!
//! How one text serves both:
//! - Placeholders are `$N`. PostgreSQL needs them and SQLite accepts them (sqlx binds `$N` to
//!   the N-th argument), so each statement is a single string. Where PostgreSQL must be told a
//!   parameter's type (`… IS NULL`) it is `CAST($1 AS TEXT)`, which SQLite reads too, and a
//!   boolean column compares with `TRUE`, which both planners match to their index.
//! - A write is one statement guarded by its own `WHERE` (revision, state) that hands the row
//!   back with `RETURNING` (SQLite has it since 3.35; sqlx bundles 3.46). On PostgreSQL, check
//!   and write are then atomic without a lock held across round trips; SQLite, whose writes
//!   all go through one connection, answers the same either way.
//! - The code is generic over `sqlx::Database`, not run through `sqlx::Any` (which would lose
//!   SQLite's pool options and PostgreSQL's `LISTEN`) nor stamped out twice by a macro (whose
//!   body rustfmt does not format and type errors point into vaguely). Its price is the `where`
//!   clause of the one `impl Store`: the types the SQL binds and the rows it reads.
//!
//! What does differ is [`Dialect`]: how a change is logged (PostgreSQL orders and announces
//! it), how a read transaction sees one snapshot, and what a backend keeps beside its pools.

use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::encode::Encode;
use sqlx::query::Query;
use sqlx::{Database, Executor, FromRow, IntoArguments, Pool, Transaction, Type};

use crate::domain::access::Viewer;
use crate::domain::agent::Visibility;
use crate::domain::deprecation::Deprecation;
use crate::domain::health::{self, ProbeCount, ProbeOutcome, Uptime};
use crate::domain::org::OrgRole;
use crate::domain::scan::{self, Severity};
use crate::domain::surface::{Inspection, Surface};
use crate::domain::{AgentDraft, DEFAULT_VERSION, Health, HealthStatus};
use crate::timestamp::Timestamp;

use super::row::{
    AUDIT_COLUMNS, AgentRow, AuditRow, BINDING_COLUMNS, BindingRow, ChangeRow, DRAFT_COLUMNS,
    DraftRow, EmbeddingRow, MEMBER_COLUMNS, MemberRow, MirrorRow, NAMESPACE_COLUMNS, NamespaceRow,
    ORG_COLUMNS, OrgRow, SessionRow, SnapshotRow, StepRow, TRANSFER_COLUMNS, TokenRow, TransferRow,
    VersionRow, from_json, recent_skips, scopes_column, to_json,
};
use super::{
    Agent, AgentState, AgentVersion, AuditEntry, AuditQuery, BindingRecord, Change, ChangeKind,
    MemberRecord, MirrorPage, MirrorRecord, MirrorSkip, MirrorWritten, NamespaceRecord, OrgRecord,
    PlaygroundSession, SessionStep, Store, StoreError, StoreResult, StoredEmbedding, TokenGrant,
    TokenRecord, TransferRecord, TransferStatus, VerificationLevel, VersionSnapshot,
    WebSessionRecord,
};

/// What one backend does differently from the shared SQL.
#[async_trait]
pub trait Dialect: Database {
    /// What the store keeps beside its pools: PostgreSQL's change listener.
    type Feed: Send + Sync + 'static;

    /// Logs one change: inserts `$1`…`$7` (agent id, package name, kind, at, public, version,
    /// audience) into `agent_changes`. `log_change` binds any further parameter.
    const LOG_CHANGE: &'static str;

    /// Run first in a read transaction that must see one snapshot, where `BEGIN` does not.
    const READ_SNAPSHOT: Option<&'static str>;

    /// Appended to the subquery that picks due probes, so concurrent claims skip the rows
    /// another transaction is claiming instead of waiting for it.
    const SKIP_LOCKED: &'static str;

    /// Run `insert` (`LOG_CHANGE` with its seven values bound) in `tx`, as the last statement
    /// before commit.
    async fn log_change<'q>(
        feed: &Self::Feed,
        tx: &mut Self::Connection,
        insert: Query<'q, Self, Self::Arguments<'q>>,
    ) -> StoreResult<()>;

    /// `Store::wait_for_change`: by default, just sleep (followers poll).
    async fn wait_for_change(_feed: &Self::Feed, timeout: Duration) {
        tokio::time::sleep(timeout).await;
    }

    fn rows_affected(result: &Self::QueryResult) -> u64;
}

/// The store over one backend's pools.
pub struct SqlStore<DB: Dialect> {
    /// Writes: SQLite's single connection, or PostgreSQL's pool.
    pub(super) writer: Pool<DB>,
    /// Reads: SQLite's read-only pool, or the same pool as `writer` on PostgreSQL.
    pub(super) reader: Pool<DB>,
    pub(super) feed: DB::Feed,
}

/// Column names for `format!`: those of each list (`a, b`) in turn, each after a prefix (`v.`),
/// separated by `, `.
#[derive(Clone, Copy)]
struct Columns<'a>(&'a str, &'a [&'a str]);

impl Columns<'_> {
    fn names(&self) -> impl Iterator<Item = &str> {
        self.1.iter().flat_map(|list| list.split(", "))
    }

    /// `$first, …`: one parameter per column.
    fn placeholders(&self, first: usize) -> String {
        params(first, self.names().count())
    }

    /// `column = $first, …`: each column set to its parameter.
    fn set_from(&self, first: usize) -> String {
        self.names()
            .zip(first..)
            .map(|(column, n)| format!("{column} = ${n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `column = excluded.column, …`: each column set to the value an upsert was refused.
    fn set_excluded(&self) -> String {
        self.names()
            .map(|column| format!("{column} = excluded.{column}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl std::fmt::Display for Columns<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, column) in self.names().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{}{column}", self.0)?;
        }
        Ok(())
    }
}

/// The columns of `agents` beside the draft's (`DRAFT_COLUMNS`) that an insert writes, in the
/// order `agent_insert` binds them: every one but `health`, which only the prober writes.
const AGENT_OWN: &str = "id, package_name, owner, state, verification_level, \
    verification_token, revision, version, probe_message, created_at, updated_at, published_at, \
    urn, provenance, visibility, inspect_tools";

const AGENT_COLUMNS: Columns = Columns(
    "",
    &[AGENT_OWN, "health, surface, deprecation", DRAFT_COLUMNS],
);

const CHANGE_COLUMNS: &str = "seq, agent_id, package_name, kind, at, public, version";

/// The key of `agent_versions`, and the columns beside it and the draft's that a version
/// row writes, in the order `version_row` binds them.
const VERSION_KEY: &str = "agent_id, version";
const VERSION_STAMP: &str = "revision, published_at";

/// The columns of `agent_versions` (as `v`) that hold a version and its fields.
const SNAPSHOT_COLUMNS: Columns = Columns(
    "v.",
    &["version", VERSION_STAMP, "deprecation", DRAFT_COLUMNS],
);

/// The columns a version row writes.
const VERSION_WRITTEN: Columns = Columns("", &[VERSION_KEY, VERSION_STAMP, DRAFT_COLUMNS]);

/// Records an agent's draft as its current version: a new row of its history, or the row of
/// that version replaced (a version that cannot be bumped changed in place).
static VERSION_UPSERT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO agent_versions ({VERSION_WRITTEN}) VALUES ({}) \
         ON CONFLICT (agent_id, version) DO UPDATE SET {}",
        VERSION_WRITTEN.placeholders(1),
        Columns("", &[VERSION_STAMP, DRAFT_COLUMNS]).set_excluded()
    )
});

/// Records an earlier version of an agent, unless its history has that version already or
/// the agent is gone.
static VERSION_KEEP: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO agent_versions ({VERSION_WRITTEN}) SELECT {} \
         WHERE EXISTS (SELECT 1 FROM agents WHERE id = $1) \
         ON CONFLICT (agent_id, version) DO NOTHING",
        VERSION_WRITTEN.placeholders(1)
    )
});

/// `sql` (writing `VERSION_WRITTEN`) with one version row bound.
fn version_row<'q, DB: Dialect>(
    sql: &'q str,
    agent_id: &'q str,
    version: &'q str,
    revision: i64,
    published_at: Timestamp,
    columns: &'q DraftRow,
) -> Query<'q, DB, DB::Arguments<'q>>
where
    &'q str: Encode<'q, DB> + Type<DB>,
    String: Encode<'q, DB> + Type<DB>,
    Option<String>: Encode<'q, DB>,
    i64: Encode<'q, DB> + Type<DB>,
{
    let query = sqlx::query(sql)
        .bind(agent_id)
        .bind(version)
        .bind(revision)
        .bind(published_at.micros());
    columns.bind(query)
}

/// `$first, …`: `count` numbered parameters, for a list of values in `IN (…)`.
fn params(first: usize, count: usize) -> String {
    (first..first + count)
        .map(|n| format!("${n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

const TOKEN_COLUMNS: &str = "id, owner, scopes, secret_hash, created_at, expires_at, revoked_at";

/// Who a change reaches in the feed: everyone (`public`), or only the viewers of one owner's
/// private agents (`audience`), or nobody (a STAGE or unlisted agent's change).
#[derive(Debug, Clone, Copy)]
struct Reach<'q> {
    public: bool,
    audience: Option<&'q str>,
}

impl<'q> Reach<'q> {
    const NOBODY: Self = Self {
        public: false,
        audience: None,
    };

    /// A change that leaves `agent` as listed as it was: public when it is listed, its
    /// owner's viewers' when it is a private ACTIVE agent.
    fn of(agent: &'q Agent) -> Self {
        Self {
            public: agent.is_listed(),
            audience: private_audience(agent),
        }
    }
}

/// The owner whose viewers see `agent` in lists beside the public: a private ACTIVE agent's.
fn private_audience(agent: &Agent) -> Option<&str> {
    (agent.is_indexed() && agent.visibility() == Visibility::Private)
        .then_some(agent.owner.as_str())
}

/// Writes the scanner's verdict on agent `id`'s texts. With `backfill` (a verdict found
/// outside a write), only while the agent exists, and never over a verdict of this scanner:
/// one written meanwhile, with a write of newer texts, stays.
fn scan_upsert<'q, DB: Dialect>(
    id: &'q str,
    severity: Severity,
    backfill: bool,
) -> Query<'q, DB, DB::Arguments<'q>>
where
    &'q str: Encode<'q, DB> + Type<DB>,
{
    let sql = if backfill {
        "INSERT INTO agent_scans (agent_id, max_severity, scanner) \
         SELECT id, $2, $3 FROM agents WHERE id = $1 \
         ON CONFLICT (agent_id) DO UPDATE SET max_severity = excluded.max_severity, \
         scanner = excluded.scanner WHERE agent_scans.scanner <> excluded.scanner"
    } else {
        "INSERT INTO agent_scans (agent_id, max_severity, scanner) VALUES ($1, $2, $3) \
         ON CONFLICT (agent_id) DO UPDATE SET max_severity = excluded.max_severity, \
         scanner = excluded.scanner"
    };
    sqlx::query(sql)
        .bind(id)
        .bind(severity.as_str())
        .bind(scan::SCANNER)
}

/// `DB::LOG_CHANGE` with the values of one change bound.
fn change_insert<'q, DB: Dialect>(
    agent: &'q Agent,
    kind: ChangeKind,
    at: Timestamp,
    reach: Reach<'q>,
) -> Query<'q, DB, DB::Arguments<'q>>
where
    &'q str: Encode<'q, DB> + Type<DB>,
    String: Type<DB>,
    Option<String>: Encode<'q, DB>,
    i64: Encode<'q, DB> + Type<DB>,
    bool: Encode<'q, DB> + Type<DB>,
{
    logged_change(
        &agent.id,
        agent.package_name(),
        agent.version(),
        kind,
        at,
        reach,
    )
}

/// `DB::LOG_CHANGE` for an agent known by id, package name and version.
fn logged_change<'q, DB: Dialect>(
    agent_id: &'q str,
    package_name: &'q str,
    version: &'q str,
    kind: ChangeKind,
    at: Timestamp,
    reach: Reach<'q>,
) -> Query<'q, DB, DB::Arguments<'q>>
where
    &'q str: Encode<'q, DB> + Type<DB>,
    String: Type<DB>,
    Option<String>: Encode<'q, DB>,
    i64: Encode<'q, DB> + Type<DB>,
    bool: Encode<'q, DB> + Type<DB>,
{
    // A public change needs no audience: every viewer reads it.
    let audience = reach.audience.filter(|_| !reach.public).map(str::to_owned);
    sqlx::query(DB::LOG_CHANGE)
        .bind(agent_id)
        .bind(package_name)
        .bind(kind.as_str())
        .bind(at.micros())
        .bind(reach.public)
        .bind(version)
        .bind(audience)
}

/// Inserts an agent (`agent_insert` binds it).
static AGENT_INSERT: LazyLock<String> = LazyLock::new(|| {
    let columns = Columns("", &[AGENT_OWN, DRAFT_COLUMNS]);
    format!(
        "INSERT INTO agents ({columns}) VALUES ({})",
        columns.placeholders(1)
    )
});

/// `AGENT_INSERT` with every column of `agent` bound.
fn agent_insert<'q, DB: Dialect>(
    agent: &'q Agent,
    columns: &'q DraftRow,
    provenance: Option<&'q str>,
) -> Query<'q, DB, DB::Arguments<'q>>
where
    &'q str: Encode<'q, DB> + Type<DB>,
    Option<&'q str>: Encode<'q, DB>,
    String: Encode<'q, DB> + Type<DB>,
    Option<String>: Encode<'q, DB>,
    i64: Encode<'q, DB> + Type<DB>,
    Option<i64>: Encode<'q, DB>,
    bool: Encode<'q, DB> + Type<DB>,
{
    let insert = sqlx::query(&AGENT_INSERT)
        .bind(agent.id.as_str())
        .bind(agent.package_name())
        .bind(agent.owner.as_str())
        .bind(agent.state.as_str())
        .bind(agent.verification_level.as_str())
        .bind(agent.verification_token.as_str())
        .bind(agent.revision)
        .bind(&agent.draft.version)
        .bind(&agent.draft.probe_message)
        .bind(agent.created_at.micros())
        .bind(agent.updated_at.micros())
        .bind(agent.published_at.map(Timestamp::micros))
        .bind(agent.urn.as_str())
        .bind(provenance)
        .bind(agent.draft.visibility.unwrap_or_default().as_str())
        .bind(agent.draft.inspect_tools.unwrap_or(true));
    columns.bind(insert)
}

/// Writes a draft over agent `$5` at `$3`: its version (`$1`), probe message (`$2`) and draft
/// columns (from `$7`), and its provenance unless `$4` is NULL; only at revision `$6` unless
/// that is NULL. Hands the agent back.
static AGENT_UPDATE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE agents SET version = $1, probe_message = $2, updated_at = $3, \
         revision = revision + 1, provenance = COALESCE($4, provenance), \
         visibility = COALESCE(CAST(${} AS TEXT), visibility), \
         inspect_tools = COALESCE(CAST(${} AS BOOLEAN), inspect_tools), {} \
         WHERE id = $5 AND (CAST($6 AS BIGINT) IS NULL OR revision = $6) \
         RETURNING {AGENT_COLUMNS}",
        7 + DRAFT_COLUMNS.split(',').count(),
        8 + DRAFT_COLUMNS.split(',').count(),
        Columns("", &[DRAFT_COLUMNS]).set_from(7)
    )
});

/// `AGENT_UPDATE` with its values bound.
fn agent_update<'q, DB: Dialect>(
    id: &'q str,
    draft: &'q AgentDraft,
    columns: &'q DraftRow,
    expected_revision: Option<i64>,
    provenance: Option<&'q str>,
    at: Timestamp,
) -> Query<'q, DB, DB::Arguments<'q>>
where
    &'q str: Encode<'q, DB> + Type<DB>,
    Option<&'q str>: Encode<'q, DB>,
    String: Encode<'q, DB> + Type<DB>,
    Option<String>: Encode<'q, DB>,
    i64: Encode<'q, DB> + Type<DB>,
    Option<i64>: Encode<'q, DB>,
    Option<bool>: Encode<'q, DB>,
    bool: Type<DB>,
{
    let update = sqlx::query(&AGENT_UPDATE)
        .bind(&draft.version)
        .bind(&draft.probe_message)
        .bind(at.micros())
        .bind(provenance)
        .bind(id)
        .bind(expected_revision);
    columns
        .bind(update)
        .bind(draft.visibility.map(|visibility| visibility.as_str()))
        .bind(draft.inspect_tools)
}

/// After `agent`'s row is written in `tx` at `at`: its draft as its current version (a new row
/// of its history, or that version's row replaced), and its change: `created` (with `published`
/// when it starts ACTIVE) for a new agent, else `updated`.
async fn log_write<DB: Dialect>(
    feed: &DB::Feed,
    tx: &mut Transaction<'_, DB>,
    agent: &Agent,
    columns: &DraftRow,
    at: Timestamp,
    inserted: bool,
    before: Option<(bool, Visibility)>,
) -> StoreResult<Severity>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> String: Encode<'q, DB> + Type<DB>,
    for<'q> Option<String>: Encode<'q, DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'q> bool: Encode<'q, DB> + Type<DB>,
{
    let (id, version) = (&agent.id, agent.version());
    version_row(&VERSION_UPSERT, id, version, agent.revision, at, columns)
        .execute(&mut **tx)
        .await?;
    // The scanner reads the texts as they are written, so the index need not at start-up.
    let severity = scan::scan(&agent.draft).max_severity;
    scan_upsert::<DB>(id, severity, false)
        .execute(&mut **tx)
        .await?;
    // Public changes are those of a listed agent (ACTIVE and public), before or after; the
    // other changes of a private ACTIVE agent, before or after, reach its owner's viewers.
    let reach = Reach::of(agent);
    let changes = if inserted {
        let published = agent.state == AgentState::Active;
        [
            Some((ChangeKind::Created, reach)),
            published.then_some((ChangeKind::Published, reach)),
        ]
    } else {
        // Unless told otherwise, an update keeps the agent's state and visibility.
        let active = agent.state == AgentState::Active;
        let (was_active, was) = before.unwrap_or((active, agent.visibility()));
        let kind_of = |before: bool, after: bool| match (before, after) {
            // Hidden: the feed's readers drop it, as for an unpublish.
            (true, false) => ChangeKind::Unpublished,
            (false, true) => ChangeKind::Published,
            _ => ChangeKind::Updated,
        };
        let was_public = was_active && was == Visibility::Public;
        let change = if was_public || reach.public {
            (
                kind_of(was_public, reach.public),
                Reach {
                    public: true,
                    ..reach
                },
            )
        } else if was_active && was == Visibility::Private || reach.audience.is_some() {
            // Only the owner's viewers read it: to them a private agent is listed.
            let was_indexed = was_active && was != Visibility::Unlisted;
            let reach = Reach {
                public: false,
                audience: Some(agent.owner.as_str()),
            };
            (kind_of(was_indexed, agent.is_indexed()), reach)
        } else {
            (ChangeKind::Updated, Reach::NOBODY)
        };
        [Some(change), None]
    };
    for (kind, reach) in changes.into_iter().flatten() {
        let change = change_insert(agent, kind, at, reach);
        DB::log_change(feed, &mut **tx, change).await?;
        let action = match (inserted, kind) {
            (false, ChangeKind::Unpublished | ChangeKind::Published) => "agent.updated",
            _ => kind_action(kind),
        };
        audit_write::<DB>(&mut **tx, action, agent, at, None).await?;
    }
    Ok(severity)
}

/// Delete agent `id` in `tx` with its probe schedule and history, and log it; the agent as it
/// was, or `None` when there is none.
async fn delete_in<DB: Dialect>(
    feed: &DB::Feed,
    tx: &mut Transaction<'_, DB>,
    id: &str,
    at: Timestamp,
) -> StoreResult<Option<Agent>>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> String: Encode<'q, DB> + Type<DB>,
    for<'q> Option<String>: Encode<'q, DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'q> bool: Encode<'q, DB> + Type<DB>,
    for<'r> AgentRow: FromRow<'r, DB::Row>,
{
    let sql = format!("DELETE FROM agents WHERE id = $1 RETURNING {AGENT_COLUMNS}");
    let row: Option<AgentRow> = sqlx::query_as(&sql)
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let deleted = Agent::try_from(row)?;
    for table in [
        "agent_probes",
        "agent_probe_days",
        "agent_scans",
        "agent_surfaces",
    ] {
        sqlx::query(&format!("DELETE FROM {table} WHERE agent_id = $1"))
            .bind(id)
            .execute(&mut **tx)
            .await?;
    }
    let change = change_insert(&deleted, ChangeKind::Deleted, at, Reach::of(&deleted));
    DB::log_change(feed, &mut **tx, change).await?;
    audit_write::<DB>(&mut **tx, "agent.deleted", &deleted, at, None).await?;
    Ok(Some(deleted))
}

/// The columns of `mirror_sources` (as `m`), with the count of the source's agents.
const MIRROR_COLUMNS: &str = "m.id, m.kind, m.url, m.position, m.walked, m.skipped, \
    m.collisions, m.last_success, m.last_attempt, m.last_error, m.failures, m.next_at, \
    m.lease_owner, m.lease_until, \
    (SELECT COUNT(*) FROM agents a WHERE a.owner = 'mirror:' || m.id) AS entries, \
    m.recent_skips";

/// Days of probe history kept per agent: enough for the 30-day uptime.
const PROBE_DAYS_KEPT: i64 = 31;

/// Agent `id` as it stands in `tx` after a guarded write matched no row (`None`: it is gone,
/// else its state failed the guard). Rolls `tx` back.
async fn missed<DB: Database>(mut tx: Transaction<'_, DB>, id: &str) -> StoreResult<Option<Agent>>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'r> AgentRow: FromRow<'r, DB::Row>,
{
    let sql = format!("SELECT {AGENT_COLUMNS} FROM agents WHERE id = $1");
    let row: Option<AgentRow> = sqlx::query_as(&sql)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
    tx.rollback().await?;
    row.map(Agent::try_from).transpose()
}

fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}

/// An insert's outcome, with a taken unique key (a token's hash, a session's id) as `Conflict`.
fn taken_is_conflict<T>(inserted: Result<T, sqlx::Error>, conflict: &str) -> StoreResult<()> {
    match inserted {
        Err(err) if is_unique_violation(&err) => Err(StoreError::Conflict(conflict.to_owned())),
        other => other.map(|_| ()).map_err(StoreError::from),
    }
}

/// PostgreSQL text cannot hold U+0000, so no stored key does on either backend: a lookup by
/// such a key finds nothing without asking (PostgreSQL would answer with an error).
fn holds_nul(key: &str) -> bool {
    key.contains('\0')
}

/// The audit action of a change to an agent.
fn kind_action(kind: ChangeKind) -> &'static str {
    match kind {
        ChangeKind::Created => "agent.created",
        ChangeKind::Updated => "agent.updated",
        ChangeKind::Published => "agent.published",
        ChangeKind::Unpublished => "agent.unpublished",
        ChangeKind::Verified => "agent.verified",
        ChangeKind::Deleted => "agent.deleted",
        ChangeKind::Health => "agent.health",
        ChangeKind::Drift => "agent.drift",
        ChangeKind::Deprecated => "agent.deprecated",
        ChangeKind::Undeprecated => "agent.undeprecated",
    }
}

/// An audit row of `action` at `at` by the current request's actor; `None` outside a request.
pub(super) fn request_entry(action: &str, at: Timestamp) -> Option<AuditEntry> {
    let context = crate::audit::current()?;
    Some(AuditEntry::by(
        context.actor().as_ref(),
        context.client.clone(),
        action,
        at,
    ))
}

/// The insert of `entry`.
fn audit_insert<'q, DB: Dialect>(entry: AuditEntry) -> Query<'q, DB, DB::Arguments<'q>>
where
    String: Encode<'q, DB> + Type<DB>,
    Option<String>: Encode<'q, DB>,
    i64: Encode<'q, DB> + Type<DB>,
{
    static INSERT: LazyLock<String> = LazyLock::new(|| {
        format!(
            "INSERT INTO audit_log ({AUDIT_COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
        )
    });
    sqlx::query(&INSERT)
        .bind(entry.at.micros())
        .bind(entry.actor)
        .bind(entry.actor_kind)
        .bind(entry.token_id)
        .bind(entry.session_id)
        .bind(entry.client)
        .bind(entry.action)
        .bind(entry.target)
        .bind(entry.agent_id)
        .bind(entry.package_name)
        .bind(entry.owner)
        .bind(entry.version)
        .bind(entry.outcome)
        .bind(entry.reason)
}

/// In a write's transaction: its audit row, when the write runs inside a request (a mirror's
/// or the prober's writes have none).
async fn audit_write<DB: Dialect>(
    conn: &mut DB::Connection,
    action: &str,
    agent: &Agent,
    at: Timestamp,
    reason: Option<String>,
) -> StoreResult<()>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> String: Encode<'q, DB> + Type<DB>,
    for<'q> Option<String>: Encode<'q, DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
{
    let Some(mut entry) = request_entry(action, at) else {
        return Ok(());
    };
    entry.target = Some(agent.id.clone());
    entry.agent_id = Some(agent.id.clone());
    entry.package_name = Some(agent.package_name().to_owned());
    entry.owner = Some(agent.owner.clone());
    entry.version = Some(agent.version().to_owned());
    entry.reason = reason;
    audit_insert::<DB>(entry).execute(conn).await?;
    Ok(())
}

/// In a transaction: the audit row of a write that is not an agent's (a token, an organisation,
/// a transfer), when it runs inside a request.
async fn audit_other<DB: Dialect>(
    conn: &mut DB::Connection,
    action: &str,
    target: &str,
    owner: Option<&str>,
    reason: Option<String>,
    at: Timestamp,
) -> StoreResult<()>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> String: Encode<'q, DB> + Type<DB>,
    for<'q> Option<String>: Encode<'q, DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
{
    let Some(mut entry) = request_entry(action, at) else {
        return Ok(());
    };
    entry.target = Some(target.to_owned());
    entry.owner = owner.map(str::to_owned);
    entry.reason = reason;
    audit_insert::<DB>(entry).execute(conn).await?;
    Ok(())
}

/// Hold organisation `org`'s row for the rest of `tx`, so concurrent changes to its members
/// (two admins demoting each other) are made one after the other.
async fn lock_org<DB: Dialect>(tx: &mut Transaction<'_, DB>, org: &str) -> StoreResult<()>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
{
    let locked = sqlx::query("UPDATE orgs SET name = name WHERE name = $1")
        .bind(org)
        .execute(&mut **tx)
        .await?;
    if DB::rows_affected(&locked) == 0 {
        return Err(StoreError::NotFound);
    }
    Ok(())
}

/// Commit `tx` unless it leaves organisation `org` without an admin (then `Conflict`).
async fn keep_an_admin<DB: Dialect>(mut tx: Transaction<'_, DB>, org: &str) -> StoreResult<()>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'r> (i64,): FromRow<'r, DB::Row>,
{
    let (admins,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM org_members WHERE org = $1 AND role = 'admin'")
            .bind(org)
            .fetch_one(&mut *tx)
            .await?;
    if admins == 0 {
        tx.rollback().await?;
        return Err(StoreError::Conflict(
            "an organisation keeps at least one admin: make another member admin first".to_owned(),
        ));
    }
    tx.commit().await?;
    Ok(())
}

/// The insert of `transfer`.
fn transfer_insert<DB: Dialect>(transfer: &TransferRecord) -> Query<'_, DB, DB::Arguments<'_>>
where
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'q> Option<i64>: Encode<'q, DB>,
{
    static INSERT: LazyLock<String> = LazyLock::new(|| {
        format!(
            "INSERT INTO transfers ({TRANSFER_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
        )
    });
    sqlx::query(&INSERT)
        .bind(transfer.id.as_str())
        .bind(transfer.agent_id.as_str())
        .bind(transfer.package_name.as_str())
        .bind(transfer.from_owner.as_str())
        .bind(transfer.to_owner.as_str())
        .bind(transfer.requested_by.as_str())
        .bind(transfer.status.as_str())
        .bind(transfer.created_at.micros())
        .bind(transfer.resolved_at.map(Timestamp::micros))
}

/// Give `transfer`'s agent to its receiver in `tx`, if it still belongs to the sender, and log
/// the change; the agent as it now is.
async fn move_agent<DB: Dialect>(
    feed: &DB::Feed,
    tx: &mut Transaction<'_, DB>,
    transfer: &TransferRecord,
    at: Timestamp,
) -> StoreResult<Option<Agent>>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> String: Encode<'q, DB> + Type<DB>,
    for<'q> Option<String>: Encode<'q, DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'q> bool: Encode<'q, DB> + Type<DB>,
    for<'r> AgentRow: FromRow<'r, DB::Row>,
{
    let sql = format!(
        "UPDATE agents SET owner = $1, updated_at = $2, revision = revision + 1 \
         WHERE id = $3 AND owner = $4 RETURNING {AGENT_COLUMNS}"
    );
    let row: Option<AgentRow> = sqlx::query_as(&sql)
        .bind(transfer.to_owner.as_str())
        .bind(at.micros())
        .bind(transfer.agent_id.as_str())
        .bind(transfer.from_owner.as_str())
        .fetch_optional(&mut **tx)
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let moved = Agent::try_from(row)?;
    if let Some(from) = private_audience(&moved).map(|_| transfer.from_owner.as_str()) {
        // A private agent leaves its former owner's viewers: for them, it is gone.
        let gone = Reach {
            public: false,
            audience: Some(from),
        };
        let change = change_insert(&moved, ChangeKind::Unpublished, at, gone);
        DB::log_change(feed, &mut **tx, change).await?;
    }
    let change = change_insert(&moved, ChangeKind::Updated, at, Reach::of(&moved));
    DB::log_change(feed, &mut **tx, change).await?;
    let reason = format!("from {} to {}", transfer.from_owner, transfer.to_owner);
    audit_write::<DB>(&mut **tx, "agent.transferred", &moved, at, Some(reason)).await?;
    Ok(Some(moved))
}

impl<DB: Dialect> SqlStore<DB>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> Option<&'q str>: Encode<'q, DB>,
{
    /// Store `token` with its grant, if any, and its audit row, in one transaction.
    async fn insert_token_with(
        &self,
        token: &TokenRecord,
        grant: Option<&TokenGrant>,
    ) -> StoreResult<()>
    where
        for<'q> String: Encode<'q, DB> + Type<DB>,
        for<'q> Option<String>: Encode<'q, DB>,
        for<'q> i64: Encode<'q, DB> + Type<DB>,
        for<'q> Option<i64>: Encode<'q, DB>,
        for<'q> bool: Encode<'q, DB> + Type<DB>,
    {
        let sql = format!(
            "INSERT INTO tokens ({TOKEN_COLUMNS}, namespaces, issuer, restricted) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
        );
        let namespaces = grant.map(|grant| to_json(&grant.namespaces)).transpose()?;
        let issuer = grant.map(|grant| to_json(&grant.issuer)).transpose()?;
        let mut tx = self.writer.begin().await?;
        let inserted = sqlx::query(&sql)
            .bind(token.id.clone())
            .bind(token.owner.clone())
            .bind(scopes_column(&token.scopes))
            .bind(token.secret_hash.clone())
            .bind(token.created_at.micros())
            .bind(token.expires_at.map(Timestamp::micros))
            .bind(token.revoked_at.map(Timestamp::micros))
            .bind(namespaces)
            .bind(issuer)
            // Without a grant the flag restricts nothing: there are no namespaces.
            .bind(grant.is_none_or(|grant| grant.restricted))
            .execute(&mut *tx)
            .await;
        taken_is_conflict(inserted, "token already exists")?;
        let (action, reason) = match grant {
            Some(grant) if grant.restricted => ("token.minted", grant.namespaces.join(", ")),
            Some(grant) => ("token.created", grant.namespaces.join(", ")),
            None => ("token.created", scopes_column(&token.scopes)),
        };
        audit_other::<DB>(
            &mut tx,
            action,
            &token.id,
            Some(&token.owner),
            Some(reason),
            token.created_at,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Delete the row of `table` whose `key` column is `value`, only `owner`'s unless `None`
    /// (the callers' NUL checks come first); whether there was one.
    async fn delete_owned(
        &self,
        table: &str,
        key: &str,
        value: &str,
        owner: Option<&str>,
    ) -> StoreResult<bool> {
        let sql = format!(
            "DELETE FROM {table} WHERE {key} = $1 AND (CAST($2 AS TEXT) IS NULL OR owner = $2)"
        );
        let deleted = sqlx::query(&sql)
            .bind(value)
            .bind(owner)
            .execute(&self.writer)
            .await?;
        Ok(DB::rows_affected(&deleted) > 0)
    }
}

#[async_trait]
impl<DB: Dialect> Store for SqlStore<DB>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> Option<&'q str>: Encode<'q, DB>,
    for<'q> String: Encode<'q, DB> + Type<DB>,
    for<'q> Option<String>: Encode<'q, DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'q> Option<i64>: Encode<'q, DB>,
    for<'q> bool: Encode<'q, DB> + Type<DB>,
    for<'q> Vec<u8>: Encode<'q, DB> + Type<DB>,
    for<'r> (i64,): FromRow<'r, DB::Row>,
    for<'r> (Option<i64>,): FromRow<'r, DB::Row>,
    for<'q> Option<bool>: Encode<'q, DB>,
    for<'r> (String, i64): FromRow<'r, DB::Row>,
    for<'r> (String, String): FromRow<'r, DB::Row>,
    for<'r> (String, Option<String>): FromRow<'r, DB::Row>,
    for<'r> (String, Option<String>, Option<String>): FromRow<'r, DB::Row>,
    for<'r> (Option<String>, Option<String>, bool): FromRow<'r, DB::Row>,
    for<'r> (String,): FromRow<'r, DB::Row>,
    for<'r> (String, String, String, String, i64, i64): FromRow<'r, DB::Row>,
    for<'r> (i64, i64, i64, i64): FromRow<'r, DB::Row>,
    for<'r> (String, String, i64): FromRow<'r, DB::Row>,
    for<'r> AgentRow: FromRow<'r, DB::Row>,
    for<'r> ChangeRow: FromRow<'r, DB::Row>,
    for<'r> VersionRow: FromRow<'r, DB::Row>,
    for<'r> SnapshotRow: FromRow<'r, DB::Row>,
    for<'r> TokenRow: FromRow<'r, DB::Row>,
    for<'r> EmbeddingRow: FromRow<'r, DB::Row>,
    for<'r> SessionRow: FromRow<'r, DB::Row>,
    for<'r> StepRow: FromRow<'r, DB::Row>,
    for<'r> MirrorRow: FromRow<'r, DB::Row>,
    for<'r> NamespaceRow: FromRow<'r, DB::Row>,
    for<'r> BindingRow: FromRow<'r, DB::Row>,
    for<'r> OrgRow: FromRow<'r, DB::Row>,
    for<'r> MemberRow: FromRow<'r, DB::Row>,
    for<'r> TransferRow: FromRow<'r, DB::Row>,
    for<'r> AuditRow: FromRow<'r, DB::Row>,
{
    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.reader).await?;
        Ok(())
    }

    async fn insert_agent(&self, agent: &Agent) -> StoreResult<()> {
        let columns = DraftRow::of(&agent.draft)?;
        let provenance = agent.provenance.as_ref().map(to_json).transpose()?;
        let mut tx = self.writer.begin().await?;
        let inserted = agent_insert(agent, &columns, provenance.as_deref())
            .execute(&mut *tx)
            .await;
        match inserted {
            // A racing insert of the same name waits on the unique index (PostgreSQL) or the
            // writer connection (SQLite) until the first commits, then fails here: one 201,
            // one 409.
            Err(err) if is_unique_violation(&err) => {
                tx.rollback().await?;
                // Which key was taken: the name, or else the identifier.
                let name_taken: Option<(i64,)> =
                    sqlx::query_as("SELECT revision FROM agents WHERE package_name = $1")
                        .bind(agent.package_name())
                        .fetch_optional(&self.writer)
                        .await?;
                return Err(match name_taken {
                    Some(_) => StoreError::Conflict(format!(
                        "package name '{}' is already registered",
                        agent.package_name()
                    )),
                    None => StoreError::IdentifierTaken(agent.urn.to_string()),
                });
            }
            other => other?,
        };
        log_write::<DB>(
            &self.feed,
            &mut tx,
            agent,
            &columns,
            agent.created_at,
            true,
            None,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn find_agent(&self, identifier: &str) -> StoreResult<Option<Agent>> {
        if holds_nul(identifier) {
            return Ok(None);
        }
        let row: Option<AgentRow> = if crate::domain::urn::is_urn(identifier) {
            let sql = format!("SELECT {AGENT_COLUMNS} FROM agents WHERE lower(urn) = $1");
            sqlx::query_as(&sql)
                .bind(identifier.to_ascii_lowercase())
                .fetch_optional(&self.reader)
                .await?
        } else {
            let sql =
                format!("SELECT {AGENT_COLUMNS} FROM agents WHERE id = $1 OR package_name = $2");
            sqlx::query_as(&sql)
                .bind(identifier)
                .bind(identifier.to_lowercase())
                .fetch_optional(&self.reader)
                .await?
        };
        row.map(Agent::try_from).transpose()
    }

    async fn agents_missing_urn(&self, limit: u32) -> StoreResult<Vec<(String, String)>> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT id, package_name FROM agents WHERE urn IS NULL ORDER BY created_at, id LIMIT $1",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.writer)
        .await?;
        Ok(rows)
    }

    async fn set_urn(&self, id: &str, urn: &str) -> StoreResult<()> {
        let written = sqlx::query("UPDATE agents SET urn = $1 WHERE id = $2 AND urn IS NULL")
            .bind(urn)
            .bind(id)
            .execute(&self.writer)
            .await;
        match written {
            Err(err) if is_unique_violation(&err) => {
                Err(StoreError::IdentifierTaken(urn.to_owned()))
            }
            other => other.map(|_| ()).map_err(StoreError::from),
        }
    }

    async fn find_agents_by_id(&self, ids: &[String]) -> StoreResult<Vec<Agent>> {
        // Chunks stay well under either backend's limit on bound parameters.
        const CHUNK: usize = 500;
        let mut found = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(CHUNK) {
            let placeholders = params(1, chunk.len());
            let sql = format!("SELECT {AGENT_COLUMNS} FROM agents WHERE id IN ({placeholders})");
            let mut query = sqlx::query_as::<_, AgentRow>(&sql);
            for id in chunk.iter().filter(|id| !holds_nul(id)) {
                query = query.bind(id.as_str());
            }
            // An id holding NUL matches nothing; bind a value no id has in its place.
            for _ in chunk.iter().filter(|id| holds_nul(id)) {
                query = query.bind("");
            }
            for row in query.fetch_all(&self.reader).await? {
                found.push(Agent::try_from(row)?);
            }
        }
        Ok(found)
    }

    async fn scan_severities(&self, ids: &[String]) -> StoreResult<Vec<(String, Severity)>> {
        const CHUNK: usize = 500;
        let mut found = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(CHUNK) {
            let wanted: Vec<&str> = chunk
                .iter()
                .filter(|id| !holds_nul(id))
                .map(String::as_str)
                .collect();
            if wanted.is_empty() {
                continue;
            }
            let placeholders = params(2, wanted.len());
            let sql = format!(
                "SELECT agent_id, max_severity FROM agent_scans \
                 WHERE scanner = $1 AND agent_id IN ({placeholders})"
            );
            let mut query = sqlx::query_as::<_, (String, String)>(&sql).bind(scan::SCANNER);
            for id in wanted {
                query = query.bind(id);
            }
            for (id, severity) in query.fetch_all(&self.reader).await? {
                // A value this program does not know is scanned again.
                if let Some(severity) = Severity::parse(&severity) {
                    found.push((id, severity));
                }
            }
        }
        Ok(found)
    }

    async fn record_scan_severities(&self, found: &[(String, Severity)]) -> StoreResult<()> {
        for chunk in found.chunks(500) {
            let mut tx = self.writer.begin().await?;
            for (id, severity) in chunk {
                scan_upsert::<DB>(id, *severity, true)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
        }
        Ok(())
    }

    async fn update_agent(
        &self,
        id: &str,
        draft: &AgentDraft,
        expected_revision: Option<i64>,
        at: Timestamp,
    ) -> StoreResult<Agent> {
        let columns = DraftRow::of(draft)?;
        let mut tx = self.writer.begin().await?;
        // Whether it was listed before: an update that changes its visibility is, for the
        // feed, a publish or an unpublish.
        let before: Option<(String, String)> =
            sqlx::query_as("SELECT state, visibility FROM agents WHERE id = $1")
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
        let was = before.map(|(state, visibility)| {
            (
                state == AgentState::Active.as_str(),
                Visibility::parse(&visibility).unwrap_or_default(),
            )
        });
        let row = agent_update(id, draft, &columns, expected_revision, None, at)
            .try_map(|row| AgentRow::from_row(&row))
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else {
            return Err(match missed(tx, id).await? {
                Some(_) => StoreError::VersionMismatch,
                None => StoreError::NotFound,
            });
        };
        let updated = Agent::try_from(row)?;
        log_write::<DB>(&self.feed, &mut tx, &updated, &columns, at, false, was).await?;
        tx.commit().await?;
        Ok(updated)
    }

    async fn transition(
        &self,
        id: &str,
        from: AgentState,
        to: AgentState,
        at: Timestamp,
    ) -> StoreResult<Agent> {
        let published_at = match to {
            AgentState::Active => Some(at.micros()),
            AgentState::Stage => None,
        };
        let mut tx = self.writer.begin().await?;
        let sql = format!(
            "UPDATE agents SET state = $1, published_at = $2, updated_at = $3, \
             revision = revision + 1 WHERE id = $4 AND state = $5 RETURNING {AGENT_COLUMNS}"
        );
        let row: Option<AgentRow> = sqlx::query_as(&sql)
            .bind(to.as_str())
            .bind(published_at)
            .bind(at.micros())
            .bind(id)
            .bind(from.as_str())
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else {
            let Some(current) = missed(tx, id).await? else {
                return Err(StoreError::NotFound);
            };
            return Err(StoreError::InvalidTransition(format!(
                "agent '{}' is {}, not {}",
                current.package_name(),
                current.state.as_str(),
                from.as_str()
            )));
        };
        let updated = Agent::try_from(row)?;
        let kind = match to {
            AgentState::Active => ChangeKind::Published,
            AgentState::Stage => ChangeKind::Unpublished,
        };
        // Listed before or after: the visibility is the same, the state changed.
        let active = Change::is_public(Some(from), Some(to));
        let reach = match updated.visibility() {
            Visibility::Public => Reach {
                public: active,
                audience: None,
            },
            Visibility::Private if active => Reach {
                public: false,
                audience: Some(updated.owner.as_str()),
            },
            _ => Reach::NOBODY,
        };
        let change = change_insert(&updated, kind, at, reach);
        DB::log_change(&self.feed, &mut tx, change).await?;
        audit_write::<DB>(&mut tx, kind_action(kind), &updated, at, None).await?;
        tx.commit().await?;
        Ok(updated)
    }

    async fn set_deprecation(
        &self,
        id: &str,
        version: Option<&str>,
        deprecation: Option<&Deprecation>,
        at: Timestamp,
    ) -> StoreResult<Agent> {
        let mut tx = self.writer.begin().await?;
        let stored = deprecation.map(to_json).transpose()?;
        if let Some(version) = version {
            let done = sqlx::query(
                "UPDATE agent_versions SET deprecation = $1 WHERE agent_id = $2 AND version = $3",
            )
            .bind(stored.clone())
            .bind(id)
            .bind(version)
            .execute(&mut *tx)
            .await?;
            if DB::rows_affected(&done) == 0 {
                tx.rollback().await?;
                return Err(StoreError::NotFound);
            }
        }
        // The agent's own deprecation changes only when no version is named; either way the
        // record changed (its version history shows it), so it takes a new revision.
        let sql = format!(
            "UPDATE agents SET deprecation = CASE WHEN $1 THEN $2 ELSE deprecation END, \
             updated_at = $3, revision = revision + 1 WHERE id = $4 RETURNING {AGENT_COLUMNS}"
        );
        let row: Option<AgentRow> = sqlx::query_as(&sql)
            .bind(version.is_none())
            .bind(stored)
            .bind(at.micros())
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else {
            tx.rollback().await?;
            return Err(StoreError::NotFound);
        };
        let updated = Agent::try_from(row)?;
        let kind = if deprecation.is_some() {
            ChangeKind::Deprecated
        } else {
            ChangeKind::Undeprecated
        };
        // A version's deprecation is logged with that version, the agent's with its current one.
        let version = version.unwrap_or(updated.version());
        let change = logged_change(
            &updated.id,
            updated.package_name(),
            version,
            kind,
            at,
            Reach::of(&updated),
        );
        DB::log_change(&self.feed, &mut tx, change).await?;
        audit_write::<DB>(&mut tx, kind_action(kind), &updated, at, None).await?;
        tx.commit().await?;
        Ok(updated)
    }

    async fn set_verification(
        &self,
        id: &str,
        level: VerificationLevel,
        at: Timestamp,
    ) -> StoreResult<Agent> {
        let mut tx = self.writer.begin().await?;
        let sql = format!(
            "UPDATE agents SET verification_level = $1, updated_at = $2, \
             revision = revision + 1 WHERE id = $3 RETURNING {AGENT_COLUMNS}"
        );
        let row: Option<AgentRow> = sqlx::query_as(&sql)
            .bind(level.as_str())
            .bind(at.micros())
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else {
            tx.rollback().await?;
            return Err(StoreError::NotFound);
        };
        let updated = Agent::try_from(row)?;
        let change = change_insert(&updated, ChangeKind::Verified, at, Reach::of(&updated));
        DB::log_change(&self.feed, &mut tx, change).await?;
        audit_write::<DB>(&mut tx, "agent.verified", &updated, at, None).await?;
        tx.commit().await?;
        Ok(updated)
    }

    async fn delete_agent(&self, id: &str, at: Timestamp) -> StoreResult<bool> {
        let mut tx = self.writer.begin().await?;
        if delete_in::<DB>(&self.feed, &mut tx, id, at)
            .await?
            .is_none()
        {
            tx.rollback().await?;
            return Ok(false);
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn agent_versions(&self, agent_id: &str) -> StoreResult<Vec<AgentVersion>> {
        if holds_nul(agent_id) {
            return Ok(Vec::new());
        }
        let rows: Vec<VersionRow> = sqlx::query_as(
            "SELECT version, revision, published_at, deprecation FROM agent_versions \
             WHERE agent_id = $1 \
             ORDER BY revision DESC, version",
        )
        .bind(agent_id)
        .fetch_all(&self.reader)
        .await?;
        Ok(rows.into_iter().map(AgentVersion::from).collect())
    }

    async fn find_agent_version(
        &self,
        agent_id: &str,
        version: &str,
    ) -> StoreResult<Option<VersionSnapshot>> {
        if holds_nul(agent_id) || holds_nul(version) {
            return Ok(None);
        }
        let sql = format!(
            "SELECT a.package_name, {SNAPSHOT_COLUMNS} FROM agent_versions v \
             JOIN agents a ON a.id = v.agent_id WHERE v.agent_id = $1 AND v.version = $2"
        );
        let row: Option<SnapshotRow> = sqlx::query_as(&sql)
            .bind(agent_id)
            .bind(version)
            .fetch_optional(&self.reader)
            .await?;
        row.map(VersionSnapshot::try_from).transpose()
    }

    async fn list_agents(
        &self,
        owners: Option<&[&str]>,
        after_id: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<Agent>> {
        let owners: Option<Vec<&str>> =
            owners.map(|owners| owners.iter().copied().filter(|o| !holds_nul(o)).collect());
        if owners.as_ref().is_some_and(Vec::is_empty) {
            return Ok(Vec::new());
        }
        // One placeholder per owner (a person's few namespaces), after the page's two.
        let filter = match &owners {
            None => String::new(),
            Some(owners) => format!("owner IN ({}) AND ", params(3, owners.len())),
        };
        let sql = format!(
            "SELECT {AGENT_COLUMNS} FROM agents WHERE {filter}id > $1 ORDER BY id LIMIT $2"
        );
        // A plain range on the primary key (see `agents_page`).
        let mut query = sqlx::query_as::<_, AgentRow>(&sql)
            .bind(after_id.unwrap_or(""))
            .bind(i64::from(limit));
        for owner in owners.iter().flatten() {
            query = query.bind(*owner);
        }
        let rows: Vec<AgentRow> = query.fetch_all(&self.reader).await?;
        rows.into_iter().map(Agent::try_from).collect()
    }

    async fn all_agents(&self, state: Option<AgentState>) -> StoreResult<Vec<Agent>> {
        let sql = format!(
            "SELECT {AGENT_COLUMNS} FROM agents WHERE (CAST($1 AS TEXT) IS NULL OR state = $1) \
             ORDER BY id"
        );
        let rows: Vec<AgentRow> = sqlx::query_as(&sql)
            .bind(state.map(AgentState::as_str))
            .fetch_all(&self.reader)
            .await?;
        rows.into_iter().map(Agent::try_from).collect()
    }

    async fn agents_page(
        &self,
        state: Option<AgentState>,
        after_id: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<Agent>> {
        let sql = format!(
            "SELECT {AGENT_COLUMNS} FROM agents WHERE (CAST($1 AS TEXT) IS NULL OR state = $1) \
             AND id > $2 ORDER BY id LIMIT $3"
        );
        // `id > ''` for the first page (every id is longer): a plain range on the primary key,
        // which an `$2 IS NULL OR id > $2` would hide from SQLite's planner (every page then
        // scanned from the first id: a 1M start-up's read took twice as long).
        let rows: Vec<AgentRow> = sqlx::query_as(&sql)
            .bind(state.map(AgentState::as_str))
            .bind(after_id.unwrap_or(""))
            .bind(i64::from(limit))
            .fetch_all(&self.reader)
            .await?;
        rows.into_iter().map(Agent::try_from).collect()
    }

    async fn changes_since(&self, since: i64, limit: u32) -> StoreResult<Vec<Change>> {
        let sql = format!(
            "SELECT {CHANGE_COLUMNS} FROM agent_changes WHERE seq > $1 ORDER BY seq LIMIT $2"
        );
        let rows: Vec<ChangeRow> = sqlx::query_as(&sql)
            .bind(since)
            .bind(i64::from(limit))
            .fetch_all(&self.reader)
            .await?;
        rows.into_iter().map(Change::try_from).collect()
    }

    async fn public_changes_since(
        &self,
        since: i64,
        limit: u32,
        viewer: &Viewer,
    ) -> StoreResult<Vec<Change>> {
        // Public changes, and those of the private agents the viewer sees.
        let audience = match viewer.owners() {
            None => " OR audience IS NOT NULL".to_owned(),
            Some([]) => String::new(),
            Some(owners) => format!(" OR audience IN ({})", params(3, owners.len())),
        };
        let sql = format!(
            "SELECT {CHANGE_COLUMNS} FROM agent_changes WHERE (public = TRUE{audience}) \
             AND seq > $1 ORDER BY seq LIMIT $2"
        );
        let mut query = sqlx::query_as(&sql).bind(since).bind(i64::from(limit));
        for owner in viewer.owners().unwrap_or_default() {
            query = query.bind(owner.as_str());
        }
        let rows: Vec<ChangeRow> = query.fetch_all(&self.reader).await?;
        rows.into_iter().map(Change::try_from).collect()
    }

    async fn latest_change(&self) -> StoreResult<i64> {
        let seq: Option<i64> = sqlx::query_scalar("SELECT MAX(seq) FROM agent_changes")
            .fetch_one(&self.reader)
            .await?;
        Ok(seq.unwrap_or(0))
    }

    async fn wait_for_change(&self, timeout: Duration) {
        DB::wait_for_change(&self.feed, timeout).await;
    }

    async fn embeddings_page(
        &self,
        embedder_id: &str,
        after_agent_id: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<StoredEmbedding>> {
        // A range on the primary key's first column (`agent_id > ''` for the first page); the
        // column compares bytewise on both backends.
        let rows: Vec<EmbeddingRow> = sqlx::query_as(
            "SELECT agent_id, content_hash, vector FROM agent_embeddings \
             WHERE agent_id > $1 AND embedder_id = $2 ORDER BY agent_id LIMIT $3",
        )
        .bind(after_agent_id.unwrap_or(""))
        .bind(embedder_id)
        .bind(i64::from(limit))
        .fetch_all(&self.reader)
        .await?;
        rows.into_iter().map(StoredEmbedding::try_from).collect()
    }

    async fn find_embedding(
        &self,
        agent_id: &str,
        embedder_id: &str,
    ) -> StoreResult<Option<StoredEmbedding>> {
        let row: Option<EmbeddingRow> = sqlx::query_as(
            "SELECT agent_id, content_hash, vector FROM agent_embeddings \
             WHERE agent_id = $1 AND embedder_id = $2",
        )
        .bind(agent_id)
        .bind(embedder_id)
        .fetch_optional(&self.reader)
        .await?;
        row.map(StoredEmbedding::try_from).transpose()
    }

    async fn save_embeddings(
        &self,
        embedder_id: &str,
        embeddings: &[StoredEmbedding],
    ) -> StoreResult<()> {
        // Rows in one order (by agent id) in every transaction: two processes, or a write and
        // the change-log follower, saving vectors of the same agents then wait for each other
        // instead of deadlocking (PostgreSQL detects that only after `deadlock_timeout`, 1 s,
        // and aborts one of them).
        let mut ordered: Vec<&StoredEmbedding> = embeddings.iter().collect();
        ordered.sort_by(|a, b| a.agent_id.cmp(&b.agent_id));
        let mut tx = self.writer.begin().await?;
        for embedding in ordered {
            // INSERT … SELECT: nothing is written for an agent deleted meanwhile.
            sqlx::query(
                "INSERT INTO agent_embeddings (agent_id, embedder_id, content_hash, vector) \
                 SELECT id, $1, $2, $3 FROM agents WHERE id = $4 \
                 ON CONFLICT (agent_id, embedder_id) DO UPDATE SET \
                 content_hash = excluded.content_hash, vector = excluded.vector",
            )
            .bind(embedder_id)
            .bind(&embedding.content_hash)
            .bind(embedding.vector_bytes())
            .bind(&embedding.agent_id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn schedule_probes(&self, due: &[(String, Timestamp)]) -> StoreResult<()> {
        const ROWS: usize = 500;
        let mut tx = self.writer.begin().await?;
        for chunk in due.chunks(ROWS) {
            let values = (0..chunk.len())
                .map(|i| format!("(${}, ${})", 2 * i + 1, 2 * i + 2))
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!(
                "INSERT INTO agent_probes (agent_id, next_at) VALUES {values} \
                 ON CONFLICT (agent_id) DO NOTHING"
            );
            let mut insert = sqlx::query(&sql);
            for (agent_id, at) in chunk {
                insert = insert.bind(agent_id.as_str()).bind(at.micros());
            }
            insert.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn claim_probes(
        &self,
        owner: &str,
        now: Timestamp,
        lease_until: Timestamp,
        limit: u32,
    ) -> StoreResult<Vec<String>> {
        // The outer guard repeats the subquery's: on PostgreSQL a row another claim leased
        // meanwhile is re-checked against it and dropped, so no agent is claimed twice.
        let sql = format!(
            "UPDATE agent_probes SET lease_owner = $1, lease_until = $2 \
             WHERE (lease_until IS NULL OR lease_until < $3) AND next_at <= $3 \
             AND agent_id IN (SELECT agent_id FROM agent_probes \
             WHERE next_at <= $3 AND (lease_until IS NULL OR lease_until < $3) \
             ORDER BY next_at, agent_id LIMIT $4{}) \
             RETURNING agent_id, next_at",
            DB::SKIP_LOCKED
        );
        let mut claimed: Vec<(String, i64)> = sqlx::query_as(&sql)
            .bind(owner)
            .bind(lease_until.micros())
            .bind(now.micros())
            .bind(i64::from(limit))
            .fetch_all(&self.writer)
            .await?;
        claimed.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        Ok(claimed.into_iter().map(|(id, _)| id).collect())
    }

    async fn release_probe_leases(&self, owner: &str) -> StoreResult<u64> {
        let released = sqlx::query(
            "UPDATE agent_probes SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = $1",
        )
        .bind(owner)
        .execute(&self.writer)
        .await?;
        Ok(DB::rows_affected(&released))
    }

    async fn record_probe(
        &self,
        agent_id: &str,
        outcome: &ProbeOutcome,
        next_at: Timestamp,
    ) -> StoreResult<Option<(Health, bool)>> {
        let mut tx = self.writer.begin().await?;
        let current: Option<(String, Option<String>, Option<String>)> =
            sqlx::query_as("SELECT package_name, version, health FROM agents WHERE id = $1")
                .bind(agent_id)
                .fetch_optional(&mut *tx)
                .await?;
        let Some((package_name, version, previous)) = current else {
            sqlx::query("DELETE FROM agent_probes WHERE agent_id = $1")
                .bind(agent_id)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            return Ok(None);
        };
        let previous: Option<Health> = previous
            .as_deref()
            .map(|text| from_json("health", text))
            .transpose()?;
        let day = health::day_of(outcome.at);
        let ok = i64::from(outcome.status == HealthStatus::Up);
        sqlx::query(
            "INSERT INTO agent_probe_days (agent_id, day, probes, ok) VALUES ($1, $2, 1, $3) \
             ON CONFLICT (agent_id, day) DO UPDATE SET \
             probes = agent_probe_days.probes + 1, ok = agent_probe_days.ok + excluded.ok",
        )
        .bind(agent_id)
        .bind(day)
        .bind(ok)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM agent_probe_days WHERE agent_id = $1 AND day <= $2")
            .bind(agent_id)
            .bind(day - PROBE_DAYS_KEPT)
            .execute(&mut *tx)
            .await?;
        let counts: (i64, i64, i64, i64) = sqlx::query_as(
            "SELECT \
             CAST(COALESCE(SUM(CASE WHEN day > $2 THEN probes ELSE 0 END), 0) AS BIGINT), \
             CAST(COALESCE(SUM(CASE WHEN day > $2 THEN ok ELSE 0 END), 0) AS BIGINT), \
             CAST(COALESCE(SUM(probes), 0) AS BIGINT), CAST(COALESCE(SUM(ok), 0) AS BIGINT) \
             FROM agent_probe_days WHERE agent_id = $1 AND day > $3",
        )
        .bind(agent_id)
        .bind(day - 7)
        .bind(day - 30)
        .fetch_one(&mut *tx)
        .await?;
        let uptime = Uptime {
            week: ProbeCount {
                probes: counts.0,
                ok: counts.1,
            },
            month: ProbeCount {
                probes: counts.2,
                ok: counts.3,
            },
        };
        let health = Health::after(previous.as_ref(), outcome, uptime);
        sqlx::query("UPDATE agents SET health = $1 WHERE id = $2")
            .bind(to_json(&health)?)
            .bind(agent_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO agent_probes (agent_id, next_at) VALUES ($1, $2) \
             ON CONFLICT (agent_id) DO UPDATE SET next_at = excluded.next_at, \
             lease_owner = NULL, lease_until = NULL",
        )
        .bind(agent_id)
        .bind(next_at.micros())
        .execute(&mut *tx)
        .await?;
        let changed = previous.as_ref().map(|health| health.status) != Some(health.status);
        if changed {
            let version = version.as_deref().unwrap_or(DEFAULT_VERSION);
            let change = logged_change(
                agent_id,
                &package_name,
                version,
                ChangeKind::Health,
                outcome.at,
                Reach::NOBODY,
            );
            DB::log_change(&self.feed, &mut tx, change).await?;
        }
        tx.commit().await?;
        Ok(Some((health, changed)))
    }

    async fn reset_probe(&self, agent_id: &str, due_at: Option<Timestamp>) -> StoreResult<()> {
        let mut tx = self.writer.begin().await?;
        sqlx::query("DELETE FROM agent_probe_days WHERE agent_id = $1")
            .bind(agent_id)
            .execute(&mut *tx)
            .await?;
        match due_at {
            None => {
                sqlx::query("DELETE FROM agent_probes WHERE agent_id = $1")
                    .bind(agent_id)
                    .execute(&mut *tx)
                    .await?;
            }
            Some(at) => {
                sqlx::query(
                    "INSERT INTO agent_probes (agent_id, next_at) SELECT id, $2 FROM agents \
                     WHERE id = $1 ON CONFLICT (agent_id) DO UPDATE SET \
                     next_at = excluded.next_at, lease_owner = NULL, lease_until = NULL",
                )
                .bind(agent_id)
                .bind(at.micros())
                .execute(&mut *tx)
                .await?;
            }
        }
        // What the old endpoint showed says nothing about the new one.
        sqlx::query("DELETE FROM agent_surfaces WHERE agent_id = $1")
            .bind(agent_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE agents SET surface = NULL WHERE id = $1 AND surface IS NOT NULL")
            .bind(agent_id)
            .execute(&mut *tx)
            .await?;
        let cleared: Option<(String, Option<String>)> = sqlx::query_as(
            "UPDATE agents SET health = NULL WHERE id = $1 AND health IS NOT NULL \
             RETURNING package_name, version",
        )
        .bind(agent_id)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some((package_name, version)) = &cleared {
            let at = Timestamp::now();
            let version = version.as_deref().unwrap_or(DEFAULT_VERSION);
            let change = logged_change(
                agent_id,
                package_name,
                version,
                ChangeKind::Health,
                at,
                Reach::NOBODY,
            );
            DB::log_change(&self.feed, &mut tx, change).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn surface_of(&self, agent_id: &str) -> StoreResult<Option<(Inspection, Surface)>> {
        let row: Option<(String, Option<String>)> = sqlx::query_as(
            "SELECT s.snapshot, a.surface FROM agents a \
             JOIN agent_surfaces s ON s.agent_id = a.id WHERE a.id = $1",
        )
        .bind(agent_id)
        .fetch_optional(&self.reader)
        .await?;
        let Some((snapshot, Some(inspection))) = row else {
            return Ok(None);
        };
        Ok(Some((
            from_json("surface", &inspection)?,
            from_json("snapshot", &snapshot)?,
        )))
    }

    async fn record_inspection(
        &self,
        agent_id: &str,
        inspection: &Inspection,
        surface: &Surface,
        changed: bool,
    ) -> StoreResult<bool> {
        let mut tx = self.writer.begin().await?;
        let sql = format!("UPDATE agents SET surface = $1 WHERE id = $2 RETURNING {AGENT_COLUMNS}");
        let row: Option<AgentRow> = sqlx::query_as(&sql)
            .bind(to_json(inspection)?)
            .bind(agent_id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else {
            return Ok(false);
        };
        let agent = Agent::try_from(row)?;
        sqlx::query(
            "INSERT INTO agent_surfaces (agent_id, hash, snapshot) VALUES ($1, $2, $3) \
             ON CONFLICT (agent_id) DO UPDATE SET hash = excluded.hash, \
             snapshot = excluded.snapshot",
        )
        .bind(agent_id)
        .bind(&inspection.hash)
        .bind(to_json(surface)?)
        .execute(&mut *tx)
        .await?;
        if changed {
            let change = logged_change(
                agent_id,
                agent.package_name(),
                agent.version(),
                ChangeKind::Drift,
                inspection.inspected_at,
                Reach::of(&agent),
            );
            DB::log_change(&self.feed, &mut tx, change).await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn find_agents_by_name(&self, names: &[String]) -> StoreResult<Vec<Agent>> {
        const CHUNK: usize = 500;
        let mut found = Vec::with_capacity(names.len());
        for chunk in names.chunks(CHUNK) {
            let placeholders = params(1, chunk.len());
            let sql = format!(
                "SELECT {AGENT_COLUMNS} FROM agents WHERE package_name IN ({placeholders})"
            );
            let mut query = sqlx::query_as::<_, AgentRow>(&sql);
            for name in chunk {
                // A name holding NUL matches nothing.
                query = query.bind(if holds_nul(name) { "" } else { name.as_str() });
            }
            for row in query.fetch_all(&self.reader).await? {
                found.push(Agent::try_from(row)?);
            }
        }
        Ok(found)
    }

    async fn mirror_sources(&self) -> StoreResult<Vec<MirrorRecord>> {
        let sql = format!("SELECT {MIRROR_COLUMNS} FROM mirror_sources m ORDER BY m.id");
        let rows: Vec<MirrorRow> = sqlx::query_as(&sql).fetch_all(&self.reader).await?;
        Ok(rows.into_iter().map(MirrorRecord::from).collect())
    }

    async fn claim_mirror(
        &self,
        id: &str,
        kind: &str,
        url: &str,
        owner: &str,
        now: Timestamp,
        lease_until: Timestamp,
        force: bool,
    ) -> StoreResult<Option<MirrorRecord>> {
        if holds_nul(id) {
            return Ok(None);
        }
        sqlx::query(
            "INSERT INTO mirror_sources (id, kind, url) VALUES ($1, $2, $3) \
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(id)
        .bind(kind)
        .bind(url)
        .execute(&self.writer)
        .await?;
        // One statement checks and takes the lease: of two processes, one gets the row.
        let sql = format!(
            "UPDATE mirror_sources SET lease_owner = $2, lease_until = $3, last_attempt = $4, \
             url = $6 \
             WHERE id = $1 AND (lease_owner IS NULL OR lease_owner = $2 OR lease_until < $4) \
             AND (next_at <= $4 OR $5) \
             RETURNING {}",
            MIRROR_COLUMNS.replace("m.", "mirror_sources.")
        );
        let row: Option<MirrorRow> = sqlx::query_as(&sql)
            .bind(id)
            .bind(owner)
            .bind(lease_until.micros())
            .bind(now.micros())
            .bind(force)
            .bind(url)
            .fetch_optional(&self.writer)
            .await?;
        Ok(row.map(MirrorRecord::from))
    }

    async fn write_mirror_page(&self, page: &MirrorPage) -> StoreResult<MirrorWritten> {
        let at = page.at.unwrap_or_else(Timestamp::now);
        let mut tx = self.writer.begin().await?;
        // First, so that on PostgreSQL the source's row is locked for the page: a process
        // that lost its lease writes nothing.
        let held = sqlx::query(
            "UPDATE mirror_sources SET position = COALESCE($1, position), walked = $2, \
             skipped = skipped + $3, collisions = collisions + $4, \
             lease_until = COALESCE($7, lease_until) WHERE id = $5 AND lease_owner = $6",
        )
        .bind(&page.position)
        .bind(page.walked)
        .bind(page.skipped)
        .bind(page.collisions)
        .bind(&page.source)
        .bind(&page.lease_owner)
        .bind(page.lease_until.map(Timestamp::micros))
        .execute(&mut *tx)
        .await?;
        if DB::rows_affected(&held) == 0 {
            tx.rollback().await?;
            return Err(StoreError::LeaseLost(page.source.clone()));
        }
        if !page.skips.is_empty() {
            // The row is this transaction's since the update above: no other page of the
            // source interleaves.
            let (_, stored): (String, Option<String>) =
                sqlx::query_as("SELECT id, recent_skips FROM mirror_sources WHERE id = $1")
                    .bind(&page.source)
                    .fetch_one(&mut *tx)
                    .await?;
            let recent = MirrorSkip::merge(recent_skips(stored.as_deref()), &page.skips);
            sqlx::query("UPDATE mirror_sources SET recent_skips = $1 WHERE id = $2")
                .bind(to_json(&recent)?)
                .bind(&page.source)
                .execute(&mut *tx)
                .await?;
        }
        let mut written = MirrorWritten::default();
        let taken = |tx_err: sqlx::Error| -> StoreError {
            if is_unique_violation(&tx_err) {
                StoreError::Conflict("a package name or identifier is taken".to_owned())
            } else {
                tx_err.into()
            }
        };
        for agent in &page.inserts {
            let columns = DraftRow::of(&agent.draft)?;
            let provenance = agent.provenance.as_ref().map(to_json).transpose()?;
            if let Err(err) = agent_insert(agent, &columns, provenance.as_deref())
                .execute(&mut *tx)
                .await
            {
                tx.rollback().await?;
                return Err(taken(err));
            }
            let severity = log_write::<DB>(
                &self.feed,
                &mut tx,
                agent,
                &columns,
                agent.created_at,
                true,
                None,
            )
            .await?;
            written.severities.insert(agent.id.clone(), severity);
            written.written.push(agent.clone());
        }
        for update in &page.updates {
            let columns = DraftRow::of(&update.draft)?;
            let provenance = to_json(&update.provenance)?;
            let row = agent_update(
                &update.id,
                &update.draft,
                &columns,
                Some(update.revision),
                Some(&provenance),
                at,
            )
            .try_map(|row| AgentRow::from_row(&row))
            .fetch_optional(&mut *tx)
            .await;
            let row = match row {
                Ok(Some(row)) => row,
                Ok(None) => {
                    tx.rollback().await?;
                    return Err(StoreError::Conflict(format!(
                        "agent '{}' changed since it was read",
                        update.id
                    )));
                }
                Err(err) => {
                    tx.rollback().await?;
                    return Err(taken(err));
                }
            };
            let updated = Agent::try_from(row)?;
            let severity =
                log_write::<DB>(&self.feed, &mut tx, &updated, &columns, at, false, None).await?;
            written.severities.insert(updated.id.clone(), severity);
            written.written.push(updated);
        }
        for (agent_id, draft, published_at) in &page.history {
            let columns = DraftRow::of(draft)?;
            // Revision 0: before any this registry wrote.
            let version = draft.version.as_deref().unwrap_or(DEFAULT_VERSION);
            version_row::<DB>(&VERSION_KEEP, agent_id, version, 0, *published_at, &columns)
                .execute(&mut *tx)
                .await?;
        }
        for id in &page.deletes {
            if let Some(deleted) = delete_in::<DB>(&self.feed, &mut tx, id, at).await? {
                written.deleted.push(deleted);
            }
        }
        tx.commit().await?;
        Ok(written)
    }

    async fn end_mirror_pass(
        &self,
        id: &str,
        owner: &str,
        at: Timestamp,
        error: Option<&str>,
        next_at: Timestamp,
    ) -> StoreResult<()> {
        let sql = match error {
            None => {
                "UPDATE mirror_sources SET last_success = $3, last_error = NULL, failures = 0, \
                 next_at = $4, lease_owner = NULL, lease_until = NULL \
                 WHERE id = $1 AND lease_owner = $2 AND CAST($5 AS TEXT) IS NULL"
            }
            Some(_) => {
                "UPDATE mirror_sources SET last_error = $5, failures = failures + 1, \
                 next_at = $4, lease_owner = NULL, lease_until = NULL \
                 WHERE id = $1 AND lease_owner = $2 AND $3 = $3"
            }
        };
        sqlx::query(sql)
            .bind(id)
            .bind(owner)
            .bind(at.micros())
            .bind(next_at.micros())
            .bind(error)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    async fn insert_token(&self, token: &TokenRecord) -> StoreResult<()> {
        self.insert_token_with(token, None).await
    }

    async fn find_token_by_hash(&self, secret_hash: &str) -> StoreResult<Option<TokenRecord>> {
        if holds_nul(secret_hash) {
            return Ok(None);
        }
        let sql = format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE secret_hash = $1");
        let row: Option<TokenRow> = sqlx::query_as(&sql)
            .bind(secret_hash)
            .fetch_optional(&self.reader)
            .await?;
        row.map(TokenRecord::try_from).transpose()
    }

    async fn list_tokens(&self, owner: Option<&str>) -> StoreResult<Vec<TokenRecord>> {
        let sql = format!(
            "SELECT {TOKEN_COLUMNS} FROM tokens WHERE (CAST($1 AS TEXT) IS NULL OR owner = $1) \
             ORDER BY created_at DESC, id DESC"
        );
        let rows: Vec<TokenRow> = sqlx::query_as(&sql)
            .bind(owner)
            .fetch_all(&self.reader)
            .await?;
        rows.into_iter().map(TokenRecord::try_from).collect()
    }

    async fn revoke_token(&self, id: &str, at: Timestamp) -> StoreResult<bool> {
        if holds_nul(id) {
            return Ok(false);
        }
        let mut tx = self.writer.begin().await?;
        let owner: Option<(String,)> = sqlx::query_as(
            "UPDATE tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL \
             RETURNING owner",
        )
        .bind(at.micros())
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((owner,)) = owner else {
            tx.rollback().await?;
            return Ok(false);
        };
        audit_other::<DB>(&mut tx, "token.revoked", id, Some(&owner), None, at).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn insert_granted_token(
        &self,
        token: &TokenRecord,
        grant: &TokenGrant,
    ) -> StoreResult<()> {
        self.insert_token_with(token, Some(grant)).await
    }

    async fn purge_expired_minted_tokens(&self, before: Timestamp) -> StoreResult<u64> {
        let purged = sqlx::query(
            "DELETE FROM tokens WHERE namespaces IS NOT NULL AND restricted = TRUE \
             AND expires_at IS NOT NULL AND expires_at < $1",
        )
        .bind(before.micros())
        .execute(&self.writer)
        .await?;
        Ok(DB::rows_affected(&purged))
    }

    async fn find_token_grant(&self, id: &str) -> StoreResult<Option<TokenGrant>> {
        if holds_nul(id) {
            return Ok(None);
        }
        let row: Option<(Option<String>, Option<String>, bool)> =
            sqlx::query_as("SELECT namespaces, issuer, restricted FROM tokens WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.reader)
                .await?;
        let Some((Some(namespaces), issuer, restricted)) = row else {
            return Ok(None);
        };
        Ok(Some(TokenGrant {
            namespaces: from_json("namespaces", &namespaces)?,
            issuer: match issuer {
                Some(issuer) => from_json("issuer", &issuer)?,
                None => serde_json::Value::Null,
            },
            restricted,
        }))
    }

    async fn insert_audit(&self, entry: &AuditEntry) -> StoreResult<()> {
        audit_insert::<DB>(entry.clone())
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    async fn audit_page(&self, query: &AuditQuery) -> StoreResult<Vec<AuditEntry>> {
        let mut conditions: Vec<String> = Vec::new();
        let mut texts: Vec<&str> = Vec::new();
        let mut numbers: Vec<i64> = Vec::new();
        // Text parameters come first ($1…), then the numbers, then the limit.
        for (column, value) in [
            ("agent_id", query.agent_id.as_deref()),
            ("actor", query.actor.as_deref()),
            ("owner", query.owner.as_deref()),
        ] {
            if let Some(value) = value {
                if holds_nul(value) {
                    return Ok(Vec::new());
                }
                conditions.push(format!("{column} = ${}", texts.len() + 1));
                texts.push(value);
            }
        }
        if let Some((viewer, owners)) = &query.visible_to {
            let mut alternatives = vec![format!("actor = ${}", texts.len() + 1)];
            texts.push(viewer.as_str());
            for owner in owners.iter().filter(|owner| !holds_nul(owner)) {
                alternatives.push(format!("owner = ${}", texts.len() + 1));
                texts.push(owner.as_str());
            }
            conditions.push(format!("({})", alternatives.join(" OR ")));
        }
        if let Some(since) = query.since {
            numbers.push(since.micros());
            conditions.push(format!("at >= ${}", texts.len() + numbers.len()));
        }
        if let Some(before) = query.before {
            numbers.push(before);
            conditions.push(format!("seq < ${}", texts.len() + numbers.len()));
        }
        let filter = if conditions.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", conditions.join(" AND "))
        };
        let sql = format!(
            "SELECT seq, {AUDIT_COLUMNS} FROM audit_log {filter} ORDER BY seq DESC LIMIT ${}",
            texts.len() + numbers.len() + 1
        );
        let mut select = sqlx::query_as::<_, AuditRow>(&sql);
        for value in &texts {
            select = select.bind(*value);
        }
        for value in &numbers {
            select = select.bind(*value);
        }
        let rows = select
            .bind(i64::from(query.limit.max(1)))
            .fetch_all(&self.reader)
            .await?;
        Ok(rows.into_iter().map(AuditEntry::from).collect())
    }

    async fn purge_audit(&self, before: Timestamp) -> StoreResult<u64> {
        let purged = sqlx::query("DELETE FROM audit_log WHERE at < $1")
            .bind(before.micros())
            .execute(&self.writer)
            .await?;
        Ok(DB::rows_affected(&purged))
    }

    async fn create_org(&self, org: &OrgRecord) -> StoreResult<()> {
        let mut tx = self.writer.begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO orgs (name, display_name, created_by, created_at) VALUES ($1, $2, $3, $4)",
        )
        .bind(&org.name)
        .bind(&org.display_name)
        .bind(&org.created_by)
        .bind(org.created_at.micros())
        .execute(&mut *tx)
        .await;
        taken_is_conflict(inserted, "an organisation has this name already")?;
        sqlx::query(
            "INSERT INTO org_members (org, owner, role, added_at) VALUES ($1, $2, 'admin', $3)",
        )
        .bind(&org.name)
        .bind(&org.created_by)
        .bind(org.created_at.micros())
        .execute(&mut *tx)
        .await?;
        let owner = crate::domain::org::org_owner(&org.name);
        let admin = Some(format!("first admin: {}", org.created_by));
        audit_other::<DB>(
            &mut tx,
            "org.created",
            &owner,
            Some(&owner),
            admin,
            org.created_at,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn find_org(&self, name: &str) -> StoreResult<Option<OrgRecord>> {
        if holds_nul(name) {
            return Ok(None);
        }
        let sql = format!("SELECT {ORG_COLUMNS} FROM orgs WHERE name = $1");
        let row: Option<OrgRow> = sqlx::query_as(&sql)
            .bind(name)
            .fetch_optional(&self.reader)
            .await?;
        Ok(row.map(OrgRecord::from))
    }

    async fn org_members(&self, org: &str) -> StoreResult<Vec<MemberRecord>> {
        if holds_nul(org) {
            return Ok(Vec::new());
        }
        let sql = format!("SELECT {MEMBER_COLUMNS} FROM org_members WHERE org = $1 ORDER BY owner");
        let rows: Vec<MemberRow> = sqlx::query_as(&sql)
            .bind(org)
            .fetch_all(&self.reader)
            .await?;
        rows.into_iter().map(MemberRecord::try_from).collect()
    }

    async fn memberships(&self, owner: &str) -> StoreResult<Vec<MemberRecord>> {
        if holds_nul(owner) {
            return Ok(Vec::new());
        }
        let sql = format!("SELECT {MEMBER_COLUMNS} FROM org_members WHERE owner = $1 ORDER BY org");
        let rows: Vec<MemberRow> = sqlx::query_as(&sql)
            .bind(owner)
            .fetch_all(&self.reader)
            .await?;
        rows.into_iter().map(MemberRecord::try_from).collect()
    }

    async fn orgs_linked_to(
        &self,
        github: &[String],
    ) -> StoreResult<Vec<(String, OrgRole, Timestamp)>> {
        let wanted: Vec<&str> = github
            .iter()
            .filter(|name| !holds_nul(name))
            .map(String::as_str)
            .take(500)
            .collect();
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let placeholders = params(1, wanted.len());
        let sql = format!(
            "SELECT org, role, linked_at FROM org_github WHERE github_org IN ({placeholders}) \
             ORDER BY org"
        );
        let mut query = sqlx::query_as::<_, (String, String, i64)>(&sql);
        for name in wanted {
            query = query.bind(name);
        }
        let rows = query.fetch_all(&self.reader).await?;
        Ok(rows
            .into_iter()
            .filter_map(|(org, role, at)| {
                Some((org, OrgRole::parse(&role)?, Timestamp::from_micros(at)))
            })
            .collect())
    }

    async fn github_link(&self, org: &str) -> StoreResult<Option<(String, OrgRole)>> {
        if holds_nul(org) {
            return Ok(None);
        }
        let row: Option<(String, String)> =
            sqlx::query_as("SELECT github_org, role FROM org_github WHERE org = $1")
                .bind(org)
                .fetch_optional(&self.reader)
                .await?;
        Ok(row.and_then(|(github, role)| Some((github, OrgRole::parse(&role)?))))
    }

    async fn set_github_link(
        &self,
        org: &str,
        link: Option<(&str, OrgRole)>,
        at: Timestamp,
    ) -> StoreResult<()> {
        if holds_nul(org) || link.is_some_and(|(github, _)| holds_nul(github)) {
            return Err(StoreError::NotFound);
        }
        let mut tx = self.writer.begin().await?;
        lock_org::<DB>(&mut tx, org).await?;
        let owner = crate::domain::org::org_owner(org);
        match link {
            Some((github, role)) => {
                let taken: Option<String> = sqlx::query_scalar(
                    "SELECT org FROM org_github WHERE github_org = $1 AND org <> $2",
                )
                .bind(github)
                .bind(org)
                .fetch_optional(&mut *tx)
                .await?;
                if let Some(other) = taken {
                    return Err(StoreError::Conflict(format!(
                        "the GitHub organisation '{github}' is linked to the organisation \
                         '{other}'"
                    )));
                }
                sqlx::query(
                    "INSERT INTO org_github (org, github_org, role, linked_at) \
                     VALUES ($1, $2, $3, $4) ON CONFLICT (org) DO UPDATE SET \
                     github_org = excluded.github_org, role = excluded.role, \
                     linked_at = excluded.linked_at",
                )
                .bind(org)
                .bind(github)
                .bind(role.as_str())
                .bind(at.micros())
                .execute(&mut *tx)
                .await?;
                let reason = Some(format!(
                    "GitHub organisation {github}, as {}",
                    role.as_str()
                ));
                audit_other::<DB>(
                    &mut tx,
                    "org.github_linked",
                    &owner,
                    Some(&owner),
                    reason,
                    at,
                )
                .await?;
            }
            None => {
                let removed = sqlx::query("DELETE FROM org_github WHERE org = $1")
                    .bind(org)
                    .execute(&mut *tx)
                    .await?;
                if DB::rows_affected(&removed) > 0 {
                    audit_other::<DB>(
                        &mut tx,
                        "org.github_unlinked",
                        &owner,
                        Some(&owner),
                        None,
                        at,
                    )
                    .await?;
                }
            }
        }
        tx.commit().await?;
        Ok(())
    }

    async fn set_member(&self, member: &MemberRecord) -> StoreResult<()> {
        if holds_nul(&member.org) || holds_nul(&member.owner) {
            return Err(StoreError::NotFound);
        }
        let mut tx = self.writer.begin().await?;
        lock_org::<DB>(&mut tx, &member.org).await?;
        sqlx::query(
            "INSERT INTO org_members (org, owner, role, added_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (org, owner) DO UPDATE SET role = excluded.role",
        )
        .bind(&member.org)
        .bind(&member.owner)
        .bind(member.role.as_str())
        .bind(member.added_at.micros())
        .execute(&mut *tx)
        .await?;
        let owner = crate::domain::org::org_owner(&member.org);
        let role = Some(format!("{} is {}", member.owner, member.role.as_str()));
        audit_other::<DB>(
            &mut tx,
            "org.member_set",
            &owner,
            Some(&owner),
            role,
            member.added_at,
        )
        .await?;
        keep_an_admin::<DB>(tx, &member.org).await
    }

    async fn remove_member(&self, org: &str, owner: &str) -> StoreResult<bool> {
        if holds_nul(org) || holds_nul(owner) {
            return Ok(false);
        }
        let mut tx = self.writer.begin().await?;
        lock_org::<DB>(&mut tx, org).await?;
        let removed = sqlx::query("DELETE FROM org_members WHERE org = $1 AND owner = $2")
            .bind(org)
            .bind(owner)
            .execute(&mut *tx)
            .await?;
        let removed = DB::rows_affected(&removed) > 0;
        if removed {
            let org_owner = crate::domain::org::org_owner(org);
            let who = Some(format!("{owner} left"));
            audit_other::<DB>(
                &mut tx,
                "org.member_removed",
                &org_owner,
                Some(&org_owner),
                who,
                Timestamp::now(),
            )
            .await?;
        }
        keep_an_admin::<DB>(tx, org).await?;
        Ok(removed)
    }

    async fn insert_transfer(&self, transfer: &TransferRecord) -> StoreResult<()> {
        let mut tx = self.writer.begin().await?;
        let inserted = transfer_insert::<DB>(transfer).execute(&mut *tx).await;
        taken_is_conflict(inserted, "this agent has a transfer pending already")?;
        let reason = Some(format!(
            "{} to {}",
            transfer.package_name, transfer.to_owner
        ));
        audit_other::<DB>(
            &mut tx,
            "transfer.requested",
            &transfer.id,
            Some(&transfer.from_owner),
            reason,
            transfer.created_at,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn find_transfer(&self, id: &str) -> StoreResult<Option<TransferRecord>> {
        if holds_nul(id) {
            return Ok(None);
        }
        let sql = format!("SELECT {TRANSFER_COLUMNS} FROM transfers WHERE id = $1");
        let row: Option<TransferRow> = sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(&self.reader)
            .await?;
        row.map(TransferRecord::try_from).transpose()
    }

    async fn pending_transfers(&self, owners: &[&str]) -> StoreResult<Vec<TransferRecord>> {
        let owners: Vec<&str> = owners.iter().copied().filter(|o| !holds_nul(o)).collect();
        if owners.is_empty() {
            return Ok(Vec::new());
        }
        let list = params(1, owners.len());
        let sql = format!(
            "SELECT {TRANSFER_COLUMNS} FROM transfers WHERE status = 'pending' \
             AND (from_owner IN ({list}) OR to_owner IN ({list})) ORDER BY created_at, id"
        );
        let mut query = sqlx::query_as::<_, TransferRow>(&sql);
        for owner in &owners {
            query = query.bind(*owner);
        }
        let rows = query.fetch_all(&self.reader).await?;
        rows.into_iter().map(TransferRecord::try_from).collect()
    }

    async fn settle_transfer(
        &self,
        id: &str,
        status: TransferStatus,
        at: Timestamp,
    ) -> StoreResult<(TransferRecord, Option<Agent>)> {
        if holds_nul(id) {
            return Err(StoreError::NotFound);
        }
        let mut tx = self.writer.begin().await?;
        let sql = format!(
            "UPDATE transfers SET status = $1, resolved_at = $2 WHERE id = $3 \
             AND status = 'pending' RETURNING {TRANSFER_COLUMNS}"
        );
        let row: Option<TransferRow> = sqlx::query_as(&sql)
            .bind(status.as_str())
            .bind(at.micros())
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else {
            tx.rollback().await?;
            return Err(StoreError::NotFound);
        };
        let transfer = TransferRecord::try_from(row)?;
        if status != TransferStatus::Accepted {
            let reason = Some(format!(
                "{} to {}",
                transfer.package_name, transfer.to_owner
            ));
            audit_other::<DB>(
                &mut tx,
                "transfer.declined",
                &transfer.id,
                Some(&transfer.from_owner),
                reason,
                at,
            )
            .await?;
            tx.commit().await?;
            return Ok((transfer, None));
        }
        let Some(moved) = move_agent::<DB>(&self.feed, &mut tx, &transfer, at).await? else {
            tx.rollback().await?;
            return Err(StoreError::Conflict(
                "the agent changed owner since the transfer was asked for".to_owned(),
            ));
        };
        tx.commit().await?;
        Ok((transfer, Some(moved)))
    }

    async fn force_transfer(&self, transfer: &TransferRecord) -> StoreResult<Agent> {
        let mut tx = self.writer.begin().await?;
        sqlx::query(
            "UPDATE transfers SET status = 'declined', resolved_at = $1 \
             WHERE agent_id = $2 AND status = 'pending'",
        )
        .bind(transfer.created_at.micros())
        .bind(&transfer.agent_id)
        .execute(&mut *tx)
        .await?;
        transfer_insert::<DB>(transfer).execute(&mut *tx).await?;
        let Some(moved) =
            move_agent::<DB>(&self.feed, &mut tx, transfer, transfer.created_at).await?
        else {
            tx.rollback().await?;
            return Err(StoreError::NotFound);
        };
        tx.commit().await?;
        Ok(moved)
    }

    async fn insert_signin_state(
        &self,
        key_hash: &str,
        data: &str,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> StoreResult<()> {
        sqlx::query("DELETE FROM signin_states WHERE expires_at < $1")
            .bind(now.micros())
            .execute(&self.writer)
            .await?;
        let inserted = sqlx::query(
            "INSERT INTO signin_states (key_hash, data, expires_at) VALUES ($1, $2, $3)",
        )
        .bind(key_hash)
        .bind(data)
        .bind(expires_at.micros())
        .execute(&self.writer)
        .await;
        taken_is_conflict(inserted, "sign-in already under way")
    }

    async fn take_signin_state(&self, key_hash: &str) -> StoreResult<Option<(String, Timestamp)>> {
        if holds_nul(key_hash) {
            return Ok(None);
        }
        let row: Option<(String, i64)> = sqlx::query_as(
            "DELETE FROM signin_states WHERE key_hash = $1 RETURNING data, expires_at",
        )
        .bind(key_hash)
        .fetch_optional(&self.writer)
        .await?;
        Ok(row.map(|(data, expires_at)| (data, Timestamp::from_micros(expires_at))))
    }

    async fn insert_web_session(&self, session: &WebSessionRecord) -> StoreResult<()> {
        sqlx::query("DELETE FROM web_sessions WHERE expires_at < $1")
            .bind(session.created_at.micros())
            .execute(&self.writer)
            .await?;
        let mut tx = self.writer.begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO web_sessions (id, secret_hash, owner, data, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&session.id)
        .bind(&session.secret_hash)
        .bind(&session.owner)
        .bind(&session.data)
        .bind(session.created_at.micros())
        .bind(session.expires_at.micros())
        .execute(&mut *tx)
        .await;
        taken_is_conflict(inserted, "session already exists")?;
        audit_other::<DB>(
            &mut tx,
            "signin",
            &session.id,
            Some(&session.owner),
            None,
            session.created_at,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn find_web_session(
        &self,
        secret_hash: &str,
        now: Timestamp,
    ) -> StoreResult<Option<WebSessionRecord>> {
        if holds_nul(secret_hash) {
            return Ok(None);
        }
        let row: Option<(String, String, String, String, i64, i64)> = sqlx::query_as(
            "SELECT id, secret_hash, owner, data, created_at, expires_at FROM web_sessions \
             WHERE secret_hash = $1 AND expires_at > $2",
        )
        .bind(secret_hash)
        .bind(now.micros())
        .fetch_optional(&self.reader)
        .await?;
        Ok(row.map(
            |(id, secret_hash, owner, data, created_at, expires_at)| WebSessionRecord {
                id,
                secret_hash,
                owner,
                data,
                created_at: Timestamp::from_micros(created_at),
                expires_at: Timestamp::from_micros(expires_at),
            },
        ))
    }

    async fn delete_web_session(&self, id: &str) -> StoreResult<bool> {
        if holds_nul(id) {
            return Ok(false);
        }
        let mut tx = self.writer.begin().await?;
        let owner: Option<(String,)> =
            sqlx::query_as("DELETE FROM web_sessions WHERE id = $1 RETURNING owner")
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
        let Some((owner,)) = owner else {
            tx.rollback().await?;
            return Ok(false);
        };
        audit_other::<DB>(&mut tx, "signout", id, Some(&owner), None, Timestamp::now()).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn person_owner(
        &self,
        issuer: &str,
        subject: &str,
        candidates: &[String],
        now: Timestamp,
    ) -> StoreResult<Option<String>> {
        if holds_nul(issuer) || holds_nul(subject) {
            return Ok(None);
        }
        let known: Option<(String,)> =
            sqlx::query_as("SELECT owner FROM people WHERE issuer = $1 AND subject = $2")
                .bind(issuer)
                .bind(subject)
                .fetch_optional(&self.writer)
                .await?;
        if let Some((owner,)) = known {
            sqlx::query("UPDATE people SET last_seen_at = $1 WHERE issuer = $2 AND subject = $3")
                .bind(now.micros())
                .bind(issuer)
                .bind(subject)
                .execute(&self.writer)
                .await?;
            return Ok(Some(owner));
        }
        for candidate in candidates.iter().filter(|candidate| !holds_nul(candidate)) {
            // A first sign-in racing another of the same person finds the row the other wrote.
            let inserted = sqlx::query(
                "INSERT INTO people (issuer, subject, owner, created_at, last_seen_at) \
                 VALUES ($1, $2, $3, $4, $4) ON CONFLICT (owner) DO NOTHING",
            )
            .bind(issuer)
            .bind(subject)
            .bind(candidate)
            .bind(now.micros())
            .execute(&self.writer)
            .await;
            match inserted {
                Ok(result) if DB::rows_affected(&result) > 0 => return Ok(Some(candidate.clone())),
                Ok(_) => continue,
                Err(err) if is_unique_violation(&err) => {
                    let known: Option<(String,)> = sqlx::query_as(
                        "SELECT owner FROM people WHERE issuer = $1 AND subject = $2",
                    )
                    .bind(issuer)
                    .bind(subject)
                    .fetch_optional(&self.writer)
                    .await?;
                    return Ok(known.map(|(owner,)| owner));
                }
                Err(err) => return Err(err.into()),
            }
        }
        Ok(None)
    }

    async fn claim_namespace(&self, claim: &NamespaceRecord) -> StoreResult<NamespaceRecord> {
        sqlx::query(
            "INSERT INTO namespaces (namespace, owner, token, created_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (namespace, owner) DO NOTHING",
        )
        .bind(&claim.namespace)
        .bind(&claim.owner)
        .bind(&claim.token)
        .bind(claim.created_at.micros())
        .execute(&self.writer)
        .await?;
        let sql = format!(
            "SELECT {NAMESPACE_COLUMNS} FROM namespaces WHERE namespace = $1 AND owner = $2"
        );
        let row: NamespaceRow = sqlx::query_as(&sql)
            .bind(&claim.namespace)
            .bind(&claim.owner)
            .fetch_one(&self.writer)
            .await?;
        Ok(row.into())
    }

    async fn namespaces_of(&self, owner: &str) -> StoreResult<Vec<NamespaceRecord>> {
        if holds_nul(owner) {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT {NAMESPACE_COLUMNS} FROM namespaces WHERE owner = $1 ORDER BY namespace"
        );
        let rows: Vec<NamespaceRow> = sqlx::query_as(&sql)
            .bind(owner)
            .fetch_all(&self.reader)
            .await?;
        Ok(rows.into_iter().map(NamespaceRecord::from).collect())
    }

    async fn namespace_holder(&self, namespace: &str) -> StoreResult<Option<NamespaceRecord>> {
        if holds_nul(namespace) {
            return Ok(None);
        }
        let sql = format!(
            "SELECT {NAMESPACE_COLUMNS} FROM namespaces \
             WHERE namespace = $1 AND verified_at IS NOT NULL"
        );
        let row: Option<NamespaceRow> = sqlx::query_as(&sql)
            .bind(namespace)
            .fetch_optional(&self.reader)
            .await?;
        Ok(row.map(NamespaceRecord::from))
    }

    async fn verify_namespace(
        &self,
        namespace: &str,
        owner: &str,
        proof: &str,
        at: Timestamp,
    ) -> StoreResult<NamespaceRecord> {
        if holds_nul(namespace) || holds_nul(owner) {
            return Err(StoreError::NotFound);
        }
        let sql = format!(
            "UPDATE namespaces SET verified_at = COALESCE(verified_at, $3), \
             proof = COALESCE(proof, $4) WHERE namespace = $1 AND owner = $2 \
             RETURNING {NAMESPACE_COLUMNS}"
        );
        let updated: Result<Option<NamespaceRow>, sqlx::Error> = sqlx::query_as(&sql)
            .bind(namespace)
            .bind(owner)
            .bind(at.micros())
            .bind(proof)
            .fetch_optional(&self.writer)
            .await;
        match updated {
            Ok(Some(row)) => Ok(row.into()),
            Ok(None) => Err(StoreError::NotFound),
            Err(err) if is_unique_violation(&err) => Err(StoreError::Conflict(format!(
                "another owner holds the namespace '{namespace}'"
            ))),
            Err(err) => Err(err.into()),
        }
    }

    async fn delete_namespace(&self, namespace: &str, owner: Option<&str>) -> StoreResult<bool> {
        if holds_nul(namespace) || owner.is_some_and(holds_nul) {
            return Ok(false);
        }
        self.delete_owned("namespaces", "namespace", namespace, owner)
            .await
    }

    async fn insert_binding(&self, binding: &BindingRecord) -> StoreResult<()> {
        let sql =
            format!("INSERT INTO bindings ({BINDING_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)");
        let inserted = sqlx::query(&sql)
            .bind(&binding.id)
            .bind(&binding.owner)
            .bind(&binding.scope)
            .bind(binding.rule.kind.as_str())
            .bind(&binding.rule.repository)
            .bind(binding.rule.workflow.as_deref().unwrap_or(""))
            .bind(binding.created_at.micros())
            .execute(&self.writer)
            .await;
        taken_is_conflict(inserted, "this binding exists already")
    }

    async fn bindings_for(&self, scopes: &[String]) -> StoreResult<Vec<BindingRecord>> {
        let scopes: Vec<&String> = scopes.iter().filter(|scope| !holds_nul(scope)).collect();
        if scopes.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT {BINDING_COLUMNS} FROM bindings WHERE scope IN ({}) ORDER BY scope, id",
            params(1, scopes.len())
        );
        let mut query = sqlx::query_as::<_, BindingRow>(&sql);
        for scope in scopes {
            query = query.bind(scope.as_str());
        }
        let rows = query.fetch_all(&self.reader).await?;
        rows.into_iter().map(BindingRecord::try_from).collect()
    }

    async fn bindings_of(&self, owner: Option<&str>) -> StoreResult<Vec<BindingRecord>> {
        if owner.is_some_and(holds_nul) {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT {BINDING_COLUMNS} FROM bindings \
             WHERE (CAST($1 AS TEXT) IS NULL OR owner = $1) ORDER BY scope, id"
        );
        let rows: Vec<BindingRow> = sqlx::query_as(&sql)
            .bind(owner)
            .fetch_all(&self.reader)
            .await?;
        rows.into_iter().map(BindingRecord::try_from).collect()
    }

    async fn delete_binding(&self, id: &str, owner: Option<&str>) -> StoreResult<bool> {
        if holds_nul(id) || owner.is_some_and(holds_nul) {
            return Ok(false);
        }
        self.delete_owned("bindings", "id", id, owner).await
    }

    async fn insert_session(&self, session: &PlaygroundSession) -> StoreResult<()> {
        let inserted = sqlx::query(
            "INSERT INTO playground_sessions (id, owner, name, created_at, last_active_at, \
             expires_at) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&session.id)
        .bind(&session.owner)
        .bind(&session.name)
        .bind(session.created_at.micros())
        .bind(session.last_active_at.micros())
        .bind(session.expires_at.micros())
        .execute(&self.writer)
        .await;
        taken_is_conflict(inserted, "session already exists")
    }

    async fn find_session(&self, id: &str) -> StoreResult<Option<PlaygroundSession>> {
        if holds_nul(id) {
            return Ok(None);
        }
        // One read transaction, so the steps belong to the session row read.
        let mut tx = self.reader.begin().await?;
        if let Some(snapshot) = DB::READ_SNAPSHOT {
            sqlx::query(snapshot).execute(&mut *tx).await?;
        }
        let row: Option<SessionRow> = sqlx::query_as(
            "SELECT id, owner, name, created_at, last_active_at, expires_at \
             FROM playground_sessions WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let steps: Vec<StepRow> = sqlx::query_as(
            "SELECT seq, kind, at, duration_ms, data FROM playground_steps \
             WHERE session_id = $1 ORDER BY seq",
        )
        .bind(id)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        row.with_steps(steps).map(Some)
    }

    async fn append_session_step(
        &self,
        session_id: &str,
        step: &SessionStep,
        expires_at: Timestamp,
    ) -> StoreResult<SessionStep> {
        if holds_nul(session_id) {
            return Err(StoreError::NotFound);
        }
        let data = to_json(&step.data)?;
        let mut tx = self.writer.begin().await?;
        // The UPDATE locks the session row, so concurrent appends number their steps in turn.
        let touched = sqlx::query(
            "UPDATE playground_sessions SET last_active_at = $1, expires_at = $2 WHERE id = $3",
        )
        .bind(step.at.micros())
        .bind(expires_at.micros())
        .bind(session_id)
        .execute(&mut *tx)
        .await?;
        if DB::rows_affected(&touched) == 0 {
            return Err(StoreError::NotFound);
        }
        let seq: i64 = sqlx::query_scalar(
            "SELECT COALESCE(MAX(seq), 0) + 1 FROM playground_steps WHERE session_id = $1",
        )
        .bind(session_id)
        .fetch_one(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO playground_steps (session_id, seq, kind, at, duration_ms, data) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(session_id)
        .bind(seq)
        .bind(step.kind.as_str())
        .bind(step.at.micros())
        .bind(step.duration_ms)
        .bind(data)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(SessionStep {
            seq,
            ..step.clone()
        })
    }

    async fn touch_session(
        &self,
        id: &str,
        at: Timestamp,
        expires_at: Timestamp,
    ) -> StoreResult<bool> {
        if holds_nul(id) {
            return Ok(false);
        }
        let result = sqlx::query(
            "UPDATE playground_sessions SET last_active_at = $1, expires_at = $2 WHERE id = $3",
        )
        .bind(at.micros())
        .bind(expires_at.micros())
        .bind(id)
        .execute(&self.writer)
        .await?;
        Ok(DB::rows_affected(&result) > 0)
    }

    async fn delete_session(&self, id: &str) -> StoreResult<bool> {
        if holds_nul(id) {
            return Ok(false);
        }
        let result = sqlx::query("DELETE FROM playground_sessions WHERE id = $1")
            .bind(id)
            .execute(&self.writer)
            .await?;
        Ok(DB::rows_affected(&result) > 0)
    }

    async fn purge_expired_sessions(&self, now: Timestamp) -> StoreResult<u64> {
        let result = sqlx::query("DELETE FROM playground_sessions WHERE expires_at <= $1")
            .bind(now.micros())
            .execute(&self.writer)
            .await?;
        Ok(DB::rows_affected(&result))
    }
}
