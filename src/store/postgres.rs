//! PostgreSQL: several stateless server processes on one database. The SQL is shared with
//! SQLite (`sql.rs`): writes are single statements guarded by their own `WHERE` (revision,
//! state), so checks and writes are atomic without holding locks across round trips. This file
//! connects, and makes each write log its change in order and wake every process with `NOTIFY`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::Postgres;
use sqlx::postgres::{PgArguments, PgConnection, PgListener, PgPoolOptions, PgQueryResult};
use sqlx::query::Query;
use tokio::sync::Notify;

use crate::task::AbortOnDrop;

use super::StoreResult;
use super::sql::{Dialect, SqlStore};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// Connections per process, the `LISTEN` connection included.
pub const MAX_CONNECTIONS: u32 = 16;

/// PostgreSQL store. Dropping it stops its `LISTEN` task.
pub type PgStore = SqlStore<Postgres>;

/// This schema's change notifications, as a `PgStore` keeps them beside its pool.
pub struct ChangeFeed {
    /// The `NOTIFY` channel of this schema's change log.
    channel: String,
    /// Signalled (one stored permit) whenever a `NOTIFY` arrives or the listener reconnects.
    changed: Arc<Notify>,
    _listener: AbortOnDrop,
}

impl SqlStore<Postgres> {
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
            writer: pool.clone(),
            reader: pool,
            feed: ChangeFeed {
                channel,
                changed,
                _listener: AbortOnDrop::new(task),
            },
        })
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

#[async_trait]
impl Dialect for Postgres {
    type Feed = ChangeFeed;

    /// Inserts the change and, on commit, tells every process its sequence number on `$7`.
    const LOG_CHANGE: &'static str = "WITH logged AS (INSERT INTO agent_changes \
        (agent_id, package_name, kind, at, public, version, audience) \
        VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING seq) SELECT pg_notify($8, seq::text) FROM logged";

    /// Both reads of a session see one snapshot, not each its own (READ COMMITTED).
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    const READ_SNAPSHOT: Option<&'static str> =
        Some("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY");

    /// The advisory lock, held until commit, makes sequence numbers commit in order: a follower
    /// that has read seq N never later finds a new change below N (an identity column alone
    /// hands out numbers at insert, not at commit).
    async fn log_change<'q>(
        feed: &ChangeFeed,
        tx: &mut PgConnection,
        insert: Query<'q, Postgres, PgArguments>,
    ) -> StoreResult<()> {
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
            .bind(&feed.channel)
            .execute(&mut *tx)
            .await?;
        insert.bind(feed.channel.clone()).execute(tx).await?;
        Ok(())
    }

    async fn wait_for_change(feed: &ChangeFeed, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, feed.changed.notified()).await;
    }

    fn rows_affected(result: &PgQueryResult) -> u64 {
        result.rows_affected()
    }
}
