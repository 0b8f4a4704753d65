//! A real server for the tests: the runtime on a temp SQLite file, the scripted model
//! over HTTP, `agentplane_server::serve` on 127.0.0.1:0, and reqwest as the client,
//! with a small SSE reader.

use std::path::PathBuf;
use std::time::Duration;

use agentplane_core::{Event, ThreadId, TurnId};
use agentplane_runtime::config::ConfigSource;
use agentplane_runtime::{Config, Runtime};
use agentplane_server::{ServeError, ServeOptions, serve};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The token used by tests that turn auth on.
pub const TOKEN: &str = "test-token-0123456789";
/// Generous bound for anything the tests wait for.
pub const PATIENCE: Duration = Duration::from_secs(15);

/// A `time_window` policy named `name` on `agent` that is closed now: open only for
/// the first minute of yesterday's weekday.
pub fn closed_window(name: &str, agent: &str) -> String {
    let days_since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        / 86_400;
    // 1970-01-01 was a Thursday.
    let yesterday =
        ["wed", "thu", "fri", "sat", "sun", "mon", "tue"][(days_since_epoch % 7) as usize];
    format!(
        "name: {name}\ntype: time_window\ntargets: {{agents: [{agent}]}}\n\
         rules: {{timezone: UTC, days: [{yesterday}], hours: \"00:00-00:01\"}}\n"
    )
}

/// Agents the tests use besides the built-ins.
const TEST_AGENTS: &str = r#"
[agents.chat]
system_prompt = "Answer briefly."

[agents.writer]
system_prompt = "Write the file you are asked to."
ensembles = ["fs"]
requires_permission = ["write_file"]
max_steps = 4
# Text answers end these tests' turns: no corrective messages (ADR 0032).
max_nudges = 0
"#;

/// How to set a server up.
pub struct Setup {
    pub scenario: Scenario,
    pub token: Option<&'static str>,
    pub permission_timeout_secs: u64,
    pub heartbeat: Duration,
    pub shutdown_grace: Duration,
    /// The model server's base URL; the scripted server's by default.
    pub llm_base_url: Option<String>,
    /// Policy files (file name, YAML), written to a `[policies]` directory.
    pub policies: Vec<(&'static str, String)>,
    /// TOML appended to the config file (agents, `[approvals]`, …).
    pub extra_config: String,
    /// `[providers]`/`[routing]` TOML in place of `[llm] base_url`; `{scripted}` in it
    /// stands for the scripted server's base URL.
    pub providers: Option<String>,
}

impl Setup {
    pub fn new(steps: Vec<Step>) -> Self {
        Self {
            scenario: Scenario::new(steps),
            token: None,
            permission_timeout_secs: 60,
            heartbeat: Duration::from_millis(100),
            shutdown_grace: Duration::from_secs(1),
            llm_base_url: None,
            policies: Vec::new(),
            extra_config: String::new(),
            providers: None,
        }
    }

    /// Configures `[providers]` (and `[routing]`) instead of `[llm] base_url`.
    pub fn providers(mut self, toml: &str) -> Self {
        self.providers = Some(toml.to_owned());
        self
    }

    /// Adds a policy file to the server's policies directory.
    pub fn policy(mut self, file: &'static str, yaml: &str) -> Self {
        self.policies.push((file, yaml.to_owned()));
        self
    }

    /// Appends TOML to the config file.
    pub fn extra_config(mut self, toml: &str) -> Self {
        self.extra_config.push_str(toml);
        self
    }

    pub fn token(mut self, token: &'static str) -> Self {
        self.token = Some(token);
        self
    }

    pub fn permission_timeout_secs(mut self, secs: u64) -> Self {
        self.permission_timeout_secs = secs;
        self
    }

    pub fn llm_base_url(mut self, url: String) -> Self {
        self.llm_base_url = Some(url);
        self
    }

