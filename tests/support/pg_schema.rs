#![allow(dead_code)]
//! Throwaway PostgreSQL schemas for tests: the store conformance suite, `tests/api` on
//! PostgreSQL, and the multi-process tests include this file (it is not part of the service).

use std::time::Duration;

use sqlx::Connection;
use sqlx::postgres::PgConnection;

/// The database tests use: `REGISTRY_TEST_DATABASE_URL`, else the local server.
pub const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
/// Set to `1` to skip the PostgreSQL tests explicitly (they fail when it is unreachable).
pub const SKIP_VAR: &str = "REGISTRY_TEST_SKIP_POSTGRES";

/// A fresh schema, dropped (with everything in it) when this is dropped.
pub struct TestSchema {
    admin_url: String,
    name: String,
    /// Connects with the schema as `search_path`: hand it to `--database-url`.
    pub url: String,
}

/// Whether the PostgreSQL tests are explicitly skipped.
pub fn skipped() -> bool {
    std::env::var(SKIP_VAR).is_ok_and(|value| value == "1")
}

impl TestSchema {
    /// Create a schema with a random name. `None` only when explicitly skipped; panics with
    /// a clear message when PostgreSQL is unreachable.
    pub async fn create() -> Option<Self> {
        if skipped() {
            eprintln!("{SKIP_VAR}=1: skipping a PostgreSQL test");
            return None;
        }
        let admin_url =
            std::env::var("REGISTRY_TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned());
        let name = format!("test_{}", ulid::Ulid::new().to_string().to_lowercase());
        let mut connection = connect(&admin_url).await;
        sqlx::query(&format!("CREATE SCHEMA {name}"))
            .execute(&mut connection)
            .await
            .unwrap_or_else(|err| panic!("cannot create schema {name}: {err}"));
        let _ = connection.close().await;
        let mut url = url::Url::parse(&admin_url).expect("REGISTRY_TEST_DATABASE_URL is a URL");
        // The application name tags every connection of the schema, so dropping it can
        // end connections a test left behind (an idle transaction would block the drop).
        url.query_pairs_mut()
            .append_pair("options", &format!("-c search_path={name}"))
            .append_pair("application_name", &name);
        Some(Self {
            admin_url,
            name,
            url: url.into(),
        })
    }
}

async fn connect(url: &str) -> PgConnection {
    let attempt = tokio::time::timeout(Duration::from_secs(10), PgConnection::connect(url));
    match attempt.await {
        Ok(Ok(connection)) => connection,
        Ok(Err(err)) => panic!(
            "PostgreSQL at {url} is unreachable ({err}); start it (.ci/run does) or set \
             {SKIP_VAR}=1 to skip the PostgreSQL tests"
        ),
        Err(_) => panic!(
            "PostgreSQL at {url} did not answer within 10 s; start it (.ci/run does) or set \
             {SKIP_VAR}=1 to skip the PostgreSQL tests"
        ),
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        let (url, name) = (self.admin_url.clone(), self.name.clone());
        // Drop may run inside a runtime that cannot block: use a thread with its own.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let mut connection = connect(&url).await;
                sqlx::query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                     WHERE application_name = $1",
                )
                .bind(&name)
                .execute(&mut connection)
                .await?;
                sqlx::query(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
                    .execute(&mut connection)
                    .await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(_))) {
            eprintln!("could not drop test schema {}", self.name);
        }
    }
}
