//! External agents held to the same rules (issue 23), through the HTTP API with the SDK
//! peer behaving as real agents did: a loaded session's replay stays out of the new
//! turn, arguments sent late replace the planned ones, usage from `usage_update` and
//! gemini's `_meta.quota` is priced, a policy over our tool names refuses what the
//! agent asks without asking anyone.

use serde_json::json;

use crate::harness::{Api, Setup, SseFrame};

fn peer_agent() -> String {
    let (node, args) = agentplane_testkit::peers::acp_sdk_agent();
    let args = args
        .iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "\n[agents.peer]\nkind = \"acp\"\nprofile = \"opencode\"\n\
         [agents.peer.acp]\ncommand = {node:?}\nargs = [{args}]\n\
         [prices.\"acp:opencode\"]\ninput_per_mtok = 10.0\noutput_per_mtok = 20.0\n"
    )
}

async fn start(policy: Option<&str>) -> Api {
    let mut setup = Setup::new(Vec::new()).extra_config(&peer_agent());
    if let Some(yaml) = policy {
        setup = setup.policy("acp.yaml", yaml);
    }
    setup.start().await
}

async fn turn(api: &Api, thread: &str, input: &str) -> Vec<SseFrame> {
    let mut stream = api.start_turn("alice", thread, input).await;
    stream.until_completed().await
}

fn of(frames: &[SseFrame], kind: &str) -> Vec<serde_json::Value> {
    frames
        .iter()
        .filter(|f| f.is(kind))
        .map(SseFrame::json)
        .collect()
}

