//! What the attack suite (`tests/attacks/`) shares: tool calls driven through the real
//! binary by the scripted model, the checks every case makes (refused, recorded as a
//! `security_event`, nothing leaked), a server started with extra environment, and a
//! tiny HTTP target on 127.0.0.1 that counts the requests it gets (so a fetch that
//! should have been refused but went out is seen).
//!
//! What must not live here: the cases themselves (they are the tests), and anything
//! that reaches into the server other than through its HTTP API, its log and its files.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentplane_testkit::Step;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{Sandbox, Served, SseReader};

/// What one scripted tool call produced in its turn.
#[derive(Debug, Clone)]
pub struct Probe {
    /// The case's name, for messages.
    pub case: String,
    /// The `tool_call_result` event's data.
    pub result: Value,
    /// Every `security_event`'s data, in order.
    pub security: Vec<Value>,
    /// Every event of the turn, as streamed.
    pub events: Vec<Value>,
}

impl Probe {
    /// The call failed with `error_type` and a `security_event` of `event_type` was
    /// recorded for it.
    pub fn assert_refused_as(&self, error_type: &str, event_type: &str) -> &Self {
        self.assert_failed(error_type);
        assert!(
            self.security.iter().any(|e| e["event_type"] == event_type),
            "{}: no security_event `{event_type}`: {:?}",
            self.case,
            self.security
        );
        self
    }

    /// The call failed with `error_type` (no security event required: not every
    /// refusal is a breach attempt, an invalid argument is just invalid).
    pub fn assert_failed(&self, error_type: &str) -> &Self {
        assert_eq!(
            self.result["status"], "error",
            "{}: the call was not refused: {}",
            self.case, self.result
        );
        assert_eq!(
            self.result["error_type"], error_type,
            "{}: {}",
            self.case, self.result
        );
        self
    }

    /// The call succeeded.
    pub fn assert_ok(&self) -> &Self {
        assert_eq!(
            self.result["status"], "ok",
            "{}: the call failed: {}",
            self.case, self.result
        );
        self
    }

    /// What the model was told.
    pub fn output(&self) -> &str {
        self.result["output"].as_str().unwrap_or_default()
    }

    /// The output does not contain `needle` (a file's content, a marker).
    pub fn assert_output_lacks(&self, needle: &str) -> &Self {
        assert!(
            !self.output().contains(needle),
            "{}: the output leaks {needle:?}: {}",
            self.case,
            self.output()
        );
        self
    }

    /// Nothing the turn streamed contains `needle`.
    pub fn assert_stream_lacks(&self, needle: &str) -> &Self {
        for event in &self.events {
            assert!(
                !event.to_string().contains(needle),
                "{}: an event leaks {needle:?}: {event}",
                self.case
            );
        }
        self
    }
}

/// The script for `calls`, one turn each: the model makes the call, then answers
/// `done` once it has read the result.
pub fn script(calls: &[(String, Value)]) -> Vec<Step> {
    script_with_nudges(calls, 0)
}

/// [`script`] for an agent that answers each text with `nudges` corrective messages (a
/// built-in agent: `max_nudges` 2): the model keeps answering in text, so each turn
/// still ends `text_answer` after its one call.
pub fn script_with_nudges(calls: &[(String, Value)], nudges: usize) -> Vec<Step> {
    calls
        .iter()
        .flat_map(|(tool, args)| {
            std::iter::once(Step::tool_call(tool.clone(), args.clone()))
                .chain(std::iter::repeat_n(Step::text("done"), nudges + 1))
        })
        .collect()
}

/// Runs one turn in `thread` whose input names the case; the scripted model (loaded
/// with [`script`]) makes its next call. Returns what the call produced.
pub async fn probe(served: &Served, thread: &str, case: &str) -> Probe {
    let mut sse = SseReader::open(served, thread, case).await;
    let streamed = sse.until("turn_completed").await;
    let events: Vec<Value> = streamed
        .iter()
        .map(|e| {
            let mut data = e.data.clone();
            if data.get("kind").is_none() {
                data["kind"] = json!(e.event);
            }
            data
        })
        .collect();
    let result = events
        .iter()
        .find(|e| e["kind"] == "tool_call_result")
        .cloned()
        .unwrap_or_else(|| panic!("{case}: no tool_call_result: {events:?}"));
    let security = events
        .iter()
        .filter(|e| e["kind"] == "security_event")
        .cloned()
        .collect();
    Probe {
        case: case.to_owned(),
        result,
        security,
        events,
    }
}

/// A `write_file` call for the scripted model: `content` at `path`.
pub fn write_call(path: &str, content: &str) -> (String, Value) {
    (
        "write_file".into(),
        json!({"path": path, "content": content}),
    )
}

