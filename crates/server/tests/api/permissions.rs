//! Permissions over HTTP: approved, declined, malformed, timed out, client gone; and
//! another client's permission is 404 and left alone.

use std::time::Duration;

use agentplane_core::PermissionId;
use agentplane_engine::ports::{PermissionRecord, PermissionStatus};
use agentplane_testkit::Step;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::harness::{Api, PATIENCE, Setup, SseFrame, SseReader, assert_frames_are};

fn write_then_finish() -> Vec<Step> {
    vec![
        Step::tool_call("write_file", json!({"path": "a.txt", "content": "hello"})),
        Step::tool_call("finish_task", json!({"summary": "done"})),
    ]
}

/// A writer turn waiting on its permission: the stream and the `permission_required`.
async fn waiting(api: &Api) -> (SseReader, Vec<SseFrame>, String) {
    let thread = api.create_thread("alice", "writer").await;
    let mut stream = api.start_turn("alice", &thread, "write a.txt").await;
    let frames = stream.until("permission_required").await;
    let required = frames.last().expect("frame").json();
    assert_eq!(required["tool"], "write_file");
    assert_eq!(
        required["arguments"],
        json!({"path": "a.txt", "content": "hello"})
    );
    assert_eq!(required["options"], json!(["approved", "declined"]));
    let id = required["permission_id"].as_str().expect("id").to_owned();
    (stream, frames, id)
}

async fn stored(api: &Api, id: &str) -> PermissionRecord {
    api.runtime
        .store()
        .permission(&PermissionId::parse(id).expect("id"))
        .await
        .expect("store")
        .expect("permission stored")
}

fn path(id: &str) -> String {
    format!("/v1/permissions/{id}")
}

#[tokio::test]
async fn an_approved_permission_runs_the_tool() {
    let api = Setup::new(write_then_finish()).start().await;
    let (mut stream, mut frames, id) = waiting(&api).await;
    let answer = api
        .post(&path(&id), "alice", json!({"decision": "approved"}))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    assert_eq!(answer.body["id"], id.as_str());
    assert_eq!(answer.body["status"], "approved");
    assert_eq!(answer.body["tool"], "write_file");
    assert!(
        answer.body["reason"]
            .as_str()
            .is_some_and(|r| r.contains("alice"))
    );

    frames.extend(stream.until_completed().await);
    let resolved = frames
        .iter()
        .find(|f| f.is("permission_resolved"))
        .expect("resolved");
    assert_eq!(resolved.json()["decision"], "approved");
    let result = frames
        .iter()
        .find(|f| f.is("tool_call_result"))
        .expect("result");
    assert_eq!(result.json()["status"], "ok");
    assert_eq!(
        frames.last().expect("last").json()["stop_reason"],
        "finished"
    );
    assert_eq!(
        std::fs::read_to_string(api.workspace.join("a.txt")).expect("written"),
        "hello"
    );
    let turn = frames[0].json()["turn_id"]
        .as_str()
        .expect("turn")
        .to_owned();
    assert_frames_are(&frames, &api.stored_events(&turn).await);

    // Decided once: a second decision is a conflict and changes nothing.
    api.post(&path(&id), "alice", json!({"decision": "declined"}))
        .await
        .assert_error(409, "CONFLICT");
    assert_eq!(
        stored(&api, &id).await.status,
        PermissionStatus::Resolved(agentplane_core::PermissionDecision::Approved)
    );
}

#[tokio::test]
async fn a_declined_permission_does_not_run_the_tool() {
    let api = Setup::new(write_then_finish()).start().await;
    let (mut stream, _, id) = waiting(&api).await;
    let answer = api
        .post(&path(&id), "alice", json!({"decision": "declined"}))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    assert_eq!(answer.body["status"], "declined");
    let frames = stream.until_completed().await;
    let result = frames
        .iter()
        .find(|f| f.is("tool_call_result"))
        .expect("result");
    assert_eq!(result.json()["status"], "error");
    assert_eq!(result.json()["error_type"], "permission_denied");
    assert!(!api.workspace.join("a.txt").exists());
}