    pub async fn start(mut self) -> Api {
        let scripted = ScriptedServer::start(self.scenario)
            .await
            .expect("scripted server");
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().to_path_buf();
        let workspace = root.join("ws");
        std::fs::create_dir(&workspace).expect("workspace");
        let base_url = self.llm_base_url.unwrap_or_else(|| scripted.base_url());
        let file = root.join("agentplane.toml");
        let llm_base_url = match &self.providers {
            Some(providers) => {
                self.extra_config.push_str(&format!(
                    "\n{}\n",
                    providers.replace("{scripted}", &scripted.base_url())
                ));
                String::new()
            }
            None => format!("base_url = \"{base_url}\"\n"),
        };
        let auth = self
            .token
            .map(|t| format!("auth_token = \"{t}\"\n"))
            .unwrap_or_default();
        std::fs::write(
            &file,
            format!(
                "[llm]\n{llm_base_url}model = \"scripted-model\"\nmax_retries = 0\n\
                 [store]\npath = \"events.db\"\n\
                 [server]\npermission_timeout_secs = {}\n{auth}{TEST_AGENTS}",
                self.permission_timeout_secs
            ),
        )
        .expect("config");
        if !self.policies.is_empty() {
            std::fs::create_dir(root.join("policies")).expect("policies dir");
            for (name, yaml) in &self.policies {
                std::fs::write(root.join("policies").join(name), yaml).expect("policy file");
            }
            self.extra_config
                .push_str("\n[policies]\ndir = \"policies\"\n");
        }
        if !self.extra_config.is_empty() {
            use std::io::Write as _;
            let mut config = std::fs::OpenOptions::new()
                .append(true)
                .open(&file)
                .expect("config to append to");
            config
                .write_all(self.extra_config.as_bytes())
                .expect("extra config");
        }
        let env = |_: &str| None;
        let config = Config::load_from(&ConfigSource {
            explicit: Some(&file),
            cwd: &root,
            env: &env,
        })
        .expect("config loads");
        let runtime = Runtime::start(config).await.expect("runtime starts");
        runtime
            .executions()
            .start()
            .await
            .expect("executions start");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (stop, stopped) = oneshot::channel::<()>();
        let served = tokio::spawn(serve(
            runtime.services().clone(),
            listener,
            ServeOptions {
                listen: addr,
                auth_token: runtime.config().server.auth_token.clone(),
                allow_public: false,
                shutdown_grace: self.shutdown_grace,
                heartbeat: self.heartbeat,
                metrics: None,
                executions: Some(runtime.executions().clone()),
                stop: None,
                connections: agentplane_server::ConnectionLimits::default(),
                followers: agentplane_server::FollowerLimits::default(),
                allowed_origins: agentplane_server::AllowedOrigins::default(),
                a2a: agentplane_server::A2aOptions::default(),
            },
            async move {
                let _ = stopped.await;
            },
        ));
        Api {
            base: format!("http://{addr}"),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .expect("client"),
            token: self.token,
            scripted,
            _dir: dir,
            workspace,
            runtime,
            stop: Some(stop),
            served: Some(served),
        }
    }
}

/// A running server and a client for it.
pub struct Api {
    pub base: String,
    pub http: reqwest::Client,
    pub token: Option<&'static str>,
    pub scripted: ScriptedServer,
    pub _dir: tempfile::TempDir,
    pub workspace: PathBuf,
    pub runtime: Runtime,
    stop: Option<oneshot::Sender<()>>,
    served: Option<JoinHandle<Result<(), ServeError>>>,
}

/// A JSON answer.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Answer {
    /// Asserts the answer is the error envelope with this status and code.
    #[track_caller]
    pub fn assert_error(&self, status: u16, code: &str) {
        assert_eq!(self.status.as_u16(), status, "{:?}", self.body);
        assert_error_envelope(&self.body);
        assert_eq!(self.body["error"]["code"], code, "{:?}", self.body);
    }
}

/// Asserts `body` is exactly `{"error":{"code","message","details"}}`.
#[track_caller]
pub fn assert_error_envelope(body: &Value) {
    let error = body["error"].as_object().expect("error envelope");
    assert_eq!(body.as_object().map(|o| o.len()), Some(1), "{body}");
    assert_eq!(error.len(), 3, "{body}");
    assert!(error["code"].is_string(), "{body}");
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    assert!(error["details"].is_object(), "{body}");
}

