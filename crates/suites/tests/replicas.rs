//! Two replicas of the real binary on one PostgreSQL database and one Redis
//! (docs/deploy.md, ADR 0019): a turn started on one is streamed live from the other;
//! one is killed (SIGKILL) mid-turn and the survivor ends that turn `interrupted` and
//! carries on with the executions; a rate limit holds across both. And what ADR 0027
//! adds: a cancel on any replica stops the turn (or execution) where it runs; a
//! recovery whose claimer dies is finished by another survivor; a replica whose
//! `LISTEN` connection was away streams what was committed meanwhile at once.
//!
//! PostgreSQL and Redis come from `AGENTPLANE_TEST_POSTGRES_URL` and
//! `AGENTPLANE_TEST_REDIS_URL` (`scripts/test.sh` starts both). Without them the test
//! fails under `CI=true` and is skipped, with a note, elsewhere. Each run works in a
//! database of its own, dropped at the end.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentplane_suites::postgres::{connect, drop_database, fresh_database, service};
use agentplane_suites::{CLIENT, Served, SseReader, api, create_thread, history, sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use serde_json::{Value, json};

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

/// A model that streams every answer slowly (`chunks` × `delay_ms`), for ever.
async fn slow_model(chunks: usize, delay_ms: u64) -> ScriptedServer {
    let words: Vec<String> = (0..chunks).map(|i| format!("word{i} ")).collect();
    ScriptedServer::start(
        Scenario::new(vec![
            Step::text(words.concat())
                .with_split(chunks)
                .with_chunk_delay_ms(delay_ms),
        ])
        .repeating(true),
    )
    .await
    .expect("model")
}

/// The turn id of the stream's `turn_started`, reading up to the first text.
async fn running_turn(sse: &mut SseReader) -> String {
    let seen = sse.until("message_delta").await;
    seen.iter()
        .find(|e| e.event == "turn_started")
        .and_then(|e| e.data["turn_id"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no turn_started before text: {seen:?}"))
}

async fn post(served: &Served, path: &str) -> (u16, Value) {
    let response = api(served, reqwest::Method::POST, path)
        .send()
        .await
        .expect("POST");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The replica recorded on a turn or an execution (`table` is `turns` or `executions`).
async fn replica_of(db: &tokio_postgres::Client, table: &str, id: &str) -> String {
    db.query_one(
        &format!("SELECT replica FROM {table} WHERE id = $1"),
        &[&id],
    )
    .await
    .expect("read the replica")
    .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_on_any_replica_stops_the_turn_where_it_runs() {
    let Some(postgres) = service("AGENTPLANE_TEST_POSTGRES_URL") else {
        return;
    };
    let (url, name) = fresh_database(&postgres).await;
    // 40 chunks 250 ms apart: ten seconds unless cancelled.
    let model = slow_model(40, 250).await;
    let sb = sandbox("[cluster]\nheartbeat_secs = 1\nreplica_timeout_secs = 3\n");
    let a = start(&sb, &model.base_url(), &["--db", &url]).await;
    let b = start(&sb, &model.base_url(), &["--db", &url]).await;
    let db = connect(&url).await;

    // A turn running on A, cancelled on B: the same answer as on A, and A stops it
    // as promptly as its own cancel would.
    let thread = create_thread(&a, &sb, "chat", "cancel anywhere").await;
    let mut on_a = SseReader::open(&a, &thread, "talk slowly").await;
    let turn = running_turn(&mut on_a).await;
    let asked = Instant::now();
    let (status, body) = post(&b, &format!("/v1/turns/{turn}/cancel")).await;
    assert_eq!(
        (status, &body),
        (202, &json!({"cancelled": true})),
        "{}",
        b.stderr()
    );
    let end = on_a.until("turn_completed").await;
    let took = asked.elapsed();
    assert_eq!(
        end.last().expect("end").data["stop_reason"],
        "cancelled",
        "{end:?}"
    );
    eprintln!("cancel on the other replica ended the turn in {took:?}");
    assert!(took < Duration::from_secs(3), "took {took:?}");
    // Ended: both replicas answer alike.
    for served in [&a, &b] {
        let (status, body) = post(served, &format!("/v1/turns/{turn}/cancel")).await;
        assert_eq!(status, 409, "{body}");
        assert_eq!(body["error"]["code"], "CONFLICT", "{body}");
    }

    // An execution running on one replica, cancelled on the other.
    let a_replica = replica_of(&db, "turns", &turn).await;
    let response = api(&a, reqwest::Method::POST, "/v1/executions")
        .json(&json!({"agent": "chat", "input": "a long job"}))
        .send()
        .await
        .expect("submit");
    assert_eq!(response.status(), 202, "{}", a.stderr());
    let execution: Value = response.json().await.expect("execution JSON");
    let id = execution["id"].as_str().expect("id").to_owned();
    eventually(
        &a,
        &format!("/v1/executions/{id}"),
        "the execution's turn",
        |e| e["status"] == "running" && e["turn_id"].is_string(),
    )
    .await;
    let elsewhere = if replica_of(&db, "executions", &id).await == a_replica {
        &b
    } else {
        &a
    };
    let asked = Instant::now();
    let (status, body) = post(elsewhere, &format!("/v1/executions/{id}/cancel")).await;
    assert!(matches!(status, 200 | 202), "{status} {body}");
    eventually(
        elsewhere,
        &format!("/v1/executions/{id}"),
        "the execution's end",
        |e| !matches!(e["status"].as_str(), Some("queued" | "running")),
    )
    .await;
    let took = asked.elapsed();
    let record: Value = api(
        elsewhere,
        reqwest::Method::GET,
        &format!("/v1/executions/{id}"),
    )
    .send()
    .await
    .expect("GET")
    .json()
    .await
    .expect("JSON");
    assert_eq!(
        record["status"],
        "cancelled",
        "{record}\n{}\n{}",
        a.stderr(),
        b.stderr()
    );
    eprintln!("cancel of an execution on the other replica took {took:?}");
    assert!(took < Duration::from_secs(5), "took {took:?}");

    drop((a, b));
    drop_database(&postgres, &name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recovery_cut_short_by_the_claimers_death_is_finished_by_another() {
    let Some(postgres) = service("AGENTPLANE_TEST_POSTGRES_URL") else {
        return;
    };
    let (url, name) = fresh_database(&postgres).await;
    let model = slow_model(200, 250).await;
    let timeout = Duration::from_secs(3);
    let sb = sandbox("[cluster]\nheartbeat_secs = 1\nreplica_timeout_secs = 3\n");
    let mut a = start(&sb, &model.base_url(), &["--db", &url]).await;
    let mut b = start(&sb, &model.base_url(), &["--db", &url]).await;
    let c = start(&sb, &model.base_url(), &["--db", &url]).await;
    let db = connect(&url).await;

    // A turn running on A and one on B, both followed from C.
    let mut turns = Vec::new();
    let mut streams = Vec::new();
    for served in [&a, &b] {
        let thread = create_thread(served, &sb, "chat", "second death").await;
        let mut follow = SseReader::follow(&c, &thread, 0).await;
        let _run = SseReader::open(served, &thread, "talk for long").await;
        turns.push(running_turn(&mut follow).await);
        streams.push((follow, _run));
    }
    let a_replica = replica_of(&db, "turns", &turns[0]).await;
    let b_replica = replica_of(&db, "turns", &turns[1]).await;

    // B claims A (the registry row exactly as B's claim leaves it) and dies before it
    // recovered anything; A is dead too.
    b.kill_9();
    a.kill_9();
    let killed = Instant::now();
    db.execute(
        "UPDATE replicas SET claimed_by = $2 WHERE id = $1",
        &[&a_replica, &b_replica],
    )
    .await
    .expect("B's claim");

    // C finds B dead, takes B's unfinished claim over, and ends both turns.
    for (follow, _) in &mut streams {
        let end = follow.until("turn_completed").await;
        assert_eq!(
            end.last().expect("end").data["stop_reason"],
            "interrupted",
            "{end:?}"
        );
    }
    let took = killed.elapsed();
    eprintln!("both dead replicas' turns ended {took:?} after the kills");
    // The claimer's death costs one more timeout at most (plus beats on a busy machine).
    assert!(took < timeout * 2 + Duration::from_secs(5), "took {took:?}");
    // Once both recoveries are closed, only C is left in the registry.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left: i64 = db
            .query_one("SELECT count(*) FROM replicas", &[])
            .await
            .expect("registry")
            .get(0);
        if left == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{left} replicas left\n{}",
            c.stderr()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(c);
    drop_database(&postgres, &name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_listen_connection_was_away_streams_the_gap_at_once() {
    let Some(postgres) = service("AGENTPLANE_TEST_POSTGRES_URL") else {
        return;
    };
    let (url, name) = fresh_database(&postgres).await;
    let model = slow_model(10, 20).await;
    let sb = sandbox("");
    let a = start(&sb, &model.base_url(), &["--db", &url]).await;
    let b = start(&sb, &model.base_url(), &["--db", &url]).await;
    let admin = connect(&postgres).await;
    let thread = create_thread(&a, &sb, "chat", "gap").await;
    // A warm pool on A: its turn below needs no new connection.
    SseReader::open(&a, &thread, "warm up")
        .await
        .until("turn_completed")
        .await;
    let mut on_b = SseReader::follow(&b, &thread, 0).await;
    let before = on_b.until("turn_completed").await;

    // The listeners lose their connections and cannot come back until allowed.
    admin
        .batch_execute(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS false"))
        .await
        .expect("refuse new connections");
    let cut: i64 = admin
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE datname = $1 AND application_name = 'agentplane-listener'",
            &[&name],
        )
        .await
        .expect("cut the listeners")
        .get(0);
    assert_eq!(cut, 2, "one listener per replica");
    // A whole turn commits while B hears nothing.
    let during = SseReader::open(&a, &thread, "in the gap")
        .await
        .until("turn_completed")
        .await;
    admin
        .batch_execute(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS true"))
        .await
        .expect("allow connections");
    let allowed = Instant::now();

    // Nothing else is committed: B streams the gap as soon as it listens again.
    let caught = on_b.until("turn_completed").await;
    let took = allowed.elapsed();
    eprintln!("B streamed the gap {took:?} after connections were allowed again");
    let ids = |events: &[agentplane_suites::Received]| -> Vec<u64> {
        events.iter().filter_map(|e| e.id).collect()
    };
    assert_eq!(
        ids(&caught),
        ids(&during),
        "every event of the gap, in order"
    );
    assert_eq!(
        ids(&caught).first().copied(),
        ids(&before).last().map(|l| l + 1),
        "no gap and no repeat"
    );
    // Reconnection backs off up to 5 s; the catch-up itself is immediate.
    assert!(took < Duration::from_secs(8), "took {took:?}");
    drop((a, b));
    drop_database(&postgres, &name).await;
}

/// API keys on a shared database (ADR 0030): a key made by `agentplane keys create`
/// beside running replicas works on both; revoked through one, it is refused by the
/// other on its next request (no cache), well within a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_revoked_on_one_replica_is_refused_by_the_other_at_once() {
    let Some(postgres) = service("AGENTPLANE_TEST_POSTGRES_URL") else {
        return;
    };
    let (db, name) = fresh_database(&postgres).await;
    let model = ScriptedServer::start(Scenario::new(vec![Step::text("hi")]).repeating(true))
        .await
        .expect("model");
    let sb = sandbox("");
    let token = "tok-replicas-keys-7d1e";
    let a = start(
        &sb,
        &model.base_url(),
        &["--db", &db, "--auth-token", token],
    )
    .await;
    let b = start(
        &sb,
        &model.base_url(),
        &["--db", &db, "--auth-token", token],
    )
    .await;
    let out = agentplane_suites::command(&sb, &model.base_url())
        .env("AGENTPLANE_DB", &db)
        .args(["keys", "create", "--client", "alice", "--role", "viewer"])
        .output()
        .expect("keys create");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let key = stdout.lines().last().expect("the key").to_owned();
    let id = stdout
        .split_whitespace()
        .find(|w| w.starts_with("key_"))
        .expect("key id")
        .to_owned();
    let http = reqwest::Client::new();
    let threads = |served: &Served| {
        http.get(format!("{}/v1/threads", served.base))
            .bearer_auth(&key)
            .send()
    };
    assert_eq!(threads(&a).await.expect("A").status(), 200);
    assert_eq!(threads(&b).await.expect("B").status(), 200);
    let revoked = http
        .post(format!("{}/v1/keys/{id}/revoke", a.base))
        .bearer_auth(token)
        .header("X-Client-ID", "admin")
        .send()
        .await
        .expect("revoke");
    assert_eq!(revoked.status(), 200);
    let at = Instant::now();
    let status = threads(&b).await.expect("B").status();
    let took = at.elapsed();
    assert_eq!(status, 401, "B still accepts the revoked key");
    assert!(took < Duration::from_secs(1), "refused after {took:?}");
    println!(
        "identity-figures revocation: refused by the other replica on its first request, {took:?} after the revoke"
    );
    drop((a, b));
    drop_database(&postgres, &name).await;
}
