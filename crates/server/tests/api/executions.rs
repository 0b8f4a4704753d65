//! `/v1/executions` over real HTTP: the queue, the workers, retries against the scripted
//! model, cancel, idempotency, tenancy, hostile bodies, and webhooks to a real receiver
//! on 127.0.0.1 (signature checked with the secret, a 500 retried, POSTs counted).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentplane_core::ExecutionId;
use agentplane_engine::ports::{DeliveryRecord, DeliveryStatus};
use agentplane_testkit::Step;
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use hmac::{KeyInit, Mac};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::harness::{Api, PATIENCE, Setup};

/// Fast retries and polling, so the tests take milliseconds, not minutes.
const FAST: &str = "\n[executions]\nworkers = 2\nbackoff_base_ms = 20\nbackoff_max_ms = 40\n\
    poll_interval_ms = 20\nwebhook_backoff_base_ms = 20\nwebhook_backoff_max_ms = 40\n";

const SECRET: &str = "whsec-test-0123456789abcdef";

fn setup(steps: Vec<Step>) -> Setup {
    Setup::new(steps).extra_config(FAST)
}

/// Config that signs webhooks with [`SECRET`], read from a file in `dir`.
fn webhook_config(dir: &std::path::Path, allow_private: bool) -> String {
    let file = dir.join("hook.secret");
    std::fs::write(&file, SECRET).expect("secret file");
    format!(
        "webhook_secret = \"HOOK\"\nallow_private_webhooks = {allow_private}\n\
         webhook_max_attempts = 5\n\n[secrets.HOOK]\nfile = \"{}\"\n",
        file.display()
    )
}

async fn submit(api: &Api, client: &str, body: Value) -> crate::harness::Answer {
    api.post("/v1/executions", client, body).await
}

/// Submits and returns the new execution's id.
async fn queue(api: &Api, client: &str, body: Value) -> String {
    let answer = submit(api, client, body).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{:?}", answer.body);
    answer.body["id"].as_str().expect("id").to_owned()
}

/// Polls until the execution's status satisfies `done`.
async fn wait_for(api: &Api, client: &str, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let answer = api.get(&format!("/v1/executions/{id}"), client).await;
        assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
        if done(&answer.body) {
            return answer.body;
        }
        assert!(
            Instant::now() < deadline,
            "gave up waiting: {}",
            answer.body
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn wait_status(api: &Api, client: &str, id: &str, status: &str) -> Value {
    wait_for(api, client, id, |e| e["status"] == status).await
}

fn is_terminal(e: &Value) -> bool {
    !matches!(e["status"].as_str(), Some("queued" | "running"))
}

#[tokio::test]
async fn an_execution_is_queued_run_and_polled_with_the_turns_result() {
    let api = setup(vec![Step::text("The answer is 42.")]).start().await;
    let answer = submit(
        &api,
        "alice",
        json!({"agent": "chat", "input": "What is it?"}),
    )
    .await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{:?}", answer.body);
    let id = answer.body["id"].as_str().expect("id").to_owned();
    assert!(id.starts_with("exec_"), "{id}");
    assert!(matches!(
        answer.body["status"].as_str(),
        Some("queued" | "running")
    ));
    assert_eq!(
        answer.headers.get("location").and_then(|v| v.to_str().ok()),
        Some(format!("/v1/executions/{id}").as_str())
    );
    assert!(answer.headers.get("idempotent-replayed").is_none());
    let done = wait_for(&api, "alice", &id, is_terminal).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["output"], json!({"text": "The answer is 42."}));
    assert_eq!(done["attempts"], 1);
    assert_eq!(done["error"], Value::Null);
    assert!(done["finished_at"].is_string() && done["started_at"].is_string());
    // The attempt is an ordinary turn of the execution's thread, with its events.
    let turn = done["turn_id"].as_str().expect("turn id");
    let events = api.stored_events(turn).await;
    assert_eq!(
        events.first().map(|e| e.payload.kind()),
        Some("turn_started")
    );
    assert_eq!(
        events.last().map(|e| e.payload.kind()),
        Some("turn_completed")
    );
    let thread = done["thread_id"].as_str().expect("thread");
    let history = api
        .get(&format!("/v1/threads/{thread}/history"), "alice")
        .await;
    assert_eq!(history.body["turns"][0]["id"], turn);
    // The thread's workspace is a fresh directory of its own.
    let cwd = api
        .get(&format!("/v1/threads/{thread}"), "alice")
        .await
        .body["cwd"]
        .as_str()
        .expect("cwd")
        .to_owned();
    assert!(cwd.contains(&id), "{cwd}");
    assert!(std::path::Path::new(&cwd).is_dir());
}

#[tokio::test]
async fn an_execution_runs_on_a_given_thread_or_directory() {
    let api = setup(vec![Step::text("one"), Step::text("two")])
        .start()
        .await;
    let thread = api.create_thread("alice", "chat").await;
    let id = queue(
        &api,
        "alice",
        json!({"agent": "chat", "input": "hi", "thread_id": thread}),
    )
    .await;
    let done = wait_for(&api, "alice", &id, is_terminal).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["thread_id"], thread.as_str());
    let cwd = api.workspace.display().to_string();
    let id = queue(
        &api,
        "alice",
        json!({"agent": "chat", "input": "hi", "cwd": cwd}),
    )
    .await;
    let done = wait_for(&api, "alice", &id, is_terminal).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let thread = done["thread_id"].as_str().expect("thread");
    let record = api.get(&format!("/v1/threads/{thread}"), "alice").await;
    assert_eq!(
        record.body["cwd"],
        api.workspace
            .canonicalize()
            .expect("canonical")
            .display()
            .to_string()
    );
}

