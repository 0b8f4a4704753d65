//! The reports service: what was spent and what was recorded, read back for the
//! caller's own client only — costs grouped as asked (`costs.rs`), the MCP gateway's
//! log, and a thread's audit chain (`audit.rs`, with the walks behind `audit verify`
//! and `audit export`, and `audit_state.rs`, the rows checked against the ledger and
//! the events). Read only: it holds the thread, call and audit ports and
//! writes nothing. Another client's thread is `NotFound`, never `Forbidden`.

mod audit;
mod audit_state;
mod costs;

pub use audit::{
    AuditReport, ExportedEvent, ExportedRecord, ExportedRow, ThreadAudit, export_chains,
    export_records, export_rows, verify_chains,
};
pub use audit_state::Mismatch;
pub use costs::{CostGroup, CostLine, CostReport, CostRequest, CostSum, report_costs};

use std::sync::Arc;

use agentplane_core::ThreadId;

use super::identity::Identity;
use crate::error::HubError;
use crate::identity::{Access, AsCaller, Caller};
use crate::ports::{AuditStore, CallStore, McpCallQuery, McpCallRecord, ThreadStore};

/// Costs, the MCP gateway's log and the audit chain, for their owners.
pub struct Reports {
    identity: Arc<Identity>,
    threads: Arc<dyn ThreadStore>,
    calls: Arc<dyn CallStore>,
    /// The audit chain read back; `None` (a process built for tests): no chain.
    audit: Option<Arc<dyn AuditStore>>,
}

/// The store ports a [`Reports`] reads.
pub struct ReportPorts {
    pub threads: Arc<dyn ThreadStore>,
    pub calls: Arc<dyn CallStore>,
    pub audit: Option<Arc<dyn AuditStore>>,
}

impl Reports {
    pub fn new(identity: Arc<Identity>, ports: ReportPorts) -> Self {
        Self {
            identity,
            threads: ports.threads,
            calls: ports.calls,
            audit: ports.audit,
        }
    }

    /// The calling client's costs, grouped as asked. `InvalidArgument` for a bound that
    /// is not RFC 3339 or a turn grouping without a thread; `NotFound` for a thread
    /// that is not the client's.
    pub async fn costs(
        &self,
        caller: &(impl AsCaller + ?Sized),
        request: CostRequest,
    ) -> Result<CostReport, HubError> {
        let caller = self
            .identity
            .require(caller, Access::Read, "reading costs")?;
        report_costs(
            (self.threads.as_ref(), self.calls.as_ref()),
            Some(caller.client()),
            request,
        )
        .await
    }

    /// The MCP gateway's log for `caller`: its client's calls, newest first.
    pub async fn mcp_gateway_calls(
        &self,
        caller: &(impl AsCaller + ?Sized),
        limit: usize,
    ) -> Result<Vec<McpCallRecord>, HubError> {
        let caller =
            self.identity
                .require(caller, Access::Read, "reading the MCP gateway's log")?;
        Ok(self
            .calls
            .mcp_calls(&McpCallQuery {
                client: Some(caller.client().to_owned()),
                approval: None,
                limit,
            })
            .await?)
    }

    /// The head of this client's thread's chain, for anchoring it outside. Another
    /// client's thread is `NotFound`, as everywhere.
    pub async fn thread_audit(
        &self,
        caller: &(impl AsCaller + ?Sized),
        id: &ThreadId,
    ) -> Result<ThreadAudit, HubError> {
        let caller =
            self.identity
                .require(caller, Access::Read, "reading a thread's audit chain")?;
        self.own_thread(&caller, id).await?;
        let Some(store) = &self.audit else {
            return Err(HubError::NotFound(format!(
                "the audit chain of thread {id}"
            )));
        };
        let thread = store
            .audited_threads(Some(id))
            .await?
            .pop()
            .ok_or_else(|| HubError::NotFound(format!("thread {id}")))?;
        Ok(ThreadAudit {
            thread_id: thread.id,
            head: store.chain_head(id).await?,
            events: thread.events,
            chained_since_seq: thread.chained_since,
        })
    }

    /// `NotFound` unless the thread is the caller's and not deleted.
    async fn own_thread(&self, caller: &Caller, id: &ThreadId) -> Result<(), HubError> {
        match self.threads.thread(id).await? {
            Some(thread) if thread.client_id == caller.client() => Ok(()),
            _ => Err(HubError::NotFound(format!("thread {id}"))),
        }
    }
}
