//! The PostgreSQL store: `PostgresStore` implements the engine's `EventStore`,
//! `ExecutionStore`, `VersionStore`, `ReplicaStore` and `AuditStore` ports on one database that several
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
mod audit;
mod budgets;
mod costs;
mod db;
mod events;
mod executions;
mod keys;
mod ledger;
mod listener;
mod mcp_calls;
mod nul;
mod record_chains;
mod replicas;
mod responses;
mod rows;
mod schema;
mod store;
mod tool_pins;
mod versions;

pub use budgets::PostgresLedger;
pub use schema::SCHEMA_VERSION;
pub use store::PostgresStore;
