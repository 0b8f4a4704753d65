//! Metrics of asynchronous executions: the queue's depth and how executions ended.
//! The execution service reports through the engine's `ExecutionTap` port; nothing here
//! decides anything about an execution.

use agentplane_engine::ports::ExecutionStatus;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::labels::AgentStatusLabels;
use crate::listed::Listed;

/// The execution metrics, registered in the process's registry.
pub(crate) struct ExecutionMetrics {
    queued: Gauge,
    finished: Family<AgentStatusLabels, Counter>,
}

impl ExecutionMetrics {
    /// Registers `execution_queue_size` and `async_executions_total`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let queued = Gauge::default();
        registry.register(
            "execution_queue_size",
            "Executions queued (new, or waiting for a retry)",
            queued.clone(),
        );
        let finished = Family::default();
        registry.register(
            "async_executions",
            "Asynchronous executions that finished, by agent and status (succeeded, \
             failed, cancelled, interrupted)",
            Listed(finished.clone()),
        );
        Self { queued, finished }
    }
}

impl ExecutionMetrics {
    /// The number of queued executions.
    pub(crate) fn queue_depth(&self, queued: u64) {
        self.queued.set(i64::try_from(queued).unwrap_or(i64::MAX));
    }

    /// An execution of `agent` (a label value that passed its cap) reached a terminal
    /// status.
    pub(crate) fn finished(&self, agent: String, status: ExecutionStatus) {
        self.finished
            .get_or_create(&AgentStatusLabels {
                agent,
                status: status.as_str(),
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use agentplane_engine::ports::TelemetrySink;

    use super::*;
    use crate::Metrics;

    #[test]
    fn the_queue_and_outcomes_are_exposed() {
        let metrics = Metrics::new();
        metrics.on_execution_queue(3);
        metrics.on_execution_finished("chat", ExecutionStatus::Succeeded);
        metrics.on_execution_finished("chat", ExecutionStatus::Succeeded);
        metrics.on_execution_finished("chat", ExecutionStatus::Failed);
        let text = metrics.encode();
        assert!(text.contains("execution_queue_size 3"), "{text}");
        assert!(
            text.contains("async_executions_total{agent=\"chat\",status=\"succeeded\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("async_executions_total{agent=\"chat\",status=\"failed\"} 1"),
            "{text}"
        );
    }
}
