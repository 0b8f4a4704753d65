//! Identity (docs/identity.md): with API keys configured, every way of calling without
//! a valid key is `401`, a key acts only as its own client, each role is held to its
//! table by the hub (`403 FORBIDDEN` naming the missing role, and a `security_event`
//! log line), approvals go to the roles they name, four eyes hold, and no secret
//! shows in an answer (but its creation's), the log or the database file.

use std::time::Duration;

use agentplane_suites::attacks::{Tally, assert_envelope};
use agentplane_suites::{Sandbox, Served, SseReader, command, sandbox, start};
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
fn call(
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
async fn send(request: reqwest::RequestBuilder) -> (u16, String) {
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

/// `agentplane keys create` before the server holds the file; the secret is the last
/// line of its output.
fn cli_key(sb: &Sandbox, model_url: &str, client: &str, roles: &[&str]) -> String {
    let mut cmd = command(sb, model_url);
    cmd.args(["keys", "create", "--client", client]);
    for role in roles {
        cmd.args(["--role", role]);
    }
    let out = cmd.output().expect("keys create");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().expect("a last line").to_owned();
    assert!(last.starts_with("ap_") && last.len() == 67, "{stdout}");
    last
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

fn refused(tally: &mut Tally, status: u16, text: &str, want: u16, code: &str, what: &str) {
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
    let admin = cli_key(&sb, &url, "root", &["admin"]);
    let alice = cli_key(&sb, &url, "alice", &["operator"]);
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

/// Workspace roots (ADR 0031): `serve` on loopback confines outside callers'
/// workspaces to the directory it started in (here, with no keys: as before, plus the
/// roots); the data and configuration directories, and any directory holding them,
/// are never a workspace; symlinks are judged by where they lead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspaces_stay_inside_the_roots() {
    let model = ScriptedServer::start(Scenario::new(vec![Step::text("hi")]).repeating(true))
        .await
        .expect("model");
    let sb = sandbox("");
    let outside = tempfile::tempdir().expect("outside");
    let inside_link = sb.workspace.join("escape");
    std::os::unix::fs::symlink(outside.path(), &inside_link).expect("symlink");
    let data_link = sb.workspace.join("data");
    std::os::unix::fs::symlink(&sb.root, &data_link).expect("symlink");
    let served = start(&sb, &model.base_url(), &[]).await;
    let mut tally = Tally::default();
    let create = |cwd: String| {
        call(&served, Method::POST, "/v1/threads", None, Some("tester"))
            .json(&json!({"agent": "chat", "cwd": cwd}))
    };
    let (status, text) = send(create(sb.workspace.display().to_string())).await;
    assert_eq!(status, 201, "a workspace inside the root: {text}");
    let hidden = outside.path().display().to_string();
    for (name, cwd) in [
        ("root of the filesystem", "/".to_owned()),
        ("/etc", "/etc".to_owned()),
        ("/tmp", "/tmp".to_owned()),
        ("another temp dir", hidden.clone()),
        (
            "a symlink inside pointing outside",
            inside_link.display().to_string(),
        ),
        (
            "the data and config directory",
            sb.root.display().to_string(),
        ),
        (
            "a symlink to the data directory",
            data_link.display().to_string(),
        ),
        (
            "dot-dot out of the root",
            format!("{}/../..", sb.workspace.display()),
        ),
        (
            "the root's parent",
            sb.root.parent().expect("parent").display().to_string(),
        ),
    ] {
        let (status, text) = send(create(cwd.clone())).await;
        refused(&mut tally, status, &text, 400, "INVALID_ARGUMENT", name);
        assert!(
            !text.contains(&hidden) && !text.contains("/tmp/"),
            "{name}: {text}"
        );
        let (status, text) = send(
            call(
                &served,
                Method::POST,
                "/v1/executions",
                None,
                Some("tester"),
            )
            .json(&json!({"agent": "chat", "input": "hi", "cwd": cwd})),
        )
        .await;
        refused(
            &mut tally,
            status,
            &text,
            400,
            "INVALID_ARGUMENT",
            &format!("execution: {name}"),
        );
    }
    let (status, text) = send(create(sb.workspace.display().to_string())).await;
    assert_eq!(status, 201, "{text}");
    tally.report("workspace-roots");
}

/// A JWKS endpoint on 127.0.0.1 whose key set can be swapped (a rotation), counting
/// the fetches.
struct Jwks {
    url: String,
    body: std::sync::Arc<std::sync::Mutex<String>>,
    hits: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Jwks {
    async fn serve(body: String) -> Jwks {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/jwks.json", listener.local_addr().expect("addr"));
        let body = std::sync::Arc::new(std::sync::Mutex::new(body));
        let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (served, counted) = (body.clone(), hits.clone());
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let text = served.lock().expect("body").clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let _ = socket.read(&mut buf).await;
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n{text}",
                        text.len()
                    );
                    let _ = socket.write_all(answer.as_bytes()).await;
                });
            }
        });
        Jwks { url, body, hits }
    }

    fn hits(&self) -> usize {
        self.hits.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// OIDC sign-in (`[auth.oidc]`): tokens minted by PyJWT against a JWKS served on
/// 127.0.0.1. A valid RS256 or ES256 token acts as its `sub`, with its roles; a wrong
/// audience or issuer, an expired or not-yet-valid token, `alg: none`, HS256 signed
/// with the public key, a tampered payload, another key's signature and an
/// algorithm that does not match the key are 401; a key rotated in is fetched on its
/// first token, and a flood of unknown `kid`s fetches the set at most once a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oidc_tokens_from_a_third_party_library_are_verified() {
    let issuer = "https://id.example.test";
    let audience = "agentplane-tests";
    let minted = std::process::Command::new(agentplane_testkit::peers::python())
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testkit/peers/mint_jwts.py"))
        .args([issuer, audience])
        .output()
        .expect("python");
    assert!(
        minted.status.success(),
        "{}",
        String::from_utf8_lossy(&minted.stderr)
    );
    let minted: Value = serde_json::from_slice(&minted.stdout).expect("minted JSON");
    let jwks = Jwks::serve(minted["jwks_before"].to_string()).await;
    let model = ScriptedServer::start(Scenario::new(vec![Step::text("hi")]).repeating(true))
        .await
        .expect("model");
    let sb = sandbox(&format!(
        "[auth.oidc]\nissuer = \"{issuer}\"\naudience = \"{audience}\"\njwks_url = \"{}\"\n",
        jwks.url
    ));
    let served = start(&sb, &model.base_url(), &[]).await;
    let mut tally = Tally::default();
    let token = |name: &str| minted[name].as_str().expect(name).to_owned();

    let (status, text) = send(call(
        &served,
        Method::GET,
        "/v1/threads",
        None,
        Some("alice"),
    ))
    .await;
    refused(
        &mut tally,
        status,
        &text,
        401,
        "UNAUTHORIZED",
        "no token, OIDC configured",
    );
    let valid = token("valid");
    let (status, text) = send(
        call(&served, Method::POST, "/v1/threads", Some(&valid), None)
            .json(&json!({"agent": "chat", "cwd": sb.workspace})),
    )
    .await;
    assert_eq!(status, 201, "a valid RS256 token: {text}");
    let thread: Value = serde_json::from_str(&text).expect("json");
    let (status, text) = send(call(
        &served,
        Method::GET,
        &format!("/v1/threads/{}", thread["id"].as_str().expect("id")),
        Some(&valid),
        Some("alice"),
    ))
    .await;
    assert_eq!(status, 200, "the token acts as its subject: {text}");
    let (status, text) = send(call(
        &served,
        Method::GET,
        "/v1/threads",
        Some(&valid),
        Some("bob"),
    ))
    .await;
    refused(
        &mut tally,
        status,
        &text,
        403,
        "FORBIDDEN",
        "a token naming another client",
    );
    let es = token("valid_es256");
    let (status, text) = send(call(&served, Method::GET, "/v1/approvals", Some(&es), None)).await;
    assert_eq!(
        status, 200,
        "a valid ES256 token with the approver role: {text}"
    );
    let (status, text) = send(call(&served, Method::GET, "/v1/threads", Some(&es), None)).await;
    refused(
        &mut tally,
        status,
        &text,
        403,
        "FORBIDDEN",
        "an approver token reading threads",
    );

    for (name, bad) in minted["bad"].as_object().expect("bad tokens") {
        let bad = bad.as_str().expect("token");
        let (status, text) = send(call(&served, Method::GET, "/v1/threads", Some(bad), None)).await;
        refused(&mut tally, status, &text, 401, "UNAUTHORIZED", name);
        assert!(!text.contains(bad), "{name}: the answer echoes the token");
    }

    // A rotation: the new key's token is refused until the provider publishes it, then
    // fetched on its first use.
    let rotated = token("rotated");
    let (status, text) = send(call(
        &served,
        Method::GET,
        "/v1/threads",
        Some(&rotated),
        None,
    ))
    .await;
    refused(
        &mut tally,
        status,
        &text,
        401,
        "UNAUTHORIZED",
        "a key not yet published",
    );
    *jwks.body.lock().expect("body") = minted["jwks_after"].to_string();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let before = jwks.hits();
    let (status, text) = send(call(
        &served,
        Method::GET,
        "/v1/threads",
        Some(&rotated),
        None,
    ))
    .await;
    assert_eq!(
        status, 200,
        "the rotated key is fetched and accepted: {text}"
    );
    assert_eq!(jwks.hits(), before + 1, "one fetch for the new kid");
    let (status, text) = send(call(
        &served,
        Method::GET,
        "/v1/threads",
        Some(&valid),
        None,
    ))
    .await;
    refused(
        &mut tally,
        status,
        &text,
        401,
        "UNAUTHORIZED",
        "a token of the retired key",
    );

    // A flood of made-up kids: refused, and the provider asked at most once a second.
    let started = std::time::Instant::now();
    let before = jwks.hits();
    for kid_token in minted["unknown_kids"].as_array().expect("kids") {
        let (status, text) = send(call(
            &served,
            Method::GET,
            "/v1/threads",
            kid_token.as_str(),
            None,
        ))
        .await;
        assert_eq!(status, 401, "{text}");
    }
    let fetched = jwks.hits() - before;
    let allowed = 1 + started.elapsed().as_secs() as usize;
    assert!(
        fetched <= allowed,
        "{fetched} fetches in {:?}",
        started.elapsed()
    );
    tally.case(true);
    println!(
        "identity-figures oidc: 20 unknown kids in {:?} fetched the key set {fetched} time(s)",
        started.elapsed()
    );
    let log = served.stderr();
    for secret in [&valid, &es, &rotated] {
        let signature = secret.rsplit('.').next().expect("signature");
        assert!(!log.contains(signature), "the log holds a token");
    }
    tally.report("oidc");
}
