//! Fixtures of the PostgreSQL tests: a fresh database (or schema) per test on the server
//! `AGENTPLANE_TEST_POSTGRES_URL` names (`scripts/postgres.sh` starts one; `scripts/test.sh`
//! sets it), dropped when the test ends, and raw SQL on it.

#![allow(dead_code)]

use agentplane_core::ReplicaId;
use agentplane_postgres::PostgresStore;
use agentplane_store_contract::{Dialect, RawSql};
use async_trait::async_trait;
use tokio_postgres::NoTls;
use tokio_postgres::error::SqlState;

/// The server's URL, or `None` (with a note) where none is configured. Under CI it
/// must be.
pub fn server_url() -> Option<String> {
    match std::env::var("AGENTPLANE_TEST_POSTGRES_URL") {
        Ok(url) => Some(url),
        Err(_) => {
            assert!(
                std::env::var("CI").is_err(),
                "CI must provide AGENTPLANE_TEST_POSTGRES_URL (scripts/test.sh starts the server)"
            );
            eprintln!(
                "AGENTPLANE_TEST_POSTGRES_URL is not set; run ./scripts/test.sh (or eval \
                 \"$(scripts/postgres.sh)\") to include the PostgreSQL tests"
            );
            None
        }
    }
}

/// `url` with its database replaced by `name`.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let after_scheme = base.find("://").map_or(0, |i| i + 3);
    let base = match base[after_scheme..].find('/') {
        Some(slash) => &base[..after_scheme + slash],
        None => base,
    };
    match query {
        Some(query) => format!("{base}/{name}?{query}"),
        None => format!("{base}/{name}"),
    }
}

/// The database the contract tests share, a schema each.
const SHARED: &str = "agentplane_contract";

/// Where one test's tables live: a database of its own, or a schema of its own in a
/// shared database (cheaper to make; enough for tests that do not look beyond their
/// database, as `LISTEN` and `pg_stat_activity` do).
enum Scope {
    Database(String),
    Schema(String),
}

/// One test's own place on the test server, dropped (with everything in it) on drop.
pub struct TestDb {
    server: String,
    scope: Scope,
    pub url: String,
}

/// A connection to `url`, driven in the background.
async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .expect("connect to the test server");
    tokio::spawn(connection);
    client
}

impl TestDb {
    /// A fresh database for one test.
    pub async fn create() -> Option<TestDb> {
        let server = server_url()?;
        let name = format!("agentplane_test_{}", uuid::Uuid::now_v7().simple());
        connect(&server)
            .await
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create the test database");
        let url = with_database(&server, &name);
        Some(TestDb {
            server,
            scope: Scope::Database(name),
            url,
        })
    }

    /// A fresh schema for one test in the database the contract tests share.
    pub async fn create_schema() -> Option<TestDb> {
        let server = server_url()?;
        if let Err(e) = connect(&server)
            .await
            .batch_execute(&format!("CREATE DATABASE {SHARED}"))
            .await
        {
            // Another test process made it first (or is making it right now).
            let code = e.code().cloned();
            assert!(
                code == Some(SqlState::DUPLICATE_DATABASE)
                    || code == Some(SqlState::UNIQUE_VIOLATION),
                "create the shared test database: {e}"
            );
        }
        let name = format!("test_{}", uuid::Uuid::now_v7().simple());
        let shared = with_database(&server, SHARED);
        connect(&shared)
            .await
            .batch_execute(&format!("CREATE SCHEMA {name}"))
            .await
            .expect("create the test schema");
        let separator = if shared.contains('?') { '&' } else { '?' };
        let url = format!("{shared}{separator}options=-csearch_path%3D{name}");
        Some(TestDb {
            server,
            scope: Scope::Schema(name),
            url,
        })
    }

    /// A store on this database as a new replica.
    pub async fn store(&self) -> PostgresStore {
        PostgresStore::connect(&self.url, ReplicaId::new())
            .await
            .expect("connect the store")
    }

    /// A raw connection to this database.
    pub async fn raw(&self) -> PgRaw {
        PgRaw {
            client: connect(&self.url).await,
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let (url, sql) = match &self.scope {
            Scope::Database(name) => (
                self.server.clone(),
                format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
            ),
            Scope::Schema(name) => (
                with_database(&self.server, SHARED),
                format!("DROP SCHEMA IF EXISTS {name} CASCADE"),
            ),
        };
        // Drop runs inside the test's runtime, which cannot block on itself.
        let statement = sql.clone();
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let (client, connection) = tokio_postgres::connect(&url, NoTls).await?;
                tokio::spawn(connection);
                client.batch_execute(&statement).await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not clean up ({sql}): {dropped:?}");
        }
    }
}

/// A connection beside the store's, as an operator could open.
pub struct PgRaw {
    pub client: tokio_postgres::Client,
}

#[async_trait]
impl RawSql for PgRaw {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    async fn execute(&self, sql: &str) -> Result<u64, String> {
        self.client.execute(sql, &[]).await.map_err(describe)
    }

    async fn batch(&self, sql: &str) -> Result<(), String> {
        self.client.batch_execute(sql).await.map_err(describe)
    }

    async fn query_i64(&self, sql: &str) -> Result<i64, String> {
        let row = self.client.query_one(sql, &[]).await.map_err(describe)?;
        row.try_get(0).map_err(describe)
    }

    async fn query_texts(&self, sql: &str) -> Result<Vec<String>, String> {
        let rows = self.client.query(sql, &[]).await.map_err(describe)?;
        rows.iter()
            .map(|row| row.try_get(0).map_err(describe))
            .collect()
    }
}

fn describe(e: tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => db.message().to_owned(),
        None => e.to_string(),
    }
}
