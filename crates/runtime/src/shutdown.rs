//! The one ordered shutdown of everything a runtime started, used by every command
//! (`serve`, `acp`, `mcp serve`, `run`):
//!
//! 1. the hub and the execution workers together: no new turns; running ones get the
//!    grace period to finish, then are cancelled and recorded as such;
//! 2. the replica watch (heartbeat, recovery of dead replicas), then this replica
//!    leaves the registry, so others do not wait for its heartbeat to lapse;
//! 3. the periodic audit anchor (`[audit] anchor_interval_s`), then the policy
//!    directory's watcher;
//! 4. the MCP servers kept for threads, and their processes;
//! 5. the local model server, if this runtime started it (`[llm] ensure_available`).
//!
//! It runs once: a second call (a server's stop hook, then the command's own call)
//! waits for the first to finish and does nothing more.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentplane_engine::executions::Executions;
use agentplane_engine::hub::Hub;
use agentplane_tools::mcp::McpServers;
use tokio::sync::OnceCell;

use crate::model_server::ModelServerKeeper;
use crate::policy_dir::PolicyWatcher;
use crate::replicas::{ReplicaWatch, Store};

/// Everything a runtime must stop, in the order it must stop them.
pub struct Shutdown {
    pub(crate) hub: Arc<Hub>,
    pub(crate) executions: Arc<Executions>,
    pub(crate) watch: ReplicaWatch,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) policy_watcher: Mutex<Option<PolicyWatcher>>,
    /// `[audit] anchor_interval_s`'s task, if configured.
    pub(crate) anchorer: Mutex<Option<crate::audit_anchor::Anchorer>>,
    pub(crate) mcp: McpServers,
    pub(crate) model_server: Option<Arc<ModelServerKeeper>>,
    /// How long running turns and executions may take to finish.
    pub(crate) grace: Duration,
    pub(crate) done: OnceCell<()>,
}

impl Shutdown {
    /// Stops everything, in order; later calls wait for the first and return.
    pub async fn run(&self) {
        self.done.get_or_init(|| self.sequence()).await;
    }

    async fn sequence(&self) {
        tokio::join!(
            self.executions.shutdown(self.grace),
            self.hub.shutdown(self.grace)
        );
        self.watch.stop().await;
        if let Err(e) = self.store.leave().await {
            tracing::warn!(error = %e, "could not leave the replica registry");
        }
        let anchorer = self.anchorer.lock().ok().and_then(|mut a| a.take());
        if let Some(anchorer) = anchorer {
            anchorer.stop().await;
        }
        let watcher = self.policy_watcher.lock().ok().and_then(|mut w| w.take());
        if let Some(watcher) = watcher {
            watcher.stop().await;
        }
        self.mcp.shutdown().await;
        if let Some(keeper) = &self.model_server {
            keeper.stop().await;
        }
    }
}