/// A `run_command` call of `make -s TARGET` (a probe built and run in the workspace).
pub fn make_call(target: &str) -> (String, Value) {
    (
        "run_command".into(),
        json!({"program": "make", "args": ["-s", target]}),
    )
}

/// The first `key: value` line of a probe's output, its value.
pub fn probe_value<'a>(output: &'a str, key: &str) -> &'a str {
    let prefix = format!("{key}: ");
    output
        .lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no `{key}` in the probe's output:\n{output}"))
}

/// Where an attack's outcome is counted: every case adds one line, and the suite's
/// figures (cases, refusals) come from here.
#[derive(Debug, Default)]
pub struct Tally {
    /// Cases tried.
    pub cases: usize,
    /// Of those, the ones refused (the rest ran inert, as they must).
    pub refused: usize,
}

impl Tally {
    /// Counts one case, refused or not.
    pub fn case(&mut self, refused: bool) {
        self.cases += 1;
        if refused {
            self.refused += 1;
        }
    }

    /// Prints `attack-figures <group>: N cases, M refused` (nextest shows it with
    /// `--no-capture`; docs/reliability.md quotes the sums).
    pub fn report(&self, group: &str) {
        println!(
            "attack-figures {group}: {} cases, {} refused",
            self.cases, self.refused
        );
    }
}

/// An HTTP/1.1 server on 127.0.0.1 that answers every request with one canned
/// response and counts the requests. A fetch the suite expects refused must leave the
/// count at zero.
pub struct Target {
    /// Where it listens (127.0.0.1).
    pub addr: SocketAddr,
    hits: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Target {
    /// Answers `200` with `body`.
    pub async fn ok(body: &str) -> Target {
        Self::start(format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        ))
        .await
    }

    /// Answers `302` to `location`.
    pub async fn redirect(location: &str) -> Target {
        Self::start(format!(
            "HTTP/1.1 302 Found\r\nlocation: {location}\r\ncontent-length: 0\r\n\
             connection: close\r\n\r\n"
        ))
        .await
    }

    async fn start(response: String) -> Target {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind target");
        let addr = listener.local_addr().expect("target addr");
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = hits.clone();
        let response = Arc::new(response);
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                let response = response.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Target { addr, hits, task }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Connections accepted so far.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Whether `needle` occurs in the bytes of `path` (a missing file holds nothing).
pub fn file_contains(path: &Path, needle: &[u8]) -> bool {
    std::fs::read(path).is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
}

/// The database and its WAL and shared-memory files: where anything stored lies.
pub fn store_files(sb: &Sandbox) -> Vec<std::path::PathBuf> {
    ["", "-wal", "-shm"]
        .iter()
        .map(|suffix| {
            let mut name = sb.db.as_os_str().to_owned();
            name.push(suffix);
            std::path::PathBuf::from(name)
        })
        .collect()
}

/// Checks that no stored byte, no log line and none of `answers` contains `secret`.
pub fn assert_nowhere(sb: &Sandbox, served: &Served, answers: &[String], secret: &str) {
    for path in store_files(sb) {
        assert!(
            !file_contains(&path, secret.as_bytes()),
            "{} holds the secret",
            path.display()
        );
    }
    let log = served.stderr();
    assert!(
        !log.contains(secret),
        "the server log holds the secret:\n{log}"
    );
    for answer in answers {
        assert!(
            !answer.contains(secret),
            "an API answer holds the secret: {answer}"
        );
    }
}

/// A JSON error envelope with `code`: `{"error":{"code":…,"message":…,"details":{}}}`.
pub fn assert_envelope(body: &str, code: &str) {
    let value: Value = serde_json::from_str(body)
        .unwrap_or_else(|e| panic!("not a JSON envelope ({e}): {body:?}"));
    assert_eq!(value["error"]["code"], code, "{body}");
    assert!(value["error"]["message"].is_string(), "{body}");
    assert!(value["error"]["details"].is_object(), "{body}");
}

/// What `GET /v1/agents` says the kernel enforces for `agent` here (`sandbox.in_force`;
/// empty when the agent is not listed).
pub async fn sandbox_in_force(served: &Served, agent: &str) -> String {
    let agents: Value = crate::api(served, reqwest::Method::GET, "/v1/agents")
        .send()
        .await
        .expect("agents")
        .json()
        .await
        .expect("agents JSON");
    agents["agents"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["name"] == agent))
        .and_then(|a| a["sandbox"]["in_force"].as_str())
        .unwrap_or_default()
        .to_owned()
}