fn result_text(frames: &[SseFrame]) -> String {
    let done = frames.last().expect("last").json();
    assert_eq!(done["kind"], "turn_completed");
    done["result"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_second_turn_records_only_its_own_work_and_sends_no_context_twice() {
    let api = start(None).await;
    let thread = api.create_thread("alice", "peer").await;
    let first = turn(&api, &thread, "hello").await;
    assert!(result_text(&first).starts_with("Hello from the SDK peer."));

    let second = turn(&api, &thread, "hello again").await;
    let text = result_text(&second);
    // The agent resumed its session (session/load), and what it replayed then — the
    // earlier answer, the earlier tool call — is not this turn's.
    assert!(text.contains("[resumed peer-session-1]"), "{text}");
    assert!(text.starts_with("Hello from the SDK peer."), "{text}");
    assert!(!text.contains("earlier answer"), "{text}");
    assert!(!text.contains("[loaded"), "{text}");
    assert!(
        !text.contains("[context sent]"),
        "the history went to a session that has it: {text}"
    );
    let planned = of(&second, "tool_call_planned");
    assert!(
        planned.iter().all(|p| p["call_id"] != "call-0"),
        "a phantom call from the replay: {planned:?}"
    );
    assert_eq!(of(&second, "tool_call_result").len(), planned.len());
}

#[tokio::test]
async fn arguments_sent_in_an_update_replace_the_planned_ones_before_the_result() {
    let api = start(None).await;
    let thread = api.create_thread("alice", "peer").await;
    let frames = turn(&api, &thread, "rawinput").await;
    let kinds: Vec<String> = frames
        .iter()
        .map(|f| f.json()["kind"].as_str().unwrap_or("").to_owned())
        .collect();
    let at = |kind: &str| {
        frames
            .iter()
            .position(|f| f.is(kind) && f.json()["call_id"] == "call-3")
            .unwrap_or_else(|| panic!("no {kind} for call-3 in {kinds:?}"))
    };
    let (planned, arguments, result) = (
        frames[at("tool_call_planned")].json(),
        frames[at("tool_call_arguments")].json(),
        frames[at("tool_call_result")].json(),
    );
    assert!(at("tool_call_planned") < at("tool_call_arguments"));
    assert!(at("tool_call_arguments") < at("tool_call_result"));
    assert_eq!(planned["tool"], "write_file", "kind edit is write_file");
    assert_eq!(
        planned["title"], "edit a.txt",
        "the agent's title beside it"
    );
    assert_eq!(planned["arguments"], json!({}));
    assert_eq!(
        arguments["arguments"],
        json!({"filePath": "a.txt", "newString": "x"})
    );
    assert_ne!(arguments["args_preview_hash"], planned["args_preview_hash"]);
    assert_eq!(result["args_preview_hash"], arguments["args_preview_hash"]);
}

#[tokio::test]
async fn usage_updates_and_gemini_quota_are_priced_so_budgets_see_them() {
    let api = start(None).await;
    let thread = api.create_thread("alice", "peer").await;
    let frames = turn(&api, &thread, "usage").await;
    let usage = &of(&frames, "usage")[0];
    assert_eq!(usage["reported"], true, "{usage}");
    assert_eq!(usage["input_tokens"], 1500);
    // 1500 tokens × $10/M = $0.015, but the agent says the session cost $0.35: the
    // larger is what budgets are charged.
    assert_eq!(of(&frames, "cost")[0]["usd_micros"], 350_000);

    let thread = api.create_thread("alice", "peer").await;
    let frames = turn(&api, &thread, "quota").await;
    let usage = &of(&frames, "usage")[0];
    assert_eq!(
        (
            usage["reported"].clone(),
            usage["input_tokens"].clone(),
            usage["output_tokens"].clone()
        ),
        (json!(true), json!(90), json!(12))
    );
    // 90 × $10/M + 12 × $20/M.
    assert_eq!(of(&frames, "cost")[0]["usd_micros"], 1_140);
}

#[tokio::test]
async fn a_policy_denying_write_file_rejects_the_agents_edit_without_asking_anyone() {
    let api = start(Some(
        "- name: no-writes\n  type: tool_access\n  targets: {agents: [peer]}\n  rules: {deny: [write_file]}\n",
    ))
    .await;
    let thread = api.create_thread("alice", "peer").await;
    // Nobody answers: a turn waiting for a person would hang until the timeout.
    let frames = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        turn(&api, &thread, "permission"),
    )
    .await
    .expect("the denied ask was not put to a person");
    let text = result_text(&frames);
    assert!(text.contains("[permission: reject]"), "{text}");
    let denied = &of(&frames, "policy_denied")[0];
    assert_eq!(denied["policy"], "no-writes");
    assert_eq!(denied["tool"], "write_file");
    let security = &of(&frames, "security_event")[0];
    assert_eq!(security["event_type"], "policy_denied");
    assert!(
        security["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("edit main.rs"),
        "{security}"
    );
    let resolved = &of(&frames, "permission_resolved")[0];
    assert_eq!(resolved["decision"], "declined");
}

#[tokio::test]
async fn the_kernel_refuses_an_agent_writing_outside_its_workspace_or_reading_the_data_dir() {
    let api = start(None).await;
    let data_dir = api._dir.path().to_path_buf();
    let outside = data_dir.join("escaped.txt");
    let secret = data_dir.join("events.db");
    assert!(secret.exists(), "the server's store is in its data dir");
    let thread = api.create_thread("alice", "peer").await;
    // The agent itself writes and reads with node's fs, not through our fs/* methods:
    // only its process's confinement can stop that.
    let frames = turn(
        &api,
        &thread,
        &format!(
            "rogue outside={} secret={}",
            outside.display(),
            secret.display()
        ),
    )
    .await;
    let text = result_text(&frames);
    assert!(text.contains("write-inside: done"), "{text}");
    assert!(text.contains("write-outside: EACCES"), "{text}");
    assert!(text.contains("read-secret: EACCES"), "{text}");
    // Its own /proc directory is open to it (Bun needs it), the server's is not.
    assert!(text.contains("read-own-proc: done"), "{text}");
    assert!(text.contains("read-server-environ: EACCES"), "{text}");
    assert!(!outside.exists(), "the agent wrote outside its workspace");
    assert!(api.workspace.join("rogue-inside.txt").exists());
    // What it wrote on its own, never through us, is in the audit trail.
    let changed = &of(&frames, "workspace_changed")[0];
    assert_eq!(
        changed["created"][0]["path"], "rogue-inside.txt",
        "{changed}"
    );
    assert_eq!(changed["created"][0]["size"], 1);
    assert_eq!(changed["complete"], true);
}

#[tokio::test]
async fn a_native_turn_records_the_files_it_changed_by_hash_never_content() {
    use agentplane_testkit::Step;
    let api = Setup::new(vec![
        Step::tool_call(
            "write_file",
            json!({"path": "notes/a.txt", "content": "hello"}),
        ),
        Step::tool_call("finish_task", json!({"summary": "done"})),
        Step::text("nothing to do"),
    ])
    .extra_config("\n[agents.maker]\nsystem_prompt = \"Write.\"\nensembles = [\"fs\"]\n")
    .start()
    .await;
    std::fs::write(api.workspace.join("old.txt"), "old").expect("old");
    let thread = api.create_thread("alice", "maker").await;
    let frames = turn(&api, &thread, "write notes/a.txt").await;
    let changed = of(&frames, "workspace_changed");
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert_eq!(
        changed[0]["created"],
        json!([{
            "path": "notes/a.txt",
            "size": 5,
            "sha256": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
        }])
    );
    assert_eq!(changed[0]["modified"], json!([]));
    assert!(
        !changed[0].to_string().contains("hello\""),
        "content leaked"
    );
    let kinds: Vec<String> = frames
        .iter()
        .map(|f| f.json()["kind"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(
        kinds[kinds.len() - 2],
        "workspace_changed",
        "right before turn_completed: {kinds:?}"
    );
    // A turn that changes nothing records no such event.
    let frames = turn(&api, &thread, "anything else?").await;
    assert!(of(&frames, "workspace_changed").is_empty());
}

#[tokio::test]
async fn arguments_in_a_permission_ask_fill_a_call_planned_without_them_before_the_ask() {
    let api = start(None).await;
    let thread = api.create_thread("alice", "peer").await;
    let mut stream = api.start_turn("alice", &thread, "askinput").await;
    let mut frames = stream.until("permission_required").await;
    let required = frames.last().expect("ask").json();
    assert_eq!(
        required["tool"], "run_command",
        "kind execute is run_command"
    );
    let arguments = frames
        .iter()
        .find(|f| f.is("tool_call_arguments"))
        .expect("the ask's arguments recorded before the ask")
        .json();
    assert_eq!(arguments["call_id"], "call-4");
    assert_eq!(arguments["arguments"], json!({"command": "cargo test"}));
    let id = required["permission_id"].as_str().expect("id").to_owned();
    let answer = api
        .post(
            &format!("/v1/permissions/{id}"),
            "alice",
            json!({"decision": "approved"}),
        )
        .await;
    assert_eq!(answer.status, reqwest::StatusCode::OK);
    frames.extend(stream.until_completed().await);
    let result = &of(&frames, "tool_call_result")
        .into_iter()
        .find(|r| r["call_id"] == "call-4")
        .expect("result");
    assert_eq!(result["args_preview_hash"], arguments["args_preview_hash"]);
}
