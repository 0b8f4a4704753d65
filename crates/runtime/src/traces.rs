//! Trace export (`agentplane_otel`), started by the command line before anything runs:
//! when `[telemetry] otlp_endpoint` or the standard OTLP variables name a collector,
//! the spans of turns, model calls, tool calls and requests go there, and the engine's
//! trace hooks carry the W3C `traceparent` in and out. Without a collector nothing is
//! started and the spans stay disabled.

use std::path::Path;

use agentplane_engine::ports::telemetry::{TraceHooks, capture_content, install_trace_hooks};
use agentplane_otel::Exporting;
pub use agentplane_otel::{Export, ExportLayer, dropped_spans};
use tracing_subscriber::registry::LookupSpan;

use crate::config::{Config, ConfigSource};

/// The variable the GenAI instrumentations read to capture message contents.
const CAPTURE_VARIABLE: &str = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";

/// The standard variables that name a collector.
const ENDPOINT_VARIABLES: &[&str] = &[
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
];

/// The export layer and its handle when a collector is configured (`config` is the
/// `--config` path); `None` otherwise, or when the exporter cannot be built (said on
/// stderr: the command goes on without traces).
pub fn start_export<S>(config: Option<&Path>) -> Option<(ExportLayer<S>, Export)>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
{
    let env = |name: &str| std::env::var(name).ok();
    let telemetry = std::env::current_dir().ok().and_then(|cwd| {
        Config::load_from(&ConfigSource {
            explicit: config,
            cwd: &cwd,
            env: &env,
        })
        .ok()
        .map(|loaded| loaded.telemetry)
    });
    let (endpoint, capture) =
        telemetry.map_or((None, None), |t| (t.otlp_endpoint, t.capture_content));
    // The file wins over the variable, as for the endpoint.
    let capture = capture.unwrap_or_else(|| {
        std::env::var(CAPTURE_VARIABLE).is_ok_and(|v| v.eq_ignore_ascii_case("true"))
    });
    let from_env = ENDPOINT_VARIABLES
        .iter()
        .any(|name| std::env::var(name).is_ok_and(|v| !v.is_empty()));
    if endpoint.is_none() && !from_env {
        return None;
    }
    match agentplane_otel::start(&Exporting { endpoint }) {
        Ok(started) => {
            install_trace_hooks(TraceHooks {
                adopt: agentplane_otel::parent_from,
                current: agentplane_otel::traceparent_of_current,
                set_strings: agentplane_otel::set_strings,
            });
            capture_content(capture);
            Some(started)
        }
        Err(e) => {
            eprintln!("warning: traces are not exported: {e}");
            None
        }
    }
}
