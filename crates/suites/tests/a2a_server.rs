//! agentplane as an A2A server, through the real binary, driven by PyPI's official
//! `a2a-sdk` as the client (1.3, protocol 1.0; and 0.3.26, protocol 0.3) with
//! agentplane keys as bearer tokens (`peers/a2a_client.py`, `peers/a2a_client_v03.py`):
//!
//! - the SDK's card resolver accepts the card (both generations);
//! - a message gets a completed task whose artifact carries `finish_task`'s payload;
//!   a streamed task's updates arrive in order and end completed;
//! - a running task is cancelled and its turn ends `cancelled` in our log;
//! - a task paused on an approval is `input-required`, and completes after
//!   `POST /v1/approvals/{id}`;
//! - after a restart on the same SQLite file, `GetTask` returns the stored task;
//! - a request without a key is refused; another client's task is "not found";
//! - each error path answers the spec's code (raw JSON-RPC over HTTP);
//! - `a2a_request` events are in the thread's history, without the message's text.
//!
//! Needs the A2A peers of `scripts/test-peers.sh`.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agentplane_suites::{Sandbox, Served, command, sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer, Step, peers};
use serde_json::{Value, json};

/// The agent published, its approval policy and `[a2a]`.
const CONFIG: &str = "\
[agents.reviewer]
description = \"Reviews changes and says whether they may ship.\"
system_prompt = \"You review.\"
ensembles = [\"fs\"]
output_schema = { type = \"object\", properties = { verdict = { type = \"string\" } }, required = [\"verdict\"] }
[policies]
dir = \"policies\"
[a2a]
agents = [\"reviewer\"]
workspace = \"../ws\"
";

const POLICY: &str = "\
name: listing-needs-approval
type: approval_required
targets: {agents: [reviewer]}
rules:
  tools: [list_files]
";

/// A word that is in the messages sent and must be in no `a2a_request` event.
const SECRET_WORD: &str = "zebra-7781";

fn a2a_sandbox() -> Sandbox {
    let sb = sandbox(CONFIG);
    std::fs::create_dir(sb.root.join("policies")).expect("policies dir");
    std::fs::write(sb.root.join("policies").join("review.yaml"), POLICY).expect("policy");
    std::fs::write(sb.workspace.join("notes.md"), "notes").expect("a file to list");
    sb
}

/// `agentplane keys create` before the server holds the file: the secret of an
/// operator and approver.
fn key(sb: &Sandbox, client: &str) -> String {
    key_with(sb, client, &["operator", "approver"])
}

fn key_with(sb: &Sandbox, client: &str, roles: &[&str]) -> String {
    agentplane_suites::cli_key(sb, client, roles)
}

fn agent_url(served: &Served) -> String {
    format!("{}/a2a/reviewer", served.base)
}

/// Runs a peer script with one JSON command; its JSON answer.
async fn peer(python: PathBuf, script: PathBuf, command: Value) -> Value {
    let mut cmd = Command::new(python);
    cmd.arg(script)
        .arg(command.to_string())
        .stdin(Stdio::null());
    let output = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("join")
        .expect("the client runs");
    peers::client_json(&output)
}

/// The 1.x SDK client.
async fn sdk(served: &Served, key: Option<&str>, mut command: Value) -> Value {
    command["url"] = json!(agent_url(served));
    if let Some(key) = key {
        command["key"] = json!(key);
    }
    peer(peers::python(), peers::a2a_client_script(), command).await
}

/// The 0.3 SDK client.
async fn sdk_v0_3(served: &Served, key: &str, mut command: Value) -> Value {
    command["url"] = json!(agent_url(served));
    command["key"] = json!(key);
    peer(
        peers::python_a2a_v0_3(),
        peers::a2a_client_v0_3_script(),
        command,
    )
    .await
}

/// One JSON-RPC request over raw HTTP as protocol 1.0 (`version` header unless
/// `None`); the HTTP status and the JSON answer.
async fn rpc(served: &Served, key: &str, version: Option<&str>, body: Vec<u8>) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(agent_url(served))
        .bearer_auth(key)
        .header("content-type", "application/json")
        .body(body);
    if let Some(version) = version {
        request = request.header("A2A-Version", version);
    }
    let response = request.send().await.expect("POST");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|_| json!({ "raw": text })),
    )
}

fn call(method: &str, params: Value) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": "r1", "method": method, "params": params})
        .to_string()
        .into_bytes()
}