impl Api {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A request with the client id (when given) and the token (when configured).
    pub fn request(
        &self,
        method: Method,
        path: &str,
        client: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let mut request = self.http.request(method, self.url(path));
        if let Some(client) = client {
            request = request.header("X-Client-ID", client);
        }
        if let Some(token) = self.token {
            request = request.bearer_auth(token);
        }
        request
    }

    /// Sends a request and reads a JSON answer (`null` for an empty body).
    pub async fn send(&self, request: reqwest::RequestBuilder) -> Answer {
        let response = request.send().await.expect("request sent");
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.expect("body");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                panic!(
                    "{status}: body is not JSON ({e}): {}",
                    String::from_utf8_lossy(&bytes)
                )
            })
        };
        Answer {
            status,
            headers,
            body,
        }
    }

    pub async fn get(&self, path: &str, client: &str) -> Answer {
        self.send(self.request(Method::GET, path, Some(client)))
            .await
    }

    pub async fn post(&self, path: &str, client: &str, body: Value) -> Answer {
        self.send(self.request(Method::POST, path, Some(client)).json(&body))
            .await
    }

    pub async fn delete(&self, path: &str, client: &str) -> Answer {
        self.send(self.request(Method::DELETE, path, Some(client)))
            .await
    }

    /// Creates a thread on the workspace and returns its id.
    pub async fn create_thread(&self, client: &str, agent: &str) -> String {
        let answer = self
            .post(
                "/v1/threads",
                client,
                json!({"agent": agent, "cwd": self.workspace.display().to_string()}),
            )
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
        answer.body["id"].as_str().expect("thread id").to_owned()
    }

    /// Starts a turn and returns its open SSE stream.
    pub async fn start_turn(&self, client: &str, thread: &str, input: &str) -> SseReader {
        let response = self
            .request(
                Method::POST,
                &format!("/v1/threads/{thread}/turns"),
                Some(client),
            )
            .json(&json!({"input": input}))
            .send()
            .await
            .expect("turn request");
        assert_eq!(response.status(), StatusCode::OK);
        SseReader::new(response)
    }

    /// Opens a thread's event stream with these headers and query.
    pub async fn follow(
        &self,
        client: &str,
        thread: &str,
        query: &str,
        last_event_id: Option<&str>,
    ) -> SseReader {
        let mut request = self.request(
            Method::GET,
            &format!("/v1/threads/{thread}/events{query}"),
            Some(client),
        );
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id);
        }
        let response = request.send().await.expect("events request");
        assert_eq!(response.status(), StatusCode::OK);
        SseReader::new(response)
    }

    /// The stored events of a turn.
    pub async fn stored_events(&self, turn: &str) -> Vec<Event> {
        let turn = TurnId::parse(turn).expect("turn id");
        self.runtime
            .store()
            .turn_events(&turn)
            .await
            .expect("stored events")
    }

    /// The stored events of a thread.
    pub async fn stored_thread_events(&self, thread: &str) -> Vec<Event> {
        let thread = ThreadId::parse(thread).expect("thread id");
        self.runtime
            .store()
            .thread_events(&thread, 0, 10_000)
            .await
            .expect("stored events")
    }

    /// Waits until the scripted model has received `n` chat requests
    /// ([`ScriptedServer::called`]).
    pub async fn model_called(&self, n: usize) {
        assert!(
            self.scripted.called(n, PATIENCE).await,
            "the model was not called {n} times in time"
        );
    }

    /// Stops the server the way the CLI does and waits for `serve` to return.
    pub async fn shut_down(&mut self) -> Result<(), ServeError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let served = self.served.take().expect("served once");
        tokio::time::timeout(PATIENCE, served)
            .await
            .expect("serve returns after shutdown")
            .expect("serve task")
    }
}

/// One SSE event as received.
#[derive(Debug, Clone, PartialEq)]
pub struct SseFrame {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
}

