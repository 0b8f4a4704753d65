//! The scripted server itself: binding, routes, the request log, and shutdown on drop.
//!
//! Handlers only record the request, pick the step and write the `Reply` that
//! `reply.rs` built; no wire-format decisions are made here.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::reply::{self, Reply};
use crate::scenario::Scenario;

/// How many requests the log keeps (the earliest ones); counts go on beyond it, so a
/// benchmark with a repeating scenario does not grow memory without bound.
const LOG_CAPACITY: usize = 10_000;

/// Requests bigger than this are refused (413), like any real server would.
const BODY_LIMIT: usize = 64 * 1024 * 1024;

/// A request the server received, for tests that check what a client sent.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedRequest {
    pub method: String,
    pub path: String,
    /// The `Authorization` header (else Anthropic's `x-api-key`), verbatim.
    pub authorization: Option<String>,
    /// The JSON body; a body that is not JSON is kept as a string.
    pub body: Option<Value>,
    /// The W3C `traceparent` header, verbatim.
    pub traceparent: Option<String>,
}

#[derive(Default)]
struct Log {
    chat_requests: usize,
    chat_bodies: Vec<Value>,
    received: Vec<ReceivedRequest>,
}

struct Shared {
    scenario: Scenario,
    log: Mutex<Log>,
}

impl Shared {
    /// The log, even if a handler panicked while holding it: it is append-only data.
    fn log(&self) -> MutexGuard<'_, Log> {
        self.log
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn record(&self, request: ReceivedRequest) {
        let mut log = self.log();
        if log.received.len() < LOG_CAPACITY {
            log.received.push(request);
        }
    }
}

/// A running scripted LLM server on 127.0.0.1. Dropping it stops it: the listener
/// closes and idle connections are shut; an answer in flight is finished.
pub struct ScriptedServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
}

