//! The SQLite event store: `SqliteStore` implements the engine's `EventStore` port on
//! one local database file (WAL, one batched writer thread, read-only readers).
//!
//! `SqliteStore` also implements `ExecutionStore` (the execution queue, `executions.rs`),
//! `VersionStore`, `ReplicaStore` (`replicas.rs`; the file is locked to one process) and
//! `AuditStore` (`audit.rs`: the tamper-evident chain, read back).
//!
//! What lives here: SQL, connections, migrations, and the translation between rows and
//! the domain's records. What must not: any rule about turns beyond the port's
//! invariants (the engine decides what happens in a turn; this crate only records it).

mod approvals;
mod audit;
mod connection;
mod costs;
mod executions;
mod keys;
mod ledger;
mod mcp_calls;
mod migrations;
mod model_calls;
mod permissions;
mod reader;
mod record_chains;
mod replicas;
mod responses;
mod rows;
mod store;
mod tool_pins;
mod versions;
mod writer;

pub use migrations::SCHEMA_VERSION;
pub use store::SqliteStore;
