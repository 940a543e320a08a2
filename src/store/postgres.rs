//! PostgreSQL: several stateless server processes on one database. Writes are single
//! statements guarded by their own `WHERE` (revision, state), so checks and writes are atomic
//! without holding locks across round trips; each write logs its change in the same transaction
//! and wakes every process with `NOTIFY`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgListener, PgPool, PgPoolOptions};
use sqlx::{Postgres, Transaction};
use tokio::sync::Notify;

use crate::domain::AgentDraft;
use crate::task::AbortOnDrop;
use crate::timestamp::Timestamp;

use super::row::{
    AgentRow, ChangeRow, DraftColumns, EmbeddingRow, SessionRow, StepRow, TokenRow, scopes_column,
    to_json,
};
use super::{
    Agent, AgentState, Change, ChangeKind, PlaygroundSession, SessionStep, Store, StoreError,
    StoreResult, StoredEmbedding, TokenRecord, VerificationLevel,
};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// Connections per process, the `LISTEN` connection included.
pub const MAX_CONNECTIONS: u32 = 16;

const AGENT_COLUMNS: &str = "id, package_name, owner, state, verification_level, \
    verification_token, revision, name, description, version, manifest_url, url, target, \
    category, tags, capabilities, payment, card, created_at, updated_at, published_at";

const CHANGE_COLUMNS: &str = "seq, agent_id, package_name, kind, at, public";

const TOKEN_COLUMNS: &str = "id, owner, scopes, secret_hash, created_at, expires_at, revoked_at";

/// PostgreSQL store. Dropping it stops its `LISTEN` task.
pub struct PgStore {
    pool: PgPool,
    /// The `NOTIFY` channel of this schema's change log.
    channel: String,
    /// Signalled (one stored permit) whenever a `NOTIFY` arrives or the listener reconnects.
    changed: Arc<Notify>,
    _listener: AbortOnDrop,
}

impl PgStore {
    /// Connect to a `postgres://` URL, run the migrations, and start listening for changes.
    /// The schema is the URL's `search_path` (e.g. `?options=-c%20search_path%3Dregistry`),
    /// else the database's default.
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await
            .map_err(|err| anyhow::anyhow!("cannot connect to PostgreSQL: {err}"))?;
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|err| anyhow::anyhow!("cannot migrate the PostgreSQL schema: {err}"))?;
        let schema: Option<String> = sqlx::query_scalar("SELECT current_schema()")
            .fetch_one(&pool)
            .await?;
        let schema = schema.ok_or_else(|| anyhow::anyhow!("the search_path names no schema"))?;
        let channel = change_channel(&schema);
        let changed = Arc::new(Notify::new());
        let mut listener = PgListener::connect_with(&pool).await?;
        listener.listen(&channel).await?;
        let task = tokio::spawn(relay_notifications(listener, Arc::clone(&changed)));
        Ok(Self {
            pool,
            channel,
            changed,
            _listener: AbortOnDrop::new(task),
        })
    }

    /// Log `kind` for `agent` and `NOTIFY` the other processes on commit. The advisory lock,
    /// held until commit, makes sequence numbers commit in order: a follower that has read
    /// seq N never later finds a new change below N (an identity column alone hands out
    /// numbers at insert, not at commit). Call it as the last statement before commit.
    async fn log_change(
        &self,
        tx: &mut Transaction<'_, Postgres>,
        agent: &Agent,
        kind: ChangeKind,
        at: Timestamp,
        public: bool,
    ) -> StoreResult<()> {
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
            .bind(&self.channel)
            .execute(&mut **tx)
            .await?;
        sqlx::query(
            "WITH logged AS (INSERT INTO agent_changes (agent_id, package_name, kind, at, public) \
             VALUES ($1, $2, $3, $4, $5) RETURNING seq) \
             SELECT pg_notify($6, seq::text) FROM logged",
        )
        .bind(&agent.id)
        .bind(agent.package_name())
        .bind(kind.as_str())
        .bind(at.micros())
        .bind(public)
        .bind(&self.channel)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    async fn fetch_agent_in(
        tx: &mut Transaction<'_, Postgres>,
        id: &str,
    ) -> StoreResult<Option<Agent>> {
        let sql = format!("SELECT {AGENT_COLUMNS} FROM agents WHERE id = $1");
        let row: Option<AgentRow> = sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?;
        row.map(Agent::try_from).transpose()
    }
}

