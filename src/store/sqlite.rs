//! The embedded default: SQLite in WAL mode, one writer connection and a pool of readers.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Sqlite, Transaction};

use crate::domain::AgentDraft;
use crate::timestamp::Timestamp;

use super::row::{
    AgentRow, ChangeRow, DraftColumns, EmbeddingRow, SessionRow, StepRow, TokenRow, scopes_column,
    to_json,
};
use super::{
    Agent, AgentState, Change, ChangeKind, PlaygroundSession, SessionStep, Store, StoreError,
    StoreResult, StoredEmbedding, TokenRecord, VerificationLevel,
};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// SQLite store. All writes go through one connection, so writers never contend for the lock
/// inside this process; readers use a separate pool and see committed data (WAL).
#[derive(Clone)]
pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
}

const AGENT_COLUMNS: &str = "id, package_name, owner, state, verification_level, \
    verification_token, revision, name, description, version, manifest_url, url, target, \
    category, tags, capabilities, payment, card, created_at, updated_at, published_at";

impl SqliteStore {
    /// Open (creating if needed) `registry.db` in `dir`.
    pub async fn open_dir(dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir).map_err(|err| {
            anyhow::anyhow!("cannot create data directory {}: {err}", dir.display())
        })?;
        let options = SqliteConnectOptions::new().filename(dir.join("registry.db"));
        Self::with_options(options).await
    }

    /// Open a `sqlite:` URL.
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        Self::with_options(SqliteConnectOptions::from_str(url)?).await
    }

    async fn with_options(options: SqliteConnectOptions) -> anyhow::Result<Self> {
        // FULL: every acknowledged write is on disk before the response, surviving a power
        // loss as well as a killed process.
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10));
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone())
            .await?;
        MIGRATOR.run(&writer).await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(options.read_only(true))
            .await?;
        Ok(Self { writer, reader })
    }

    async fn fetch_agent_in(
        tx: &mut Transaction<'_, Sqlite>,
        id: &str,
    ) -> StoreResult<Option<Agent>> {
        let sql = format!("SELECT {AGENT_COLUMNS} FROM agents WHERE id = ?");
        let row: Option<AgentRow> = sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?;
        row.map(Agent::try_from).transpose()
    }

    async fn log_change(
        tx: &mut Transaction<'_, Sqlite>,
        agent: &Agent,
        kind: ChangeKind,
        at: Timestamp,
        public: bool,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO agent_changes (agent_id, package_name, kind, at, public) \
             VALUES (?, ?, ?, ?, ?)",
        )
        .bind(&agent.id)
        .bind(agent.package_name())
        .bind(kind.as_str())
        .bind(at.micros())
        .bind(public)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Read an agent inside a write transaction, or `NotFound`.
    async fn existing(tx: &mut Transaction<'_, Sqlite>, id: &str) -> StoreResult<Agent> {
        Self::fetch_agent_in(tx, id)
            .await?
            .ok_or(StoreError::NotFound)
    }
}

fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}

