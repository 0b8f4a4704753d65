//! `agentplane serve`, `threads` and `history` as real processes: the release of a bind,
//! turns over real HTTP and SSE against the scripted model on 127.0.0.1, SQLite files in
//! temp dirs, SIGKILL and SIGTERM sent to the server mid-turn, restarts on the same file.
//!
//! Only what needs the real binary and real signals lives here; the API's own behaviour
//! is tested in `crates/server`.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use agentplane_suites::{
    EVENT_BUDGET, SseReader, api, assert_kept, command, create_thread, events_of, free_port,
    history, sandbox, start,
};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use serde_json::{Value, json};

async fn run_cli(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("join")
        .expect("binary runs")
}

/// Runs the binary with arguments that must make it exit by itself within 20 s.
async fn exits_by_itself(mut cmd: Command) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "still running after 20 s: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child.wait_with_output().expect("output")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_healthz_and_summarizes_its_startup() {
    let model = ScriptedServer::start(Scenario::new(vec![]))
        .await
        .expect("model");
    let sb = sandbox("");
    let served = start(&sb, &model.base_url(), &[]).await;
    let summary = served.stderr();
    let port = served.base.rsplit(':').next().expect("port");
    assert!(
        summary.contains(port),
        "the summary names the address:\n{summary}"
    );
    assert!(
        summary.contains("events.db"),
        "the summary names the DB:\n{summary}"
    );
    assert!(
        summary.contains("chat"),
        "the summary lists the agents:\n{summary}"
    );
    assert!(sb.db.exists(), "the DB was opened");
    assert!(
        !summary.contains("local-model.sh"),
        "a model server answers, so no hint to start one:\n{summary}"
    );

    // `/v1/*` without a client id is refused in the envelope.
    let response = reqwest::get(format!("{}/v1/threads", served.base))
        .await
        .expect("request");
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.expect("envelope");
    assert_eq!(body["error"]["code"], "INVALID_ARGUMENT");
}

