//! The hub: threads and turns as a service, shared by every interface.
//!
//! It owns what outlives one call: the live feed of each thread's events, the registry
//! of running turns (to cancel them), the permission broker, model resolution and the
//! task tracker used by graceful shutdown. Tenancy lives here too: every method takes
//! the caller's client id, and another client's thread or turn is `NotFound`, never
//! `Forbidden`, so ids cannot be probed. Handlers stay thin: they extract, call one
//! method, and map the result.
//!
//! This file only lists the files and the public names. `Hub` itself is `state.rs`,
//! built by `builder.rs`; every other file adds the methods of one concept to it, and
//! the types of its fields live in files that add none (`live.rs`,
//! `workspace_roots.rs`), so no file is read back by one it reads.

mod admission;
mod agents;
mod approvals;
mod builder;
mod external;
mod feeds;
mod history;
mod live;
mod plan;
mod replicas;
mod shadows;
mod shared_event;
mod shutdown;
mod state;
mod stream;
mod tasks;
mod threads;
mod turns;
mod workspace_roots;
mod workspaces;

pub use crate::error::HubError;
pub use approvals::ApprovalAnswer;
pub use builder::{HubBuilder, Services};
pub use feeds::DisconnectGuard;
pub use history::{Compaction, History, HistoryTurn};
pub use plan::MAX_INPUT_CHARS;
pub use shared_event::SharedEvent;
pub use state::{Hub, HubConfig, Toolbox};
pub use stream::EventStream;
pub use threads::{CreateThread, MAX_THREAD_PAGE, MAX_TITLE_CHARS, ThreadPage};
pub use turns::StartedTurn;
pub use workspace_roots::WorkspaceRoots;