#[tokio::test]
async fn an_upstream_500_is_retried_and_the_next_attempt_succeeds() {
    let api = setup(vec![
        Step::error(500, "{\"error\":\"overloaded\"}"),
        Step::text("second time lucky"),
    ])
    .start()
    .await;
    let id = queue(&api, "alice", json!({"agent": "chat", "input": "try"})).await;
    let done = wait_for(&api, "alice", &id, is_terminal).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["attempts"], 2);
    assert_eq!(done["output"], json!({"text": "second time lucky"}));
    assert_eq!(api.scripted.chat_request_count(), 2);
    // Each attempt was a turn of the same thread: the first ended in error.
    let thread = done["thread_id"].as_str().expect("thread");
    let history = api
        .get(&format!("/v1/threads/{thread}/history"), "alice")
        .await;
    let stops: Vec<_> = history.body["turns"]
        .as_array()
        .expect("turns")
        .iter()
        .map(|t| t["stop_reason"].clone())
        .collect();
    assert_eq!(stops, vec![json!("error"), json!("text_answer")]);
}

#[tokio::test]
async fn upstream_failures_stop_after_max_attempts() {
    let api = Setup::new(vec![Step::error(503, "{}")])
        .extra_config(&format!("{FAST}max_attempts = 3\n"))
        .start()
        .await;
    // The scripted model repeats nothing: after the first step it answers with errors
    // of its own, which are upstream failures too.
    let id = queue(&api, "alice", json!({"agent": "chat", "input": "try"})).await;
    let done = wait_for(&api, "alice", &id, is_terminal).await;
    assert_eq!(done["status"], "failed", "{done}");
    assert_eq!(done["attempts"], 3);
    assert_eq!(done["error"]["code"], "UPSTREAM_UNAVAILABLE");
    assert_eq!(api.scripted.chat_request_count(), 3);
}