/// One channel per schema, so several registries (or test runs) on one database do not wake
/// each other. PostgreSQL limits channel names to 63 bytes.
fn change_channel(schema: &str) -> String {
    let mut channel = format!("agent_changes.{schema}");
    while channel.len() > 63 {
        channel.pop();
    }
    channel
}

/// Turn notifications into `Notify` permits until the store is dropped (which aborts this).
/// A lost connection may have lost notifications, so reconnecting signals too.
async fn relay_notifications(mut listener: PgListener, changed: Arc<Notify>) {
    loop {
        match listener.try_recv().await {
            Ok(_) => changed.notify_one(),
            Err(err) => {
                tracing::warn!(error = %err, "lost the PostgreSQL change listener; retrying");
                changed.notify_one();
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}

#[async_trait]
impl Store for PgStore {
    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn insert_agent(&self, agent: &Agent) -> StoreResult<()> {
        let columns = DraftColumns::of(&agent.draft)?;
        let draft = &agent.draft;
        let mut tx = self.pool.begin().await?;
        let sql = format!(
            "INSERT INTO agents ({AGENT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, \
             $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)"
        );
        let inserted = sqlx::query(&sql)
            .bind(&agent.id)
            .bind(agent.package_name())
            .bind(&agent.owner)
            .bind(agent.state.as_str())
            .bind(agent.verification_level.as_str())
            .bind(&agent.verification_token)
            .bind(agent.revision)
            .bind(&draft.name)
            .bind(&draft.description)
            .bind(&draft.version)
            .bind(&draft.manifest_url)
            .bind(&draft.url)
            .bind(&draft.target)
            .bind(&draft.category)
            .bind(&columns.tags)
            .bind(&columns.capabilities)
            .bind(&columns.payment)
            .bind(&columns.card)
            .bind(agent.created_at.micros())
            .bind(agent.updated_at.micros())
            .bind(agent.published_at.map(Timestamp::micros))
            .execute(&mut *tx)
            .await;
        match inserted {
            // A racing insert of the same name waits on the unique index until the first
            // commits, then fails here: one 201, one 409.
            Err(err) if is_unique_violation(&err) => {
                tx.rollback().await?;
                return Err(StoreError::Conflict(format!(
                    "package name '{}' is already registered",
                    agent.package_name()
                )));
            }
            other => other?,
        };
        let public = Change::is_public(None, Some(agent.state));
        self.log_change(
            &mut tx,
            agent,
            ChangeKind::Created,
            agent.created_at,
            public,
        )
        .await?;
        if agent.state == AgentState::Active {
            self.log_change(
                &mut tx,
                agent,
                ChangeKind::Published,
                agent.created_at,
                true,
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn find_agent(&self, identifier: &str) -> StoreResult<Option<Agent>> {
        if identifier.contains('\0') {
            return Ok(None); // PostgreSQL text cannot hold U+0000, so no key does.
        }
        let sql = format!("SELECT {AGENT_COLUMNS} FROM agents WHERE id = $1 OR package_name = $2");
        let row: Option<AgentRow> = sqlx::query_as(&sql)
            .bind(identifier)
            .bind(identifier.to_lowercase())
            .fetch_optional(&self.pool)
            .await?;
        row.map(Agent::try_from).transpose()
    }

    async fn update_agent(
        &self,
        id: &str,
        draft: &AgentDraft,
        expected_revision: Option<i64>,
        at: Timestamp,
    ) -> StoreResult<Agent> {
        let columns = DraftColumns::of(draft)?;
        let mut tx = self.pool.begin().await?;
        let sql = format!(
            "UPDATE agents SET name = $1, description = $2, version = $3, manifest_url = $4, \
             url = $5, target = $6, category = $7, tags = $8, capabilities = $9, payment = $10, \
             card = $11, updated_at = $12, revision = revision + 1 \
             WHERE id = $13 AND ($14::BIGINT IS NULL OR revision = $14) \
             RETURNING {AGENT_COLUMNS}"
        );
        let row: Option<AgentRow> = sqlx::query_as(&sql)
            .bind(&draft.name)
            .bind(&draft.description)
            .bind(&draft.version)
            .bind(&draft.manifest_url)
            .bind(&draft.url)
            .bind(&draft.target)
            .bind(&draft.category)
            .bind(&columns.tags)
            .bind(&columns.capabilities)
            .bind(&columns.payment)
            .bind(&columns.card)
            .bind(at.micros())
            .bind(id)
            .bind(expected_revision)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else {
            let exists = Self::fetch_agent_in(&mut tx, id).await?.is_some();
            tx.rollback().await?;
            return Err(if exists {
                StoreError::VersionMismatch
            } else {
                StoreError::NotFound
            });
        };
        let updated = Agent::try_from(row)?;
        let public = Change::is_public(Some(updated.state), Some(updated.state));
        self.log_change(&mut tx, &updated, ChangeKind::Updated, at, public)
            .await?;
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
        let mut tx = self.pool.begin().await?;
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
            let current = Self::fetch_agent_in(&mut tx, id).await?;
            tx.rollback().await?;
            return Err(match current {
                Some(current) => StoreError::InvalidTransition(format!(
                    "agent '{}' is {}, not {}",
                    current.package_name(),
                    current.state.as_str(),
                    from.as_str()
                )),
                None => StoreError::NotFound,
            });
        };
        let updated = Agent::try_from(row)?;
        let kind = match to {
            AgentState::Active => ChangeKind::Published,
            AgentState::Stage => ChangeKind::Unpublished,
        };
        let public = Change::is_public(Some(from), Some(to));
        self.log_change(&mut tx, &updated, kind, at, public).await?;
        tx.commit().await?;
        Ok(updated)
    }

    async fn set_verification(
        &self,
        id: &str,
        level: VerificationLevel,
        at: Timestamp,
    ) -> StoreResult<Agent> {
        let mut tx = self.pool.begin().await?;
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
        let public = Change::is_public(Some(updated.state), Some(updated.state));
        self.log_change(&mut tx, &updated, ChangeKind::Verified, at, public)
            .await?;
        tx.commit().await?;
        Ok(updated)
    }

    async fn delete_agent(&self, id: &str, at: Timestamp) -> StoreResult<bool> {
        let mut tx = self.pool.begin().await?;
        let sql = format!("DELETE FROM agents WHERE id = $1 RETURNING {AGENT_COLUMNS}");
        let row: Option<AgentRow> = sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else {
            tx.rollback().await?;
            return Ok(false);
        };
        let deleted = Agent::try_from(row)?;
        let public = Change::is_public(Some(deleted.state), None);
        self.log_change(&mut tx, &deleted, ChangeKind::Deleted, at, public)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn list_agents(
        &self,
        owner: Option<&str>,
        after_id: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<Agent>> {
        let sql = format!(
            "SELECT {AGENT_COLUMNS} FROM agents \
             WHERE ($1::TEXT IS NULL OR owner = $1) AND ($2::TEXT IS NULL OR id > $2) \
             ORDER BY id LIMIT $3"
        );
        let rows: Vec<AgentRow> = sqlx::query_as(&sql)
            .bind(owner)
            .bind(after_id)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(Agent::try_from).collect()
    }

    async fn all_agents(&self, state: Option<AgentState>) -> StoreResult<Vec<Agent>> {
        let sql = format!(
            "SELECT {AGENT_COLUMNS} FROM agents WHERE ($1::TEXT IS NULL OR state = $1) \
             ORDER BY id"
        );
        let rows: Vec<AgentRow> = sqlx::query_as(&sql)
            .bind(state.map(AgentState::as_str))
            .fetch_all(&self.pool)
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
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(Change::try_from).collect()
    }

    async fn public_changes_since(&self, since: i64, limit: u32) -> StoreResult<Vec<Change>> {
        let sql = format!(
            "SELECT {CHANGE_COLUMNS} FROM agent_changes WHERE public AND seq > $1 \
             ORDER BY seq LIMIT $2"
        );
        let rows: Vec<ChangeRow> = sqlx::query_as(&sql)
            .bind(since)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(Change::try_from).collect()
    }

    async fn latest_change(&self) -> StoreResult<i64> {
        let seq: Option<i64> = sqlx::query_scalar("SELECT MAX(seq) FROM agent_changes")
            .fetch_one(&self.pool)
            .await?;
        Ok(seq.unwrap_or(0))
    }

    async fn wait_for_change(&self, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, self.changed.notified()).await;
    }

    async fn load_embeddings(&self, embedder_id: &str) -> StoreResult<Vec<StoredEmbedding>> {
        let rows: Vec<EmbeddingRow> = sqlx::query_as(
            "SELECT agent_id, content_hash, vector FROM agent_embeddings WHERE embedder_id = $1",
        )
        .bind(embedder_id)
        .fetch_all(&self.pool)
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
        .fetch_optional(&self.pool)
        .await?;
        row.map(StoredEmbedding::try_from).transpose()
    }

    async fn save_embeddings(
        &self,
        embedder_id: &str,
        embeddings: &[StoredEmbedding],
    ) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        for embedding in embeddings {
            // INSERT … SELECT: nothing is written for an agent deleted meanwhile.
            sqlx::query(
                "INSERT INTO agent_embeddings (agent_id, embedder_id, content_hash, vector) \
                 SELECT id, $1, $2, $3 FROM agents WHERE id = $4 \
                 ON CONFLICT (agent_id, embedder_id) DO UPDATE SET \
                 content_hash = EXCLUDED.content_hash, vector = EXCLUDED.vector",
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

    async fn insert_token(&self, token: &TokenRecord) -> StoreResult<()> {
        let inserted = sqlx::query(
            "INSERT INTO tokens (id, owner, scopes, secret_hash, created_at, expires_at, \
             revoked_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&token.id)
        .bind(&token.owner)
        .bind(scopes_column(&token.scopes))
        .bind(&token.secret_hash)
        .bind(token.created_at.micros())
        .bind(token.expires_at.map(Timestamp::micros))
        .bind(token.revoked_at.map(Timestamp::micros))
        .execute(&self.pool)
        .await;
        match inserted {
            Err(err) if is_unique_violation(&err) => {
                Err(StoreError::Conflict("token already exists".to_owned()))
            }
            other => other.map(|_| ()).map_err(StoreError::from),
        }
    }

    async fn find_token_by_hash(&self, secret_hash: &str) -> StoreResult<Option<TokenRecord>> {
        if secret_hash.contains('\0') {
            return Ok(None);
        }
        let sql = format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE secret_hash = $1");
        let row: Option<TokenRow> = sqlx::query_as(&sql)
            .bind(secret_hash)
            .fetch_optional(&self.pool)
            .await?;
        row.map(TokenRecord::try_from).transpose()
    }

    async fn list_tokens(&self, owner: Option<&str>) -> StoreResult<Vec<TokenRecord>> {
        let sql = format!(
            "SELECT {TOKEN_COLUMNS} FROM tokens WHERE ($1::TEXT IS NULL OR owner = $1) \
             ORDER BY created_at DESC, id DESC"
        );
        let rows: Vec<TokenRow> = sqlx::query_as(&sql)
            .bind(owner)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(TokenRecord::try_from).collect()
    }

    async fn revoke_token(&self, id: &str, at: Timestamp) -> StoreResult<bool> {
        if id.contains('\0') {
            return Ok(false);
        }
        let result =
            sqlx::query("UPDATE tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL")
                .bind(at.micros())
                .bind(id)
                .execute(&self.pool)
                .await?;
        Ok(result.rows_affected() > 0)
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
        .execute(&self.pool)
        .await;
        match inserted {
            Err(err) if is_unique_violation(&err) => {
                Err(StoreError::Conflict("session already exists".to_owned()))
            }
            other => other.map(|_| ()).map_err(StoreError::from),
        }
    }

    async fn find_session(&self, id: &str) -> StoreResult<Option<PlaygroundSession>> {
        if id.contains('\0') {
            return Ok(None);
        }
        // One repeatable-read transaction, so the steps belong to the session row read.
        let mut tx = self.pool.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await?;
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
        if session_id.contains('\0') {
            return Err(StoreError::NotFound);
        }
        let data = to_json(&step.data)?;
        let mut tx = self.pool.begin().await?;
        // The UPDATE locks the session row, so concurrent appends number their steps in turn.
        let touched = sqlx::query(
            "UPDATE playground_sessions SET last_active_at = $1, expires_at = $2 WHERE id = $3",
        )
        .bind(step.at.micros())
        .bind(expires_at.micros())
        .bind(session_id)
        .execute(&mut *tx)
        .await?;
        if touched.rows_affected() == 0 {
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
        if id.contains('\0') {
            return Ok(false);
        }
        let result = sqlx::query(
            "UPDATE playground_sessions SET last_active_at = $1, expires_at = $2 WHERE id = $3",
        )
        .bind(at.micros())
        .bind(expires_at.micros())
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(result.rows_affected() > 0)
    }

    async fn delete_session(&self, id: &str) -> StoreResult<bool> {
        if id.contains('\0') {
            return Ok(false);
        }
        let result = sqlx::query("DELETE FROM playground_sessions WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(result.rows_affected() > 0)
    }

    async fn purge_expired_sessions(&self, now: Timestamp) -> StoreResult<u64> {
        let result = sqlx::query("DELETE FROM playground_sessions WHERE expires_at <= $1")
            .bind(now.micros())
            .execute(&self.pool)
            .await?;
        Ok(result.rows_affected())
    }
}