fn code_of(answer: &Value) -> i64 {
    answer["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("a JSON-RPC error: {answer}"))
}

/// The task of a 1.x `send` answer (its last stream item's task, or the one task).
fn task_of(answer: &Value) -> Value {
    let events = answer["events"]
        .as_array()
        .unwrap_or_else(|| panic!("events: {answer}"));
    events
        .iter()
        .rev()
        .find_map(|e| e.get("task").cloned())
        .unwrap_or_else(|| panic!("a task: {answer}"))
}

async fn history_of(served: &Served, key: &str, thread: &str) -> Value {
    let response = reqwest::Client::new()
        .get(format!(
            "{}/v1/threads/{thread}/history?includeEvents=1",
            served.base
        ))
        .bearer_auth(key)
        .send()
        .await
        .expect("history");
    assert_eq!(response.status(), 200);
    response.json().await.expect("history JSON")
}

fn events_named(history: &Value, kind: &str) -> Vec<Value> {
    agentplane_suites::events_of(history)
        .into_iter()
        .filter(|e| e["kind"] == kind)
        .collect()
}

/// Polls `GetTask` until the task is in `state`.
async fn wait_for_state(served: &Served, key: &str, task: &str, state: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = sdk(served, Some(key), json!({"op": "get", "task": task})).await;
        if got["task"]["status"]["state"] == state {
            return got["task"].clone();
        }
        assert!(Instant::now() < deadline, "never {state}: {got}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_sdk_drives_our_agent_as_an_a2a_agent() {
    let sb = a2a_sandbox();
    let alice = key(&sb, "alice");
    let bob = key(&sb, "bob");
    let viewer = key_with(&sb, "vic", &["viewer"]);
    let model = ScriptedServer::start(Scenario::new(vec![
        // 1. a blocking message: finish_task.
        Step::tool_call("finish_task", json!({"verdict": "ship it"})),
        // 2. a streamed message: text in pieces.
        Step::text("Looks good to me.").with_split(3),
        // 3. a message that never gets an answer: cancelled.
        Step::silent(),
        // 4. a listing under approval, then the result.
        Step::tool_call("list_files", json!({"path": "."})),
        Step::tool_call("finish_task", json!({"verdict": "listed"})),
    ]))
    .await
    .expect("scripted model");
    let mut served = start(&sb, &model.base_url(), &[]).await;

    // The card: public, parsed by the SDK's own resolver.
    let card = sdk(&served, None, json!({"op": "card"})).await;
    let card = &card["card"];
    assert_eq!(card["name"], "reviewer", "{card}");
    assert_eq!(
        card["description"],
        "Reviews changes and says whether they may ship."
    );
    assert_eq!(card["capabilities"]["streaming"], true);
    let interfaces = card["supportedInterfaces"].as_array().expect("interfaces");
    assert!(
        interfaces
            .iter()
            .any(|i| i["protocolVersion"] == "1.0" && i["url"] == agent_url(&served)),
        "{card}"
    );
    assert!(card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "bearer");
    assert!(
        card["skills"][0]["description"]
            .as_str()
            .is_some_and(|d| d.contains("verdict")),
        "the output schema is in the skill: {card}"
    );
    // The host's card is the first agent's.
    let host: Value = reqwest::get(format!("{}/.well-known/agent-card.json", served.base))
        .await
        .expect("host card")
        .json()
        .await
        .expect("JSON");
    assert_eq!(host["name"], "reviewer");
    assert_eq!(host["url"], agent_url(&served), "0.3's url is there too");

    // A request without a key is refused: 401 with our envelope and a challenge.
    let response = reqwest::Client::new()
        .post(agent_url(&served))
        .header("A2A-Version", "1.0")
        .body(call("GetTask", json!({"id": "turn_x"})))
        .send()
        .await
        .expect("POST");
    assert_eq!(response.status(), 401);
    assert!(response.headers().contains_key("www-authenticate"));
    let body: Value = response.json().await.expect("envelope");
    assert_eq!(body["error"]["code"], "UNAUTHORIZED", "{body}");
    let refused = sdk(&served, None, json!({"op": "send", "text": "hello"})).await;
    assert!(refused["error"]["message"].as_str().is_some(), "{refused}");
    assert_eq!(model.chat_request_count(), 0, "nothing ran without a key");
    // A viewer may read, not start turns: 403, as on /v1.
    let send =
        json!({"message": {"messageId": "v1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}});
    let (status, answer) = rpc(&served, &viewer, Some("1.0"), call("SendMessage", send)).await;
    assert_eq!(status, 403, "{answer}");
    assert_eq!(answer["error"]["code"], "FORBIDDEN", "{answer}");
    assert_eq!(model.chat_request_count(), 0, "nothing ran for a viewer");

    // 2. A blocking message: the completed task carries finish_task's payload.
    let sent = sdk(
        &served,
        Some(&alice),
        json!({"op": "send", "text": format!("Review {SECRET_WORD} please"), "data": {"pr": 7}}),
    )
    .await;
    let task = task_of(&sent);
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{sent}");
    let artifact = &task["artifacts"][0];
    assert_eq!(
        artifact["parts"][0]["data"],
        json!({"verdict": "ship it"}),
        "{task}"
    );
    assert!(artifact["parts"][1]["text"].is_string(), "{task}");
    let first_task = task["id"].as_str().expect("task id").to_owned();
    let first_context = task["contextId"].as_str().expect("context").to_owned();
    assert!(first_task.starts_with("turn_") && first_context.starts_with("thr_"));
    // The turn input was the message's text and data parts (protobuf's numbers are
    // doubles: the SDK sends 7 as 7.0).
    let asked = model.requests()[0]["messages"][1]["content"].clone();
    assert_eq!(
        asked,
        json!(format!("Review {SECRET_WORD} please\n{{\"pr\":7.0}}"))
    );

    // 3. A streamed task: the task, then updates in order, the last one completed.
    let streamed = sdk(
        &served,
        Some(&alice),
        json!({"op": "send", "text": format!("Again {SECRET_WORD}"), "stream": true}),
    )
    .await;
    let items = streamed["events"]
        .as_array()
        .unwrap_or_else(|| panic!("{streamed}"));
    assert!(
        items[0].get("task").is_some(),
        "the task comes first: {streamed}"
    );
    let texts: String = items
        .iter()
        .filter_map(|i| i["artifactUpdate"]["artifact"]["parts"][0]["text"].as_str())
        .filter(|_| true)
        .collect::<Vec<_>>()
        .join("|");
    assert!(texts.contains("Looks good to me."), "{streamed}");
    let states: Vec<&str> = items
        .iter()
        .filter_map(|i| i["statusUpdate"]["status"]["state"].as_str())
        .collect();
    assert_eq!(states.first(), Some(&"TASK_STATE_WORKING"), "{streamed}");
    assert_eq!(states.last(), Some(&"TASK_STATE_COMPLETED"), "{streamed}");
    let stream_context = task_of(&streamed)["contextId"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| {
            items[0]["task"]["contextId"]
                .as_str()
                .expect("ctx")
                .to_owned()
        });
    assert_ne!(
        stream_context, first_context,
        "a message without context starts one"
    );

    // 4. Cancel a running task: non-blocking send, then cancel.
    let running = sdk(
        &served,
        Some(&alice),
        json!({"op": "send", "text": "Take your time", "return_immediately": true}),
    )
    .await;
    let running_task = task_of(&running);
    assert!(
        ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"]
            .contains(&running_task["status"]["state"].as_str().unwrap_or_default()),
        "{running}"
    );
    let running_id = running_task["id"].as_str().expect("id").to_owned();
    // Bob cannot see it, nor cancel it.
    let theirs = sdk(
        &served,
        Some(&bob),
        json!({"op": "get", "task": running_id}),
    )
    .await;
    assert!(theirs["error"]["type"].as_str().is_some(), "{theirs}");
    let (_, answer) = rpc(
        &served,
        &bob,
        Some("1.0"),
        call("CancelTask", json!({"id": running_id})),
    )
    .await;
    assert_eq!(
        code_of(&answer),
        -32001,
        "another client's task is not found"
    );
    let (_, answer) = rpc(
        &served,
        &bob,
        Some("1.0"),
        call("GetTask", json!({"id": first_task})),
    )
    .await;
    assert_eq!(code_of(&answer), -32001);
    let cancelled = sdk(
        &served,
        Some(&alice),
        json!({"op": "cancel", "task": running_id}),
    )
    .await;
    assert_eq!(
        cancelled["task"]["status"]["state"], "TASK_STATE_CANCELED",
        "{cancelled}"
    );
    let history = history_of(
        &served,
        &alice,
        running_task["contextId"].as_str().expect("ctx"),
    )
    .await;
    let ends = events_named(&history, "turn_completed");
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["stop_reason"], "cancelled", "{history}");
    // A task that has ended cannot be cancelled again.
    let (_, answer) = rpc(
        &served,
        &alice,
        Some("1.0"),
        call("CancelTask", json!({"id": running_id})),
    )
    .await;
    assert_eq!(code_of(&answer), -32002);

    // 5. Input required: an approval pauses the task; deciding it completes it.
    let paused = sdk(
        &served,
        Some(&alice),
        json!({"op": "send", "text": "List the workspace"}),
    )
    .await;
    let paused_task = task_of(&paused);
    assert_eq!(
        paused_task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{paused}"
    );
    let waiting = paused_task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .expect("what is awaited");
    let approval = waiting
        .split_whitespace()
        .find(|w| w.starts_with("apr_"))
        .unwrap_or_else(|| panic!("an approval id in {waiting}"))
        .to_owned();
    let paused_id = paused_task["id"].as_str().expect("id").to_owned();
    // A client following the paused task sees it resume and complete.
    let following = {
        let command =
            json!({"op": "subscribe", "task": paused_id, "url": agent_url(&served), "key": alice});
        tokio::spawn(peer(peers::python(), peers::a2a_client_script(), command))
    };
    // The follower is there once its request is recorded in the task's turn (the
    // stream replays from the store whatever comes after what it read).
    let paused_context = paused_task["contextId"].as_str().expect("ctx").to_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let history = history_of(&served, &alice, &paused_context).await;
        if events_named(&history, "a2a_request")
            .iter()
            .any(|e| e["method"] == "SubscribeToTask")
        {
            break;
        }
        assert!(Instant::now() < deadline, "no follower: {history}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let decided = reqwest::Client::new()
        .post(format!("{}/v1/approvals/{approval}", served.base))
        .bearer_auth(&alice)
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .expect("decide");
    assert_eq!(
        decided.status(),
        200,
        "{}",
        decided.text().await.unwrap_or_default()
    );
    let done = wait_for_state(&served, &alice, &paused_id, "TASK_STATE_COMPLETED").await;
    assert_eq!(
        done["artifacts"][0]["parts"][0]["data"],
        json!({"verdict": "listed"})
    );
    let followed = following.await.expect("the follower");
    let items = followed["events"]
        .as_array()
        .unwrap_or_else(|| panic!("{followed}"));
    assert_eq!(
        items[0]["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{followed}"
    );
    let last = items.last().expect("an item");
    assert_eq!(
        last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{followed}"
    );

    // 9. Error paths, with the spec's codes.
    let (status, answer) = rpc(&served, &alice, Some("1.0"), b"{not json".to_vec()).await;
    assert_eq!((status, code_of(&answer)), (200, -32700), "malformed JSON");
    let (_, answer) = rpc(
        &served,
        &alice,
        Some("1.0"),
        br#"{"jsonrpc":"1.0","id":1,"method":"GetTask"}"#.to_vec(),
    )
    .await;
    assert_eq!(code_of(&answer), -32600, "not JSON-RPC 2.0");
    let (_, answer) = rpc(&served, &alice, Some("1.0"), call("DoSomething", json!({}))).await;
    assert_eq!(code_of(&answer), -32601, "unknown method");
    let (_, answer) = rpc(
        &served,
        &alice,
        Some("1.0"),
        call("GetTask", json!({"id": 5})),
    )
    .await;
    assert_eq!(code_of(&answer), -32602, "invalid params");
    let (_, answer) = rpc(
        &served,
        &alice,
        Some("1.0"),
        call(
            "GetTask",
            json!({"id": "turn_0000000000000000000000000000"}),
        ),
    )
    .await;
    assert_eq!(code_of(&answer), -32001, "unknown task");
    assert_eq!(
        answer["error"]["data"][0]["reason"], "TASK_NOT_FOUND",
        "{answer}"
    );
    let wrong_context = json!({"message": {
        "messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}],
        "taskId": first_task, "contextId": stream_context,
    }});
    let (_, answer) = rpc(
        &served,
        &alice,
        Some("1.0"),
        call("SendMessage", wrong_context),
    )
    .await;
    assert_eq!(
        code_of(&answer),
        -32602,
        "a task of another context: {answer}"
    );
    let oversized = json!({"message": {
        "messageId": "m2", "role": "ROLE_USER", "parts": [{"text": "x".repeat(300 * 1024)}],
    }});
    let (_, answer) = rpc(&served, &alice, Some("1.0"), call("SendMessage", oversized)).await;
    assert_eq!(
        code_of(&answer),
        -32602,
        "a message over the turn input cap: {answer}"
    );
    let huge = call(
        "SendMessage",
        json!({"message": {"messageId": "m3", "role": "ROLE_USER",
        "parts": [{"text": "x".repeat(2 * 1024 * 1024)}]}}),
    );
    let (status, answer) = rpc(&served, &alice, Some("1.0"), huge).await;
    assert_eq!(status, 413, "a body over the server's limit: {answer}");
    assert_eq!(
        answer["error"]["code"], "INVALID_ARGUMENT",
        "our envelope: {answer}"
    );
    // The same body without a declared length (chunked): refused as it grows.
    let chunks = (0..40).map(|_| Ok::<_, std::io::Error>(vec![b' '; 64 * 1024]));
    let response = reqwest::Client::new()
        .post(agent_url(&served))
        .bearer_auth(&alice)
        .header("A2A-Version", "1.0")
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await
        .expect("POST");
    assert_eq!(response.status(), 413);
    let answer: Value = response.json().await.expect("envelope");
    assert_eq!(answer["error"]["code"], "INVALID_ARGUMENT", "{answer}");
    let (_, answer) = rpc(
        &served,
        &alice,
        None,
        call("GetTask", json!({"id": first_task})),
    )
    .await;
    assert_eq!(
        code_of(&answer),
        -32009,
        "a 1.0 method without the version header"
    );
    let (_, answer) = rpc(
        &served,
        &alice,
        Some("2.0"),
        call("GetTask", json!({"id": first_task})),
    )
    .await;
    assert_eq!(code_of(&answer), -32009, "an unsupported version");
    let (_, answer) = rpc(
        &served,
        &alice,
        Some("1.0"),
        call(
            "CreateTaskPushNotificationConfig",
            json!({"taskId": first_task, "url": "https://example.com/hook"}),
        ),
    )
    .await;
    assert_eq!(
        code_of(&answer),
        -32003,
        "push notifications are not offered"
    );
    let file = json!({"message": {"messageId": "m4", "role": "ROLE_USER",
        "parts": [{"url": "https://example.com/f.txt", "mediaType": "text/plain"}]}});
    let (_, answer) = rpc(&served, &alice, Some("1.0"), call("SendMessage", file)).await;
    assert_eq!(code_of(&answer), -32005, "a file part");
    assert_eq!(
        model.chat_request_count(),
        5,
        "no error path reached the model"
    );

    // ListTasks (1.0): the tasks of one context.
    let listed = sdk(
        &served,
        Some(&alice),
        json!({"op": "list", "context": first_context}),
    )
    .await;
    assert_eq!(listed["list"]["tasks"][0]["id"], first_task, "{listed}");

    // 11. a2a_request events: in the thread's history, never the message's text.
    let history = history_of(&served, &alice, &first_context).await;
    let requests = events_named(&history, "a2a_request");
    assert!(!requests.is_empty(), "{history}");
    assert_eq!(requests[0]["method"], "SendMessage");
    assert_eq!(requests[0]["direction"], "in");
    assert_eq!(requests[0]["protocol_version"], "1.0");
    assert_eq!(requests[0]["task"], first_task);
    assert_eq!(requests[0]["context"], first_context);
    assert_eq!(requests[0]["outcome"], "ok");
    for request in &requests {
        assert!(!request.to_string().contains(SECRET_WORD), "{request}");
    }
    let history = history_of(&served, &alice, &stream_context).await;
    let requests = events_named(&history, "a2a_request");
    assert_eq!(requests[0]["method"], "SendStreamingMessage", "{history}");

    // 6. After a restart on the same database, GetTask returns the stored task.
    served.kill_9();
    drop(served);
    let served = start(&sb, &model.base_url(), &[]).await;
    let again = sdk(
        &served,
        Some(&alice),
        json!({"op": "get", "task": first_task}),
    )
    .await;
    assert_eq!(
        again["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{again}"
    );
    assert_eq!(
        again["task"]["artifacts"][0]["parts"][0]["data"],
        json!({"verdict": "ship it"})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_0_3_client_gets_the_same_in_its_own_shapes() {
    let sb = a2a_sandbox();
    let carol = key(&sb, "carol");
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::tool_call("finish_task", json!({"verdict": "fine"})),
        Step::text("Streaming works.").with_split(2),
        Step::tool_call("finish_task", json!({"verdict": "still fine"})),
    ]))
    .await
    .expect("scripted model");
    let served = start(&sb, &model.base_url(), &[]).await;

    let card = sdk_v0_3(&served, &carol, json!({"op": "card"})).await;
    assert_eq!(card["card"]["name"], "reviewer", "{card}");
    assert_eq!(card["card"]["url"], agent_url(&served));
    assert_eq!(card["card"]["preferredTransport"], "JSONRPC");

    let sent = sdk_v0_3(&served, &carol, json!({"op": "send", "text": "Review"})).await;
    let task = &sent["events"][0]["task"];
    assert_eq!(task["kind"], "task", "{sent}");
    assert_eq!(task["status"]["state"], "completed", "{sent}");
    assert_eq!(task["artifacts"][0]["parts"][0]["kind"], "data");
    assert_eq!(
        task["artifacts"][0]["parts"][0]["data"],
        json!({"verdict": "fine"})
    );
    let id = task["id"].as_str().expect("id").to_owned();
    let context = task["contextId"].as_str().expect("context").to_owned();

    let got = sdk_v0_3(&served, &carol, json!({"op": "get", "task": id})).await;
    assert_eq!(got["task"]["status"]["state"], "completed", "{got}");

    let streamed = sdk_v0_3(
        &served,
        &carol,
        json!({"op": "send", "text": "Stream", "stream": true}),
    )
    .await;
    let items = streamed["events"]
        .as_array()
        .unwrap_or_else(|| panic!("{streamed}"));
    let last = items.last().expect("an item");
    assert_eq!(last["task"]["status"]["state"], "completed", "{streamed}");
    assert_eq!(last["update"]["kind"], "status-update", "{streamed}");
    assert_eq!(last["update"]["final"], true, "{streamed}");
    assert!(
        items
            .iter()
            .any(|i| i["update"]["kind"] == "artifact-update"),
        "{streamed}"
    );

    // A message naming a context continues that thread with a new task.
    let more = sdk_v0_3(
        &served,
        &carol,
        json!({"op": "send", "text": "And now?", "context": context}),
    )
    .await;
    let next = &more["events"][0]["task"];
    assert_eq!(next["contextId"], context, "{more}");
    assert_ne!(next["id"], id.as_str());
    assert_eq!(next["status"]["state"], "completed", "{more}");
    let history = history_of(&served, &carol, &context).await;
    assert_eq!(
        history["turns"].as_array().map(Vec::len),
        Some(2),
        "{history}"
    );

    // Unknown task, in 0.3's shape (no details).
    let (_, answer) = rpc(
        &served,
        &carol,
        None,
        call("tasks/get", json!({"id": "turn_nope"})),
    )
    .await;
    assert_eq!(code_of(&answer), -32001);
    assert!(answer["error"].get("data").is_none(), "{answer}");

    let history = history_of(&served, &carol, &context).await;
    let requests = events_named(&history, "a2a_request");
    assert_eq!(requests[0]["method"], "message/send", "{history}");
    assert_eq!(requests[0]["protocol_version"], "0.3");
}

#[tokio::test(flavor = "multi_thread")]
async fn nothing_is_published_without_a2a_agents() {
    let sb = sandbox("");
    let model = ScriptedServer::start(Scenario::new(vec![]))
        .await
        .expect("scripted model");
    let served = start(&sb, &model.base_url(), &[]).await;
    for path in [
        "/.well-known/agent-card.json",
        "/a2a/chat/.well-known/agent-card.json",
    ] {
        let response = reqwest::get(format!("{}{path}", served.base))
            .await
            .expect("GET");
        assert_eq!(response.status(), 404, "{path}");
    }
    let response = reqwest::Client::new()
        .post(format!("{}/a2a/chat", served.base))
        .body(call("message/send", json!({})))
        .send()
        .await
        .expect("POST");
    assert_eq!(response.status(), 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_refuses_unknown_agents_and_a_workspace_outside_the_roots() {
    for (a2a, expected) in [
        ("agents = [\"nobody\"]", "unknown agent `nobody`"),
        // The configuration folder is never a workspace (ADR 0040).
        ("agents = [\"chat\"]\nworkspace = \".\"", "a2a.workspace"),
    ] {
        let sb = sandbox(&format!("[a2a]\n{a2a}\n"));
        let out = command(&sb, "http://127.0.0.1:9")
            .args(["serve", "--listen", "127.0.0.1:0"])
            .output()
            .expect("serve");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{a2a}: {stderr}");
        assert!(stderr.contains(expected), "{a2a}: {stderr}");
    }
}

/// One POST a webhook receiver got.
#[derive(Debug)]
struct Posted {
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Posted {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

/// A webhook receiver on 127.0.0.1 answering 200 to every POST; its URL and what it got.
async fn webhook_receiver() -> (String, tokio::sync::mpsc::UnboundedReceiver<Posted>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                let (head_end, length) = loop {
                    let Ok(n) = socket.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                        let length = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        break (end + 4, length);
                    }
                };
                while buf.len() < head_end + length {
                    let Ok(n) = socket.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
                let headers = head
                    .lines()
                    .skip(1)
                    .filter_map(|l| l.split_once(':'))
                    .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
                    .collect();
                let _ = socket
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
                let _ = tx.send(Posted {
                    headers,
                    body: buf[head_end..head_end + length].to_vec(),
                });
            });
        }
    });
    (url, rx)
}

async fn next_post(posts: &mut tokio::sync::mpsc::UnboundedReceiver<Posted>) -> Posted {
    tokio::time::timeout(Duration::from_secs(30), posts.recv())
        .await
        .expect("a push notification in time")
        .expect("the receiver runs")
}

#[tokio::test(flavor = "multi_thread")]
async fn push_notifications_are_the_executions_signed_webhooks() {
    let sb = sandbox(&format!(
        "{CONFIG}[executions]\nwebhook_secret = \"HOOK\"\nallow_private_webhooks = true\n\
         [secrets.HOOK]\nfile = \"hook.secret\"\n"
    ));
    std::fs::write(sb.root.join("hook.secret"), "hook-secret").expect("secret");
    std::fs::create_dir(sb.root.join("policies")).expect("policies dir");
    std::fs::write(sb.root.join("policies").join("review.yaml"), POLICY).expect("policy");
    let dave = key(&sb, "dave");
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::tool_call("list_files", json!({"path": "."})),
        Step::tool_call("finish_task", json!({"verdict": "pushed"})),
    ]))
    .await
    .expect("scripted model");
    let served = start(&sb, &model.base_url(), &[]).await;
    let card = sdk(&served, None, json!({"op": "card"})).await;
    assert_eq!(
        card["card"]["capabilities"]["pushNotifications"], true,
        "{card}"
    );
    let (url, mut posts) = webhook_receiver().await;

    let send = json!({
        "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "List it"}]},
        "configuration": {"returnImmediately": true,
            "taskPushNotificationConfig": {"url": url, "token": "tok-first"}},
    });
    let (_, answer) = rpc(&served, &dave, Some("1.0"), call("SendMessage", send)).await;
    let task = answer["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {answer}"))
        .to_owned();

    // Paused on the approval: the task is POSTed, signed, with the client's token.
    let paused = next_post(&mut posts).await;
    assert_eq!(paused.header("x-a2a-notification-token"), Some("tok-first"));
    assert_eq!(paused.header("x-agentplane-event"), Some("a2a.task"));
    assert!(
        paused
            .header("x-agentplane-signature")
            .is_some_and(|s| s.starts_with("sha256=")),
        "{paused:?}"
    );
    // The signature is the executions' one: HMAC-SHA256 of "{timestamp}.{body}".
    let check = Command::new(peers::python())
        .arg("-c")
        .arg(
            "import hmac, hashlib, sys; \
             print('sha256=' + hmac.new(b'hook-secret', sys.argv[1].encode() + b'.' + \
             sys.argv[2].encode(), hashlib.sha256).hexdigest())",
        )
        .arg(paused.header("x-agentplane-timestamp").expect("timestamp"))
        .arg(String::from_utf8(paused.body.clone()).expect("utf-8"))
        .output()
        .expect("python");
    assert_eq!(
        String::from_utf8_lossy(&check.stdout).trim(),
        paused.header("x-agentplane-signature").expect("signature")
    );
    let body = paused.json();
    assert_eq!(body["task"]["id"], task.as_str());
    assert_eq!(
        body["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{body}"
    );

    // A second configuration while it waits; both are listed.
    let second = json!({"taskId": task, "id": "second", "url": url, "token": "tok-second"});
    let (_, answer) = rpc(
        &served,
        &dave,
        Some("1.0"),
        call("CreateTaskPushNotificationConfig", second),
    )
    .await;
    assert_eq!(answer["result"]["id"], "second", "{answer}");
    let (_, answer) = rpc(
        &served,
        &dave,
        Some("1.0"),
        call("ListTaskPushNotificationConfigs", json!({"taskId": task})),
    )
    .await;
    assert_eq!(
        answer["result"]["configs"].as_array().map(Vec::len),
        Some(2),
        "{answer}"
    );

    // Decided: both get the completed task.
    let approval = body["task"]["status"]["message"]["parts"][0]["text"]
        .as_str()
        .and_then(|t| t.split_whitespace().find(|w| w.starts_with("apr_")))
        .expect("the approval id")
        .to_owned();
    let decided = reqwest::Client::new()
        .post(format!("{}/v1/approvals/{approval}", served.base))
        .bearer_auth(&dave)
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .expect("decide");
    assert_eq!(decided.status(), 200);
    let mut tokens = Vec::new();
    for _ in 0..2 {
        let done = next_post(&mut posts).await;
        let body = done.json();
        assert_eq!(
            body["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{body}"
        );
        assert_eq!(
            body["task"]["artifacts"][0]["parts"][0]["data"],
            json!({"verdict": "pushed"})
        );
        tokens.push(done.header("x-a2a-notification-token").map(str::to_owned));
    }
    tokens.sort();
    assert_eq!(
        tokens,
        [Some("tok-first".to_owned()), Some("tok-second".to_owned())]
    );

    // A push to a task that has ended is refused; a URL that is not one, too.
    let late = json!({"taskId": task, "url": url});
    let (_, answer) = rpc(
        &served,
        &dave,
        Some("1.0"),
        call("CreateTaskPushNotificationConfig", late),
    )
    .await;
    assert_eq!(code_of(&answer), -32004, "{answer}");
    let bad = json!({
        "message": {"messageId": "m2", "role": "ROLE_USER", "parts": [{"text": "x"}]},
        "configuration": {"taskPushNotificationConfig": {"url": "ftp://example.com/x"}},
    });
    let (_, answer) = rpc(&served, &dave, Some("1.0"), call("SendMessage", bad)).await;
    assert_eq!(code_of(&answer), -32602, "{answer}");
    assert_eq!(model.chat_request_count(), 2);
}

/// A permission (an agent's `requires_permission`) pauses the task as `input-required`
/// naming the permission; the client that sent the message has gone away by then, and
/// the permission still waits (it is not declined with the connection), until
/// `POST /v1/permissions/{id}` allows the call and the task completes.
#[tokio::test(flavor = "multi_thread")]
async fn a_permission_pauses_a_task_until_answered() {
    let sb = sandbox("[a2a]\nagents = [\"careful\"]\nworkspace = \"../ws\"\n");
    let erin = key(&sb, "erin");
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::tool_call("list_files", json!({"path": "."})),
        Step::text("Listed."),
    ]))
    .await
    .expect("scripted model");
    let served = start(&sb, &model.base_url(), &[]).await;
    let url = format!("{}/a2a/careful", served.base);
    let sent = peer(
        peers::python(),
        peers::a2a_client_script(),
        json!({"op": "send", "url": url, "key": erin, "text": "List"}),
    )
    .await;
    let task = task_of(&sent);
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{sent}"
    );
    let text = task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .expect("what is awaited");
    assert!(text.contains("POST /v1/permissions/"), "{text}");
    let permission = text
        .split_whitespace()
        .find(|w| w.starts_with("perm_"))
        .unwrap_or_else(|| panic!("a permission id in {text}"))
        .to_owned();
    // The client is gone; a moment later the permission is still pending.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let answered = reqwest::Client::new()
        .post(format!("{}/v1/permissions/{permission}", served.base))
        .bearer_auth(&erin)
        .json(&json!({"decision": "approved"}))
        .send()
        .await
        .expect("answer");
    assert_eq!(
        answered.status(),
        200,
        "{}",
        answered.text().await.unwrap_or_default()
    );
    let id = task["id"].as_str().expect("id");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = peer(
            peers::python(),
            peers::a2a_client_script(),
            json!({"op": "get", "url": url, "key": erin, "task": id}),
        )
        .await;
        if got["task"]["status"]["state"] == "TASK_STATE_COMPLETED" {
            assert_eq!(
                got["task"]["artifacts"][0]["parts"][0]["text"], "Listed.",
                "{got}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "never completed: {got}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
