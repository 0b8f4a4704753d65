//! The chaos suite (docs/reliability.md, ADR 0027): N replicas of the real binary on one
//! PostgreSQL database, behind no load balancer but a random choice per request, while
//! replicas are killed (SIGKILL) and restarted at random moments (sometimes two in quick
//! succession) and every connection to the database is cut now and then.
//!
//! The load: turns (a slowly streamed answer), turns that a policy suspends on an
//! approval, executions, cancels of turns and executions, approval decisions, and one
//! SSE subscriber per thread that reconnects (`after` its last event) to another replica
//! whenever its replica dies. Every request goes to a random live replica.
//!
//! At the end, once everything settled, through the API: every turn ended exactly once
//! (one `turn_started`, one `turn_completed`); every thread's seqs are 1..n; every
//! approval was decided, from whichever replica was asked; every accepted cancel was
//! honoured (the turn ended `cancelled`, or `interrupted` by its replica's death, or had
//! just ended) and no cancel was refused while its turn ran; every execution finished
//! once (one terminal state, at most one turn of it not interrupted); every
//! subscriber's stream equals the stored events of its thread, in order; and
//! `agentplane audit verify` finds every thread's chain unbroken.
//!
//! Sizes: CI runs 3 replicas for 40 s of chaos; `scripts/reliability.sh chaos` runs the
//! full size (5 replicas, 240 s). `AGENTPLANE_CHAOS_SEED`, `AGENTPLANE_CHAOS_REPLICAS`
//! and `AGENTPLANE_CHAOS_SECONDS` override the seed and the size.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentplane_suites::crash::Rng;
use agentplane_suites::postgres::{
    connect, cut_connections, drop_database, fresh_database, service,
};
use agentplane_suites::{
    CLIENT, Received, Sandbox, Served, SseReader, events_of, full_size, sandbox, start,
};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use serde_json::{Value, json};

/// How long after a cancel's answer a turn may still end otherwise: the answer and
/// the turn's last event can cross.
const RACE_MS: u64 = 1_000;
/// How long the system may take to settle once the load stops.
const SETTLE: Duration = Duration::from_secs(120);

