//! Cross-tenant access on every endpoint: `/openapi.json` is enumerated, and every
//! operation on a path naming one of alice's objects (thread, turn, approval,
//! permission, execution, shadow list) is tried as mallory. Each answer is the same
//! `404 NOT_FOUND` an unknown id gets, nothing of alice's shows in any of mallory's
//! answers, and alice's objects are untouched afterwards.

use std::collections::BTreeMap;

use agentplane_suites::attacks::{Tally, assert_envelope};
use agentplane_suites::{SseReader, sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use reqwest::Method;
use serde_json::{Value, json};

const ALICE: &str = "tester"; // the harness's client
const MALLORY: &str = "mallory";
/// Text only alice's turns carry.
const PRIVATE: &str = "alice-private-3c9d";

const CONFIG: &str = "[agents.guarded]\nsystem_prompt = \"You list files.\"\nensembles = [\"fs\"]\n\
    [policies]\ndir = \"policies\"\nreload_interval_ms = 60000\n\
    [executions]\nworkers = 1\npoll_interval_ms = 20\n";
const REVIEW: &str = "name: review\ntype: approval_required\ntargets: {agents: [guarded]}\nrules: {tools: [list_files]}\n";

/// Alice's objects, by the path parameter that names them.
struct Owned {
    thread: String,
    turn: String,
    approval: String,
    permission: String,
    execution: String,
}

/// What a path's `{id}` stands for, or `None` for a path naming nothing of a client's
/// (lists, creation, global resources): those are checked for what they show instead.
fn id_for<'a>(path: &str, owned: &'a Owned) -> Option<&'a str> {
    let kind = path.strip_prefix("/v1/")?.split('/').next()?;
    // Keys belong to no client: they are the admins' (the identity group tests them).
    if !path.contains("{id}") || kind == "keys" {
        return None;
    }
    Some(match kind {
        "threads" => &owned.thread,
        "turns" => &owned.turn,
        "approvals" => &owned.approval,
        "permissions" => &owned.permission,
        "executions" => &owned.execution,
        other => panic!("{path}: a per-object path of unknown kind {other:?}; classify it"),
    })
}

/// A valid body for the operation, so a 404 is not masked by a 400.
fn body_for(path: &str) -> Value {
    if path.ends_with("/turns") {
        json!({"input": "mine now"})
    } else if path.starts_with("/v1/permissions/") {
        json!({"decision": "approved"})
    } else if path.starts_with("/v1/approvals/") {
        json!({"decision": "approve"})
    } else {
        json!({})
    }
}

/// Paths that name no client's object; each must be listed here so a new endpoint
/// is classified by whoever adds it.
const SHARED: &[&str] = &[
    "/healthz",
    "/openapi.json",
    "/v1/agents",
    "/v1/agents/{agent}/versions",
    "/v1/agents/{agent}/versions/{version}",
    "/v1/agents/{agent}/versions/{version}/promote",
    "/v1/agents/{agent}/traffic",
    "/v1/agents/{agent}/traffic/rollback",
    "/v1/agents/{agent}/shadow",
    "/v1/policies",
    // Decides a request against the global policy set; stores and reads nothing.
    "/v1/policies/explain",
    "/v1/costs",
    // The calling client's MCP gateway calls only (tested in `mcp_gateway.rs`).
    "/v1/mcp/calls",
    // Upstream tools' pinned definitions: configuration, not a client's object (listing
    // needs `viewer`, approving `admin`; tested in `mcp_pins.rs`).
    "/v1/mcp/tools",
    // The gateway's upstreams as this replica sees them: configuration, not an object.
    "/v1/mcp/servers",
    "/v1/mcp/tools/{server}/{tool}/approve",
    "/v1/threads",
    "/v1/approvals",
    "/v1/executions",
    "/v1/keys",
    "/v1/keys/{id}/revoke",
];