#[tokio::test]
async fn a_400_from_the_model_is_not_retried() {
    let api = setup(vec![
        Step::error(400, "{\"error\":\"bad field\"}"),
        Step::text("never reached"),
    ])
    .start()
    .await;
    let id = queue(&api, "alice", json!({"agent": "chat", "input": "try"})).await;
    let done = wait_for(&api, "alice", &id, is_terminal).await;
    assert_eq!(done["status"], "failed", "{done}");
    assert_eq!(done["attempts"], 1);
    assert!(
        done["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("400")),
        "{done}"
    );
    assert_eq!(api.scripted.chat_request_count(), 1);
}

#[tokio::test]
async fn a_queued_execution_is_cancelled_at_once_and_a_running_one_via_its_turn() {
    let api = Setup::new(vec![Step::text("slow").with_delay_ms(30_000)])
        .extra_config(&FAST.replace("workers = 2", "workers = 1"))
        .start()
        .await;
    let first = queue(&api, "alice", json!({"agent": "chat", "input": "one"})).await;
    let running = wait_for(&api, "alice", &first, |e| {
        e["status"] == "running" && e["turn_id"].is_string()
    })
    .await;
    // The only worker is busy: the second waits in the queue.
    let second = queue(&api, "alice", json!({"agent": "chat", "input": "two"})).await;
    let answer = api
        .post(
            &format!("/v1/executions/{second}/cancel"),
            "alice",
            json!({}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{:?}", answer.body);
    assert_eq!(answer.body["status"], "cancelled");
    assert_eq!(answer.body["attempts"], 0);
    assert_eq!(answer.body["turn_id"], Value::Null);
    // Cancelling again is a conflict: it has finished.
    api.post(
        &format!("/v1/executions/{second}/cancel"),
        "alice",
        json!({}),
    )
    .await
    .assert_error(409, "CONFLICT");

    let answer = api
        .post(
            &format!("/v1/executions/{first}/cancel"),
            "alice",
            json!({}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{:?}", answer.body);
    assert_eq!(answer.body["cancel_requested"], true);
    let done = wait_status(&api, "alice", &first, "cancelled").await;
    assert_eq!(done["turn_id"], running["turn_id"]);
    let turn = done["turn_id"].as_str().expect("turn");
    let events = api.stored_events(turn).await;
    let last = serde_json::to_value(events.last().expect("events")).expect("json");
    assert_eq!(last["stop_reason"], "cancelled");
    // The cancelled one never ran a turn.
    assert_eq!(api.scripted.chat_request_count(), 1);
}

#[tokio::test]
async fn lists_filter_by_status_agent_and_thread() {
    let api = setup(vec![Step::text("a"), Step::text("b"), Step::text("c")])
        .extra_config("\n[agents.other]\nsystem_prompt = \"x\"\n")
        .start()
        .await;
    let thread = api.create_thread("alice", "chat").await;
    let a = queue(
        &api,
        "alice",
        json!({"agent": "chat", "input": "a", "thread_id": thread}),
    )
    .await;
    wait_for(&api, "alice", &a, is_terminal).await;
    let b = queue(&api, "alice", json!({"agent": "other", "input": "b"})).await;
    wait_for(&api, "alice", &b, is_terminal).await;
    let c = queue(&api, "alice", json!({"agent": "chat", "input": "c"})).await;
    wait_for(&api, "alice", &c, is_terminal).await;
    queue(&api, "bob", json!({"agent": "chat", "input": "bob's"})).await;

    let ids = |answer: &crate::harness::Answer| -> Vec<String> {
        assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
        answer.body["executions"]
            .as_array()
            .expect("list")
            .iter()
            .map(|e| e["id"].as_str().expect("id").to_owned())
            .collect()
    };
    // Newest first, only alice's.
    assert_eq!(
        ids(&api.get("/v1/executions", "alice").await),
        vec![c.clone(), b.clone(), a.clone()]
    );
    assert_eq!(
        ids(&api.get("/v1/executions?agent=other", "alice").await),
        vec![b.clone()]
    );
    assert_eq!(
        ids(&api
            .get(&format!("/v1/executions?thread_id={thread}"), "alice")
            .await),
        vec![a.clone()]
    );
    assert_eq!(
        ids(&api
            .get("/v1/executions?status=succeeded&limit=2", "alice")
            .await),
        vec![c.clone(), b.clone()]
    );
    assert!(ids(&api.get("/v1/executions?status=queued", "alice").await).is_empty());
    assert!(ids(&api.get("/v1/executions?thread_id=thr_nope", "alice").await).is_empty());
}

#[tokio::test]
async fn an_idempotency_key_replays_the_same_execution_and_refuses_another_body() {
    let api = setup(vec![Step::text("once"), Step::text("bob")])
        .start()
        .await;
    let body = json!({"agent": "chat", "input": "do it once", "idempotency_key": "order-17"});
    let first = submit(&api, "alice", body.clone()).await;
    assert_eq!(first.status, StatusCode::ACCEPTED);
    let id = first.body["id"].as_str().expect("id").to_owned();
    wait_for(&api, "alice", &id, is_terminal).await;
    let again = submit(&api, "alice", body.clone()).await;
    assert_eq!(again.status, StatusCode::ACCEPTED, "{:?}", again.body);
    assert_eq!(again.body["id"], id.as_str());
    assert_eq!(again.body["status"], "succeeded");
    assert_eq!(
        again
            .headers
            .get("idempotent-replayed")
            .and_then(|v| v.to_str().ok()),
        Some("true")
    );
    let other = submit(
        &api,
        "alice",
        json!({"agent": "chat", "input": "something else", "idempotency_key": "order-17"}),
    )
    .await;
    other.assert_error(409, "CONFLICT");
    // Keys are per client.
    let bobs = submit(&api, "bob", body).await;
    assert_eq!(bobs.status, StatusCode::ACCEPTED);
    assert_ne!(bobs.body["id"], id.as_str());
    assert!(bobs.headers.get("idempotent-replayed").is_none());
    // One model call for alice's key, one for bob's.
    wait_for(
        &api,
        "bob",
        bobs.body["id"].as_str().expect("id"),
        is_terminal,
    )
    .await;
    assert_eq!(api.scripted.chat_request_count(), 2);
}

#[tokio::test]
async fn another_clients_execution_is_not_found() {
    let api = setup(vec![Step::text("mine")]).start().await;
    let id = queue(&api, "alice", json!({"agent": "chat", "input": "x"})).await;
    api.get(&format!("/v1/executions/{id}"), "mallory")
        .await
        .assert_error(404, "NOT_FOUND");
    api.post(&format!("/v1/executions/{id}/cancel"), "mallory", json!({}))
        .await
        .assert_error(404, "NOT_FOUND");
    let list = api.get("/v1/executions", "mallory").await;
    assert_eq!(list.body["executions"], json!([]));
    // Nor may an execution run on another client's thread.
    let thread = api.create_thread("alice", "chat").await;
    submit(
        &api,
        "mallory",
        json!({"agent": "chat", "input": "x", "thread_id": thread}),
    )
    .await
    .assert_error(404, "NOT_FOUND");
    assert_eq!(
        wait_for(&api, "alice", &id, is_terminal).await["status"],
        "succeeded"
    );
}

#[tokio::test]
async fn hostile_requests_are_refused_in_the_envelope_and_queue_nothing() {
    let api = setup(vec![]).start().await;
    let long = "x".repeat(65_537);
    let cases = [
        json!({}),
        json!({"agent": "chat"}),
        json!({"input": "x"}),
        json!({"agent": "chat", "input": ""}),
        json!({"agent": "chat", "input": "   "}),
        json!({"agent": "chat", "input": long}),
        json!({"agent": "nobody", "input": "x"}),
        json!({"agent": "chat", "input": "x", "extra": 1}),
        json!({"agent": "chat", "input": 7}),
        json!({"agent": ["chat"], "input": "x"}),
        json!({"agent": "chat", "input": "x", "cwd": "relative/dir"}),
        json!({"agent": "chat", "input": "x", "cwd": "/no/such/dir/anywhere"}),
        json!({"agent": "chat", "input": "x", "cwd": "/tmp", "thread_id": "thr_0196f3c2a1b27c3d8e9f0a1b2c3d4e5f"}),
        json!({"agent": "chat", "input": "x", "idempotency_key": ""}),
        json!({"agent": "chat", "input": "x", "idempotency_key": "k".repeat(201)}),
        json!({"agent": "chat", "input": "x", "idempotency_key": "a\nb"}),
        // No webhook secret is configured: webhooks are refused.
        json!({"agent": "chat", "input": "x", "webhook_url": "https://example.com/hook"}),
        json!([1, 2]),
        json!("chat"),
    ];
    for body in cases {
        let answer = submit(&api, "alice", body.clone()).await;
        answer.assert_error(400, "INVALID_ARGUMENT");
    }
    // A malformed thread id is 404 like a foreign one.
    submit(
        &api,
        "alice",
        json!({"agent": "chat", "input": "x", "thread_id": "../../etc"}),
    )
    .await
    .assert_error(404, "NOT_FOUND");
    let raw = api
        .send(
            api.request(Method::POST, "/v1/executions", Some("alice"))
                .header("content-type", "application/json")
                .body("{\"agent\": \"chat\", \"input\": "),
        )
        .await;
    raw.assert_error(400, "INVALID_ARGUMENT");
    for query in [
        "?limit=0",
        "?limit=1001",
        "?limit=-1",
        "?limit=abc",
        "?status=done",
        "?surprise=1",
    ] {
        api.get(&format!("/v1/executions{query}"), "alice")
            .await
            .assert_error(400, "INVALID_ARGUMENT");
    }
    for path in [
        "/v1/executions/exec_",
        "/v1/executions/thr_0196f3c2a1b27c3d8e9f0a1b2c3d4e5f",
        "/v1/executions/exec_0196f3c2a1b27c3d8e9f0a1b2c3d4e5f",
    ] {
        api.get(path, "alice").await.assert_error(404, "NOT_FOUND");
        api.post(&format!("{path}/cancel"), "alice", json!({}))
            .await
            .assert_error(404, "NOT_FOUND");
    }
    let list = api.get("/v1/executions", "alice").await;
    assert_eq!(list.body["executions"], json!([]), "nothing was queued");
    assert_eq!(api.scripted.chat_request_count(), 0);
}

// ----- webhooks ------------------------------------------------------------------------

/// One POST the receiver got.
#[derive(Debug, Clone)]
struct Received {
    headers: HeaderMap,
    body: Vec<u8>,
}

/// A webhook receiver on 127.0.0.1 answering with `statuses` in turn (then 200).
struct Receiver {
    addr: SocketAddr,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    async fn start(statuses: Vec<u16>) -> Self {
        let received = Arc::new(Mutex::new(Vec::<Received>::new()));
        let script = Arc::new(Mutex::new(statuses.into_iter()));
        let log = received.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: HeaderMap, body: axum::body::Bytes| {
                let log = log.clone();
                let script = script.clone();
                async move {
                    log.lock().expect("log").push(Received {
                        headers,
                        body: body.to_vec(),
                    });
                    let status = script.lock().expect("script").next().unwrap_or(200);
                    AxumStatus::from_u16(status).expect("status")
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { addr, received }
    }

    fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().expect("log").clone()
    }
}

/// What a receiver does: recompute the HMAC of `"{timestamp}.{body}"` and compare.
fn signature_verifies(secret: &str, received: &Received) -> bool {
    let header = |name: &str| {
        received
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let timestamp = header("x-agentplane-timestamp");
    let Some(hex) = header("x-agentplane-signature")
        .strip_prefix("sha256=")
        .map(str::to_owned)
    else {
        return false;
    };
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(&received.body);
    let expected: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    expected == hex
}

async fn deliveries(api: &Api, id: &str) -> Vec<DeliveryRecord> {
    let id = ExecutionId::parse(id).expect("execution id");
    api.runtime
        .store()
        .deliveries(&id)
        .await
        .expect("deliveries")
}

/// Waits until the execution's delivery is no longer pending.
async fn settled_delivery(api: &Api, id: &str) -> DeliveryRecord {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let found = deliveries(api, id).await;
        if let Some(delivery) = found.first()
            && delivery.status != DeliveryStatus::Pending
        {
            assert_eq!(found.len(), 1, "one delivery per execution");
            return delivery.clone();
        }
        assert!(
            Instant::now() < deadline,
            "delivery never settled: {found:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_webhook_is_signed_retried_after_500s_and_posted_exactly_three_times() {
    let receiver = Receiver::start(vec![500, 500, 200]).await;
    let secrets = tempfile::tempdir().expect("tempdir");
    let api = setup(vec![Step::text("done and dusted")])
        .extra_config(&webhook_config(secrets.path(), true))
        .start()
        .await;
    let id = queue(
        &api,
        "alice",
        json!({"agent": "chat", "input": "go", "webhook_url": receiver.url()}),
    )
    .await;
    let delivery = settled_delivery(&api, &id).await;
    assert_eq!(delivery.status, DeliveryStatus::Delivered, "{delivery:?}");
    assert_eq!(delivery.attempts, 3);
    assert_eq!(delivery.last_status, Some(200));
    // Nothing more arrives once delivered.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let posts = receiver.received();
    assert_eq!(posts.len(), 3, "exactly three POSTs");
    let final_state = api.get(&format!("/v1/executions/{id}"), "alice").await.body;
    for post in &posts {
        assert!(signature_verifies(SECRET, post), "signature of {post:?}");
        assert!(!signature_verifies("another secret", post));
        assert_eq!(
            post.headers
                .get("x-agentplane-delivery")
                .and_then(|v| v.to_str().ok()),
            Some(delivery.id.as_str()),
            "the same delivery id every time"
        );
        assert_eq!(
            post.headers
                .get("content-type")
                .and_then(|v| v.to_str().ok()),
            Some("application/json")
        );
        let body: Value = serde_json::from_slice(&post.body).expect("JSON body");
        assert_eq!(body["event"], "execution.finished");
        assert_eq!(body["delivery_id"], delivery.id.as_str());
        // The body is the execution's final state, as GET shows it.
        assert_eq!(body["execution"], final_state);
        assert_eq!(body["execution"]["status"], "succeeded");
        assert_eq!(
            body["execution"]["output"],
            json!({"text": "done and dusted"})
        );
    }
    // The same bytes every attempt: a receiver may dedupe on the delivery id.
    assert!(posts.iter().all(|p| p.body == posts[0].body));
    // A tampered body does not verify.
    let mut tampered = posts[0].clone();
    tampered.body.push(b' ');
    assert!(!signature_verifies(SECRET, &tampered));
}

#[tokio::test]
async fn webhooks_give_up_after_their_attempts() {
    let receiver = Receiver::start(vec![500; 10]).await;
    let secrets = tempfile::tempdir().expect("tempdir");
    let api = setup(vec![Step::error(400, "{}")])
        .extra_config(&webhook_config(secrets.path(), true))
        .start()
        .await;
    let id = queue(
        &api,
        "alice",
        json!({"agent": "chat", "input": "go", "webhook_url": receiver.url()}),
    )
    .await;
    let delivery = settled_delivery(&api, &id).await;
    assert_eq!(delivery.status, DeliveryStatus::Failed);
    assert_eq!(delivery.attempts, 5, "webhook_max_attempts");
    assert_eq!(delivery.last_status, Some(500));
    assert_eq!(receiver.received().len(), 5);
    let body: Value = serde_json::from_slice(&receiver.received()[0].body).expect("json");
    assert_eq!(body["execution"]["status"], "failed");
}

#[tokio::test]
async fn private_webhook_addresses_are_refused_unless_allowed() {
    let receiver = Receiver::start(vec![]).await;
    let secrets = tempfile::tempdir().expect("tempdir");
    let api = setup(vec![Step::text("x")])
        .extra_config(&webhook_config(secrets.path(), false))
        .start()
        .await;
    // An address literal is refused when the execution is submitted…
    for url in [
        receiver.url(),
        "http://10.0.0.1/hook".to_owned(),
        "http://169.254.169.254/latest".to_owned(),
        "http://[::1]/hook".to_owned(),
        "ftp://example.com/hook".to_owned(),
        "https://user:pw@example.com/hook".to_owned(),
    ] {
        submit(
            &api,
            "alice",
            json!({"agent": "chat", "input": "x", "webhook_url": url}),
        )
        .await
        .assert_error(400, "INVALID_ARGUMENT");
    }
    // …and a name that resolves to one when the POST would be made: no retry.
    let url = format!("http://localhost:{}/hook", receiver.addr.port());
    let id = queue(
        &api,
        "alice",
        json!({"agent": "chat", "input": "x", "webhook_url": url}),
    )
    .await;
    let delivery = settled_delivery(&api, &id).await;
    assert_eq!(delivery.status, DeliveryStatus::Failed);
    assert_eq!(delivery.attempts, 1);
    assert!(
        delivery
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("loopback")),
        "{delivery:?}"
    );
    assert!(receiver.received().is_empty(), "nothing was sent");
    assert_eq!(
        api.get(&format!("/v1/executions/{id}"), "alice").await.body["status"],
        "succeeded"
    );
}

#[tokio::test]
async fn a_cancelled_queued_execution_announces_itself_too() {
    let receiver = Receiver::start(vec![]).await;
    let secrets = tempfile::tempdir().expect("tempdir");
    let api = Setup::new(vec![Step::text("slow").with_delay_ms(30_000)])
        .extra_config(&format!(
            "{}{}",
            FAST.replace("workers = 2", "workers = 1"),
            webhook_config(secrets.path(), true)
        ))
        .start()
        .await;
    let busy = queue(&api, "alice", json!({"agent": "chat", "input": "busy"})).await;
    wait_status(&api, "alice", &busy, "running").await;
    let id = queue(
        &api,
        "alice",
        json!({"agent": "chat", "input": "x", "webhook_url": receiver.url()}),
    )
    .await;
    let answer = api
        .post(&format!("/v1/executions/{id}/cancel"), "alice", json!({}))
        .await;
    assert_eq!(answer.body["status"], "cancelled");
    let delivery = settled_delivery(&api, &id).await;
    assert_eq!(delivery.status, DeliveryStatus::Delivered);
    let posts = receiver.received();
    assert_eq!(posts.len(), 1);
    let body: Value = serde_json::from_slice(&posts[0].body).expect("json");
    assert_eq!(body["execution"]["status"], "cancelled");
    api.post(&format!("/v1/executions/{busy}/cancel"), "alice", json!({}))
        .await;
}

#[tokio::test]
async fn an_execution_waiting_for_an_approval_holds_no_worker_and_ends_with_its_turn() {
    let api = Setup::new(vec![
        Step::tool_call(
            "write_file",
            json!({"path": "out.txt", "content": "approved"}),
        ),
        Step::text("other work"),
        Step::text("written"),
    ])
    .extra_config(&FAST.replace("workers = 2", "workers = 1"))
    .extra_config(
        "\n[agents.reviewed]\nsystem_prompt = \"Write.\"\nensembles = [\"fs\"]\nmax_steps = 4\nmax_nudges = 0\n",
    )
    .policy(
        "review.yaml",
        "name: review\ntype: approval_required\nrules: {tools: [write_file]}\n",
    )
    .start()
    .await;
    let cwd = api.workspace.display().to_string();
    let held = queue(
        &api,
        "alice",
        json!({"agent": "reviewed", "input": "write it", "cwd": cwd}),
    )
    .await;
    // The turn is suspended on the approval…
    let deadline = Instant::now() + PATIENCE;
    let approval = loop {
        let list = api.get("/v1/approvals", "alice").await;
        if let Some(first) = list.body["approvals"].as_array().and_then(|a| a.first()) {
            break first["id"].as_str().expect("approval id").to_owned();
        }
        assert!(Instant::now() < deadline, "no approval");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // …and the only worker is free for another execution meanwhile.
    let other = queue(
        &api,
        "alice",
        json!({"agent": "chat", "input": "meanwhile"}),
    )
    .await;
    let done = wait_for(&api, "alice", &other, is_terminal).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let waiting = api.get(&format!("/v1/executions/{held}"), "alice").await;
    assert_eq!(waiting.body["status"], "running", "{:?}", waiting.body);
    let decided = api
        .post(
            &format!("/v1/approvals/{approval}"),
            "alice",
            json!({"decision": "approve"}),
        )
        .await;
    assert_eq!(decided.status, StatusCode::OK, "{:?}", decided.body);
    let done = wait_for(&api, "alice", &held, is_terminal).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["output"], json!({"text": "written"}));
    assert_eq!(done["attempts"], 1);
    assert_eq!(
        std::fs::read_to_string(api.workspace.join("out.txt")).expect("file"),
        "approved"
    );
}
