//! Prometheus metrics of agentplane, derived from the event log as it is written.
//!
//! One [`Metrics`] per process holds every metric. It learns about turns the way every
//! other view does, from events: it is a [`TelemetrySink`], so executions, their
//! durations, costs, policy violations, the approval queue and tool calls are counted
//! from the stored events alone. HTTP requests are recorded by the server's middleware
//! through [`Metrics::observe_http`], and store operations by [`MeteredStore`], which
//! wraps the event store. [`Metrics::encode`] renders the Prometheus text format
//! (version 0.0.4) that `promtool check metrics` accepts; `docs/metrics.md` lists every
//! metric.
//!
//! What lives here: metric names, labels, buckets and their bounds. What must not:
//! any decision about a turn (this crate only watches), and anything blocking on the
//! path that records an event: [`Metrics::on_event`] takes short locks and never
//! waits on I/O.
//!
//! [`TelemetrySink`]: agentplane_engine::ports::TelemetrySink

mod events;
mod executions;
mod exposition;
mod labels;
mod listed;
mod metrics;
mod providers;
mod store;
mod timed;

pub use labels::{MAX_DISTINCT_VALUES, MAX_LABEL_LEN, OTHER};
pub use metrics::{CONTENT_TYPE, Metrics, UNMATCHED_ROUTE};
pub use store::MeteredStore;
pub use timed::MAX_TIMED_TURNS;
