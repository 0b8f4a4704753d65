//! Approvals over real HTTP: a policy holds `write_file`, the turn suspends, and a
//! person approves, edits or rejects through `/v1/approvals`; the turn resumes and
//! completes. Also expiry (a rejection), tenancy, the approvers rule, the listing
//! filter, and hostile bodies that must decide nothing.
//!
//! The server is the harness's (runtime on a temp SQLite file, scripted model over
//! HTTP) with a policies directory holding an `approval_required` policy.

use std::time::Instant;

use agentplane_testkit::Step;
use serde_json::{Value, json};

use crate::harness::{Answer, Api, PATIENCE, Setup, SseFrame};

const OWNER: &str = "owner";

/// An agent with the file tools and no permission prompts: only the policy holds calls.
const REVIEWED_AGENT: &str = "
[agents.reviewed]
system_prompt = \"Write the file you are asked to.\"
ensembles = [\"fs\"]
max_steps = 4
max_nudges = 0
";

const REVIEW: &str = "name: review\ntype: approval_required\nrules: {tools: [write_file]}\n";

fn planned() -> Value {
    json!({"path": "out.txt", "content": "planned"})
}

/// The model plans one `write_file`, then answers in text.
fn steps() -> Vec<Step> {
    vec![Step::tool_call("write_file", planned()), Step::text("done")]
}

async fn server(steps: Vec<Step>, policy: &str) -> Api {
    Setup::new(steps)
        .policy("review.yaml", policy)
        .extra_config(REVIEWED_AGENT)
        .start()
        .await
}

/// A turn suspended on its approval.
struct Held {
    thread: String,
    turn: String,
    approval: String,
    stream: crate::harness::SseReader,
    /// The events up to `approval_requested`.
    before: Vec<SseFrame>,
}

async fn hold(api: &Api, client: &str) -> Held {
    let thread = api.create_thread(client, "reviewed").await;
    let mut stream = api.start_turn(client, &thread, "write out.txt").await;
    let before = stream.until("approval_requested").await;
    let turn = before[0].json()["turn_id"]
        .as_str()
        .expect("turn id")
        .to_owned();
    let requested = before.last().expect("approval_requested").json();
    assert_eq!(requested["tool"], "write_file");
    assert_eq!(requested["arguments"], planned());
    assert_eq!(requested["policy"], "review");
    let approval = requested["approval_id"]
        .as_str()
        .expect("approval id")
        .to_owned();
    Held {
        thread,
        turn,
        approval,
        stream,
        before,
    }
}

async fn decide(api: &Api, client: &str, approval: &str, body: Value) -> Answer {
    api.post(&format!("/v1/approvals/{approval}"), client, body)
        .await
}

async fn status_of(api: &Api, client: &str, approval: &str) -> String {
    let answer = api.get(&format!("/v1/approvals/{approval}"), client).await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    answer.body["status"].as_str().expect("a status").to_owned()
}

fn kinds(frames: &[SseFrame]) -> Vec<String> {
    frames
        .iter()
        .filter_map(|f| f.event.clone())
        .filter(|k| k != "message_delta")
        .collect()
}

/// The `tool_call_result` of `write_file` among the frames.
fn write_result(frames: &[SseFrame]) -> Value {
    frames
        .iter()
        .filter(|f| f.is("tool_call_result"))
        .map(SseFrame::json)
        .find(|e| e["tool"] == "write_file")
        .expect("a write_file result")
}

#[tokio::test]
async fn an_approved_call_runs_and_the_turn_completes() {
    let api = server(steps(), REVIEW).await;
    let mut held = hold(&api, OWNER).await;
    assert!(
        !held.before.iter().any(|f| f.is("tool_call_result")),
        "nothing ran before the decision: {:?}",
        kinds(&held.before)
    );
    assert!(!api.workspace.join("out.txt").exists());

    let listed = api.get("/v1/approvals", OWNER).await;
    assert_eq!(listed.status, 200, "{:?}", listed.body);
    let approvals = listed.body["approvals"].as_array().expect("a list");
    assert_eq!(approvals.len(), 1, "{approvals:?}");
    let view = &approvals[0];
    assert_eq!(view["id"], held.approval);
    assert_eq!(view["thread_id"], held.thread);
    assert_eq!(view["turn_id"], held.turn);
    assert_eq!(view["agent"], "reviewed");
    assert_eq!(view["tool"], "write_file");
    assert_eq!(view["arguments"], planned());
    assert_eq!(view["policy"], "review");
    assert_eq!(view["approvers"], json!([]));
    assert_eq!(view["status"], "pending");
    assert!(view["expires_at"].is_string() && view["decided_at"].is_null());
    assert!(
        view.get("snapshot").is_none(),
        "the turn state stays inside"
    );

    let decided = decide(&api, OWNER, &held.approval, json!({"decision": "approve"})).await;
    assert_eq!(decided.status, 200, "{:?}", decided.body);
    assert_eq!(decided.body["status"], "approved");
    assert_eq!(decided.body["decided_by"], OWNER);
    assert!(decided.body["decided_at"].is_string());

    let after = held.stream.until_completed().await;
    let kinds = kinds(&after);
    assert_eq!(kinds.first().map(String::as_str), Some("approval_decided"));
    assert_eq!(kinds.last().map(String::as_str), Some("turn_completed"));
    assert_eq!(write_result(&after)["status"], "ok");
    let completed = after.last().expect("turn_completed").json();
    assert_eq!(completed["stop_reason"], "text_answer", "{completed}");
    assert_eq!(
        std::fs::read_to_string(api.workspace.join("out.txt")).expect("the file was written"),
        "planned"
    );
    // The store has the same story, in order.
    let stored: Vec<&str> = api
        .stored_events(&held.turn)
        .await
        .iter()
        .map(|e| e.payload.kind())
        .filter(|k| {
            matches!(
                *k,
                "approval_requested" | "approval_decided" | "tool_call_result" | "turn_completed"
            )
        })
        .collect();
    assert_eq!(
        stored,
        [
            "approval_requested",
            "approval_decided",
            "tool_call_result",
            "turn_completed"
        ]
    );

    // Decided once: a second decision is a conflict and changes nothing.
    let again = decide(&api, OWNER, &held.approval, json!({"decision": "reject"})).await;
    again.assert_error(409, "CONFLICT");
    assert_eq!(status_of(&api, OWNER, &held.approval).await, "approved");
}

#[tokio::test]
async fn an_edited_call_runs_with_the_edited_arguments() {
    let api = server(steps(), REVIEW).await;
    let mut held = hold(&api, OWNER).await;

    // Arguments the tool's schema refuses are a 400; the approval stays pending.
    for bad in [
        json!({"path": 5, "content": "x"}),
        json!({"path": "out.txt"}),
        json!({"path": "out.txt", "content": "x", "mode": "0777"}),
        json!("out.txt"),
        json!(null),
    ] {
        let answer = decide(
            &api,
            OWNER,
            &held.approval,
            json!({"decision": "edit", "arguments": bad}),
        )
        .await;
        answer.assert_error(400, "INVALID_ARGUMENT");
        assert_eq!(status_of(&api, OWNER, &held.approval).await, "pending");
    }

    let edited = json!({"path": "edited.txt", "content": "edited by a person"});
    let decided = decide(
        &api,
        OWNER,
        &held.approval,
        json!({"decision": "edit", "arguments": edited}),
    )
    .await;
    assert_eq!(decided.status, 200, "{:?}", decided.body);
    assert_eq!(decided.body["status"], "edited");
    assert_eq!(decided.body["edited_arguments"], edited);
    assert_eq!(decided.body["arguments"], planned(), "the plan is kept");

    let after = held.stream.until_completed().await;
    assert_eq!(after[0].json()["outcome"], "edited");
    assert_eq!(after[0].json()["arguments"], edited);
    assert_eq!(write_result(&after)["status"], "ok");
    assert_eq!(
        std::fs::read_to_string(api.workspace.join("edited.txt")).expect("edited file"),
        "edited by a person"
    );
    assert!(
        !api.workspace.join("out.txt").exists(),
        "the plan did not run"
    );
}

#[tokio::test]
async fn a_rejection_does_not_run_the_call_and_its_feedback_reaches_the_model() {
    let api = server(steps(), REVIEW).await;
    let mut held = hold(&api, OWNER).await;
    let feedback = "write notes.md instead, and never touch out.txt";
    let decided = decide(
        &api,
        OWNER,
        &held.approval,
        json!({"decision": "reject", "feedback": feedback}),
    )
    .await;
    assert_eq!(decided.status, 200, "{:?}", decided.body);
    assert_eq!(decided.body["status"], "rejected");
    assert_eq!(decided.body["feedback"], feedback);

    let after = held.stream.until_completed().await;
    let result = write_result(&after);
    assert_eq!(result["status"], "error", "{result}");
    assert!(
        result["output"]
            .as_str()
            .is_some_and(|o| o.contains(feedback)),
        "{result}"
    );
    assert!(
        !api.workspace.join("out.txt").exists(),
        "the call did not run"
    );
    // The model's next request carries the rejection and its feedback.
    let requests = api.scripted.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let told = requests[1]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .any(|m| {
            m["role"] == "tool" && m["content"].as_str().is_some_and(|c| c.contains(feedback))
        });
    assert!(told, "{}", requests[1]);
}

#[tokio::test]
async fn an_expired_approval_is_a_rejection_and_the_turn_resumes() {
    let api = Setup::new(steps())
        .policy("review.yaml", REVIEW)
        .extra_config(REVIEWED_AGENT)
        .extra_config("[approvals]\nexpire_after_secs = 1\n")
        .start()
        .await;
    api.runtime.hub().start_governance();
    let mut held = hold(&api, OWNER).await;
    let started = Instant::now();
    let after = held.stream.until_completed().await;
    assert!(started.elapsed() < PATIENCE);
    let decided = after[0].json();
    assert_eq!(decided["outcome"], "expired", "{decided}");
    assert_eq!(decided["by"], "expiry");
    let result = write_result(&after);
    assert_eq!(result["status"], "error", "{result}");
    assert!(
        result["output"]
            .as_str()
            .is_some_and(|o| o.contains("expired")),
        "{result}"
    );
    assert!(!api.workspace.join("out.txt").exists());
    assert_eq!(status_of(&api, OWNER, &held.approval).await, "expired");
    // Too late for a person.
    decide(&api, OWNER, &held.approval, json!({"decision": "approve"}))
        .await
        .assert_error(409, "CONFLICT");
}

#[tokio::test]
async fn another_client_sees_nothing_and_decides_nothing() {
    let api = server(steps(), REVIEW).await;
    let held = hold(&api, OWNER).await;
    let path = format!("/v1/approvals/{}", held.approval);
    api.get(&path, "intruder")
        .await
        .assert_error(404, "NOT_FOUND");
    decide(
        &api,
        "intruder",
        &held.approval,
        json!({"decision": "approve"}),
    )
    .await
    .assert_error(404, "NOT_FOUND");
    let listed = api.get("/v1/approvals?status=all", "intruder").await;
    assert_eq!(listed.body, json!({"approvals": []}));
    assert_eq!(status_of(&api, OWNER, &held.approval).await, "pending");
}

#[tokio::test]
async fn named_approvers_decide_and_the_owner_may_not() {
    let policy = "name: review\ntype: approval_required\n\
                  rules: {tools: [write_file], approvers: [lead]}\n";
    let api = server(steps(), policy).await;
    let mut held = hold(&api, OWNER).await;
    decide(&api, OWNER, &held.approval, json!({"decision": "approve"}))
        .await
        .assert_error(403, "FORBIDDEN");
    assert_eq!(status_of(&api, OWNER, &held.approval).await, "pending");
    // The approver sees it without owning the thread, and decides.
    let listed = api.get("/v1/approvals", "lead").await;
    assert_eq!(listed.body["approvals"][0]["id"], held.approval);
    assert_eq!(listed.body["approvals"][0]["approvers"], json!(["lead"]));
    let decided = decide(&api, "lead", &held.approval, json!({"decision": "approve"})).await;
    assert_eq!(decided.status, 200, "{:?}", decided.body);
    assert_eq!(decided.body["decided_by"], "lead");
    let after = held.stream.until_completed().await;
    assert_eq!(write_result(&after)["status"], "ok");
}

#[tokio::test]
async fn hostile_bodies_and_ids_decide_nothing() {
    let api = server(steps(), REVIEW).await;
    let held = hold(&api, OWNER).await;
    let path = format!("/v1/approvals/{}", held.approval);
    let long = "x".repeat(4_001);
    let bodies: Vec<(&str, String)> = vec![
        ("bad JSON", "{\"decision\": \"approve\"".to_owned()),
        ("empty", String::new()),
        ("not an object", "[\"approve\"]".to_owned()),
        ("a string", "\"approve\"".to_owned()),
        ("no decision", "{}".to_owned()),
        ("unknown decision", "{\"decision\":\"approved\"}".to_owned()),
        ("wrong case", "{\"decision\":\"APPROVE\"}".to_owned()),
        ("decision null", "{\"decision\":null}".to_owned()),
        (
            "extra field",
            "{\"decision\":\"approve\",\"feedback\":\"x\"}".to_owned(),
        ),
        (
            "unknown field",
            "{\"decision\":\"approve\",\"force\":true}".to_owned(),
        ),
        (
            "edit without arguments",
            "{\"decision\":\"edit\"}".to_owned(),
        ),
        (
            "feedback of the wrong type",
            "{\"decision\":\"reject\",\"feedback\":7}".to_owned(),
        ),
        (
            "feedback too long",
            json!({"decision": "reject", "feedback": long}).to_string(),
        ),
        ("nul bytes", "{\"decision\":\"approve\u{0}\"}".to_owned()),
    ];
    for (what, body) in bodies {
        let answer = api
            .send(
                api.request(reqwest::Method::POST, &path, Some(OWNER))
                    .header("content-type", "application/json")
                    .body(body),
            )
            .await;
        assert_eq!(answer.status, 400, "{what}: {:?}", answer.body);
        crate::harness::assert_error_envelope(&answer.body);
        assert_eq!(answer.body["error"]["code"], "INVALID_ARGUMENT", "{what}");
        assert_eq!(
            status_of(&api, OWNER, &held.approval).await,
            "pending",
            "{what}"
        );
    }
    // Not JSON at all: what a web page can send without a preflight never reaches the
    // route (the ingress guard, 403); the approval stays pending.
    let answer = api
        .send(
            api.request(reqwest::Method::POST, &path, Some(OWNER))
                .header("content-type", "text/plain")
                .body("{\"decision\":\"approve\"}"),
        )
        .await;
    answer.assert_error(403, "FORBIDDEN");
    assert_eq!(status_of(&api, OWNER, &held.approval).await, "pending");
    // Malformed ids are 404 like every id in a path: a thread id, no prefix, a
    // traversal, an approval that does not exist.
    for id in [
        held.thread.as_str(),
        "0196f3c2a1b27c3d8e9f0a1b2c3d4e5f",
        "apr_..%2F..%2Fetc",
        "apr_0196f3c2a1b27c3d8e9f0a1b2c3d4e5f",
    ] {
        decide(&api, OWNER, id, json!({"decision": "approve"}))
            .await
            .assert_error(404, "NOT_FOUND");
        api.get(&format!("/v1/approvals/{id}"), OWNER)
            .await
            .assert_error(404, "NOT_FOUND");
    }
    // Bad listing parameters.
    for query in [
        "?status=done",
        "?status=",
        "?pending=1",
        "?status=all&status=pending",
    ] {
        api.get(&format!("/v1/approvals{query}"), OWNER)
            .await
            .assert_error(400, "INVALID_ARGUMENT");
    }
    // Still exactly one pending approval, and no decision was recorded.
    assert_eq!(status_of(&api, OWNER, &held.approval).await, "pending");
    let events = api.stored_events(&held.turn).await;
    assert!(
        !events
            .iter()
            .any(|e| e.payload.kind() == "approval_decided"),
        "{events:?}"
    );
}

#[tokio::test]
async fn the_listing_filters_by_status() {
    let steps = vec![
        Step::tool_call("write_file", planned()),
        Step::text("done"),
        Step::tool_call("write_file", planned()),
    ];
    let api = server(steps, REVIEW).await;
    let mut first = hold(&api, OWNER).await;
    decide(&api, OWNER, &first.approval, json!({"decision": "approve"})).await;
    first.stream.until_completed().await;
    let second = hold(&api, OWNER).await;

    let ids = |answer: &Answer| -> Vec<String> {
        answer.body["approvals"]
            .as_array()
            .expect("a list")
            .iter()
            .map(|a| a["id"].as_str().expect("id").to_owned())
            .collect()
    };
    let pending = api.get("/v1/approvals", OWNER).await;
    assert_eq!(ids(&pending), [second.approval.as_str()]);
    let explicit = api.get("/v1/approvals?status=pending", OWNER).await;
    assert_eq!(ids(&explicit), [second.approval.as_str()]);
    let all = api.get("/v1/approvals?status=all", OWNER).await;
    assert_eq!(
        ids(&all),
        [first.approval.as_str(), second.approval.as_str()]
    );
    assert_eq!(all.body["approvals"][0]["status"], "approved");
    assert_eq!(all.body["approvals"][1]["status"], "pending");
}
