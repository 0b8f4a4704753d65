//! The store contract (`agentplane-store-contract`) against `PostgresStore`: every test
//! gets a database of its own on the test server, and a raw connection to it.

mod common;

use agentplane_postgres::PostgresStore;
use agentplane_store_contract::store_contract;

use common::{PgRaw, TestDb};

async fn fresh() -> Option<(TestDb, PostgresStore, PgRaw)> {
    let db = TestDb::create().await?;
    let store = db.store().await;
    let raw = db.raw().await;
    Some((db, store, raw))
}

store_contract!(fresh);
