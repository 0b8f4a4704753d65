//! Two replicas of the real binary on one PostgreSQL database and one Redis
//! (docs/deploy.md, ADR 0019): a turn started on one is streamed live from the other;
//! one is killed (SIGKILL) mid-turn and the survivor ends that turn `interrupted` and
//! carries on with the executions; a rate limit holds across both.
//!
//! PostgreSQL and Redis come from `AGENTPLANE_TEST_POSTGRES_URL` and
//! `AGENTPLANE_TEST_REDIS_URL` (`scripts/test.sh` starts both). Without them the test
//! fails under `CI=true` and is skipped, with a note, elsewhere. Each run works in a
//! database of its own, dropped at the end.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentplane_suites::{CLIENT, Served, SseReader, api, create_thread, history, sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use serde_json::{Value, json};

/// The URL in `var`, or `None` (a skip) outside CI.
fn service(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var("CI").is_err(),
                "CI must provide {var} (scripts/test.sh starts the service)"
            );
            eprintln!("{var} is not set; run ./scripts/test.sh to include this test");
            None
        }
    }
}

/// A fresh database on the server of `url`: its URL, and the name to drop.
async fn fresh_database(url: &str) -> (String, String) {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect to the test PostgreSQL");
    tokio::spawn(connection);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_nanos();
    let name = format!("ap_replicas_{}_{nanos}", std::process::id());
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create a database");
    let (server, _) = url
        .split_once('?')
        .map_or((url, ""), |(server, query)| (server, query));
    let slash = server.rfind('/').expect("a URL with a database");
    let fresh = if slash > server.find("://").expect("a URL") + 2 {
        format!("{}/{name}", &server[..slash])
    } else {
        format!("{server}/{name}")
    };
    (fresh, name)
}

async fn drop_database(url: &str, name: &str) {
    if let Ok((client, connection)) = tokio_postgres::connect(url, tokio_postgres::NoTls).await {
        tokio::spawn(connection);
        let _ = client
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await;
    }
}

/// Polls `GET path` on `served` until `done` holds, within a generous budget.
async fn eventually(served: &Served, path: &str, what: &str, done: impl Fn(&Value) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let response = api(served, reqwest::Method::GET, path)
            .send()
            .await
            .expect("GET");
        let body: Value = response.json().await.expect("JSON");
        if done(&body) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what} did not happen: {body}\n{}",
            served.stderr()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Starts a turn as `client` on a new thread of that client; the response's status.
