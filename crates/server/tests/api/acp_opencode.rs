//! opencode (npm `opencode-ai`, pinned in `scripts/test-peers.sh`) driven through the
//! HTTP API against scripted models: a real external agent, in its kernel sandbox,
//! asking permissions we approve and decline, cancelled mid-request, refused by a
//! policy over `write_file`, and its own writes recorded in `workspace_changed`.
//!
//! Each agent gets a scripted model of its own (so one agent's steps never reach
//! another), and all share one for opencode's session titles (its `small_model`).

use std::time::{Duration, Instant};

use agentplane_testkit::{Scenario, ScriptedServer, ScriptedToolCall, Step};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{Api, Setup, SseFrame, SseReader};

/// How long opencode may be quiet between two events: a new session starts a Node
/// process that, on a loaded 2-core machine, took longer than the harness's 15 s.
const OPENCODE_PATIENCE: Duration = Duration::from_secs(180);

fn write(path: &std::path::Path, content: &str) -> Step {
    Step::tool_call(
        "write",
        json!({"filePath": path.display().to_string(), "content": content}),
    )
}

/// `[agents.NAME]` running opencode with its own HOME, models from `model` (and
/// `titles`), and `permission.edit = "ask"` when `ask`.
fn opencode_agent(
    name: &str,
    home: &std::path::Path,
    model: &str,
    titles: &str,
    ask: bool,
) -> String {
    let permission = if ask {
        r#","permission":{"edit":"ask"}"#
    } else {
        ""
    };
    let config = format!(
        r#"{{"provider":{{"scripted":{{"npm":"@ai-sdk/openai-compatible","name":"Scripted","options":{{"baseURL":"{model}","apiKey":"none"}},"models":{{"scripted-model":{{"name":"scripted","tool_call":true}}}}}},"titles":{{"npm":"@ai-sdk/openai-compatible","name":"Titles","options":{{"baseURL":"{titles}","apiKey":"none"}},"models":{{"scripted-model":{{"name":"titles"}}}}}}}},"model":"scripted/scripted-model","small_model":"titles/scripted-model","autoupdate":false,"share":"disabled"{permission}}}"#
    );
    format!(
        "\n[agents.{name}]\nkind = \"acp\"\nprofile = \"opencode\"\n\
         [agents.{name}.acp]\ncommand = {:?}\nhandshake_timeout_secs = 120\n\
         [agents.{name}.acp.env]\nHOME = {:?}\nOPENCODE_DISABLE_MODELS_FETCH = \"1\"\n\
         OPENCODE_DISABLE_AUTOUPDATE = \"1\"\nOPENCODE_CONFIG_CONTENT = '{config}'\n",
        agentplane_testkit::peers::opencode(),
        home.display().to_string(),
    )
}

fn of(frames: &[SseFrame], kind: &str) -> Vec<Value> {
    frames
        .iter()
        .filter(|f| f.is(kind))
        .map(SseFrame::json)
        .collect()
}

/// Reads the stream to the end, answering each permission with the next decision.
async fn answering(api: &Api, stream: &mut SseReader, decisions: &[&str]) -> Vec<SseFrame> {
    let mut frames = Vec::new();
    let mut decisions = decisions.iter();
    loop {
        let frame = stream
            .next_within(OPENCODE_PATIENCE)
            .await
            .expect("the stream ended before turn_completed");
        let json = frame.json();
        let done = frame.is("turn_completed");
        if frame.is("permission_required") {
            let id = json["permission_id"].as_str().expect("id").to_owned();
            let decision = decisions
                .next()
                .unwrap_or_else(|| panic!("an unexpected permission ask: {json}"));
            let answer = api
                .post(
                    &format!("/v1/permissions/{id}"),
                    "alice",
                    json!({ "decision": decision }),
                )
                .await;
            assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
        }
        frames.push(frame);
        if done {
            return frames;
        }
    }
}

