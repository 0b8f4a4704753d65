//! OpenTelemetry trace export: agentplane's spans (`agentplane_engine::ports::telemetry`,
//! target `agentplane::trace`) sent over OTLP (HTTP/protobuf) to a collector, in the
//! GenAI semantic conventions the engine names them by.
//!
//! Exporting never slows a turn: a finished span goes into a bounded queue
//! ([`QUEUE`] spans) with a non-blocking send, and one thread of its own batches the
//! queue and posts it. A span that finds the queue full, or whose batch the collector
//! did not take (down, refusing, too slow), is dropped and counted ([`dropped_spans`]).
//! With no endpoint configured nothing here runs at all.
//!
//! The W3C `traceparent` crosses the process here too: [`parent_from`] makes an
//! incoming one the parent of a span, [`traceparent_of_current`] gives the one an
//! outgoing request carries. The engine reaches both through the hooks of its
//! telemetry port, so it stays free of OpenTelemetry.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll, Waker};
use std::time::{Duration, Instant};

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracerProvider, Span, SpanData, SpanExporter, SpanProcessor};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{Layer, filter::Filtered};

/// How many finished spans wait for export at most.
pub const QUEUE: usize = 4096;
/// The most spans one request to the collector carries.
const BATCH: usize = 512;
/// How long a span waits for its batch to fill.
const LINGER: Duration = Duration::from_millis(500);
/// Longest request to the collector.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// The target of the spans exported.
pub const TARGET: &str = "agentplane::trace";

static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Spans dropped since the process started: the queue was full, or the collector did
/// not take their batch.
pub fn dropped_spans() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Where spans go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exporting {
    /// The collector's base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`'s meaning): spans are
    /// posted to its `/v1/traces`. `None`: the standard variables decide.
    pub endpoint: Option<String>,
}

/// The running export; [`Export::shutdown`] sends what is queued (bounded in time).
pub struct Export {
    provider: SdkTracerProvider,
}

impl Export {
    /// Sends the queued spans, waiting at most `timeout`.
    pub fn shutdown(&self, timeout: Duration) {
        if let Err(e) = self.provider.shutdown_with_timeout(timeout) {
            tracing::debug!(error = %e, "the span export did not end cleanly");
        }
    }
}

/// The layer that exports agentplane's spans, and the handle that ends the export.
pub type ExportLayer<S> = Filtered<
    tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::Tracer>,
    Targets,
    S,
>;

/// Starts the export: the layer to add to the subscriber, and its handle.
pub fn start<S>(exporting: &Exporting) -> Result<(ExportLayer<S>, Export), String>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
{
    // reqwest is built without a TLS provider of its own; ring is the one the workspace
    // builds. A provider already installed is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_timeout(EXPORT_TIMEOUT);
    if let Some(base) = &exporting.endpoint {
        builder = builder.with_endpoint(format!("{}/v1/traces", base.trim_end_matches('/')));
    }
    let mut exporter = builder
        .build()
        .map_err(|e| format!("the OTLP exporter could not be built: {e}"))?;
    let mut resource = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("agentplane");
    }
    let resource = resource
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build();
    exporter.set_resource(&resource);
    let provider = SdkTracerProvider::builder()
        .with_span_processor(Queue::start(exporter))
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("agentplane");
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        .with_filter(Targets::new().with_target(TARGET, tracing::Level::INFO));
    Ok((layer, Export { provider }))
}

/// Makes the W3C `traceparent` (and `tracestate`) the parent of `span`; an invalid
/// one is ignored.
pub fn parent_from(span: &tracing::Span, traceparent: &str, tracestate: Option<&str>) {
    let mut carrier = std::collections::HashMap::new();
    carrier.insert("traceparent".to_owned(), traceparent.to_owned());
    if let Some(state) = tracestate {
        carrier.insert("tracestate".to_owned(), state.to_owned());
    }
    let cx = TraceContextPropagator::new().extract(&carrier);
    use opentelemetry::trace::TraceContextExt as _;
    if cx.span().span_context().is_valid() {
        let _ = span.set_parent(cx);
    }
}

/// Sets a string-array attribute (`gen_ai.response.finish_reasons`) on `span`.
pub fn set_strings(span: &tracing::Span, key: &'static str, values: &[&str]) {
    let values: Vec<opentelemetry::StringValue> =
        values.iter().map(|v| (*v).to_owned().into()).collect();
    span.set_attribute(key, opentelemetry::Value::Array(values.into()));
}

/// The `traceparent` of the current span, for an outgoing request; `None` outside an
/// exported span.
pub fn traceparent_of_current() -> Option<String> {
    let cx = tracing::Span::current().context();
    use opentelemetry::trace::TraceContextExt as _;
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = std::collections::HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    carrier.remove("traceparent")
}

/// The bounded queue between finished spans and the collector.
#[derive(Debug)]
struct Queue {
    sender: Mutex<Option<SyncSender<SpanData>>>,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Queue {
    fn start<E: SpanExporter + 'static>(exporter: E) -> Self {
        let (sender, receiver) = sync_channel(QUEUE);
        let worker = std::thread::Builder::new()
            .name("otel-export".into())
            .spawn(move || drain(&exporter, &receiver))
            .ok();
        if worker.is_none() {
            tracing::warn!("the span export thread could not start; spans are dropped");
        }
        Self {
            sender: Mutex::new(worker.as_ref().map(|_| sender)),
            worker: Mutex::new(worker),
        }
    }
}

impl SpanProcessor for Queue {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        let sender = self.sender.lock().unwrap_or_else(|e| e.into_inner());
        let sent = match sender.as_ref() {
            Some(sender) => sender.try_send(span),
            None => Err(TrySendError::Disconnected(span)),
        };
        if sent.is_err() {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        // Closing the channel ends the worker once it sent what is queued.
        drop(self.sender.lock().unwrap_or_else(|e| e.into_inner()).take());
        let worker = self.worker.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(worker) = worker {
            let deadline = Instant::now() + timeout;
            while !worker.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        Ok(())
    }
}

/// The worker: batches of at most [`BATCH`] spans, each sent once it is full or its
/// first span waited [`LINGER`]; until the channel closes.
fn drain<E: SpanExporter>(exporter: &E, receiver: &Receiver<SpanData>) {
    let exporter = Arc::new(exporter);
    loop {
        let first = match receiver.recv() {
            Ok(span) => span,
            Err(_) => return,
        };
        let mut batch = vec![first];
        let deadline = Instant::now() + LINGER;
        let mut closed = false;
        while batch.len() < BATCH {
            let left = deadline.saturating_duration_since(Instant::now());
            match receiver.recv_timeout(left) {
                Ok(span) => batch.push(span),
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => {
                    closed = true;
                    break;
                }
            }
        }
        let count = batch.len() as u64;
        if block_on(exporter.export(batch)).is_err() {
            DROPPED.fetch_add(count, Ordering::Relaxed);
        }
        if closed {
            return;
        }
    }
}

/// Runs a future on this thread (the exporter's HTTP client is a blocking one, so its
/// future completes without waiting on anything else).
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut cx = TaskContext::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::park_timeout(Duration::from_millis(1));
    }
}