async fn turn_as(served: &Served, cwd: &std::path::Path, client: &str) -> reqwest::StatusCode {
    let http = reqwest::Client::new();
    let thread: Value = http
        .post(format!("{}/v1/threads", served.base))
        .header("X-Client-ID", client)
        .json(&json!({"agent": "chat", "cwd": cwd, "title": "limited"}))
        .send()
        .await
        .expect("create thread")
        .json()
        .await
        .expect("thread JSON");
    let id = thread["id"].as_str().expect("thread id");
    http.post(format!("{}/v1/threads/{id}/turns", served.base))
        .header("X-Client-ID", client)
        .json(&json!({"input": "hi"}))
        .send()
        .await
        .expect("start turn")
        .status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_turns_streams_recovery_and_rate_limits() {
    let (Some(postgres), Some(redis)) = (
        service("AGENTPLANE_TEST_POSTGRES_URL"),
        service("AGENTPLANE_TEST_REDIS_URL"),
    ) else {
        return;
    };
    let (db, name) = fresh_database(&postgres).await;
    // Every model call streams its answer slowly (about 3 s), so turns are caught
    // running: the kill lands mid-turn.
    let words: Vec<String> = (0..15).map(|i| format!("word{i} ")).collect();
    let model = ScriptedServer::start(
        Scenario::new(vec![
            Step::text(words.concat())
                .with_split(15)
                .with_chunk_delay_ms(200),
        ])
        .repeating(true),
    )
    .await
    .expect("model");
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_nanos();
    let limited = format!("limited-{nanos}");
    let sb = sandbox(&format!(
        "[cluster]\nheartbeat_secs = 1\nreplica_timeout_secs = 3\n\
         [rate_limits]\nredis = \"{redis}\"\n\
         [policies]\ndir = \"policies\"\n"
    ));
    std::fs::create_dir(sb.root.join("policies")).expect("policies dir");
    std::fs::write(
        sb.root.join("policies").join("limit.yaml"),
        format!(
            // Named per run: the counts live in Redis for the window, across runs.
            "name: shared-limit-{nanos}\ntype: rate_limit\ntargets:\n  clients: [{limited}]\n\
             rules:\n  window: 1h\n  max: 3\n  per: [client]\n"
        ),
    )
    .expect("policy");
    let mut a = start(&sb, &model.base_url(), &["--db", &db]).await;
    let b = start(&sb, &model.base_url(), &["--db", &db]).await;

    // 1. A turn started on A is followed live from B.
    let thread = create_thread(&a, &sb, "chat", "across replicas").await;
    let mut on_b = SseReader::follow(&b, &thread, 0).await;
    let mut on_a = SseReader::open(&a, &thread, "hello").await;
    let first = on_b.until("message_delta").await;
    assert_eq!(first[0].event, "turn_started", "{first:?}");
    let live = history(&b, &thread).await;
    assert_eq!(
        live["turns"][0]["status"], "running",
        "B saw text while the turn still ran on A: {live}"
    );
    let streamed_b = on_b.until("turn_completed").await;
    let streamed_a = on_a.until("turn_completed").await;
    let seqs_b: Vec<u64> = first
        .iter()
        .chain(&streamed_b)
        .filter_map(|e| e.id)
        .collect();
    let seqs_a: Vec<u64> = streamed_a.iter().filter_map(|e| e.id).collect();
    assert_eq!(seqs_b, seqs_a, "B streamed exactly A's events, in order");
    assert_eq!(
        streamed_b.last().expect("end").data["stop_reason"],
        "text_answer"
    );

    // 2. Executions queued on the shared database, then A is killed mid-turn.
    let mut executions = Vec::new();
    for i in 0..4 {
        let response = api(&a, reqwest::Method::POST, "/v1/executions")
            .json(&json!({"agent": "chat", "input": format!("job {i}")}))
            .send()
            .await
            .expect("submit");
        assert_eq!(response.status(), 202, "{}", a.stderr());
        let body: Value = response.json().await.expect("execution JSON");
        executions.push(body["id"].as_str().expect("id").to_owned());
    }
    let _on_a = SseReader::open(&a, &thread, "again").await;
    let seen = on_b.until("message_delta").await;
    let turn = seen
        .iter()
        .find(|e| e.event == "turn_started")
        .and_then(|e| e.data["turn_id"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no turn_started before text: {seen:?}"));
    a.kill_9();

    // 3. B finds A dead, ends A's turn as interrupted (its stream says so), and runs
    // every execution to the end, A's included.
    let ended = on_b.until("turn_completed").await;
    let end = ended.last().expect("end");
    assert_eq!(end.data["turn_id"], turn.as_str(), "{ended:?}");
    assert_eq!(end.data["stop_reason"], "interrupted", "{ended:?}");
    for id in &executions {
        eventually(
            &b,
            &format!("/v1/executions/{id}"),
            "an execution's end",
            |e| !matches!(e["status"].as_str(), Some("queued" | "running")),
        )
        .await;
        let response = api(&b, reqwest::Method::GET, &format!("/v1/executions/{id}"))
            .send()
            .await
            .expect("GET");
        let record: Value = response.json().await.expect("JSON");
        assert_eq!(record["status"], "succeeded", "{record}\n{}", b.stderr());
    }
    assert!(
        b.stderr().contains("its work was recovered here"),
        "{}",
        b.stderr()
    );
    // The thread is free again: a new turn on B runs to its end.
    let mut again = SseReader::open(&b, &thread, "after the crash").await;
    let done = again.until("turn_completed").await;
    assert_eq!(done.last().expect("end").data["stop_reason"], "text_answer");

    // 4. One rate limit across replicas: A's replacement and B share the Redis count.
    let a2 = start(&sb, &model.base_url(), &["--db", &db]).await;
    let mut statuses = Vec::new();
    for served in [&a2, &b, &a2, &b] {
        statuses.push(turn_as(served, &sb.workspace, &limited).await.as_u16());
    }
    assert_eq!(
        statuses,
        [200, 200, 200, 429],
        "three turns per hour for the client, counted once across both replicas"
    );
    // Another client is not limited.
    assert_eq!(turn_as(&a2, &sb.workspace, CLIENT).await.as_u16(), 200);

    drop(a2);
    drop(b);
    drop(a);
    drop_database(&postgres, &name).await;
}

/// The SQLite file serves one process: a second `serve` on it refuses to start, saying
/// why, and the first carries on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_serve_on_one_sqlite_file_refuses_to_start() {
    let model = ScriptedServer::start(Scenario::new(vec![Step::text("hello")]))
        .await
        .expect("model");
    let sb = sandbox("");
    let first = start(&sb, &model.base_url(), &[]).await;
    let port = agentplane_suites::free_port();
    let output = agentplane_suites::command(&sb, &model.base_url())
        .arg("serve")
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .output()
        .expect("run a second serve");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("in use by another agentplane process"),
        "{stderr}"
    );
    assert!(stderr.contains("events.db"), "{stderr}");
    let thread = create_thread(&first, &sb, "chat", "still serving").await;
    let mut sse = SseReader::open(&first, &thread, "hi").await;
    sse.until("turn_completed").await;
}