#[tokio::test]
async fn a_malformed_decision_is_400_and_declines() {
    let bodies: Vec<(Option<&str>, &str, u16)> = vec![
        (Some(r#"{"decision":"yes"}"#), "application/json", 400),
        (Some(r#"{"decision":"APPROVED"}"#), "application/json", 400),
        (Some(r#"{"decision":true}"#), "application/json", 400),
        (
            Some(r#"{"decision":"approved","also":1}"#),
            "application/json",
            400,
        ),
        (Some(r#"{"decision":"#), "application/json", 400),
        (Some(r#"{}"#), "application/json", 400),
        // Not JSON. (A form type never reaches the route: the ingress guard refuses
        // what a web page can send without a preflight, and nothing is decided.)
        (
            Some(r#"<decision>approved</decision>"#),
            "application/xml",
            415,
        ),
        (None, "application/json", 400),
    ];
    for (body, content_type, status) in bodies {
        let api = Setup::new(write_then_finish()).start().await;
        let (mut stream, _, id) = waiting(&api).await;
        let mut request = api
            .request(Method::POST, &path(&id), Some("alice"))
            .header("content-type", content_type);
        if let Some(body) = body {
            request = request.body(body.to_owned());
        }
        let answer = api.send(request).await;
        answer.assert_error(status, "INVALID_ARGUMENT");
        let message = answer.body["error"]["message"].as_str().expect("message");
        assert!(message.contains("declined"), "{body:?}: {message}");
        let record = stored(&api, &id).await;
        assert_eq!(
            record.status,
            PermissionStatus::Resolved(agentplane_core::PermissionDecision::Declined),
            "{body:?}"
        );
        assert!(
            record
                .reason
                .as_deref()
                .is_some_and(|r| r.contains("malformed")),
            "{record:?}"
        );
        let frames = stream.until_completed().await;
        assert!(frames.iter().any(|f| f.is("permission_resolved")));
        assert!(!api.workspace.join("a.txt").exists());
    }
}

#[tokio::test]
async fn an_unanswered_permission_times_out_declined() {
    let api = Setup::new(write_then_finish())
        .permission_timeout_secs(1)
        .start()
        .await;
    let (mut stream, _, id) = waiting(&api).await;
    let frames = stream.until_completed().await;
    let resolved = frames
        .iter()
        .find(|f| f.is("permission_resolved"))
        .expect("resolved")
        .json();
    assert_eq!(resolved["decision"], "declined");
    assert!(
        resolved["reason"]
            .as_str()
            .is_some_and(|r| r.contains("no decision within 1 s")),
        "{resolved}"
    );
    assert!(!api.workspace.join("a.txt").exists());
    api.post(&path(&id), "alice", json!({"decision": "approved"}))
        .await
        .assert_error(409, "CONFLICT");
}

#[tokio::test]
async fn a_client_that_disconnects_declines_its_pending_permission() {
    let api = Setup::new(write_then_finish()).start().await;
    let (stream, _, id) = waiting(&api).await;
    drop(stream);
    let record = tokio::time::timeout(PATIENCE, async {
        loop {
            let record = stored(&api, &id).await;
            if record.status != PermissionStatus::Pending {
                return record;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the permission is resolved after the disconnect");
    assert_eq!(
        record.status,
        PermissionStatus::Resolved(agentplane_core::PermissionDecision::Declined)
    );
    assert_eq!(
        record.reason.as_deref(),
        Some("declined: the client disconnected")
    );
    assert!(!api.workspace.join("a.txt").exists());
    api.post(&path(&id), "alice", json!({"decision": "approved"}))
        .await
        .assert_error(409, "CONFLICT");
}

#[tokio::test]
async fn another_clients_permission_is_404_and_stays_pending() {
    let api = Setup::new(write_then_finish()).start().await;
    let (mut stream, _, id) = waiting(&api).await;
    for body in [
        json!({"decision": "approved"}),
        json!({"decision": "nonsense"}),
        Value::Null,
    ] {
        api.post(&path(&id), "mallory", body)
            .await
            .assert_error(404, "NOT_FOUND");
    }
    assert_eq!(stored(&api, &id).await.status, PermissionStatus::Pending);
    for unknown in [
        "perm_0196f3c2a1b27c3d8e9f0a1b2c3d4e5f",
        "perm_../../etc",
        "thr_abc",
        "x",
    ] {
        api.post(&path(unknown), "alice", json!({"decision": "approved"}))
            .await
            .assert_error(404, "NOT_FOUND");
    }
    api.post(&path(&id), "alice", json!({"decision": "approved"}))
        .await;
    stream.until_completed().await;
}