/// A fresh server's first scrape lists every family `docs/metrics.md` documents (and no
/// other), with HELP and TYPE before any series exists, so `absent()` checks and alerts
/// work from the start; promtool accepts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_servers_first_scrape_lists_every_documented_metric_family() {
    let model = ScriptedServer::start(Scenario::new(vec![]))
        .await
        .expect("model");
    let sb = sandbox("");
    let served = start(&sb, &model.base_url(), &[]).await;
    let response = reqwest::get(format!("{}/metrics", served.base))
        .await
        .expect("scrape");
    assert_eq!(response.status(), 200);
    let text = response.text().await.expect("text");
    agentplane_testkit::promtool::assert_documented_families(&text);
    for (family, _) in agentplane_testkit::promtool::documented_families() {
        assert!(
            text.contains(&format!("# HELP {family} ")),
            "{family} has no help:\n{text}"
        );
    }
    assert!(
        !text.contains("policy_denials_total{"),
        "nothing was refused yet:\n{text}"
    );
    agentplane_testkit::promtool::assert_accepts(&text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_model_server_the_summary_names_the_command_that_starts_one() {
    // A port nobody listens on any more.
    let port = free_port();
    let sb = sandbox("");
    let served = start(&sb, &format!("http://127.0.0.1:{port}/v1"), &[]).await;
    let summary = served.stderr();
    assert!(
        summary.contains(&format!(
            "Next    start a small local model there: AGENTPLANE_LOCAL_MODEL_PORT={port} ./scripts/local-model.sh"
        )),
        "{summary}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn public_addresses_need_allow_public_and_a_token() {
    let sb = sandbox("");
    let model = "http://127.0.0.1:9/v1";

    let mut cmd = command(&sb, model);
    cmd.args(["serve", "--listen", "0.0.0.0:0"]);
    let out = exits_by_itself(cmd).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--allow-public"),
        "{}",
        text(&out.stderr)
    );

    for empty_token in [None, Some("")] {
        let mut cmd = command(&sb, model);
        cmd.args(["serve", "--listen", "0.0.0.0:0", "--allow-public"]);
        if let Some(token) = empty_token {
            cmd.env("AGENTPLANE_AUTH_TOKEN", token);
        }
        let out = exits_by_itself(cmd).await;
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        assert!(text(&out.stderr).contains("token"), "{}", text(&out.stderr));
    }

    // The same refusals for an address from the config file, and for IPv6.
    let public_in_file = sandbox("[server]\nlisten = \"[::]:0\"\n");
    let mut cmd = command(&public_in_file, model);
    cmd.arg("serve");
    let out = exits_by_itself(cmd).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));

    // Hostile values are usage errors too.
    for args in [
        &["serve", "--listen", "not-an-address"][..],
        &["serve", "--listen", "127.0.0.1:0", "--auth-token", " "][..],
    ] {
        let mut cmd = command(&sb, model);
        cmd.args(args);
        let out = exits_by_itself(cmd).await;
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    assert!(!sb.db.exists(), "a refused start opened the store");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_turn_then_restart_leaves_the_turn_interrupted_with_its_events() {
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::text("too late").with_delay_ms(120_000),
        Step::text("after the restart"),
    ]))
    .await
    .expect("model");
    let sb = sandbox("");
    let mut served = start(&sb, &model.base_url(), &[]).await;
    let thread = create_thread(&served, &sb, "chat", "crash test").await;
    let mut stream = SseReader::open(&served, &thread, "take your time").await;
    let streamed = stream.until("turn_started").await;
    let turn = streamed[0].data["turn_id"]
        .as_str()
        .expect("turn id")
        .to_owned();
    // Kill while the model call is in flight, not before it was made.
    assert!(
        model.called(1, EVENT_BUDGET).await,
        "the model was never called"
    );
    served.kill_9();
    drop(stream);

    let served = start(&sb, &model.base_url(), &[]).await;
    let history = history(&served, &thread).await;
    let turns = history["turns"].as_array().expect("turns");
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0]["id"], turn.as_str());
    assert_eq!(turns[0]["status"], "ended");
    assert_eq!(turns[0]["stop_reason"], "interrupted");
    let stored = events_of(&history);
    assert_kept(&streamed, &stored);
    let last = stored.last().expect("events");
    assert_eq!(last["kind"], "turn_completed");
    assert_eq!(last["stop_reason"], "interrupted");
    let seqs: Vec<u64> = stored
        .iter()
        .map(|e| e["seq"].as_u64().expect("seq"))
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "gapless");

    // The thread is usable again: its one running turn was ended.
    let mut stream = SseReader::open(&served, &thread, "again").await;
    let events = stream.until("turn_completed").await;
    assert_eq!(
        events.last().expect("end").data["stop_reason"],
        "text_answer"
    );
    assert!(
        events.first().expect("start").id > Some(*seqs.last().expect("seq")),
        "seq continues after the restart"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_pending_at_kill_9_is_declined_after_restart_with_the_reason() {
    let model = ScriptedServer::start(Scenario::new(vec![Step::tool_call(
        "list_files",
        json!({}),
    )]))
    .await
    .expect("model");
    let sb = sandbox("");
    let mut served = start(&sb, &model.base_url(), &[]).await;
    let thread = create_thread(&served, &sb, "careful", "permission test").await;
    let mut stream = SseReader::open(&served, &thread, "list the files").await;
    let streamed = stream.until("permission_required").await;
    let asked = &streamed.last().expect("permission_required").data;
    assert_eq!(asked["tool"], "list_files");
    let permission = asked["permission_id"].as_str().expect("id").to_owned();
    served.kill_9();
    drop(stream);

    let served = start(&sb, &model.base_url(), &[]).await;
    let history = history(&served, &thread).await;
    let stored = events_of(&history);
    assert_kept(&streamed, &stored);
    let resolved = stored
        .iter()
        .find(|e| e["kind"] == "permission_resolved")
        .expect("a permission_resolved event after the restart");
    assert_eq!(resolved["permission_id"], permission.as_str());
    assert_eq!(resolved["decision"], "declined");
    let reason = resolved["reason"].as_str().expect("reason");
    assert!(reason.contains("stopped"), "the reason says why: {reason}");
    assert_eq!(history["turns"][0]["stop_reason"], "interrupted");
    assert!(
        !stored
            .iter()
            .any(|e| e["kind"] == "tool_call_result" && e["status"] == "ok"),
        "the tool never ran"
    );

    // A late approval cannot undo the decline (fail-closed).
    let response = api(
        &served,
        reqwest::Method::POST,
        &format!("/v1/permissions/{permission}"),
    )
    .json(&json!({"decision": "approved"}))
    .send()
    .await
    .expect("late decision");
    assert_eq!(response.status(), 409);
    let body: Value = response.json().await.expect("envelope");
    assert_eq!(body["error"]["code"], "CONFLICT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_cancels_a_running_turn_after_the_grace_period_and_exits_0() {
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::text("too late").with_delay_ms(120_000),
    ]))
    .await
    .expect("model");
    let sb = sandbox("[server]\nshutdown_grace_secs = 1\n");
    let mut served = start(&sb, &model.base_url(), &[]).await;
    let thread = create_thread(&served, &sb, "chat", "shutdown test").await;
    let mut stream = SseReader::open(&served, &thread, "take your time").await;
    stream.until("turn_started").await;

    let signalled = Instant::now();
    let kill = Command::new("kill")
        .args(["-TERM", &served.pid().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(kill.success());
    let status = served
        .exit_within(Duration::from_secs(15))
        .await
        .unwrap_or_else(|| panic!("still running 15 s after SIGTERM:\n{}", served.stderr()));
    assert_eq!(status.code(), Some(0), "{}", served.stderr());
    assert!(
        signalled.elapsed() >= Duration::from_millis(900),
        "stopped before the grace period was over: {:?}",
        signalled.elapsed()
    );
    assert!(
        served.stderr().contains("shutting down"),
        "{}",
        served.stderr()
    );
    // The stream delivers the stored `turn_completed` before the server closes it.
    let mut rest = Vec::new();
    while let Ok(Some(event)) = tokio::time::timeout(EVENT_BUDGET, stream.next()).await {
        rest.push(event);
    }
    let completed: Vec<_> = rest
        .iter()
        .filter(|e| e.event == "turn_completed")
        .collect();
    assert_eq!(completed.len(), 1, "{rest:?}");
    assert_eq!(completed[0].data["stop_reason"], "cancelled", "{rest:?}");

    let served = start(&sb, &model.base_url(), &[]).await;
    let history = history(&served, &thread).await;
    assert_eq!(
        history["turns"][0]["stop_reason"], "cancelled",
        "not interrupted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_and_history_read_a_running_server_as_one_client() {
    let model = ScriptedServer::start(Scenario::new(vec![Step::text("Hi there")]))
        .await
        .expect("model");
    let sb = sandbox("");
    let served = start(&sb, &model.base_url(), &["--auth-token", "s3cret"]).await;
    let thread = {
        let response = reqwest::Client::new()
            .post(format!("{}/v1/threads", served.base))
            .header("X-Client-ID", "alice")
            .bearer_auth("s3cret")
            .json(&json!({"agent": "chat", "cwd": sb.workspace,
                          "title": "greeting\nthr_forged\u{1b}[2J"}))
            .send()
            .await
            .expect("create");
        assert_eq!(response.status(), 201);
        let body: Value = response.json().await.expect("thread");
        body["id"].as_str().expect("id").to_owned()
    };
    // A token on the command line works, and is warned about: `ps` shows it to all.
    assert!(
        served
            .stderr()
            .contains("--auth-token was given on the command line"),
        "{}",
        served.stderr()
    );
    let response = reqwest::Client::new()
        .post(format!("{}/v1/threads/{thread}/turns", served.base))
        .header("X-Client-ID", "alice")
        .bearer_auth("s3cret")
        .json(&json!({"input": "hello"}))
        .send()
        .await
        .expect("turn");
    assert_eq!(response.status(), 200);
    let sse = response.text().await.expect("stream to the end");
    assert!(sse.contains("event: turn_completed"), "{sse}");

    let client = |args: &[&str], client_id: &str, token: &str| {
        let mut cmd = command(&sb, "http://127.0.0.1:9/v1");
        cmd.args(args)
            .args(["--server", &served.base, "--client-id", client_id])
            .env("AGENTPLANE_AUTH_TOKEN", token);
        cmd
    };

    let out = run_cli(client(&["threads"], "alice", "s3cret")).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    assert_eq!(table.lines().count(), 1, "{table}");
    assert!(table.starts_with(&thread), "{table}");
    // The line break and the escape sequence are shown as codes (`agentplane_core::visible`).
    assert!(
        table.contains("greeting\\u{a}thr_forged\\u{1b}[2J"),
        "{table}"
    );
    assert!(!table.contains('\u{1b}'), "{table:?}");

    let out = run_cli(client(&["threads", "--json"], "alice", "s3cret")).await;
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["threads"][0]["id"], thread.as_str());

    let out = run_cli(client(&["history", &thread, "--events"], "alice", "s3cret")).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(shown.contains("text_answer"), "{shown}");
    assert!(shown.contains("  > hello\n  < Hi there\n"), "{shown}");
    assert!(shown.contains("#1 turn_started agent chat"), "{shown}");
    assert!(shown.contains("turn_completed text_answer"), "{shown}");

    let out = run_cli(client(&["history", &thread, "--json"], "alice", "s3cret")).await;
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["turns"][0]["stop_reason"], "text_answer");
    assert!(
        doc["turns"][0].get("events").is_none(),
        "events only with --events"
    );

    // Another client sees nothing of alice's, exactly like a thread that does not exist.
    let out = run_cli(client(&["threads"], "bob", "s3cret")).await;
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    assert!(
        text(&out.stderr).contains("no threads"),
        "{}",
        text(&out.stderr)
    );
    let out = run_cli(client(&["history", &thread], "bob", "s3cret")).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).starts_with("error [NOT_FOUND]: "),
        "{}",
        text(&out.stderr)
    );

    // A wrong token, a bad client id, a bad thread id.
    let out = run_cli(client(&["threads"], "alice", "wrong")).await;
    assert!(
        text(&out.stderr).starts_with("error [UNAUTHORIZED]: "),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        !text(&out.stderr).contains("wrong"),
        "the token is not echoed"
    );
    let out = run_cli(client(&["threads"], "al ice/../x", "s3cret")).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).starts_with("error [INVALID_ARGUMENT]: "),
        "{}",
        text(&out.stderr)
    );
    let out = run_cli(client(
        &["history", "turn_0196f3c2a1b27c3d8e9f0a1b2c3d4e5f"],
        "alice",
        "s3cret",
    ))
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).starts_with("error [INVALID_ARGUMENT]: "),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_name_the_url_of_a_server_that_is_not_there() {
    let sb = sandbox("");
    let url = format!("http://127.0.0.1:{}", free_port());
    for args in [
        &["threads"][..],
        &["history", "thr_0196f3c2a1b27c3d8e9f0a1b2c3d4e5f"][..],
    ] {
        let mut cmd = command(&sb, "http://127.0.0.1:9/v1");
        cmd.args(args).env("AGENTPLANE_SERVER", &url);
        let out = run_cli(cmd).await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.starts_with("error [UPSTREAM_UNAVAILABLE]: "),
            "{stderr}"
        );
        assert!(stderr.contains(&url), "{stderr}");
    }

    // Something that answers but is not agentplane.
    let model = ScriptedServer::start(Scenario::new(vec![]))
        .await
        .expect("model");
    let not_agentplane = format!("http://{}", model.addr());
    let mut cmd = command(&sb, "http://127.0.0.1:9/v1");
    cmd.args(["threads", "--server", &not_agentplane]);
    let out = run_cli(cmd).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("did not answer as an agentplane server"),
        "{stderr}"
    );
}