impl std::fmt::Debug for ScriptedServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl ScriptedServer {
    /// Starts serving `scenario` on a free port of 127.0.0.1.
    pub async fn start(scenario: Scenario) -> std::io::Result<ScriptedServer> {
        Self::bind(scenario, SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// Starts serving `scenario` on `addr` (port 0 picks a free one). An invalid
    /// scenario is `InvalidInput`.
    pub async fn bind(scenario: Scenario, addr: SocketAddr) -> std::io::Result<ScriptedServer> {
        Self::serve(scenario, TcpListener::bind(addr).await?)
    }

    /// Starts serving `scenario` on a listener the caller bound and held: a test that
    /// must name the port before the scenario is known (a config, a pid in the steps)
    /// keeps it reserved, where dropping and binding it again races other tests.
    pub async fn listen(
        scenario: Scenario,
        listener: std::net::TcpListener,
    ) -> std::io::Result<ScriptedServer> {
        listener.set_nonblocking(true)?;
        Self::serve(scenario, TcpListener::from_std(listener)?)
    }

    fn serve(scenario: Scenario, listener: TcpListener) -> std::io::Result<ScriptedServer> {
        scenario
            .validate()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            scenario,
            log: Mutex::new(Log::default()),
        });
        let router = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/messages", post(messages))
            .route("/v1/models", get(models))
            .route("/v1/embeddings", post(embeddings))
            .route("/api/tags", get(tags))
            .route("/props", get(props))
            .fallback(not_found)
            .layer(DefaultBodyLimit::max(BODY_LIMIT))
            .with_state(shared.clone());
        let (shutdown, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let serving = axum::serve(listener, router).with_graceful_shutdown(async move {
                // A dropped sender is a shutdown too.
                let _ = stopped.await;
            });
            if let Err(e) = serving.await {
                eprintln!("scripted-llm: server stopped: {e}");
            }
        });
        Ok(ScriptedServer {
            addr,
            shared,
            shutdown: Some(shutdown),
        })
    }

    /// `http://127.0.0.1:PORT/v1`: what a client takes as its OpenAI base URL.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bodies of the chat requests received, in order (the first 10,000).
    pub fn requests(&self) -> Vec<Value> {
        self.shared.log().chat_bodies.clone()
    }

    /// How many chat requests arrived, including those past the log's capacity.
    pub fn chat_request_count(&self) -> usize {
        self.shared.log().chat_requests
    }

    /// Waits until `n` chat requests have arrived; `false` if `within` ran out first.
    /// A test that stops a turn on a slow step waits for this first: stopped before its
    /// request arrived, the turn would leave that step to the next request (steps are
    /// taken in the order requests arrive).
    pub async fn called(&self, n: usize, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        while self.chat_request_count() < n {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
    }

    /// Every request received (chat, listings, unknown paths), in order, with its
    /// `Authorization` header (the first 10,000).
    pub fn received(&self) -> Vec<ReceivedRequest> {
        self.shared.log().received.clone()
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

/// The request's W3C `traceparent`.
fn traceparent(headers: &HeaderMap) -> Option<String> {
    headers
        .get("traceparent")
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

/// The request's credential: `Authorization`, else Anthropic's `x-api-key`.
fn authorization(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::AUTHORIZATION)
        .or_else(|| headers.get("x-api-key"))
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

async fn chat(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    answer_step(
        &shared,
        "/v1/chat/completions",
        &headers,
        &body,
        reply::answer,
    )
    .await
}

/// Anthropic's Messages API: the same steps, in its wire format (`anthropic.rs`).
async fn messages(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    answer_step(
        &shared,
        "/v1/messages",
        &headers,
        &body,
        crate::anthropic::answer,
    )
    .await
}

/// Records a chat request, takes the next step and answers it with `answer`.
async fn answer_step(
    shared: &Shared,
    path: &str,
    headers: &HeaderMap,
    body: &Bytes,
    answer: fn(&crate::scenario::Step, usize, &Value) -> Reply,
) -> Response {
    let parsed: Result<Value, String> = serde_json::from_slice(body).map_err(|e| e.to_string());
    let recorded = parsed
        .clone()
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()));
    shared.record(ReceivedRequest {
        method: "POST".to_owned(),
        path: path.to_owned(),
        authorization: authorization(headers),
        traceparent: traceparent(headers),
        body: Some(recorded.clone()),
    });
    let reply = {
        let mut log = shared.log();
        let n = log.chat_requests;
        log.chat_requests += 1;
        if log.chat_bodies.len() < LOG_CAPACITY {
            log.chat_bodies.push(recorded);
        }
        match &parsed {
            Err(detail) => reply::bad_request(detail),
            Ok(request) => match shared.scenario.step_for(n) {
                Some(step) => answer(step, n, request),
                None => reply::exhausted(),
            },
        }
    };
    send(reply).await
}

async fn models(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    shared.record(ReceivedRequest {
        method: "GET".to_owned(),
        path: "/v1/models".to_owned(),
        authorization: authorization(&headers),
        traceparent: traceparent(&headers),
        body: None,
    });
    let data: Vec<Value> = shared
        .scenario
        .models()
        .iter()
        .map(|m| json!({"id": m.id, "object": "model", "created": 0, "owned_by": "scripted"}))
        .collect();
    json_response(StatusCode::OK, json!({"object": "list", "data": data}))
}

/// `POST /v1/embeddings`: a deterministic 8-number vector per input (from its bytes),
/// and usage of one token per four bytes, so tests can check order and pricing. Not
/// a step of the scenario: chat steps are not spent by embeddings.
async fn embeddings(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let parsed: Option<Value> = serde_json::from_slice(&body).ok();
    shared.record(ReceivedRequest {
        method: "POST".to_owned(),
        path: "/v1/embeddings".to_owned(),
        authorization: authorization(&headers),
        traceparent: traceparent(&headers),
        body: parsed.clone(),
    });
    let inputs: Vec<String> = match parsed.as_ref().map(|v| &v["input"]) {
        Some(Value::String(text)) => vec![text.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|i| i.as_str().map(str::to_owned))
            .collect(),
        _ => {
            return json_response(
                StatusCode::BAD_REQUEST,
                json!({"error": {"message": "`input` must be a string or strings"}}),
            );
        }
    };
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, text)| json!({"object": "embedding", "index": index, "embedding": vector_of(text)}))
        .collect();
    let tokens: usize = inputs.iter().map(|t| t.len().div_ceil(4)).sum();
    let model = parsed
        .as_ref()
        .and_then(|v| v["model"].as_str())
        .unwrap_or("scripted-embedding")
        .to_owned();
    json_response(
        StatusCode::OK,
        json!({"object": "list", "data": data, "model": model,
               "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}),
    )
}

/// The scripted embedding of `text`: byte sums in 8 buckets, scaled to 0..1.
pub fn vector_of(text: &str) -> Vec<f32> {
    let mut buckets = [0u32; 8];
    for (i, b) in text.bytes().enumerate() {
        buckets[i % 8] += u32::from(b);
    }
    buckets
        .iter()
        .map(|b| (*b % 1000) as f32 / 1000.0)
        .collect()
}

/// llama.cpp's `/props`, the part capability probes read. Not logged: a probe is not
/// a request a test scripted.
async fn props(State(shared): State<Arc<Shared>>) -> Response {
    let native = shared.scenario.native_tools();
    json_response(
        StatusCode::OK,
        json!({
            "model_alias": shared.scenario.models().first().map(|m| m.id.clone()),
            "chat_template_caps": {"supports_tool_calls": native, "supports_tools": native},
        }),
    )
}

async fn tags(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    shared.record(ReceivedRequest {
        method: "GET".to_owned(),
        path: "/api/tags".to_owned(),
        authorization: authorization(&headers),
        traceparent: traceparent(&headers),
        body: None,
    });
    let models: Vec<Value> = shared
        .scenario
        .models()
        .iter()
        .map(|m| {
            let mut details = json!({"format": "gguf", "families": m.families});
            if let Some(family) = m.families.first() {
                details["family"] = json!(family);
            }
            if let Some(size) = &m.parameter_size {
                details["parameter_size"] = json!(size);
            }
            json!({"name": m.id, "model": m.id, "details": details})
        })
        .collect();
    json_response(StatusCode::OK, json!({"models": models}))
}

async fn not_found(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    shared.record(ReceivedRequest {
        method: method.to_string(),
        path: uri.path().to_owned(),
        authorization: authorization(&headers),
        traceparent: traceparent(&headers),
        body: None,
    });
    json_response(
        StatusCode::NOT_FOUND,
        json!({"error": {"message": format!("no route for {method} {}", uri.path())}}),
    )
}

fn json_response(status: StatusCode, body: Value) -> Response {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

/// Body chunks still to write, and where to cut.
struct Writing {
    chunks: VecDeque<Bytes>,
    sent: usize,
    chunk_delay: Duration,
    truncate_after: Option<usize>,
    stall_after: Option<usize>,
    endless: bool,
    cut: bool,
}

async fn send(reply: Reply) -> Response {
    if reply.stall_before_headers {
        // Hyper drops this future when the client gives up and closes the connection.
        std::future::pending::<()>().await;
    }
    if reply.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(reply.delay_ms)).await;
    }
    let status = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let whole = reply.chunks.len() == 1
        && reply.truncate_after.is_none()
        && reply.stall_after.is_none()
        && !reply.endless;
    let body = if whole {
        Body::from(reply.chunks[0].clone())
    } else {
        let writing = Writing {
            chunks: reply.chunks.into(),
            sent: 0,
            chunk_delay: Duration::from_millis(reply.chunk_delay_ms),
            truncate_after: reply.truncate_after,
            stall_after: reply.stall_after,
            endless: reply.endless,
            cut: false,
        };
        Body::from_stream(futures_util::stream::unfold(writing, next_chunk))
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(reply.content_type),
    );
    if let Some(retry_after) = &reply.retry_after
        && let Ok(value) = header::HeaderValue::from_str(retry_after)
    {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    if reply.content_type == "text/event-stream" {
        response.headers_mut().insert(
            header::CACHE_CONTROL,
            header::HeaderValue::from_static("no-cache"),
        );
    }
    response
}

/// The next body chunk; an error item makes hyper drop the connection without
/// finishing the chunked body, which is how a truncation looks to a client.
async fn next_chunk(mut writing: Writing) -> Option<(Result<Bytes, std::io::Error>, Writing)> {
    if writing.cut {
        return None;
    }
    if let Some(limit) = writing.truncate_after
        && (writing.sent >= limit || writing.chunks.is_empty())
    {
        writing.cut = true;
        // Let hyper flush what was already written before the connection drops, so
        // the client really sees a body cut mid-way rather than nothing.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let error =
            std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "scripted truncation");
        return Some((Err(error), writing));
    }
    if writing
        .stall_after
        .is_some_and(|limit| writing.sent >= limit)
    {
        // Silence with the connection open; hyper drops this stream when the client
        // closes it.
        std::future::pending::<()>().await;
    }
    let chunk = if writing.endless && writing.chunks.len() == 1 {
        writing.chunks.front()?.clone()
    } else {
        writing.chunks.pop_front()?
    };
    if writing.sent > 0 && !writing.chunk_delay.is_zero() {
        tokio::time::sleep(writing.chunk_delay).await;
    }
    writing.sent += 1;
    Some((Ok(chunk), writing))
}

/// The names of the tools a logged chat request offered (`tools[].function.name`).
pub fn offered_tools(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
