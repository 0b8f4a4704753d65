//! What the fault suite and the load-under-faults run share (docs/reliability.md): a
//! model URL nobody listens on, a config with a chosen `[llm]` section, a turn run to its
//! end and summed up, the memory of the serve process, and many concurrent turns with
//! their latencies.
//!
//! The misbehaving peers themselves live in `agentplane-testkit` (scripted model steps,
//! `peers/mcp_hostile.py`, `peers/acp_hostile.py`); nothing here imitates a peer.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{Sandbox, Served, SseReader, api, create_thread, sandbox};

/// `http://127.0.0.1:PORT/v1` on a port that was just closed: connections are refused.
pub fn refused_url() -> String {
    format!("http://127.0.0.1:{}/v1", crate::free_port())
}

/// The harness's sandbox with `llm` (lines of TOML) as its `[llm]` section instead of
/// the default `max_retries = 0`.
pub fn sandbox_with_llm(llm: &str, extra_config: &str) -> Sandbox {
    let sb = sandbox(extra_config);
    let path = sb.root.join("agentplane.toml");
    let config = std::fs::read_to_string(&path).expect("config");
    let replaced = config.replacen("[llm]\nmax_retries = 0\n", &format!("[llm]\n{llm}\n"), 1);
    assert_ne!(config, replaced, "the harness's [llm] section moved");
    std::fs::write(&path, replaced).expect("config");
    sb
}

/// How long a fault turn may take to end: the faults are sized to end well within it.
pub const TURN_BUDGET: Duration = Duration::from_secs(90);

/// How a turn ended, as its events say, or the refusal of the turn request.
#[derive(Clone)]
pub struct Outcome {
    /// The turn request's status: 200 when the turn streamed.
    pub http_status: u16,
    pub turn_id: String,
    /// `turn_completed.stop_reason` (empty when the request was refused).
    pub stop_reason: String,
    /// The code of the `error` event before it, or of the refusal's envelope.
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    /// Every event streamed, in order, as `kind` and data.
    pub events: Vec<(String, Value)>,
}

impl Outcome {
    /// The events of `kind`, in order.
    pub fn of_kind(&self, kind: &str) -> Vec<&Value> {
        self.events
            .iter()
            .filter(|(k, _)| k == kind)
            .map(|(_, data)| data)
            .collect()
    }
}

/// Short: a flood may stream thousands of events, a panic message shows their count.
impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut kinds: Vec<String> = Vec::new();
        for (kind, _) in &self.events {
            match kinds.last_mut() {
                Some(last) if last.split(' ').next() == Some(kind.as_str()) => {
                    let n: usize = last
                        .split_once(" ×")
                        .and_then(|(_, n)| n.parse().ok())
                        .unwrap_or(1);
                    *last = format!("{kind} ×{}", n + 1);
                }
                _ => kinds.push(kind.clone()),
            }
        }
        f.debug_struct("Outcome")
            .field("http_status", &self.http_status)
            .field("stop_reason", &self.stop_reason)
            .field("error_code", &self.error_code)
            .field("error_message", &self.error_message)
            .field("events", &kinds)
            .finish()
    }
}

/// Sums up streamed events that end with `turn_completed`.
pub fn outcome_of(events: Vec<crate::Received>) -> Outcome {
    let done = events.last().map(|e| e.data.clone()).unwrap_or(Value::Null);
    let error = events.iter().find(|e| e.event == "error");
    Outcome {
        http_status: 200,
        turn_id: done["turn_id"].as_str().unwrap_or_default().to_owned(),
        stop_reason: done["stop_reason"].as_str().unwrap_or_default().to_owned(),
        error_code: error.and_then(|e| e.data["code"].as_str().map(str::to_owned)),
        error_message: error.and_then(|e| e.data["message"].as_str().map(str::to_owned)),
        events: events.into_iter().map(|e| (e.event, e.data)).collect(),
    }
}

/// Starts a turn on a new thread of `agent` and reads it to `turn_completed`, within
/// [`TURN_BUDGET`]. A refused turn request is an outcome too (its status and code).
pub async fn turn(served: &Served, sb: &Sandbox, agent: &str, input: &str) -> Outcome {
    let thread = create_thread(served, sb, agent, "fault").await;
    turn_on(served, &thread, input).await
}

/// As [`turn`], on an existing thread.
pub async fn turn_on(served: &Served, thread: &str, input: &str) -> Outcome {
    let response = api(
        served,
        reqwest::Method::POST,
        &format!("/v1/threads/{thread}/turns"),
    )
    .json(&json!({"input": input}))
    .send()
    .await
    .expect("turn request");
    let status = response.status().as_u16();
    if status != 200 {
        let body: Value = response.json().await.unwrap_or(Value::Null);
        return Outcome {
            http_status: status,
            turn_id: String::new(),
            stop_reason: String::new(),
            error_code: body["error"]["code"].as_str().map(str::to_owned),
            error_message: body["error"]["message"].as_str().map(str::to_owned),
            events: Vec::new(),
        };
    }
    let mut sse = SseReader::from_response(response);
    let mut events = Vec::new();
    let deadline = Instant::now() + TURN_BUDGET;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let event = match tokio::time::timeout(left, sse.next()).await {
            Ok(Some(event)) => event,
            Ok(None) => panic!(
                "the stream ended before turn_completed: {:?}",
                outcome_of(events)
            ),
            Err(_) => panic!(
                "no turn_completed within {TURN_BUDGET:?}: {:?}",
                outcome_of(events)
            ),
        };
        let done = event.event == "turn_completed";
        events.push(event);
        if done {
            return outcome_of(events);
        }
    }
}

