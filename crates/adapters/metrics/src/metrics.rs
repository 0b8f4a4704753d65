//! The one [`Metrics`] value of a process: every family, registered once with its help
//! text and buckets, the text exposition, and the observations that come from outside
//! the event log (HTTP requests, store operations, the approval queue at start-up).
//! What each event changes is `events.rs`'s; provider and execution families are
//! `providers.rs`'s and `executions.rs`'s.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::executions::ExecutionMetrics;
use crate::exposition;
use crate::labels::{
    AgentDecisionLabels, AgentLabel, AgentProviderLabels, AgentStatusLabels, ContentLabels,
    LabelCap, MAX_DISTINCT_VALUES, MAX_LABEL_LEN, OTHER, PolicyAgentKindLabels, PolicyAgentLabels,
    PolicyWouldLabels, RouteLabels, RouteStatusLabels, StoreOpLabel, StoreOutcomeLabels, ToolLabel,
    ToolStatusLabels,
};
use crate::listed::Listed;
use crate::providers::ProviderMetrics;
use crate::timed::TimedTurns;

/// The content type of [`Metrics::encode`]'s text: Prometheus' text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// The `route` label of a request no route matched.
pub const UNMATCHED_ROUTE: &str = "unmatched";

/// Turn durations: from under a second (a text answer) to half an hour (a long tool
/// loop or a turn suspended on an approval).
const TURN_SECONDS: [f64; 12] = [
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0,
];
/// Tool call latencies: a file read to a slow shell command or web fetch.
const TOOL_SECONDS: [f64; 12] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0, 120.0,
];
/// HTTP request durations. An SSE turn stream counts until its response headers, so
/// these are short.
const HTTP_SECONDS: [f64; 11] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];
/// Store operations: a cached read to a write waiting for the batched writer.
const STORE_SECONDS: [f64; 11] = [
    0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.5,
];

/// A histogram family's constructor; one per bucket layout.
type Buckets = fn() -> Histogram;

