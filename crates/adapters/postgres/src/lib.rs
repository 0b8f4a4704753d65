//! The PostgreSQL store: `PostgresStore` implements the engine's `EventStore`,
//! `ExecutionStore`, `VersionStore` and `ReplicaStore` ports on one database that several
//! `serve` processes (replicas) share (ADR 0020).
//!
//! What lives here: SQL, the connection pool, migrations, the `LISTEN` task, and the
//! translation between rows and the domain's records, which read back exactly as the
//! SQLite store's do. What must not: any rule about turns beyond the ports' invariants
//! (the engine decides; this crate records), and anything SQLite-specific.
//!
//! The invariants hold across processes because the database enforces them: row locks
//! order appenders, partial unique indexes keep one running turn per thread, triggers
//! keep the audit tables append-only, and `FOR UPDATE SKIP LOCKED` hands each queued
//! row to one claimer.

mod approvals;
mod budgets;
mod costs;
mod db;
mod events;
mod executions;
mod keys;
mod listener;
mod nul;
mod replicas;
mod schema;
mod store;
mod versions;

pub use budgets::PostgresLedger;
pub use schema::SCHEMA_VERSION;
pub use store::PostgresStore;

use agentplane_engine::ports::StoreError;
use tokio_postgres::error::SqlState;

/// Any PostgreSQL failure without a more specific meaning. Free text is escaped so that
/// NUL characters are stored (`nul.rs`); should one still reach a `TEXT` column, the
/// write is refused as a `Conflict` that says so rather than as an internal failure:
/// the input, not the store, is at fault.
fn pg(e: tokio_postgres::Error) -> StoreError {
    if let Some(db) = e.as_db_error() {
        let code = db.code();
        if *code == SqlState::CHARACTER_NOT_IN_REPERTOIRE
            || *code == SqlState::UNTRANSLATABLE_CHARACTER
        {
            return StoreError::Conflict(format!(
                "text containing a NUL character cannot be stored ({})",
                db.message()
            ));
        }
        return StoreError::Backend(format!("postgres: {}", db.message()));
    }
    StoreError::Backend(format!("postgres: {e}"))
}

/// The name of the unique index or key `e` violated, if that is what failed.
fn unique_violation(e: &tokio_postgres::Error) -> Option<&str> {
    let db = e.as_db_error()?;
    (*db.code() == SqlState::UNIQUE_VIOLATION).then(|| db.constraint().unwrap_or(""))
}

/// A stored value that does not decode.
fn damaged(what: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(format!("stored {what} is damaged"))
}