/// Whether `/healthz` answers `{"ok":true}` within two seconds.
pub async fn healthy(served: &Served) -> bool {
    let answer = reqwest::Client::new()
        .get(format!("{}/healthz", served.base))
        .timeout(Duration::from_secs(2))
        .send()
        .await;
    match answer {
        Ok(response) if response.status() == 200 => {
            response.json::<Value>().await.ok() == Some(json!({"ok": true}))
        }
        _ => false,
    }
}

/// Asks for a running turn to be cancelled.
pub async fn cancel(served: &Served, turn_id: &str) {
    let response = api(
        served,
        reqwest::Method::POST,
        &format!("/v1/turns/{turn_id}/cancel"),
    )
    .send()
    .await
    .expect("cancel");
    assert_eq!(response.status(), 202, "{}", served.stderr());
}

/// The resident and peak memory of a process, from `/proc/PID/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    pub rss_kib: u64,
    pub hwm_kib: u64,
}

/// `VmRSS` and `VmHWM` of process `pid` (Linux only).
pub fn memory(pid: u32) -> Memory {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /proc/{pid}/status"))
    };
    Memory {
        rss_kib: field("VmRSS:"),
        hwm_kib: field("VmHWM:"),
    }
}

/// How one turn of a load run ended.
#[derive(Debug, Clone)]
pub enum LoadEnd {
    /// `turn_completed` arrived: its stop reason and the `error` code before it.
    Completed {
        stop_reason: String,
        error_code: Option<String>,
    },
    /// The request failed or the stream ended without `turn_completed`.
    Broken(String),
    /// Nothing ended it within the deadline.
    Hung,
}

/// One turn of a load run.
#[derive(Debug, Clone)]
pub struct LoadTurn {
    pub end: LoadEnd,
    /// From the turn request to `turn_completed` (or the failure).
    pub latency: Duration,
}

/// `turns` turns of `agent` at once, each on its own thread, each given `deadline` to
/// end. Threads are created first so the turns themselves start together.
pub async fn load(
    served: &Served,
    sb: &Sandbox,
    agent: &str,
    turns: usize,
    deadline: Duration,
) -> Vec<LoadTurn> {
    let mut threads = Vec::with_capacity(turns);
    for _ in 0..turns {
        threads.push(create_thread(served, sb, agent, "load").await);
    }
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .expect("client");
    let mut running = tokio::task::JoinSet::new();
    for thread in threads {
        let url = format!("{}/v1/threads/{thread}/turns", served.base);
        let client = client.clone();
        running.spawn(async move {
            let started = Instant::now();
            let end = match tokio::time::timeout(deadline, one_turn(&client, &url)).await {
                Ok(end) => end,
                Err(_) => LoadEnd::Hung,
            };
            LoadTurn {
                end,
                latency: started.elapsed(),
            }
        });
    }
    let mut done = Vec::with_capacity(turns);
    while let Some(turn) = running.join_next().await {
        done.push(turn.expect("a load turn panicked"));
    }
    done
}

/// One turn over SSE, read until `turn_completed`, without panicking on the way.
async fn one_turn(client: &reqwest::Client, url: &str) -> LoadEnd {
    let response = client
        .post(url)
        .header("X-Client-ID", crate::CLIENT)
        .json(&json!({"input": "hi"}))
        .send()
        .await;
    let mut response = match response {
        Ok(r) if r.status() == 200 => r,
        Ok(r) => return LoadEnd::Broken(format!("status {}", r.status())),
        Err(e) => return LoadEnd::Broken(e.to_string()),
    };
    let mut buffer = String::new();
    let mut error_code = None;
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let kind = block
                .lines()
                .find_map(|l| l.strip_prefix("event:"))
                .map(str::trim)
                .unwrap_or("message")
                .to_owned();
            let data: String = block
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            let Ok(data) = serde_json::from_str::<Value>(&data) else {
                continue;
            };
            if kind == "error" {
                error_code = data["code"].as_str().map(str::to_owned);
            }
            if kind == "turn_completed" {
                return LoadEnd::Completed {
                    stop_reason: data["stop_reason"].as_str().unwrap_or_default().to_owned(),
                    error_code,
                };
            }
        }
        match response.chunk().await {
            Ok(Some(chunk)) => {
                buffer.push_str(&String::from_utf8_lossy(&chunk).replace("\r\n", "\n"));
            }
            Ok(None) => return LoadEnd::Broken("the stream ended early".to_owned()),
            Err(e) => return LoadEnd::Broken(e.to_string()),
        }
    }
}

/// The `q` quantile (0..=1) of `latencies`, nearest rank.
pub fn quantile(latencies: &[Duration], q: f64) -> Duration {
    if latencies.is_empty() {
        return Duration::ZERO;
    }
    let mut sorted = latencies.to_vec();
    sorted.sort();
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The model of a load run: one request in `every` fails (alternately a 500 and a stream
/// cut mid-way), the others answer with a short text. `every = 0`: none fail.
pub fn load_scenario(every: usize) -> agentplane_testkit::Scenario {
    use agentplane_testkit::{Scenario, Step};
    let ok = || Step::text("fine, thanks").with_split(2);
    let steps = if every == 0 {
        vec![ok()]
    } else {
        let mut steps = Vec::with_capacity(every * 2);
        for cycle in 0..2 {
            for position in 0..every {
                steps.push(if position + 1 < every {
                    ok()
                } else if cycle == 0 {
                    Step::error(500, r#"{"error":{"message":"scripted outage"}}"#)
                } else {
                    ok().truncated_after(2)
                });
            }
        }
        steps
    };
    Scenario::new(steps).repeating(true)
}