async fn as_client(
    served: &agentplane_suites::Served,
    client: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, String) {
    let mut request = reqwest::Client::new()
        .request(method, format!("{}{path}", served.base))
        .header("X-Client-ID", client);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_clients_objects_are_404_on_every_endpoint() {
    let model = ScriptedServer::start(Scenario::new(vec![
        // alice's chat turn
        Step::text(PRIVATE),
        // alice's `careful` turn asks permission for list_files and waits
        Step::tool_call("list_files", json!({})),
        // alice's `guarded` turn waits for an approval
        Step::tool_call("list_files", json!({})),
        // alice's execution
        Step::text(PRIVATE),
        // the `careful` turn after alice declined
        Step::text("declined"),
    ]))
    .await
    .expect("model");
    let sb = sandbox(CONFIG);
    std::fs::create_dir(sb.root.join("policies")).expect("policies");
    std::fs::write(sb.root.join("policies/review.yaml"), REVIEW).expect("policy");
    let served = start(&sb, &model.base_url(), &[]).await;

    // Alice's objects.
    let thread = agentplane_suites::create_thread(&served, &sb, "chat", PRIVATE).await;
    let mut sse = SseReader::open(&served, &thread, PRIVATE).await;
    let streamed = sse.until("turn_completed").await;
    let turn = streamed[0].data["turn_id"]
        .as_str()
        .expect("turn id")
        .to_owned();
    let careful = agentplane_suites::create_thread(&served, &sb, "careful", "perm").await;
    let mut waiting = SseReader::open(&served, &careful, "list").await;
    let asked = waiting.until("permission_required").await;
    let permission = asked.last().expect("event").data["permission_id"]
        .as_str()
        .expect("permission id")
        .to_owned();
    let guarded = agentplane_suites::create_thread(&served, &sb, "guarded", "appr").await;
    let mut held = SseReader::open(&served, &guarded, "list").await;
    let requested = held.until("approval_requested").await;
    let approval = requested.last().expect("event").data["approval_id"]
        .as_str()
        .expect("approval id")
        .to_owned();
    let (status, body) = as_client(
        &served,
        ALICE,
        Method::POST,
        "/v1/executions",
        Some(json!({"agent": "chat", "input": PRIVATE})),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let execution = serde_json::from_str::<Value>(&body).expect("json")["id"]
        .as_str()
        .expect("execution id")
        .to_owned();
    let owned = Owned {
        thread,
        turn,
        approval,
        permission,
        execution,
    };
    let alice_ids = [
        &owned.thread,
        &owned.turn,
        &owned.approval,
        &owned.permission,
        &owned.execution,
        &careful,
        &guarded,
    ];

    // Every operation of the API, from its own document.
    let (status, doc) = as_client(&served, MALLORY, Method::GET, "/openapi.json", None).await;
    assert_eq!(status, 200);
    let doc: Value = serde_json::from_str(&doc).expect("openapi");
    let mut operations: BTreeMap<String, Vec<Method>> = BTreeMap::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in ["get", "post", "put", "patch", "delete"] {
            if item.get(method).is_some() {
                operations
                    .entry(path.clone())
                    .or_default()
                    .push(method.to_uppercase().parse().expect("method"));
            }
        }
    }
    assert!(
        operations.len() >= 20,
        "the document lists the API: {operations:?}"
    );

    let mut tally = Tally::default();
    let mut answers = Vec::new();
    for (path, methods) in &operations {
        let Some(id) = id_for(path, &owned) else {
            assert!(
                SHARED.contains(&path.as_str()),
                "{path} is neither per-object nor listed as shared: classify it"
            );
            continue;
        };
        for method in methods {
            let body = (*method != Method::GET).then(|| body_for(path));
            let real = path.replace("{id}", id);
            let (status, text) =
                as_client(&served, MALLORY, method.clone(), &real, body.clone()).await;
            assert_eq!(status, 404, "{method} {real} as mallory: {text}");
            assert_envelope(&text, "NOT_FOUND");
            // The same answer as for an id that does not exist: no existence oracle.
            let unknown = unknown_like(id);
            let (unknown_status, unknown_text) = as_client(
                &served,
                MALLORY,
                method.clone(),
                &path.replace("{id}", &unknown),
                body,
            )
            .await;
            assert_eq!(unknown_status, 404, "{method} {path} with an unknown id");
            assert_eq!(
                text.replace(id, "ID"),
                unknown_text.replace(&unknown, "ID"),
                "{method} {path}: another client's object answers unlike a missing one"
            );
            // An error may name the id it was asked about; nothing else of alice's.
            answers.push(text.replace(id, "ID"));
            tally.case(true);
        }
    }
    // Alice's id under another spelling of her client id is someone else.
    for client in ["Tester", "TESTER", "tester.", "tester@"] {
        let (status, text) = as_client(
            &served,
            client,
            Method::GET,
            &format!("/v1/threads/{}", owned.thread),
            None,
        )
        .await;
        assert_eq!(status, 404, "{client}: {text}");
        answers.push(text.replace(&owned.thread, "ID"));
        tally.case(true);
    }
    // Client ids that are not ids at all.
    // (Spaces around a header value are not part of it in HTTP: ` tester ` is tester.)
    for client in [
        "",
        "tes ter",
        "tester,mallory",
        "*",
        "../tester",
        "tester;x",
    ] {
        let (status, text) = as_client(
            &served,
            client,
            Method::GET,
            &format!("/v1/threads/{}", owned.thread),
            None,
        )
        .await;
        assert_eq!(status, 400, "{client:?}: {text}");
        assert_envelope(&text, "INVALID_ARGUMENT");
        tally.case(true);
    }
    // Lists and shared resources show mallory nothing of alice's.
    for path in [
        "/v1/threads",
        "/v1/approvals",
        "/v1/executions",
        "/v1/costs",
        "/v1/agents",
        "/v1/policies",
    ] {
        let (status, text) = as_client(&served, MALLORY, Method::GET, path, None).await;
        assert_eq!(status, 200, "{path}: {text}");
        answers.push(text);
        tally.case(true);
    }
    for answer in &answers {
        assert!(
            !answer.contains(PRIVATE),
            "mallory saw alice's text: {answer}"
        );
        for id in alice_ids {
            assert!(
                !answer.contains(id.as_str()),
                "mallory saw alice's id {id}: {answer}"
            );
        }
    }

    // Alice's objects are as she left them: mallory decided, cancelled, deleted nothing.
    let (status, text) = as_client(
        &served,
        ALICE,
        Method::GET,
        &format!("/v1/approvals/{}", owned.approval),
        None,
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains("\"pending\""),
        "the approval is still pending: {text}"
    );
    let (status, text) = as_client(
        &served,
        ALICE,
        Method::POST,
        &format!("/v1/permissions/{}", owned.permission),
        Some(json!({"decision": "declined"})),
    )
    .await;
    assert!(
        (200..300).contains(&status),
        "alice still decides her permission: {status} {text}"
    );
    let resolved = waiting.until("permission_resolved").await;
    assert_eq!(
        resolved.last().expect("event").data["decision"],
        "declined",
        "mallory's `approved` did not count"
    );
    let (status, text) = as_client(
        &served,
        ALICE,
        Method::GET,
        &format!("/v1/threads/{}", owned.thread),
        None,
    )
    .await;
    assert_eq!(
        status, 200,
        "alice's thread survived mallory's DELETE: {text}"
    );
    let (status, text) = as_client(
        &served,
        ALICE,
        Method::GET,
        &format!("/v1/executions/{}", owned.execution),
        None,
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert!(
        !text.contains("\"cancelled\""),
        "mallory cancelled it: {text}"
    );
    drop(held);
    tally.report("tenancy");
}

/// An id of the same shape as `id` that names nothing: the same prefix, the last
/// twelve hex digits shifted.
fn unknown_like(id: &str) -> String {
    let keep = id.len().saturating_sub(12);
    let shifted: String = id[keep..]
        .chars()
        .map(|c| match c {
            '0'..='8' | 'a'..='e' => char::from(c as u8 + 1),
            '9' => 'a',
            'f' => '0',
            other => other,
        })
        .collect();
    format!("{}{shifted}", &id[..keep])
}
