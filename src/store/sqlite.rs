//! The embedded default: SQLite in WAL mode, one writer connection and a pool of readers. The
//! SQL is shared with PostgreSQL (`sql.rs`); this file opens the database and says how SQLite
//! logs a change.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::Sqlite;
use sqlx::query::Query;
use sqlx::sqlite::{
    SqliteArguments, SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePoolOptions,
    SqliteQueryResult, SqliteSynchronous,
};

use super::StoreResult;
use super::sql::{Dialect, SqlStore};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// SQLite store. All writes go through one connection, so writers never contend for the lock
/// inside this process; readers use a separate pool and see committed data (WAL).
pub type SqliteStore = SqlStore<Sqlite>;

impl SqlStore<Sqlite> {
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
        Ok(Self {
            writer,
            reader,
            feed: (),
        })
    }
}

#[async_trait]
impl Dialect for Sqlite {
    /// Nothing: followers in other processes poll.
    type Feed = ();

    const LOG_CHANGE: &'static str = "INSERT INTO agent_changes \
        (agent_id, package_name, kind, at, public, version, audience) \
        VALUES ($1, $2, $3, $4, $5, $6, $7)";

    /// A WAL read transaction keeps the snapshot of its first read.
    const SKIP_LOCKED: &'static str = "";
    const READ_SNAPSHOT: Option<&'static str> = None;

    /// One writer connection: changes are logged, and committed, in sequence order.
    async fn log_change<'q>(
        _feed: &(),
        tx: &mut SqliteConnection,
        insert: Query<'q, Sqlite, SqliteArguments<'q>>,
    ) -> StoreResult<()> {
        insert.execute(tx).await?;
        Ok(())
    }

    fn rows_affected(result: &SqliteQueryResult) -> u64 {
        result.rows_affected()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::scan::Severity;
    use crate::store::{Agent, Store};

    /// A verdict missing (a row written before verdicts were stored) or of another scanner is
    /// backfilled; one of this scanner stays.
    #[tokio::test]
    async fn a_backfill_writes_missing_and_outdated_verdicts_only() {
        let dir = tempfile::tempdir().expect("dir");
        let store = SqliteStore::open_dir(dir.path()).await.expect("store");
        let draft = crate::domain::AgentDraft::parse(&serde_json::json!({
            "package_name": "com.example.old", "name": "Old", "description": "Tides.",
        }))
        .expect("draft");
        let agent = Agent::new(draft, "alice", crate::timestamp::Timestamp::now());
        store.insert_agent(&agent).await.expect("insert");
        let ids = vec![agent.id.clone()];
        let verdicts = || async { store.scan_severities(&ids).await.expect("verdicts") };
        assert_eq!(verdicts().await, vec![(agent.id.clone(), Severity::None)]);

        sqlx::query("DELETE FROM agent_scans")
            .execute(&store.writer)
            .await
            .expect("forget");
        assert!(verdicts().await.is_empty());
        let found = [(agent.id.clone(), Severity::Low)];
        store
            .record_scan_severities(&found)
            .await
            .expect("backfill");
        assert_eq!(verdicts().await, vec![(agent.id.clone(), Severity::Low)]);

        sqlx::query("UPDATE agent_scans SET scanner = 'agent-registry-scan@0'")
            .execute(&store.writer)
            .await
            .expect("age");
        assert!(
            verdicts().await.is_empty(),
            "another scanner's verdict is not read"
        );
        let found = [(agent.id.clone(), Severity::Medium)];
        store
            .record_scan_severities(&found)
            .await
            .expect("backfill");
        assert_eq!(verdicts().await, vec![(agent.id.clone(), Severity::Medium)]);

        let found = [(agent.id.clone(), Severity::High)];
        store
            .record_scan_severities(&found)
            .await
            .expect("backfill");
        assert_eq!(verdicts().await, vec![(agent.id.clone(), Severity::Medium)]);
    }
}