/// Every metric of the process. Create one with [`Metrics::new`], share it in an
/// `Arc`: give it to the engine's `Telemetry` as a sink, wrap the event store in a
/// [`MeteredStore`] with it, and hand it to the HTTP router.
///
/// Invariant: each label value passed a cap (see `labels.rs`), so the number of
/// series stays bounded whatever models and clients send.
pub struct Metrics {
    pub(crate) registry: Registry,
    pub(crate) executions: Family<AgentStatusLabels, Counter>,
    pub(crate) execution_seconds: Family<AgentLabel, Histogram, Buckets>,
    pub(crate) cost_usd: Family<AgentProviderLabels, Counter<f64, AtomicU64>>,
    pub(crate) violations: Family<PolicyAgentLabels, Counter>,
    pub(crate) audited: Family<PolicyWouldLabels, Counter>,
    pub(crate) content_findings: Family<ContentLabels, Counter>,
    pub(crate) egress: Family<AgentDecisionLabels, Counter>,
    pub(crate) denials: Family<PolicyAgentKindLabels, Counter>,
    pub(crate) approval_queue: Gauge,
    /// Spans the trace exporter dropped, read from its count at each scrape.
    pub(crate) spans_dropped: Counter,
    pub(crate) spans_dropped_source: std::sync::OnceLock<fn() -> u64>,
    pub(crate) tool_calls: Family<ToolStatusLabels, Counter>,
    pub(crate) recovered_calls: Family<ToolLabel, Counter>,
    /// Upstream MCP tools whose definition changed since it was approved, by
    /// `mcp__SERVER__TOOL`.
    pub(crate) tool_definition_changes: Family<ToolLabel, Counter>,
    /// Model calls whose server reported more usage than the call could have used.
    pub(crate) over_reported: Family<AgentProviderLabels, Counter>,
    pub(crate) tool_seconds: Family<ToolLabel, Histogram, Buckets>,
    pub(crate) http_requests: Family<RouteStatusLabels, Counter>,
    pub(crate) http_seconds: Family<RouteLabels, Histogram, Buckets>,
    pub(crate) store_operations: Family<StoreOutcomeLabels, Counter>,
    pub(crate) store_seconds: Family<StoreOpLabel, Histogram, Buckets>,
    /// Asynchronous executions (`executions.rs`).
    pub(crate) async_executions: ExecutionMetrics,
    pub(crate) provider_metrics: ProviderMetrics,
    /// When each running turn's `turn_started` arrived.
    pub(crate) started: Mutex<TimedTurns>,
    pub(crate) agents: LabelCap,
    pub(crate) providers: LabelCap,
    pub(crate) policies: LabelCap,
    pub(crate) tools: LabelCap,
    pub(crate) routes: LabelCap,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// Every metric, registered and empty (the gauges at 0). Every family shows in the
    /// text from the first scrape on, with its `# HELP` and `# TYPE` (`listed.rs`);
    /// its series appear with their first sample.
    pub fn new() -> Self {
        // Help texts end without a period: the registry adds one.
        let mut registry = Registry::default();
        let executions = Family::default();
        registry.register(
            "agent_executions",
            "Turns that ended, by agent and stop reason (finished, text_answer, step_limit, \
             error, cancelled, interrupted)",
            Listed(executions.clone()),
        );
        let execution_seconds: Family<AgentLabel, Histogram, Buckets> =
            Family::new_with_constructor(|| Histogram::new(TURN_SECONDS));
        registry.register(
            "agent_execution_duration_seconds",
            "Time from a turn's start to its end, by agent, as seen by this process",
            Listed(execution_seconds.clone()),
        );
        let cost_usd = Family::default();
        registry.register(
            "agent_execution_cost_usd",
            "What model calls cost in US dollars, by agent and provider",
            Listed(cost_usd.clone()),
        );
        let violations = Family::default();
        registry.register(
            "policy_violations",
            "Policy violations found by the post-turn audit, by policy and agent",
            Listed(violations.clone()),
        );
        let audited = Family::default();
        registry.register(
            "policy_audited",
            "What audit-mode policies would have decided (policy_audited events), by policy, \
             agent and would-be decision (allow, deny, approval); never enforced",
            Listed(audited.clone()),
        );
        let content_findings = Family::default();
        registry.register(
            "content_findings",
            "What content policies found (content_finding events), by policy, surface, \
             detector and action",
            Listed(content_findings.clone()),
        );
        let egress = Family::default();
        registry.register(
            "egress_connections",
            "Connections tool programs asked of the egress proxy (egress events), by agent \
             and decision (allowed, refused)",
            Listed(egress.clone()),
        );
        let denials = Family::default();
        registry.register(
            "policy_denials",
            "Refusals by a policy before a turn or tool call ran (policy_denied events), by \
             policy, agent and policy type",
            Listed(denials.clone()),
        );
        let approval_queue = Gauge::default();
        registry.register(
            "approval_queue_size",
            "Approvals waiting for a decision",
            approval_queue.clone(),
        );
        let spans_dropped = Counter::default();
        registry.register(
            "otel_spans_dropped",
            "Trace spans not exported: the export queue was full, or the collector did not \
             take their batch",
            spans_dropped.clone(),
        );
        let tool_calls = Family::default();
        registry.register(
            "tool_calls",
            "Tool calls that ran, by tool and status (ok, error)",
            Listed(tool_calls.clone()),
        );
        let recovered_calls = Family::default();
        registry.register(
            "tool_calls_recovered",
            "Tool calls the model wrote as text and the engine recovered (tool_call_planned \
             events marked recovered), by tool",
            Listed(recovered_calls.clone()),
        );
        let tool_definition_changes = Family::default();
        registry.register(
            "mcp_tool_definition_changes",
            "Upstream MCP tools listed with a definition other than the one approved (each \
             change counted once, when first seen; quarantined under pin = \"strict\"), by tool",
            Listed(tool_definition_changes.clone()),
        );
        let over_reported = Family::default();
        registry.register(
            "usage_over_reported",
            "Model calls (turns and gateway) whose server reported more usage than the \
             call could have used; each was charged its worst case, by agent and provider",
            Listed(over_reported.clone()),
        );
        let tool_seconds: Family<ToolLabel, Histogram, Buckets> =
            Family::new_with_constructor(|| Histogram::new(TOOL_SECONDS));
        registry.register(
            "tool_call_latency_seconds",
            "How long tool calls took, by tool",
            Listed(tool_seconds.clone()),
        );
        let http_requests = Family::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by method, route template and status",
            Listed(http_requests.clone()),
        );
        let http_seconds: Family<RouteLabels, Histogram, Buckets> =
            Family::new_with_constructor(|| Histogram::new(HTTP_SECONDS));
        registry.register(
            "http_request_duration_seconds",
            "Time until an HTTP response's headers, by method and route template",
            Listed(http_seconds.clone()),
        );
        let store_operations = Family::default();
        registry.register(
            "store_operations",
            "Event store operations, by operation and outcome (ok, not_found, conflict, \
             error)",
            Listed(store_operations.clone()),
        );
        let store_seconds: Family<StoreOpLabel, Histogram, Buckets> =
            Family::new_with_constructor(|| Histogram::new(STORE_SECONDS));
        registry.register(
            "store_operation_duration_seconds",
            "How long event store operations took, by operation",
            Listed(store_seconds.clone()),
        );
        let async_executions = ExecutionMetrics::register(&mut registry);
        let provider_metrics = ProviderMetrics::register(&mut registry);
        Self {
            registry,
            async_executions,
            executions,
            execution_seconds,
            cost_usd,
            violations,
            audited,
            content_findings,
            egress,
            denials,
            approval_queue,
            spans_dropped,
            spans_dropped_source: std::sync::OnceLock::new(),
            tool_calls,
            recovered_calls,
            tool_definition_changes,
            over_reported,
            tool_seconds,
            http_requests,
            http_seconds,
            store_operations,
            store_seconds,
            provider_metrics,
            started: Mutex::new(TimedTurns::default()),
            agents: LabelCap::default(),
            providers: LabelCap::default(),
            policies: LabelCap::default(),
            tools: LabelCap::default(),
            routes: LabelCap::new(2 * MAX_LABEL_LEN, MAX_DISTINCT_VALUES),
        }
    }

    /// Every metric in Prometheus' text format (see [`CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        if let Some(source) = self.spans_dropped_source.get() {
            let (now, seen) = (source(), self.spans_dropped.get());
            if now > seen {
                self.spans_dropped.inc_by(now - seen);
            }
        }
        exposition::encode(&self.registry)
    }

    /// Where `otel_spans_dropped_total` is read from at each scrape (the trace
    /// exporter's count); without one it stays 0.
    pub fn count_dropped_spans(&self, source: fn() -> u64) {
        let _ = self.spans_dropped_source.set(source);
    }

    /// Counts a changed definition of `server`'s MCP tool `tool`, first seen now.
    pub fn count_tool_definition_change(&self, server: &str, tool: &str) {
        self.tool_definition_changes
            .get_or_create(&ToolLabel {
                tool: self.tools.admit(&format!("mcp__{server}__{tool}")),
            })
            .inc();
    }

    /// Sets the approval queue to the number of approvals pending in the store. Call it
    /// once at start-up, before turns run: approvals survive restarts, and from then on
    /// `approval_requested` and `approval_decided` events keep the gauge current.
    pub fn set_approval_queue(&self, pending: u64) {
        self.approval_queue
            .set(i64::try_from(pending).unwrap_or(i64::MAX));
    }

    /// Records one answered HTTP request. `route` is the matched route template
    /// (`/v1/threads/{id}`), never the raw path, so ids never become labels; `None`
    /// when no route matched. `elapsed` runs until the response's headers.
    pub fn observe_http(&self, method: &str, route: Option<&str>, status: u16, elapsed: Duration) {
        let method = known_method(method);
        let route = match route {
            Some(route) => self.routes.admit(route),
            None => UNMATCHED_ROUTE.to_owned(),
        };
        self.http_seconds
            .get_or_create(&RouteLabels {
                method,
                route: route.clone(),
            })
            .observe(elapsed.as_secs_f64());
        self.http_requests
            .get_or_create(&RouteStatusLabels {
                method,
                route,
                status: status.to_string(),
            })
            .inc();
    }

    /// Records one event store operation.
    pub(crate) fn observe_store(&self, op: &'static str, outcome: &'static str, elapsed: Duration) {
        self.store_seconds
            .get_or_create(&StoreOpLabel { op })
            .observe(elapsed.as_secs_f64());
        self.store_operations
            .get_or_create(&StoreOutcomeLabels { op, outcome })
            .inc();
    }

    /// One approval left the queue; never below zero (a decision on an approval made
    /// before a start-up that was not seeded with [`Metrics::set_approval_queue`]).
    pub(crate) fn approval_left_queue(&self) {
        let _ =
            self.approval_queue
                .inner()
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                    (n > 0).then(|| n - 1)
                });
    }
}

/// The method as a label: the standard ones by name, any other (a client may send
/// any token) as [`OTHER`].
fn known_method(method: &str) -> &'static str {
    const KNOWN: [&str; 9] = [
        "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE",
    ];
    KNOWN
        .into_iter()
        .find(|known| *known == method)
        .unwrap_or(OTHER)
}
