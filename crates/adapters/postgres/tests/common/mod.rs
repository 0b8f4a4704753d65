//! Fixtures of the PostgreSQL tests: a fresh database per test on the server
//! `AGENTPLANE_TEST_POSTGRES_URL` names (`scripts/postgres.sh` starts one; `scripts/test.sh`
//! sets it), dropped when the test ends, and raw SQL on it.

#![allow(dead_code)]

use agentplane_core::ReplicaId;
use agentplane_postgres::PostgresStore;
use agentplane_store_contract::{Dialect, RawSql};
use async_trait::async_trait;
use tokio_postgres::NoTls;

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

/// A database of its own for one test, dropped (with any connection left) on drop.
pub struct TestDb {
    server: String,
    name: String,
    pub url: String,
}

impl TestDb {
    pub async fn create() -> Option<TestDb> {
        let server = server_url()?;
        let name = format!("agentplane_test_{}", uuid::Uuid::now_v7().simple());
        let (client, connection) = tokio_postgres::connect(&server, NoTls)
            .await
            .expect("connect to the test server");
        tokio::spawn(connection);
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create the test database");
        let url = with_database(&server, &name);
        Some(TestDb { server, name, url })
    }

    /// A store on this database as a new replica.
    pub async fn store(&self) -> PostgresStore {
        PostgresStore::connect(&self.url, ReplicaId::new())
            .await
            .expect("connect the store")
    }

    /// A raw connection to this database.
    pub async fn raw(&self) -> PgRaw {
        let (client, connection) = tokio_postgres::connect(&self.url, NoTls)
            .await
            .expect("raw connection");
        tokio::spawn(connection);
        PgRaw { client }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let (server, name) = (self.server.clone(), self.name.clone());
        // Drop runs inside the test's runtime, which cannot block on itself.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let (client, connection) = tokio_postgres::connect(&server, NoTls).await?;
                tokio::spawn(connection);
                client
                    .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!(
                "could not drop the test database {}: {dropped:?}",
                self.name
            );
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
