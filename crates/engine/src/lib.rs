//! The application layer: runs turns and decides what happens in them.
//!
//! The engine declares the ports it needs (`ports`) and adapters implement them. It must
//! never import an adapter crate, open a socket, touch a file or spawn a process itself;
//! everything outside the process reaches it through a port. Interfaces (CLI, HTTP) call
//! the same engine functions, so they behave the same.

pub mod call_records;
pub mod context;
pub mod error;
pub mod executions;
pub mod external_turn;
pub mod gateway;
pub mod governance;
pub mod harmony;
pub mod hub;
pub mod identity;
pub mod metered;
pub mod models;
pub mod permissions;

pub mod ports;
pub mod recover;
pub mod schema;
pub mod services;
pub mod turn;

pub use turn::{
    EngineError, NoObserver, TurnDeps, TurnError, TurnObserver, TurnOutcome, TurnRequest, run_turn,
};
