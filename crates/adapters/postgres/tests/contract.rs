//! The store contract (`agentplane-store-contract`) against `PostgresStore`: every test
//! gets a schema of its own (in a database the contract tests share) on the test
//! server, and a raw connection to it.

mod common;

use agentplane_postgres::PostgresStore;
use agentplane_store_contract::{replica_contract, store_contract};

use common::{PgRaw, TestDb};

async fn fresh() -> Option<(TestDb, PostgresStore, PgRaw)> {
    let db = TestDb::create_schema().await?;
    let store = db.store().await;
    let raw = db.raw().await;
    Some((db, store, raw))
}

store_contract!(fresh);
replica_contract!(fresh);