#[tokio::test]
async fn opencode_from_npm_is_approved_declined_cancelled_refused_by_policy_and_recorded() {
    let started = Instant::now();
    let homes = tempfile::tempdir().expect("homes");
    let titles = ScriptedServer::start(Scenario::new(vec![Step::text("A title")]).repeating(true))
        .await
        .expect("titles");
    // The workspace is only known once the server runs: the steps name paths in it,
    // so the agents' models start after it, on ports the config already names.
    // The listeners are held until the models take them: a port dropped and bound
    // again could be taken by a parallel test in between.
    let mut listeners: Vec<std::net::TcpListener> = (0..3)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("port"))
        .collect();
    let ports: Vec<std::net::SocketAddr> = listeners
        .iter()
        .map(|listener| listener.local_addr().expect("addr"))
        .collect();
    let url = |addr: &std::net::SocketAddr| format!("http://{addr}/v1");
    let api = Setup::new(Vec::new())
        .extra_config(&opencode_agent("oc", &homes.path().join("oc"), &url(&ports[0]), &titles.base_url(), true))
        .extra_config(&opencode_agent("ocdeny", &homes.path().join("ocdeny"), &url(&ports[1]), &titles.base_url(), true))
        .extra_config(&opencode_agent("ocfree", &homes.path().join("ocfree"), &url(&ports[2]), &titles.base_url(), false))
        .policy(
            "opencode.yaml",
            "- name: no-writes\n  type: tool_access\n  targets: {agents: [ocdeny]}\n  rules: {deny: [write_file]}\n",
        )
        .start()
        .await;
    for name in ["oc", "ocdeny", "ocfree"] {
        std::fs::create_dir_all(homes.path().join(name)).expect("home");
    }
    let ws = api.workspace.clone();
    let data_dir = api._dir.path().to_path_buf();
    let stall = Step {
        stall_before_headers: true,
        ..Step::default()
    };
    let oc_model = ScriptedServer::listen(
        Scenario::new(vec![
            stall,
            write(&ws.join("a.txt"), "approved\n"),
            write(&ws.join("b.txt"), "declined\n"),
            Step::text("Wrote a.txt; b.txt was declined."),
        ]),
        listeners.remove(0),
    )
    .await
    .expect("oc model");
    let _deny_model = ScriptedServer::listen(
        Scenario::new(vec![
            write(&ws.join("c.txt"), "refused\n"),
            Step::text("ok"),
        ]),
        listeners.remove(0),
    )
    .await
    .expect("ocdeny model");
    let _free_model = ScriptedServer::listen(
        Scenario::new(vec![
            write(&ws.join("d.txt"), "written without asking\n"),
            Step::tool_calls(vec![ScriptedToolCall {
                id: None,
                name: "bash".into(),
                arguments: json!({"command": "echo on its own > e.txt", "description": "write e.txt"}),
            }]),
            Step::text("done"),
            Step::tool_calls(vec![ScriptedToolCall {
                id: None,
                name: "bash".into(),
                arguments: json!({
                    "command": format!(
                        "echo escaped > {data}/escaped.txt; head -c 16 {data}/events.db",
                        data = data_dir.display()
                    ),
                    "description": "leave the workspace",
                }),
            }]),
            Step::text("tried"),
        ]),
        listeners.remove(0),
    )
    .await
    .expect("ocfree model");

    // 1. A cancel while opencode waits for its model.
    let thread = api.create_thread("alice", "oc").await;
    let mut stream = api.start_turn("alice", &thread, "think about it").await;
    let first = stream.until("turn_started").await;
    let turn = first[0].json()["turn_id"]
        .as_str()
        .expect("turn")
        .to_owned();
    if !oc_model.called(1, Duration::from_secs(120)).await {
        let rest = tokio::time::timeout(Duration::from_secs(5), stream.until_completed()).await;
        panic!(
            "opencode never called its model: {:?}",
            rest.map(|frames| frames.iter().map(SseFrame::json).collect::<Vec<_>>())
        );
    }
    let cancel_at = Instant::now();
    let cancelled = api
        .post(&format!("/v1/turns/{turn}/cancel"), "alice", Value::Null)
        .await;
    assert_eq!(cancelled.status, StatusCode::ACCEPTED);
    let frames = stream.until_completed().await;
    assert_eq!(
        frames.last().expect("last").json()["stop_reason"],
        "cancelled"
    );
    let cancel_took = cancel_at.elapsed();
    assert!(
        cancel_took < Duration::from_secs(5),
        "cancel took {cancel_took:?}"
    );

    // 2. One permission approved, one declined (the same thread: session/load).
    let mut stream = api
        .start_turn("alice", &thread, "write a.txt and b.txt")
        .await;
    let frames = answering(&api, &mut stream, &["approved", "declined"]).await;
    let asked = of(&frames, "permission_required");
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked.iter().all(|a| a["tool"] == "write_file"), "{asked:?}");
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).ok().as_deref(),
        Some("approved\n")
    );
    assert!(!ws.join("b.txt").exists(), "a declined write happened");
    let decisions: Vec<Value> = of(&frames, "permission_resolved")
        .iter()
        .map(|r| r["decision"].clone())
        .collect();
    assert_eq!(decisions, vec![json!("approved"), json!("declined")]);
    let changed = &of(&frames, "workspace_changed")[0];
    assert_eq!(changed["created"][0]["path"], "a.txt", "{changed}");

    // 3. A policy denying write_file stops the edit when opencode asks.
    let thread = api.create_thread("alice", "ocdeny").await;
    let mut stream = api.start_turn("alice", &thread, "write c.txt").await;
    // Nobody answers: the policy does, at once (the ask is recorded, and declined).
    // A policy that failed to answer would leave the ask to a person, and the stream
    // quiet until this patience runs out.
    let frames = stream.until_completed_within(OPENCODE_PATIENCE).await;
    assert!(!ws.join("c.txt").exists(), "the denied write happened");
    let security = &of(&frames, "security_event")[0];
    assert_eq!(security["event_type"], "policy_denied", "{security}");
    assert_eq!(security["tool"], "write_file");
    assert_eq!(of(&frames, "policy_denied")[0]["policy"], "no-writes");

    // 4. Not asked to ask, opencode writes on its own: workspace_changed has it.
    let thread = api.create_thread("alice", "ocfree").await;
    let mut stream = api
        .start_turn("alice", &thread, "write d.txt and e.txt")
        .await;
    let frames = answering(&api, &mut stream, &[]).await;
    assert!(of(&frames, "permission_required").is_empty());
    assert!(ws.join("e.txt").exists(), "bash did not run");
    let changed = &of(&frames, "workspace_changed")[0];
    let created: Vec<&str> = changed["created"]
        .as_array()
        .expect("created")
        .iter()
        .filter_map(|c| c["path"].as_str())
        .collect();
    assert!(
        created.contains(&"d.txt") && created.contains(&"e.txt"),
        "{changed}"
    );

    // 5. Told by its model to write outside its workspace and read the server's
    // store, opencode runs bash itself — a person even approves whatever it asks —
    // and the kernel refuses both.
    let mut stream = api
        .start_turn("alice", &thread, "leave the workspace")
        .await;
    let frames = answering(&api, &mut stream, &["approved"; 8]).await;
    assert!(
        !data_dir.join("escaped.txt").exists(),
        "opencode wrote into the data dir"
    );
    let outputs: Vec<String> = of(&frames, "tool_call_result")
        .iter()
        .filter_map(|r| r["output"].as_str().map(str::to_owned))
        .collect();
    assert!(
        outputs
            .iter()
            .any(|o| o.matches("Permission denied").count() >= 2),
        "the kernel's refusals, as bash saw them: {outputs:?}"
    );
    assert!(
        !outputs.iter().any(|o| o.contains("SQLite format")),
        "the store leaked: {outputs:?}"
    );
    eprintln!(
        "opencode end-to-end: {:.1} s (cancel answered in {cancel_took:?})",
        started.elapsed().as_secs_f64()
    );
}