fn env_or(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .map(|v| {
            v.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{var}={v:?} is not a number"))
        })
        .unwrap_or(default)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Unix milliseconds of an RFC 3339 UTC timestamp as the store writes it
/// (`2026-11-24T21:35:20.864Z`).
fn ts_ms(ts: &str) -> u64 {
    let n = |a: usize, b: usize| -> i64 { ts[a..b].parse().expect("a stored timestamp") };
    let (y, m, d) = (n(0, 4), n(5, 7), n(8, 10));
    // Days from civil (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + n(11, 13) * 3_600 + n(14, 16) * 60 + n(17, 19);
    let millis = if ts.len() > 23 { n(20, 23) } else { 0 };
    (secs * 1_000 + millis) as u64
}

/// A cancel as answered: what, by which status, when (Unix ms after the answer).
struct Ask {
    id: String,
    status: u16,
    at: u64,
}

/// What the load tasks share.
struct World {
    bases: Mutex<Vec<Option<String>>>,
    rng: Mutex<Rng>,
    http: reqwest::Client,
    streams: reqwest::Client,
    cwd: String,
    /// The `chat` model's URL, for the harness's `[llm]` environment.
    model: String,
    stop_load: AtomicBool,
    stop_approvals: AtomicBool,
    threads: Mutex<Vec<String>>,
    received: Mutex<HashMap<String, Vec<Received>>>,
    turn_cancels: Mutex<Vec<Ask>>,
    execution_cancels: Mutex<Vec<Ask>>,
    executions: Mutex<Vec<String>>,
    decided: Mutex<u64>,
    /// Requests answered 5xx: in flight when a connection was cut (not a failure; what
    /// they did or did not do is checked like anything else).
    transient: Mutex<u64>,
    failures: Mutex<Vec<String>>,
    subscribers: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl World {
    fn below(&self, n: u64) -> u64 {
        self.rng.lock().expect("rng").below(n)
    }

    fn chance(&self, percent: u64) -> bool {
        self.rng.lock().expect("rng").chance(percent)
    }

    fn fail(&self, what: String) {
        eprintln!("FAILURE: {what}");
        self.failures.lock().expect("failures").push(what);
    }

    /// A random live replica's base URL.
    fn pick(&self) -> Option<String> {
        let live: Vec<String> = self
            .bases
            .lock()
            .expect("bases")
            .iter()
            .flatten()
            .cloned()
            .collect();
        if live.is_empty() {
            return None;
        }
        Some(live[self.below(live.len() as u64) as usize].clone())
    }

    /// One request to a random live replica, tried on others while replicas die.
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Option<(u16, Value)> {
        for _ in 0..20 {
            let Some(base) = self.pick() else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            let mut request = self
                .http
                .request(method.clone(), format!("{base}{path}"))
                .header("X-Client-ID", CLIENT);
            if let Some(body) = body {
                request = request.json(body);
            }
            match request.send().await {
                Ok(response) => {
                    let status = response.status().as_u16();
                    let body = response.json().await.unwrap_or(Value::Null);
                    return Some((status, body));
                }
                // The replica died (or its port is not open yet): another one.
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
        None
    }
}

/// Follows a thread's events across replicas, reconnecting after its last event.
fn subscribe(world: &Arc<World>, thread: String) {
    world
        .received
        .lock()
        .expect("received")
        .insert(thread.clone(), Vec::new());
    let w = world.clone();
    let task = tokio::spawn(async move {
        loop {
            let Some(base) = w.pick() else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            let after = w.received.lock().expect("received")[&thread]
                .last()
                .and_then(|e| e.id)
                .unwrap_or(0);
            let response = w
                .streams
                .get(format!("{base}/v1/threads/{thread}/events?after={after}"))
                .header("X-Client-ID", CLIENT)
                .send()
                .await;
            let Ok(response) = response.and_then(reqwest::Response::error_for_status) else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            let mut sse = SseReader::from_response(response);
            while let Some(event) = sse.next().await {
                let mut received = w.received.lock().expect("received");
                let mine = received.get_mut(&thread).expect("subscribed");
                let expected = mine.last().and_then(|e| e.id).unwrap_or(0) + 1;
                if event.id != Some(expected) {
                    drop(received);
                    w.fail(format!(
                        "subscriber of {thread} on {base} got seq {:?} after {}",
                        event.id,
                        expected - 1
                    ));
                    break;
                }
                mine.push(event);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    world.subscribers.lock().expect("subscribers").push(task);
}

/// Runs turns of `agent` one after another on a thread of its own, cancelling some.
async fn turns(world: Arc<World>, agent: &'static str) {
    let mut thread: Option<String> = None;
    while !world.stop_load.load(Ordering::SeqCst) {
        let current = match &thread {
            Some(t) => t.clone(),
            None => {
                let body = json!({"agent": agent, "cwd": world.cwd, "title": "chaos"});
                let Some((201, created)) = world
                    .send(reqwest::Method::POST, "/v1/threads", Some(&body))
                    .await
                else {
                    continue;
                };
                let id = created["id"].as_str().expect("thread id").to_owned();
                world.threads.lock().expect("threads").push(id.clone());
                subscribe(&world, id.clone());
                thread = Some(id.clone());
                id
            }
        };
        let Some(base) = world.pick() else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let started = world
            .streams
            .post(format!("{base}/v1/threads/{current}/turns"))
            .header("X-Client-ID", CLIENT)
            .json(&json!({"input": "go on"}))
            .send()
            .await;
        let response = match started {
            Ok(r) if r.status() == 200 => r,
            // Busy: suspended on an approval, or a dead replica's turn not yet ended.
            Ok(r) if r.status() == 409 => {
                thread = None;
                continue;
            }
            Ok(r) if r.status().is_server_error() => {
                *world.transient.lock().expect("transient") += 1;
                continue;
            }
            Ok(r) => {
                world.fail(format!("starting a turn on {base}: {}", r.status()));
                continue;
            }
            Err(_) => continue,
        };
        let mut sse = SseReader::from_response(response);
        while let Some(event) = sse.next().await {
            if event.event == "turn_started" && world.chance(30) {
                let turn = event.data["turn_id"].as_str().expect("turn id").to_owned();
                let delay = Duration::from_millis(50 + world.below(1_500));
                let w = world.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let path = format!("/v1/turns/{turn}/cancel");
                    if let Some((status, _)) = w.send(reqwest::Method::POST, &path, None).await {
                        let at = now_ms();
                        w.turn_cancels.lock().expect("cancels").push(Ask {
                            id: turn,
                            status,
                            at,
                        });
                    }
                });
            }
            if event.event == "turn_completed" {
                break;
            }
        }
    }
}

/// Submits executions now and then, cancelling some.
async fn executions(world: Arc<World>) {
    while !world.stop_load.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(300 + world.below(900))).await;
        let body = json!({"agent": "chat", "input": "a job"});
        let Some((status, record)) = world
            .send(reqwest::Method::POST, "/v1/executions", Some(&body))
            .await
        else {
            continue;
        };
        if status >= 500 {
            *world.transient.lock().expect("transient") += 1;
            continue;
        }
        if status != 202 {
            world.fail(format!("submitting an execution: {status} {record}"));
            continue;
        }
        let id = record["id"].as_str().expect("execution id").to_owned();
        world
            .executions
            .lock()
            .expect("executions")
            .push(id.clone());
        if world.chance(30) {
            let delay = Duration::from_millis(world.below(2_500));
            let w = world.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let path = format!("/v1/executions/{id}/cancel");
                if let Some((status, _)) = w.send(reqwest::Method::POST, &path, None).await {
                    let at = now_ms();
                    w.execution_cancels
                        .lock()
                        .expect("cancels")
                        .push(Ask { id, status, at });
                }
            });
        }
    }
}

/// Decides every pending approval, each on a random replica.
async fn approvals(world: Arc<World>) {
    while !world.stop_approvals.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let Some((200, list)) = world
            .send(reqwest::Method::GET, "/v1/approvals", None)
            .await
        else {
            continue;
        };
        for approval in list["approvals"].as_array().cloned().unwrap_or_default() {
            let id = approval["id"].as_str().expect("approval id");
            let body = if world.chance(70) {
                json!({"decision": "approve"})
            } else {
                json!({"decision": "reject", "feedback": "not now"})
            };
            match world
                .send(
                    reqwest::Method::POST,
                    &format!("/v1/approvals/{id}"),
                    Some(&body),
                )
                .await
            {
                Some((200, _)) => *world.decided.lock().expect("decided") += 1,
                // Decided meanwhile (a listing from before a decision).
                Some((409, _)) | None => {}
                Some((status, _)) if status >= 500 => {
                    *world.transient.lock().expect("transient") += 1;
                }
                Some((status, body)) => {
                    world.fail(format!("deciding approval {id}: {status} {body}"))
                }
            }
        }
    }
}

/// The suite's configuration: `chat` streams slowly; `reviewed` writes a file, which a
/// policy holds for approval. Each agent has a model server of its own.
fn configure(sb: &Sandbox, chat: &ScriptedServer, reviewed: &ScriptedServer) {
    let policies = sb.root.join("policies");
    std::fs::create_dir_all(&policies).expect("policies dir");
    std::fs::write(
        policies.join("review.yaml"),
        "name: review\ntype: approval_required\ntargets: {agents: [reviewed]}\n\
         rules: {tools: [write_file]}\n",
    )
    .expect("policy");
    std::fs::write(
        sb.root.join("agentplane.toml"),
        agentplane_suites::without_nudges(&format!(
            "[cluster]\nheartbeat_secs = 1\nreplica_timeout_secs = 3\n\
             [policies]\ndir = \"policies\"\n\
             [executions]\nworkers = 2\nmax_attempts = 100\non_restart = \"retry\"\n\
             poll_interval_ms = 100\nbackoff_base_ms = 100\nbackoff_max_ms = 200\n\
             [routing]\ndefault = [\"chat\"]\n\
             [providers.chat]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"scripted-model\"\n\
             max_retries = 0\n\
             [providers.reviewed]\nkind = \"openai\"\nbase_url = \"{}\"\n\
             model = \"scripted-model\"\nmax_retries = 0\n\
             [[routing.rules]]\nagent = \"chat\"\nproviders = [\"chat\"]\n\
             [[routing.rules]]\nagent = \"reviewed\"\nproviders = [\"reviewed\"]\n\
             [agents.chat]\nsystem_prompt = \"You chat.\"\n\
             [agents.reviewed]\nsystem_prompt = \"You write.\"\nensembles = [\"fs\"]\n",
            chat.base_url(),
            reviewed.base_url()
        )),
    )
    .expect("config");
}

/// Starts replica `slot` and records its address.
async fn start_replica(world: &World, sb: &Sandbox, url: &str, slot: usize) -> Served {
    let served = start(sb, &world.model, &["--db", url]).await;
    world.bases.lock().expect("bases")[slot] = Some(served.base.clone());
    served
}

fn kill(world: &World, replicas: &mut [Option<Served>], slot: usize) {
    world.bases.lock().expect("bases")[slot] = None;
    if let Some(mut served) = replicas[slot].take() {
        served.kill_9();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_hold_under_kills_restarts_and_cut_connections() {
    let Some(postgres) = service("AGENTPLANE_TEST_POSTGRES_URL") else {
        return;
    };
    let seed = env_or("AGENTPLANE_CHAOS_SEED", now_ms());
    let size = env_or("AGENTPLANE_CHAOS_REPLICAS", if full_size() { 5 } else { 3 }) as usize;
    let seconds = env_or(
        "AGENTPLANE_CHAOS_SECONDS",
        if full_size() { 240 } else { 40 },
    );
    eprintln!(
        "chaos suite seed: {seed} (replay with AGENTPLANE_CHAOS_SEED={seed}); \
         {size} replicas, {seconds} s of chaos"
    );
    let (url, name) = fresh_database(&postgres).await;
    let admin = connect(&postgres).await;
    let words: Vec<String> = (0..8).map(|i| format!("word{i} ")).collect();
    let chat = ScriptedServer::start(
        Scenario::new(vec![
            Step::text(words.concat())
                .with_split(8)
                .with_chunk_delay_ms(120),
        ])
        .repeating(true),
    )
    .await
    .expect("chat model");
    let reviewed = ScriptedServer::start(
        Scenario::new(vec![
            Step::tool_call(
                "write_file",
                json!({"path": "notes.txt", "content": "chaos"}),
            ),
            Step::text("written").with_split(4).with_chunk_delay_ms(100),
        ])
        .repeating(true),
    )
    .await
    .expect("reviewed model");
    let sb = sandbox("");
    configure(&sb, &chat, &reviewed);

    let world = Arc::new(World {
        bases: Mutex::new(vec![None; size]),
        rng: Mutex::new(Rng::seeded(seed)),
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(15))
            .build()
            .expect("client"),
        streams: reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .expect("client"),
        cwd: sb.workspace.display().to_string(),
        model: chat.base_url(),
        stop_load: AtomicBool::new(false),
        stop_approvals: AtomicBool::new(false),
        threads: Mutex::new(Vec::new()),
        received: Mutex::new(HashMap::new()),
        turn_cancels: Mutex::new(Vec::new()),
        execution_cancels: Mutex::new(Vec::new()),
        executions: Mutex::new(Vec::new()),
        decided: Mutex::new(0),
        transient: Mutex::new(0),
        failures: Mutex::new(Vec::new()),
        subscribers: Mutex::new(Vec::new()),
    });
    let mut replicas: Vec<Option<Served>> = Vec::new();
    for slot in 0..size {
        replicas.push(Some(start_replica(&world, &sb, &url, slot).await));
    }

    let mut load = Vec::new();
    for agent in ["chat", "chat", "chat", "reviewed", "reviewed"] {
        load.push(tokio::spawn(turns(world.clone(), agent)));
    }
    load.push(tokio::spawn(executions(world.clone())));
    let approver = tokio::spawn(approvals(world.clone()));

    // The chaos.
    let began = Instant::now();
    let (mut kills, mut double_kills, mut cuts) = (0u64, 0u64, 0u64);
    while began.elapsed() < Duration::from_secs(seconds) {
        tokio::time::sleep(Duration::from_millis(1_500 + world.below(3_000))).await;
        let action = world.below(10);
        if action >= 7 {
            let cut = cut_connections(&admin, &name).await;
            eprintln!("chaos: cut {cut} database connections");
            cuts += 1;
            continue;
        }
        let first = world.below(size as u64) as usize;
        kill(&world, &mut replicas, first);
        kills += 1;
        let mut dead = vec![first];
        if action >= 5 && size > 1 {
            // A second death in quick succession: maybe the one recovering the first.
            tokio::time::sleep(Duration::from_millis(50 + world.below(2_000))).await;
            let second = (first + 1 + world.below(size as u64 - 1) as usize) % size;
            kill(&world, &mut replicas, second);
            kills += 1;
            double_kills += 1;
            dead.push(second);
        }
        eprintln!("chaos: killed {dead:?}");
        tokio::time::sleep(Duration::from_millis(world.below(4_000))).await;
        for slot in dead {
            replicas[slot] = Some(start_replica(&world, &sb, &url, slot).await);
        }
    }

    // Settle: no new work; the approvals still get decided; everything ends.
    world.stop_load.store(true, Ordering::SeqCst);
    for task in load {
        let _ = tokio::time::timeout(Duration::from_secs(60), task).await;
    }
    let db = connect(&url).await;
    let count = |sql: &'static str| {
        let db = &db;
        async move { db.query_one(sql, &[]).await.expect(sql).get::<_, i64>(0) }
    };
    let settled = Instant::now();
    loop {
        let busy = count("SELECT count(*) FROM turns WHERE status = 'running'").await
            + count("SELECT count(*) FROM executions WHERE status IN ('queued', 'running')").await
            + count(
                "SELECT count(*) FROM approvals WHERE status = 'pending' OR resumed_at IS NULL",
            )
            .await;
        if busy == 0 {
            break;
        }
        if settled.elapsed() > SETTLE {
            world.fail(format!(
                "{busy} turns, executions or approvals still open after {SETTLE:?}"
            ));
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    world.stop_approvals.store(true, Ordering::SeqCst);
    let _ = approver.await;
    eprintln!("settled {:?} after the load stopped", settled.elapsed());

    // The checks, through the API of a random replica.
    let (_, list) = world
        .send(reqwest::Method::GET, "/v1/threads", None)
        .await
        .expect("threads");
    let mut ended: BTreeMap<String, (String, u64)> = BTreeMap::new();
    let mut thread_turns: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let mut stored_events: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let (mut turn_count, mut event_count) = (0u64, 0u64);
    for thread in list["threads"].as_array().expect("threads") {
        let id = thread["id"].as_str().expect("thread id").to_owned();
        let path = format!("/v1/threads/{id}/history?includeEvents=1");
        let (status, history) = world
            .send(reqwest::Method::GET, &path, None)
            .await
            .expect("history");
        assert_eq!(status, 200, "{history}");
        let events = events_of(&history);
        let seqs: Vec<u64> = events
            .iter()
            .map(|e| e["seq"].as_u64().expect("seq"))
            .collect();
        if seqs != (1..=seqs.len() as u64).collect::<Vec<_>>() {
            world.fail(format!("thread {id}: seqs {seqs:?} are not 1..n"));
        }
        event_count += events.len() as u64;
        for turn in history["turns"].as_array().expect("turns") {
            turn_count += 1;
            let turn_id = turn["id"].as_str().expect("turn id").to_owned();
            let of_turn: Vec<&Value> = events
                .iter()
                .filter(|e| e["turn_id"] == turn_id.as_str())
                .collect();
            let kinds = |kind: &str| of_turn.iter().filter(|e| e["kind"] == kind).count();
            if kinds("turn_started") != 1 || kinds("turn_completed") != 1 {
                world.fail(format!(
                    "turn {turn_id}: {} turn_started, {} turn_completed (status {})",
                    kinds("turn_started"),
                    kinds("turn_completed"),
                    turn["status"]
                ));
                continue;
            }
            let done = of_turn
                .iter()
                .find(|e| e["kind"] == "turn_completed")
                .expect("completed");
            let reason = done["stop_reason"].as_str().unwrap_or_default().to_owned();
            let at = ts_ms(done["ts"].as_str().expect("ts"));
            thread_turns
                .entry(id.clone())
                .or_default()
                .push((turn_id.clone(), reason.clone()));
            ended.insert(turn_id, (reason, at));
        }
        stored_events.insert(id, events);
    }

    // Cancels: honoured when accepted, refused only once the turn had ended.
    let mut honoured = 0;
    for ask in world.turn_cancels.lock().expect("cancels").iter() {
        let Some((reason, at)) = ended.get(&ask.id) else {
            world.fail(format!("cancelled turn {} has not ended once", ask.id));
            continue;
        };
        let ended_before = *at <= ask.at + RACE_MS;
        match ask.status {
            202 if matches!(reason.as_str(), "cancelled" | "interrupted") || ended_before => {
                honoured += 1
            }
            409 if ended_before => {}
            status if status >= 500 => *world.transient.lock().expect("transient") += 1,
            status => world.fail(format!(
                "cancel of turn {} answered {status}, and the turn ended {reason} {} ms later",
                ask.id,
                at.saturating_sub(ask.at)
            )),
        }
    }

    // Executions: finished once; a cancel accepted is honoured.
    let ids = world.executions.lock().expect("executions").clone();
    let mut records = BTreeMap::new();
    for id in &ids {
        let (status, record) = world
            .send(reqwest::Method::GET, &format!("/v1/executions/{id}"), None)
            .await
            .expect("execution");
        assert_eq!(status, 200, "{record}");
        let state = record["status"].as_str().unwrap_or_default().to_owned();
        if matches!(state.as_str(), "queued" | "running") {
            world.fail(format!("execution {id} is still {state}"));
        }
        let thread = record["thread_id"].as_str().unwrap_or_default();
        let not_interrupted = thread_turns.get(thread).map_or(0, |turns| {
            turns.iter().filter(|(_, r)| r != "interrupted").count()
        });
        if not_interrupted > 1 {
            world.fail(format!(
                "execution {id} ran {not_interrupted} turns to an end"
            ));
        }
        records.insert(id.clone(), record);
    }
    for ask in world.execution_cancels.lock().expect("cancels").iter() {
        let record = &records[&ask.id];
        let state = record["status"].as_str().unwrap_or_default();
        let turn_end = record["turn_id"]
            .as_str()
            .and_then(|t| ended.get(t))
            .map(|(_, at)| *at);
        let ended_before = turn_end.is_some_and(|at| at <= ask.at + RACE_MS);
        match ask.status {
            200 | 202 if state == "cancelled" || ended_before => {}
            409 if state != "cancelled" => {}
            status if status >= 500 => *world.transient.lock().expect("transient") += 1,
            status => world.fail(format!(
                "cancel of execution {} answered {status}, and it ended {state}: {record}",
                ask.id
            )),
        }
    }

    // Subscribers: each stream is its thread's stored events, in order.
    let deadline = Instant::now() + Duration::from_secs(60);
    for (thread, stored) in &stored_events {
        loop {
            let have = world
                .received
                .lock()
                .expect("received")
                .get(thread)
                .map(Vec::len);
            match have {
                None => break,
                Some(n) if n >= stored.len() => break,
                Some(_) if Instant::now() > deadline => break,
                Some(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }
    for task in world.subscribers.lock().expect("subscribers").drain(..) {
        task.abort();
    }
    let received = world.received.lock().expect("received").clone();
    for (thread, got) in &received {
        let stored = &stored_events[thread];
        let data: Vec<&Value> = got.iter().map(|e| &e.data).collect();
        if data != stored.iter().collect::<Vec<_>>() {
            world.fail(format!(
                "subscriber of {thread} received {} events, {} stored; first difference at {:?}",
                got.len(),
                stored.len(),
                data.iter().zip(stored).position(|(a, b)| *a != b)
            ));
        }
    }

    let failures = world.failures.lock().expect("failures").clone();
    let decided = *world.decided.lock().expect("decided");
    let transient = *world.transient.lock().expect("transient");
    let turn_cancels = world.turn_cancels.lock().expect("cancels").len();
    let execution_cancels = world.execution_cancels.lock().expect("cancels").len();
    eprintln!(
        "chaos suite: {size} replicas, {seconds} s, {kills} kills ({double_kills} double), \
         {cuts} connection cuts; {turn_count} turns on {} threads, {event_count} events, \
         {} executions, {decided} approvals decided, {turn_cancels} turn cancels \
         ({honoured} accepted and honoured), {execution_cancels} execution cancels, \
         {} subscribers; {transient} requests answered 5xx during cuts; failures: {}",
        stored_events.len(),
        ids.len(),
        received.len(),
        failures.len()
    );
    drop(replicas);
    // Appends from every replica, across kills and cut connections: one unbroken chain
    // per thread.
    let (ok, _, text) = agentplane_suites::audit::verify(&sb, Some(&url));
    if !ok {
        world
            .failures
            .lock()
            .expect("failures")
            .push(format!("audit verify: {text}"));
    }
    let failures = world.failures.lock().expect("failures").clone();
    drop_database(&postgres, &name).await;
    if !failures.is_empty() {
        // What the replicas logged as errors, every life of each.
        for entry in std::fs::read_dir(&sb.root).expect("sandbox").flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "log") {
                let log = std::fs::read_to_string(&path).unwrap_or_default();
                let about = |l: &str| {
                    l.contains("ERROR")
                        || failures.iter().any(|f| {
                            f.split_whitespace()
                                .any(|w| w.starts_with("turn_") && l.contains(w))
                        })
                };
                for line in log.lines().filter(|l| about(l)).take(40) {
                    eprintln!("{}: {line}", path.display());
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(kills > 0 && turn_count > 0, "the run did nothing");
}
