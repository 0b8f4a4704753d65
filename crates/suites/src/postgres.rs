//! PostgreSQL for the replica suites: the test server's URL (`AGENTPLANE_TEST_POSTGRES_URL`,
//! started by `scripts/postgres.sh`), a fresh database per run, and a plain connection
//! for the checks and faults made behind the API's back (reading the tables, cutting
//! the replicas' connections).

use std::time::{SystemTime, UNIX_EPOCH};

use tokio_postgres::{Client, NoTls};

/// The URL in `var`, or `None` (a skip, with a note) outside CI; under `CI=true` a
/// missing service fails the test.
pub fn service(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var("CI").is_err(),
                "CI must provide {var} (scripts/test.sh starts the service)"
            );
            eprintln!("{var} is not set; run ./scripts/test.sh to include this test");
            None
        }
    }
}

/// A connection to `url`, driven in the background.
pub async fn connect(url: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .expect("connect to the test PostgreSQL");
    tokio::spawn(connection);
    client
}

/// A fresh database on the server of `url`: its URL, and the name to drop.
pub async fn fresh_database(url: &str) -> (String, String) {
    let client = connect(url).await;
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_nanos();
    let name = format!("ap_replicas_{}_{nanos}", std::process::id());
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create a database");
    let (server, _) = url
        .split_once('?')
        .map_or((url, ""), |(server, query)| (server, query));
    let slash = server.rfind('/').expect("a URL with a database");
    let fresh = if slash > server.find("://").expect("a URL") + 2 {
        format!("{}/{name}", &server[..slash])
    } else {
        format!("{server}/{name}")
    };
    (fresh, name)
}

/// Drops the database `name` (also with connections still open).
pub async fn drop_database(url: &str, name: &str) {
    if let Ok((client, connection)) = tokio_postgres::connect(url, NoTls).await {
        tokio::spawn(connection);
        let _ = client
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await;
    }
}

/// Cuts every connection agentplane holds to the database `name` (its listeners and
/// its pools), as a network blip or a database restart would; returns how many.
pub async fn cut_connections(admin: &Client, name: &str) -> i64 {
    admin
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE datname = $1 AND pid <> pg_backend_pid()
               AND application_name LIKE 'agentplane%'",
            &[&name],
        )
        .await
        .expect("terminate connections")
        .get(0)
}
