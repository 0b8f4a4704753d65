//! Identity (docs/identity.md; OIDC in `oidc.rs`, workspace roots in `roots.rs`): with
//! API keys configured, every way of calling without a valid key is `401`, a key acts
//! only as its own client, each role is held to its table by the hub (`403 FORBIDDEN`
//! naming the missing role, and a `security_event` log line), approvals go to the
//! roles they name, four eyes hold, and no secret shows in an answer (but its
//! creation's), the log or the database file.

use std::time::Duration;

use agentplane_suites::attacks::{Tally, assert_envelope};
use agentplane_suites::{Sandbox, Served, SseReader, sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use reqwest::Method;
use serde_json::{Value, json};

const TOKEN: &str = "tok-Identity-51c0a9e7d3f2";

const AGENTS: &str = "[agents.secured]\nsystem_prompt = \"Write the file.\"\n\
    ensembles = [\"fs\"]\nmax_steps = 4\n\
    [agents.paired]\nsystem_prompt = \"Write the file.\"\nensembles = [\"fs\"]\nmax_steps = 4\n\
    [policies]\ndir = \"policies\"\n";

const SECURITY: &str = "name: security-review\ntype: approval_required\n\
    targets: {agents: [secured]}\nrules: {tools: [write_file], approvers: [\"role:security\"]}\n";

const FOUR_EYES: &str = "name: four-eyes\ntype: approval_required\n\
    targets: {agents: [paired]}\n\
    rules: {tools: [write_file], approvers: [alice, \"role:security\"], separate_approver: true}\n";

/// A request with an optional key and client id.
pub(crate) fn call(
    served: &Served,
    method: Method,
    path: &str,
    key: Option<&str>,
    client: Option<&str>,
) -> reqwest::RequestBuilder {
    let mut request = reqwest::Client::new()
        .request(method, format!("{}{path}", served.base))
        .header("Accept", "application/json, text/event-stream");
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    if let Some(client) = client {
        request = request.header("X-Client-ID", client);
    }
    request
}

/// Status and body of a request.
pub(crate) async fn send(request: reqwest::RequestBuilder) -> (u16, String) {
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

/// `agentplane keys create` before the server holds the file; the secret is the last
/// line of its output.
pub(crate) fn cli_key(sb: &Sandbox, client: &str, roles: &[&str]) -> String {
    let key = agentplane_suites::cli_key(sb, client, roles);
    assert_eq!(key.len(), 67, "{key}");
    key
}

/// A key made over `/v1/keys` with the admin key: (id, secret).
async fn http_key(served: &Served, admin: &str, body: Value) -> (String, String) {
    let (status, text) =
        send(call(served, Method::POST, "/v1/keys", Some(admin), None).json(&body)).await;
    assert_eq!(status, 201, "{text}");
    let created: Value = serde_json::from_str(&text).expect("json");
    (
        created["key"]["id"].as_str().expect("id").to_owned(),
        created["secret"].as_str().expect("secret").to_owned(),
    )
}

async fn new_thread(served: &Served, sb: &Sandbox, key: &str, agent: &str) -> String {
    let (status, text) = send(
        call(served, Method::POST, "/v1/threads", Some(key), None)
            .json(&json!({"agent": agent, "cwd": sb.workspace})),
    )
    .await;
    assert_eq!(status, 201, "{text}");
    let thread: Value = serde_json::from_str(&text).expect("json");
    thread["id"].as_str().expect("id").to_owned()
}

/// Starts a turn with `key` and reads until its approval is asked: the approval id.
async fn held_call(served: &Served, thread: &str, key: &str) -> (SseReader, String) {
    let response = call(
        served,
        Method::POST,
        &format!("/v1/threads/{thread}/turns"),
        Some(key),
        None,
    )
    .json(&json!({"input": "write it"}))
    .send()
    .await
    .expect("turn");
    assert_eq!(response.status(), 200, "{}", served.stderr());
    let mut stream = SseReader::from_response(response);
    let events = stream.until("approval_requested").await;
    let asked = events
        .iter()
        .find(|e| e.event == "approval_requested")
        .expect("approval_requested");
    let id = asked.data["approval_id"].as_str().expect("approval id");
    (stream, id.to_owned())
}

pub(crate) fn refused(
    tally: &mut Tally,
    status: u16,
    text: &str,
    want: u16,
    code: &str,
    what: &str,
) {
    assert_eq!(status, want, "{what}: {text}");
    assert_envelope(text, code);
    tally.case(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_roles_and_approvers_hold_through_the_real_binary() {
    let model = ScriptedServer::start(
        Scenario::new(vec![
            Step::tool_call("write_file", json!({"path": "out.txt", "content": "x"})),
            Step::text("done"),
        ])
        .repeating(true),
    )
    .await
    .expect("model");
    let sb = sandbox(AGENTS);
    std::fs::create_dir(sb.root.join("policies")).expect("policies");
    std::fs::write(sb.root.join("policies/security.yaml"), SECURITY).expect("policy");
    std::fs::write(sb.root.join("policies/four-eyes.yaml"), FOUR_EYES).expect("policy");
    let url = model.base_url();
    // Made by the CLI, through the runtime, before the server locks the file.
    let admin = cli_key(&sb, "root", &["admin"]);
    let alice = cli_key(&sb, "alice", &["operator"]);
    let served = start(&sb, &url, &["--auth-token", TOKEN]).await;
    let mut secrets = vec![admin.clone(), alice.clone()];
    let (_, bob) = http_key(
        &served,
        &admin,
        json!({"client": "bob", "roles": ["operator"]}),
    )
    .await;
    let (_, viewer) = http_key(
        &served,
        &admin,
        json!({"client": "alice", "roles": ["viewer"]}),
    )
    .await;
    let (sec_id, security) = http_key(
        &served,
        &admin,
        json!({"client": "sec", "roles": ["approver", "security"], "description": "reviewer"}),
    )
    .await;
    let (gone_id, gone) = http_key(
        &served,
        &admin,
        json!({"client": "alice", "roles": ["operator"]}),
    )
    .await;
    let (_, brief) = http_key(
        &served,
        &admin,
        json!({"client": "alice", "roles": ["operator"], "expires": "1s"}),
    )
    .await;
    let (_, approver_only) = http_key(
        &served,
        &admin,
        json!({"client": "carol", "roles": ["approver"]}),
    )
    .await;
    secrets.extend([
        bob.clone(),
        viewer.clone(),
        security.clone(),
        gone.clone(),
        brief.clone(),
        approver_only.clone(),
    ]);
    let mut tally = Tally::default();
    let mut answers = Vec::new();

    // 1. No key, or a key that is not one: 401 on every guarded route.
    let guarded: Vec<(Method, &str, Option<Value>)> = vec![
        (Method::GET, "/v1/threads", None),
        (
            Method::POST,
            "/v1/threads",
            Some(json!({"agent": "chat", "cwd": sb.workspace})),
        ),
        (Method::GET, "/v1/keys", None),
        (Method::GET, "/v1/agents", None),
        (Method::GET, "/metrics", None),
        (
            Method::POST,
            "/mcp",
            Some(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})),
        ),
        (Method::GET, "/openai/v1/models", None),
        (
            Method::POST,
            "/openai/v1/chat/completions",
            Some(json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}]})),
        ),
    ];
    for (method, path, body) in &guarded {
        let mut request = call(&served, method.clone(), path, None, Some("alice"));
        if let Some(body) = body {
            request = request.json(body);
        }
        let (status, text) = send(request).await;
        refused(
            &mut tally,
            status,
            &text,
            401,
            "UNAUTHORIZED",
            &format!("no key: {method} {path}"),
        );
        answers.push(text);
    }
    let flipped = {
        let mut k = alice.clone().into_bytes();
        let last = k.len() - 1;
        k[last] = if k[last] == b'0' { b'1' } else { b'0' };
        String::from_utf8(k).expect("ascii")
    };
    for (name, presented) in [
        ("one-digit-changed", flipped),
        ("truncated", alice[..alice.len() - 1].to_owned()),
        ("uppercased", alice.to_uppercase()),
        ("not-hex", format!("ap_{}", "g".repeat(64))),
        ("prefix-only", "ap_".to_owned()),
        (
            "digest-not-secret",
            "dcb6c77364d675f43e58eca0cf655224162a124fc926943b86994c47b912123a".to_owned(),
        ),
    ] {
        let (status, text) = send(call(
            &served,
            Method::GET,
            "/v1/threads",
            Some(&presented),
            None,
        ))
        .await;
        refused(&mut tally, status, &text, 401, "UNAUTHORIZED", name);
        answers.push(text);
    }
    // A key anywhere but the Authorization header is no key.
    let (status, text) = send(
        call(
            &served,
            Method::GET,
            &format!("/v1/threads?key={alice}"),
            None,
            None,
        )
        .header("X-API-Key", &alice),
    )
    .await;
    refused(
        &mut tally,
        status,
        &text,
        401,
        "UNAUTHORIZED",
        "key in a query and another header",
    );
    answers.push(text);

    // 2. A key acts as its own client.
    let (status, text) = send(call(
        &served,
        Method::GET,
        "/v1/threads",
        Some(&alice),
        Some("bob"),
    ))
    .await;
    refused(
        &mut tally,
        status,
        &text,
        403,
        "FORBIDDEN",
        "alice's key naming bob",
    );
    answers.push(text);
    let (status, text) = send(
        call(
            &served,
            Method::POST,
            "/v1/threads",
            Some(&alice),
            Some("bob"),
        )
        .json(&json!({"agent": "chat", "cwd": sb.workspace})),
    )
    .await;
    refused(
        &mut tally,
        status,
        &text,
        403,
        "FORBIDDEN",
        "alice's key creating as bob",
    );
    let bobs = new_thread(&served, &sb, &bob, "chat").await;
    let (status, text) = send(call(
        &served,
        Method::GET,
        &format!("/v1/threads/{bobs}"),
        Some(&alice),
        None,
    ))
    .await;
    refused(
        &mut tally,
        status,
        &text,
        404,
        "NOT_FOUND",
        "alice reading bob's thread",
    );
    let alices = new_thread(&served, &sb, &alice, "chat").await;
    let (status, text) = send(call(
        &served,
        Method::GET,
        "/v1/threads",
        Some(&alice),
        Some("alice"),
    ))
    .await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains(&alices) && !text.contains(&bobs), "{text}");

    // 3. Roles, enforced by the hub.
    let (status, text) = send(
        call(
            &served,
            Method::POST,
            &format!("/v1/threads/{alices}/turns"),
            Some(&viewer),
            None,
        )
        .json(&json!({"input": "hi"})),
    )
    .await;
    refused(
        &mut tally,
        status,
        &text,
        403,
        "FORBIDDEN",
        "viewer starting a turn",
    );
    assert!(
        text.contains("operator"),
        "the missing role is named: {text}"
    );
    let (status, text) = send(
        call(&served, Method::POST, "/v1/threads", Some(&viewer), None)
            .json(&json!({"agent": "chat", "cwd": sb.workspace})),
    )
    .await;
    refused(
        &mut tally,
        status,
        &text,
        403,
        "FORBIDDEN",
        "viewer creating a thread",
    );
    let (status, text) = send(call(
        &served,
        Method::DELETE,
        &format!("/v1/threads/{alices}"),
        Some(&viewer),
        None,
    ))
    .await;
    refused(
        &mut tally,
        status,
        &text,
        403,
        "FORBIDDEN",
        "viewer deleting a thread",
    );
    let (status, text) = send(call(
        &served,
        Method::GET,
        &format!("/v1/threads/{alices}"),
        Some(&viewer),
        None,
    ))
    .await;
    assert_eq!(status, 200, "a viewer reads its client's threads: {text}");
    let (status, text) = send(call(&served, Method::GET, "/metrics", Some(&viewer), None)).await;
    assert_eq!(status, 200, "a viewer reads metrics: {text}");
    for (name, key) in [
        ("operator", &alice),
        ("viewer", &viewer),
        ("approver", &approver_only),
    ] {
        let (status, text) = send(
            call(&served, Method::POST, "/v1/keys", Some(key), None)
                .json(&json!({"client": "mallory", "roles": ["admin"]})),
        )
        .await;
        refused(
            &mut tally,
            status,
            &text,
            403,
            "FORBIDDEN",
            &format!("{name} creating a key"),
        );
        assert!(text.contains("admin"), "{text}");
    }
    let (status, text) = send(call(&served, Method::GET, "/v1/keys", Some(&alice), None)).await;
    refused(
        &mut tally,
        status,
        &text,
        403,
        "FORBIDDEN",
        "operator listing keys",
    );
    let (status, text) = send(call(
        &served,
        Method::POST,
        &format!("/v1/keys/{sec_id}/revoke"),
        Some(&bob),
        None,
    ))
    .await;
    refused(
        &mut tally,
        status,
        &text,
        403,
        "FORBIDDEN",
        "operator revoking a key",
    );
    for (name, method, path, body) in [
        (
            "creating a version",
            Method::POST,
            "/v1/agents/chat/versions",
            json!({"version": "9.0.0", "spec": {"system_prompt": "obey mallory"}}),
        ),
        (
            "promoting a version",
            Method::POST,
            "/v1/agents/chat/versions/9.0.0/promote",
            json!({}),
        ),
        (
            "routing traffic",
            Method::PUT,
            "/v1/agents/chat/traffic",
            json!({"weights": {"9.0.0": 100}}),
        ),
        (
            "setting a shadow",
            Method::PUT,
            "/v1/agents/chat/shadow",
            json!({"version": "9.0.0"}),
        ),
    ] {
        let (status, text) =
            send(call(&served, method, path, Some(&alice), None).json(&body)).await;
        refused(
            &mut tally,
            status,
            &text,
            403,
            "FORBIDDEN",
            &format!("operator {name}"),
        );
        assert!(text.contains("admin"), "{text}");
    }
    let (status, text) = send(
        call(
            &served,
            Method::POST,
            "/v1/threads",
            Some(&approver_only),
            None,
        )
        .json(&json!({"agent": "chat", "cwd": sb.workspace})),
    )
    .await;
    refused(
        &mut tally,
        status,
        &text,
        403,
        "FORBIDDEN",
        "approver creating a thread",
    );
    let (status, text) = send(call(
        &served,
        Method::GET,
        "/v1/threads",
        Some(&approver_only),
        None,
    ))
    .await;
    refused(
        &mut tally,
        status,
        &text,
        403,
        "FORBIDDEN",
        "approver listing threads",
    );
    let (status, text) = send(
        call(
            &served,
            Method::POST,
            "/openai/v1/chat/completions",
            Some(&viewer),
            None,
        )
        .json(&json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}]})),
    )
    .await;
    assert_eq!(status, 403, "viewer calling the gateway: {text}");
    tally.case(true);

    // The token is an admin that may name any client; an admin key may too.
    let (status, text) = send(call(
        &served,
        Method::GET,
        "/v1/threads",
        Some(TOKEN),
        Some("bob"),
    ))
    .await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains(&bobs), "{text}");
    let (status, text) = send(call(
        &served,
        Method::GET,
        "/v1/threads",
        Some(&admin),
        Some("bob"),
    ))
    .await;
    assert_eq!(status, 200, "{text}");

    // 4. Approvals addressed to a role; four eyes.
    let secured = new_thread(&served, &sb, &alice, "secured").await;
    let (mut stream, approval) = held_call(&served, &secured, &alice).await;
    let decide = |key: &str| {
        call(
            &served,
            Method::POST,
            &format!("/v1/approvals/{approval}"),
            Some(key),
            None,
        )
        .json(&json!({"decision": "approve"}))
    };
    let (status, text) = send(decide(&alice)).await;
    refused(
        &mut tally,
        status,
        &text,
        403,
        "FORBIDDEN",
        "operator deciding a role:security approval",
    );
    let (status, text) = send(decide(&bob)).await;
    refused(
        &mut tally,
        status,
        &text,
        404,
        "NOT_FOUND",
        "another operator deciding it",
    );
    let (status, text) = send(decide(&approver_only)).await;
    refused(
        &mut tally,
        status,
        &text,
        404,
        "NOT_FOUND",
        "an approver without the role",
    );
    let (status, text) = send(call(
        &served,
        Method::GET,
        "/v1/approvals",
        Some(&security),
        None,
    ))
    .await;
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains(&approval),
        "the security approver sees it: {text}"
    );
    let (status, text) = send(decide(&security)).await;
    assert_eq!(status, 200, "the security approver decides: {text}");
    let events = stream.until("turn_completed").await;
    let decided = events
        .iter()
        .find(|e| e.event == "approval_decided")
        .expect("approval_decided");
    assert_eq!(decided.data["by"], "sec", "{:?}", decided.data);
    assert_eq!(
        decided.data["decider"],
        format!("key:{sec_id}"),
        "{:?}",
        decided.data
    );

    let paired = new_thread(&served, &sb, &alice, "paired").await;
    let (mut stream, approval) = held_call(&served, &paired, &alice).await;
    let (status, text) = send(
        call(
            &served,
            Method::POST,
            &format!("/v1/approvals/{approval}"),
            Some(&alice),
            None,
        )
        .json(&json!({"decision": "approve"})),
    )
    .await;
    refused(
        &mut tally,
        status,
        &text,
        403,
        "FORBIDDEN",
        "self-approval under four eyes",
    );
    let (status, text) = send(
        call(
            &served,
            Method::POST,
            &format!("/v1/approvals/{approval}"),
            Some(&security),
            None,
        )
        .json(&json!({"decision": "reject", "feedback": "no"})),
    )
    .await;
    assert_eq!(status, 200, "the second pair of eyes decides: {text}");
    stream.until("turn_completed").await;

    // 5. Revoked and expired keys.
    let (status, _) = send(call(&served, Method::GET, "/v1/threads", Some(&gone), None)).await;
    assert_eq!(status, 200, "the key works before it is revoked");
    let (status, text) = send(call(
        &served,
        Method::POST,
        &format!("/v1/keys/{gone_id}/revoke"),
        Some(&admin),
        None,
    ))
    .await;
    assert_eq!(status, 200, "{text}");
    let (status, text) = send(call(&served, Method::GET, "/v1/threads", Some(&gone), None)).await;
    refused(
        &mut tally,
        status,
        &text,
        401,
        "UNAUTHORIZED",
        "a revoked key",
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (status, text) = send(call(
        &served,
        Method::GET,
        "/v1/threads",
        Some(&brief),
        None,
    ))
    .await;
    refused(
        &mut tally,
        status,
        &text,
        401,
        "UNAUTHORIZED",
        "an expired key",
    );
    for (name, body) in [
        ("a key without a role", json!({"client": "x", "roles": []})),
        (
            "a key with only a free role",
            json!({"client": "x", "roles": ["security"]}),
        ),
        (
            "a key for a hostile client id",
            json!({"client": "../x y", "roles": ["viewer"]}),
        ),
        (
            "a key that never ends",
            json!({"client": "x", "roles": ["viewer"], "expires": "99999999d"}),
        ),
    ] {
        let (status, text) =
            send(call(&served, Method::POST, "/v1/keys", Some(&admin), None).json(&body)).await;
        refused(&mut tally, status, &text, 400, "INVALID_ARGUMENT", name);
    }

    // 6. Listing keys shows no secret; no secret is in any answer, the log or the file.
    let (status, text) = send(call(&served, Method::GET, "/v1/keys", Some(&admin), None)).await;
    assert_eq!(status, 200, "{text}");
    answers.push(text);
    let log = served.stderr();
    assert!(
        log.contains("security_event"),
        "refusals are logged as security events:\n{log}"
    );
    drop(served);
    let db = std::fs::read(&sb.db).expect("db");
    let wal = std::fs::read(sb.root.join("events.db-wal")).unwrap_or_default();
    for secret in &secrets {
        let hex = &secret[3..];
        for answer in &answers {
            assert!(!answer.contains(hex), "an answer holds a key: {answer}");
        }
        assert!(!log.contains(hex), "the log holds a key");
        for file in [&db, &wal] {
            assert!(
                !file.windows(hex.len()).any(|w| w == hex.as_bytes()),
                "the database holds a key in clear"
            );
        }
    }
    tally.case(true);
    tally.report("identity");
    assert!(tally.cases >= 30, "{} cases", tally.cases);
}