impl SseFrame {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).expect("SSE data is JSON")
    }

    pub fn seq(&self) -> u64 {
        self.id
            .as_deref()
            .expect("an id")
            .parse()
            .expect("id is a seq")
    }

    pub fn is(&self, kind: &str) -> bool {
        self.event.as_deref() == Some(kind)
    }
}

/// Reads `text/event-stream` by hand: frames split on blank lines, comments counted.
pub struct SseReader {
    response: reqwest::Response,
    buffer: String,
    ended: bool,
    pub heartbeats: usize,
}

impl SseReader {
    pub fn new(response: reqwest::Response) -> Self {
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        assert!(
            content_type.starts_with("text/event-stream"),
            "{content_type}"
        );
        Self {
            response,
            buffer: String::new(),
            ended: false,
            heartbeats: 0,
        }
    }

    /// The next event (comments skipped), `None` at the end of the stream.
    pub async fn next(&mut self) -> Option<SseFrame> {
        self.next_within(PATIENCE).await
    }

    /// [`SseReader::next`], waiting up to `patience` (an external agent starting up
    /// on a loaded machine may be quiet for longer than [`PATIENCE`]).
    pub async fn next_within(&mut self, patience: Duration) -> Option<SseFrame> {
        tokio::time::timeout(patience, self.next_untimed())
            .await
            .unwrap_or_else(|_| panic!("no SSE event within {patience:?}"))
    }

    async fn next_untimed(&mut self) -> Option<SseFrame> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                if let Some(frame) = self.parse(&block) {
                    return Some(frame);
                }
                continue;
            }
            if self.ended {
                return None;
            }
            match self.response.chunk().await {
                Ok(Some(chunk)) => self
                    .buffer
                    .push_str(std::str::from_utf8(&chunk).expect("utf-8 stream")),
                Ok(None) | Err(_) => self.ended = true,
            }
        }
    }

    fn parse(&mut self, block: &str) -> Option<SseFrame> {
        let mut frame = SseFrame {
            id: None,
            event: None,
            data: String::new(),
        };
        let mut has_field = false;
        for line in block.lines().filter(|l| !l.is_empty()) {
            if line.starts_with(':') {
                self.heartbeats += 1;
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            has_field = true;
            match field {
                "id" => frame.id = Some(value.to_owned()),
                "event" => frame.event = Some(value.to_owned()),
                "data" => {
                    if !frame.data.is_empty() {
                        frame.data.push('\n');
                    }
                    frame.data.push_str(value);
                }
                other => panic!("unexpected SSE field {other:?}"),
            }
        }
        has_field.then_some(frame)
    }

    /// Events until (and with) `turn_completed`, or the end of the stream.
    pub async fn until_completed(&mut self) -> Vec<SseFrame> {
        self.until_completed_within(PATIENCE).await
    }

    /// [`SseReader::until_completed`], waiting up to `patience` for each event.
    pub async fn until_completed_within(&mut self, patience: Duration) -> Vec<SseFrame> {
        let mut frames = Vec::new();
        while let Some(frame) = self.next_within(patience).await {
            let done = frame.is("turn_completed");
            frames.push(frame);
            if done {
                break;
            }
        }
        frames
    }

    /// Events until (and with) the first of `kind`.
    pub async fn until(&mut self, kind: &str) -> Vec<SseFrame> {
        let mut frames = Vec::new();
        loop {
            let frame = self
                .next()
                .await
                .unwrap_or_else(|| panic!("stream ended before {kind}: {frames:?}"));
            let done = frame.is(kind);
            frames.push(frame);
            if done {
                return frames;
            }
        }
    }
}

/// Asserts SSE frames are exactly these stored events: `id` = seq, `event` = kind and
/// `data` = the event as JSON.
#[track_caller]
pub fn assert_frames_are(frames: &[SseFrame], events: &[Event]) {
    assert_eq!(frames.len(), events.len(), "{frames:#?}\n{events:#?}");
    for (frame, event) in frames.iter().zip(events) {
        assert_eq!(frame.seq(), event.seq);
        assert_eq!(frame.event.as_deref(), Some(event.payload.kind()));
        let stored = serde_json::to_value(event).expect("event json");
        assert_eq!(frame.json(), stored);
    }
}