#[async_trait]
impl Store for SqliteStore {
    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.reader).await?;
        Ok(())
    }

    async fn insert_agent(&self, agent: &Agent) -> StoreResult<()> {
        let columns = DraftColumns::of(&agent.draft)?;
        let draft = &agent.draft;
        let mut tx = self.writer.begin().await?;
        let sql = format!(
            "INSERT INTO agents ({AGENT_COLUMNS}) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
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
            Err(err) if is_unique_violation(&err) => {
                return Err(StoreError::Conflict(format!(
                    "package name '{}' is already registered",
                    agent.package_name()
                )));
            }
            other => other?,
        };
        let public = Change::is_public(None, Some(agent.state));
        Self::log_change(
            &mut tx,
            agent,
            ChangeKind::Created,
            agent.created_at,
            public,
        )
        .await?;
        if agent.state == AgentState::Active {
            Self::log_change(
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
        let sql = format!("SELECT {AGENT_COLUMNS} FROM agents WHERE id = ? OR package_name = ?");
        let row: Option<AgentRow> = sqlx::query_as(&sql)
            .bind(identifier)
            .bind(identifier.to_lowercase())
            .fetch_optional(&self.reader)
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
        let mut tx = self.writer.begin().await?;
        let current = Self::existing(&mut tx, id).await?;
        if expected_revision.is_some_and(|rev| rev != current.revision) {
            return Err(StoreError::VersionMismatch);
        }
        sqlx::query(
            "UPDATE agents SET name = ?, description = ?, version = ?, manifest_url = ?, \
             url = ?, target = ?, category = ?, tags = ?, capabilities = ?, payment = ?, \
             card = ?, updated_at = ?, revision = revision + 1 WHERE id = ?",
        )
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
        .execute(&mut *tx)
        .await?;
        let updated = Self::existing(&mut tx, id).await?;
        let public = Change::is_public(Some(current.state), Some(updated.state));
        Self::log_change(&mut tx, &updated, ChangeKind::Updated, at, public).await?;
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
        let mut tx = self.writer.begin().await?;
        let current = Self::existing(&mut tx, id).await?;
        if current.state != from {
            return Err(StoreError::InvalidTransition(format!(
                "agent '{}' is {}, not {}",
                current.package_name(),
                current.state.as_str(),
                from.as_str()
            )));
        }
        let published_at = match to {
            AgentState::Active => Some(at.micros()),
            AgentState::Stage => None,
        };
        sqlx::query(
            "UPDATE agents SET state = ?, published_at = ?, updated_at = ?, \
             revision = revision + 1 WHERE id = ?",
        )
        .bind(to.as_str())
        .bind(published_at)
        .bind(at.micros())
        .bind(id)
        .execute(&mut *tx)
        .await?;
        let updated = Self::existing(&mut tx, id).await?;
        let kind = match to {
            AgentState::Active => ChangeKind::Published,
            AgentState::Stage => ChangeKind::Unpublished,
        };
        Self::log_change(
            &mut tx,
            &updated,
            kind,
            at,
            Change::is_public(Some(from), Some(to)),
        )
        .await?;
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
        let current = Self::existing(&mut tx, id).await?;
        sqlx::query(
            "UPDATE agents SET verification_level = ?, updated_at = ?, revision = revision + 1 \
             WHERE id = ?",
        )
        .bind(level.as_str())
        .bind(at.micros())
        .bind(id)
        .execute(&mut *tx)
        .await?;
        let updated = Self::existing(&mut tx, id).await?;
        let public = Change::is_public(Some(current.state), Some(updated.state));
        Self::log_change(&mut tx, &updated, ChangeKind::Verified, at, public).await?;
        tx.commit().await?;
        Ok(updated)
    }

    async fn delete_agent(&self, id: &str, at: Timestamp) -> StoreResult<bool> {
        let mut tx = self.writer.begin().await?;
        let Some(current) = Self::fetch_agent_in(&mut tx, id).await? else {
            return Ok(false);
        };
        sqlx::query("DELETE FROM agents WHERE id = ?")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let public = Change::is_public(Some(current.state), None);
        Self::log_change(&mut tx, &current, ChangeKind::Deleted, at, public).await?;
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
             WHERE (?1 IS NULL OR owner = ?1) AND (?2 IS NULL OR id > ?2) \
             ORDER BY id LIMIT ?3"
        );
        let rows: Vec<AgentRow> = sqlx::query_as(&sql)
            .bind(owner)
            .bind(after_id)
            .bind(i64::from(limit))
            .fetch_all(&self.reader)
            .await?;
        rows.into_iter().map(Agent::try_from).collect()
    }

    async fn all_agents(&self, state: Option<AgentState>) -> StoreResult<Vec<Agent>> {
        let sql = format!(
            "SELECT {AGENT_COLUMNS} FROM agents WHERE (?1 IS NULL OR state = ?1) ORDER BY id"
        );
        let rows: Vec<AgentRow> = sqlx::query_as(&sql)
            .bind(state.map(AgentState::as_str))
            .fetch_all(&self.reader)
            .await?;
        rows.into_iter().map(Agent::try_from).collect()
    }

    async fn changes_since(&self, since: i64, limit: u32) -> StoreResult<Vec<Change>> {
        let rows: Vec<ChangeRow> = sqlx::query_as(
            "SELECT seq, agent_id, package_name, kind, at, public FROM agent_changes \
             WHERE seq > ? ORDER BY seq LIMIT ?",
        )
        .bind(since)
        .bind(i64::from(limit))
        .fetch_all(&self.reader)
        .await?;
        rows.into_iter().map(Change::try_from).collect()
    }

    async fn public_changes_since(&self, since: i64, limit: u32) -> StoreResult<Vec<Change>> {
        let rows: Vec<ChangeRow> = sqlx::query_as(
            "SELECT seq, agent_id, package_name, kind, at, public FROM agent_changes \
             WHERE public = 1 AND seq > ? ORDER BY seq LIMIT ?",
        )
        .bind(since)
        .bind(i64::from(limit))
        .fetch_all(&self.reader)
        .await?;
        rows.into_iter().map(Change::try_from).collect()
    }

    async fn latest_change(&self) -> StoreResult<i64> {
        let seq: Option<i64> = sqlx::query_scalar("SELECT MAX(seq) FROM agent_changes")
            .fetch_one(&self.reader)
            .await?;
        Ok(seq.unwrap_or(0))
    }

    async fn load_embeddings(&self, embedder_id: &str) -> StoreResult<Vec<StoredEmbedding>> {
        let rows: Vec<EmbeddingRow> = sqlx::query_as(
            "SELECT agent_id, content_hash, vector FROM agent_embeddings WHERE embedder_id = ?",
        )
        .bind(embedder_id)
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
             WHERE agent_id = ? AND embedder_id = ?",
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
        let mut tx = self.writer.begin().await?;
        for embedding in embeddings {
            // INSERT … SELECT: nothing is written for an agent deleted meanwhile.
            sqlx::query(
                "INSERT INTO agent_embeddings (agent_id, embedder_id, content_hash, vector) \
                 SELECT id, ?, ?, ? FROM agents WHERE id = ? \
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

    async fn insert_token(&self, token: &TokenRecord) -> StoreResult<()> {
        let inserted = sqlx::query(
            "INSERT INTO tokens (id, owner, scopes, secret_hash, created_at, expires_at, \
             revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&token.id)
        .bind(&token.owner)
        .bind(scopes_column(&token.scopes))
        .bind(&token.secret_hash)
        .bind(token.created_at.micros())
        .bind(token.expires_at.map(Timestamp::micros))
        .bind(token.revoked_at.map(Timestamp::micros))
        .execute(&self.writer)
        .await;
        match inserted {
            Err(err) if is_unique_violation(&err) => {
                Err(StoreError::Conflict("token already exists".to_owned()))
            }
            other => other.map(|_| ()).map_err(StoreError::from),
        }
    }

    async fn find_token_by_hash(&self, secret_hash: &str) -> StoreResult<Option<TokenRecord>> {
        let row: Option<TokenRow> = sqlx::query_as(
            "SELECT id, owner, scopes, secret_hash, created_at, expires_at, revoked_at \
             FROM tokens WHERE secret_hash = ?",
        )
        .bind(secret_hash)
        .fetch_optional(&self.reader)
        .await?;
        row.map(TokenRecord::try_from).transpose()
    }

    async fn list_tokens(&self, owner: Option<&str>) -> StoreResult<Vec<TokenRecord>> {
        let rows: Vec<TokenRow> = sqlx::query_as(
            "SELECT id, owner, scopes, secret_hash, created_at, expires_at, revoked_at \
             FROM tokens WHERE (?1 IS NULL OR owner = ?1) ORDER BY created_at DESC, id DESC",
        )
        .bind(owner)
        .fetch_all(&self.reader)
        .await?;
        rows.into_iter().map(TokenRecord::try_from).collect()
    }

    async fn revoke_token(&self, id: &str, at: Timestamp) -> StoreResult<bool> {
        let result =
            sqlx::query("UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL")
                .bind(at.micros())
                .bind(id)
                .execute(&self.writer)
                .await?;
        Ok(result.rows_affected() > 0)
    }

    async fn insert_session(&self, session: &PlaygroundSession) -> StoreResult<()> {
        let inserted = sqlx::query(
            "INSERT INTO playground_sessions (id, owner, name, created_at, last_active_at, \
             expires_at) VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(&session.id)
        .bind(&session.owner)
        .bind(&session.name)
        .bind(session.created_at.micros())
        .bind(session.last_active_at.micros())
        .bind(session.expires_at.micros())
        .execute(&self.writer)
        .await;
        match inserted {
            Err(err) if is_unique_violation(&err) => {
                Err(StoreError::Conflict("session already exists".to_owned()))
            }
            other => other.map(|_| ()).map_err(StoreError::from),
        }
    }

    async fn find_session(&self, id: &str) -> StoreResult<Option<PlaygroundSession>> {
        // One read transaction, so the steps belong to the session row read.
        let mut tx = self.reader.begin().await?;
        let row: Option<SessionRow> = sqlx::query_as(
            "SELECT id, owner, name, created_at, last_active_at, expires_at \
             FROM playground_sessions WHERE id = ?",
        )
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let steps: Vec<StepRow> = sqlx::query_as(
            "SELECT seq, kind, at, duration_ms, data FROM playground_steps \
             WHERE session_id = ? ORDER BY seq",
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
        let data = to_json(&step.data)?;
        let mut tx = self.writer.begin().await?;
        let touched = sqlx::query(
            "UPDATE playground_sessions SET last_active_at = ?, expires_at = ? WHERE id = ?",
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
            "SELECT COALESCE(MAX(seq), 0) + 1 FROM playground_steps WHERE session_id = ?",
        )
        .bind(session_id)
        .fetch_one(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO playground_steps (session_id, seq, kind, at, duration_ms, data) \
             VALUES (?, ?, ?, ?, ?, ?)",
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
        let result = sqlx::query(
            "UPDATE playground_sessions SET last_active_at = ?, expires_at = ? WHERE id = ?",
        )
        .bind(at.micros())
        .bind(expires_at.micros())
        .bind(id)
        .execute(&self.writer)
        .await?;
        Ok(result.rows_affected() > 0)
    }

    async fn delete_session(&self, id: &str) -> StoreResult<bool> {
        let result = sqlx::query("DELETE FROM playground_sessions WHERE id = ?")
            .bind(id)
            .execute(&self.writer)
            .await?;
        Ok(result.rows_affected() > 0)
    }

    async fn purge_expired_sessions(&self, now: Timestamp) -> StoreResult<u64> {
        let result = sqlx::query("DELETE FROM playground_sessions WHERE expires_at <= ?")
            .bind(now.micros())
            .execute(&self.writer)
            .await?;
        Ok(result.rows_affected())
    }
}
