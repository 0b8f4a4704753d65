//! Threads: creation rules, tenancy (another client's thread is 404 everywhere),
//! deletion, history and compaction.

use agentplane_testkit::Step;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::harness::{Setup, assert_error_envelope};

#[tokio::test]
async fn threads_are_created_read_listed_and_deleted() {
    let api = Setup::new(vec![]).start().await;
    let cwd = api.workspace.display().to_string();
    let created = api
        .post(
            "/v1/threads",
            "alice",
            json!({"agent": "chat", "cwd": cwd, "title": "First"}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    let id = created.body["id"].as_str().expect("id").to_owned();
    assert!(id.starts_with("thr_"));
    assert_eq!(created.body["agent"], "chat");
    assert_eq!(created.body["title"], "First");
    assert_eq!(created.body["summary"], Value::Null);
    let canonical = api.workspace.canonicalize().expect("canonical");
    assert_eq!(created.body["cwd"], canonical.display().to_string());

    let read = api.get(&format!("/v1/threads/{id}"), "alice").await;
    assert_eq!(read.status, StatusCode::OK);
    assert_eq!(read.body, created.body);

    let second = api.create_thread("alice", "chat").await;
    let listed = api.get("/v1/threads", "alice").await;
    let ids: Vec<&str> = listed.body["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert_eq!(ids, [second.as_str(), id.as_str()], "newest first");
    assert_eq!(
        api.get("/v1/threads", "bob").await.body,
        json!({"threads": []})
    );

    let deleted = api.delete(&format!("/v1/threads/{id}"), "alice").await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    assert_eq!(deleted.body, Value::Null);
    api.get(&format!("/v1/threads/{id}"), "alice")
        .await
        .assert_error(404, "NOT_FOUND");
    api.delete(&format!("/v1/threads/{id}"), "alice")
        .await
        .assert_error(404, "NOT_FOUND");
    let listed = api.get("/v1/threads", "alice").await;
    assert_eq!(listed.body["threads"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn bad_thread_requests_are_400() {
    let api = Setup::new(vec![]).start().await;
    let cwd = api.workspace.display().to_string();
    let missing = api.workspace.join("nope").display().to_string();
    let file = api.workspace.join("file.txt");
    std::fs::write(&file, "x").expect("file");
    let cases = [
        json!({"agent": "chat", "cwd": "ws"}),
        json!({"agent": "chat", "cwd": "./ws"}),
        json!({"agent": "chat", "cwd": ""}),
        json!({"agent": "chat", "cwd": missing}),
        json!({"agent": "chat", "cwd": file.display().to_string()}),
        json!({"agent": "nobody", "cwd": cwd}),
        json!({"agent": "chat", "cwd": cwd, "title": "t".repeat(201)}),
    ];
    for body in cases {
        let answer = api.post("/v1/threads", "alice", body.clone()).await;
        answer.assert_error(400, "INVALID_ARGUMENT");
        println!("{body} -> {}", answer.body["error"]["message"]);
    }
    let unknown = api
        .post(
            "/v1/threads",
            "alice",
            json!({"agent": "nobody", "cwd": cwd}),
        )
        .await;
    let message = unknown.body["error"]["message"].as_str().expect("message");
    assert!(
        message.contains("chat") && message.contains("writer"),
        "{message}"
    );
    assert_eq!(
        api.get("/v1/threads", "alice").await.body,
        json!({"threads": []})
    );
}

#[tokio::test]
async fn another_clients_thread_turn_and_events_are_404_everywhere() {
    let api = Setup::new(vec![Step::text("Paris."), Step::text("summary")])
        .start()
        .await;
    let thread = api.create_thread("alice", "chat").await;
    let frames = api
        .start_turn("alice", &thread, "capital of France?")
        .await
        .until_completed()
        .await;
    let turn = frames[0].json()["turn_id"]
        .as_str()
        .expect("turn id")
        .to_owned();

    let t = format!("/v1/threads/{thread}");
    let attempts: Vec<(Method, String, Option<Value>)> = vec![
        (Method::GET, t.clone(), None),
        (Method::DELETE, t.clone(), None),
        (Method::GET, format!("{t}/history"), None),
        (
            Method::GET,
            format!("{t}/history?includeEvents=1&includeInternal=1"),
            None,
        ),
        (Method::GET, format!("{t}/events"), None),
        (
            Method::POST,
            format!("{t}/turns"),
            Some(json!({"input": "mine now"})),
        ),
        (Method::POST, format!("{t}/compact"), None),
        (Method::POST, format!("/v1/turns/{turn}/cancel"), None),
    ];
    for (method, path, body) in attempts {
        let mut request = api.request(method.clone(), &path, Some("mallory"));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer = api.send(request).await;
        answer.assert_error(404, "NOT_FOUND");
        assert!(
            !answer.body.to_string().contains("alice"),
            "{method} {path}: {:?}",
            answer.body
        );
    }
    // Nothing happened to alice's thread.
    let history = api.get(&format!("{t}/history"), "alice").await;
    assert_eq!(history.status, StatusCode::OK);
    assert_eq!(history.body["turns"].as_array().map(Vec::len), Some(1));
    assert_eq!(api.scripted.requests().len(), 1, "mallory's turn never ran");
    // A finished turn is a conflict for its owner, still 404 for anyone else.
    api.post(&format!("/v1/turns/{turn}/cancel"), "alice", Value::Null)
        .await
        .assert_error(409, "CONFLICT");
}

#[tokio::test]
async fn history_hides_events_and_internal_turns_unless_asked_and_compaction_stores_a_summary() {
    let api = Setup::new(vec![
        Step::text("Paris."),
        Step::text("The user asked for the capital of France: Paris."),
    ])
    .start()
    .await;
    let thread = api.create_thread("alice", "chat").await;
    let t = format!("/v1/threads/{thread}");
    api.start_turn("alice", &thread, "capital of France?")
        .await
        .until_completed()
        .await;

    let plain = api.get(&format!("{t}/history"), "alice").await;
    assert_eq!(plain.status, StatusCode::OK, "{:?}", plain.body);
    assert_eq!(plain.body["thread"]["id"], thread.as_str());
    let turns = plain.body["turns"].as_array().expect("turns");
    assert_eq!(turns.len(), 1);
    let turn = &turns[0];
    assert_eq!(turn["input"], "capital of France?");
    assert_eq!(turn["status"], "ended");
    assert_eq!(turn["stop_reason"], "text_answer");
    assert_eq!(turn["internal"], false);
    assert_eq!(turn["result"], json!({"text": "Paris."}));
    assert!(turn["ended_at"].is_string() && turn["created_at"].is_string());
    assert!(turn.get("events").is_none(), "{turn}");

    let compacted = api
        .post(&format!("{t}/compact"), "alice", Value::Null)
        .await;
    assert_eq!(compacted.status, StatusCode::OK, "{:?}", compacted.body);
    let summary = "The user asked for the capital of France: Paris.";
    assert_eq!(compacted.body["summary"], summary);
    let compact_turn = compacted.body["turn_id"]
        .as_str()
        .expect("turn id")
        .to_owned();
    assert_eq!(api.get(&t, "alice").await.body["summary"], summary);
    let asked = api.scripted.requests()[1].to_string();
    assert!(
        asked.contains("capital of France"),
        "the transcript went to the model"
    );

    // The internal turn stays hidden by default.
    let plain = api.get(&format!("{t}/history"), "alice").await;
    assert_eq!(plain.body["turns"].as_array().map(Vec::len), Some(1));

    for query in ["?includeInternal=1", "?includeInternal=true"] {
        let full = api.get(&format!("{t}/history{query}"), "alice").await;
        let turns = full.body["turns"].as_array().expect("turns");
        assert_eq!(turns.len(), 2, "{query}");
        assert_eq!(turns[1]["id"], compact_turn.as_str());
        assert_eq!(turns[1]["internal"], true);
        assert!(turns[1].get("events").is_none());
    }

    let with_events = api
        .get(
            &format!("{t}/history?includeEvents=1&includeInternal=1"),
            "alice",
        )
        .await;
    let turns = with_events.body["turns"].as_array().expect("turns");
    assert_eq!(turns.len(), 2);
    for turn in turns {
        let id = turn["id"].as_str().expect("id");
        let stored = api.stored_events(id).await;
        let stored = serde_json::to_value(&stored).expect("json");
        assert_eq!(
            turn["events"], stored,
            "history events are the stored events"
        );
    }
    let off = api
        .get(
            &format!("{t}/history?includeEvents=0&includeInternal=false"),
            "alice",
        )
        .await;
    assert_eq!(off.body["turns"].as_array().map(Vec::len), Some(1));
    assert!(off.body["turns"][0].get("events").is_none());
}

#[tokio::test]
async fn a_failed_compaction_is_an_error_and_changes_nothing() {
    let api = Setup::new(vec![
        Step::text("Paris."),
        Step::error(500, "{\"error\":\"boom\"}"),
    ])
    .start()
    .await;
    let thread = api.create_thread("alice", "chat").await;
    api.start_turn("alice", &thread, "capital?")
        .await
        .until_completed()
        .await;
    let answer = api
        .post(
            &format!("/v1/threads/{thread}/compact"),
            "alice",
            Value::Null,
        )
        .await;
    assert!(answer.status.is_client_error() || answer.status.is_server_error());
    assert_ne!(
        answer.status,
        StatusCode::INTERNAL_SERVER_ERROR,
        "{:?}",
        answer.body
    );
    assert_error_envelope(&answer.body);
    let thread = api.get(&format!("/v1/threads/{thread}"), "alice").await;
    assert_eq!(thread.body["summary"], Value::Null);
}
