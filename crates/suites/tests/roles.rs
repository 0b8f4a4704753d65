//! The role table of `docs/identity.md` against the real binary (the API test
//! `crates/server/tests/api/roles.rs` reads the same table in process, with ids of
//! nothing): one key per access role (admin, operator, approver, viewer, all of one
//! client, made by `agentplane keys create`), every route of `/openapi.json` plus
//! `/mcp` (`tools/list`, `tools/call`), `/openai/v1` and `/metrics`, each called with
//! each key, and the answer compared with the table between
//! `<!-- route-roles:begin -->` and `<!-- route-roles:end -->` (✓: not `403`).
//!
//! What is compared is `403` against anything else. A `403` must name the missing
//! role (`needs the … role`), so a refusal for another reason does not pass for a role
//! check. Path parameters are real where the suite makes the thing cheaply — the
//! thread, its turn, the agent and its version, a spare key (revoked on the way) —
//! and well-formed ids of nothing for a permission, an approval and an execution:
//! the hub checks the role before it looks anything up, so `404` there means "let
//! through the role check", and a refused role still gets `403`. Bodies are `{}`
//! (an allowed caller gets its `400`; a refused one its `403`, whatever it sent),
//! except the gateway's chat call, which is a real one. A route of the document
//! missing from the table, or a row of the table naming no route, fails the suite.

use std::collections::BTreeSet;
use std::time::Duration;

use agentplane_suites::mcp::{mcp_request, mcp_session};
use agentplane_suites::{Sandbox, Served, SseReader, sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use reqwest::Method;
use serde_json::{Value, json};

/// The roles, in the table's column order.
const ROLES: [&str; 4] = ["admin", "operator", "approver", "viewer"];

/// The rows of the table that are not OpenAPI routes.
const BEYOND_THE_DOCUMENT: [(&str, &str); 5] = [
    ("POST", "/mcp tools/list"),
    ("POST", "/mcp tools/call"),
    ("GET", "/openai/v1/models"),
    ("POST", "/openai/v1/chat/completions"),
    ("GET", "/metrics"),
];

/// Well-formed ids of nothing (the hub answers `404` once the role lets it look).
const NO_PERMISSION: &str = "perm_0190f3a1b2c37d4e8f9a0b1c2d3e4f50";
const NO_APPROVAL: &str = "apr_0190f3a1b2c37d4e8f9a0b1c2d3e4f50";
const NO_EXECUTION: &str = "exec_0190f3a1b2c37d4e8f9a0b1c2d3e4f50";

/// One row of the table: a route and, per role, whether it gets past the role check.
#[derive(Debug)]
struct Row {
    method: String,
    path: String,
    allowed: [bool; 4],
}

/// The table between the markers of `docs/identity.md`.
fn role_table() -> Vec<Row> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/identity.md");
    let text = std::fs::read_to_string(path).expect("docs/identity.md");
    let begin = text
        .find("<!-- route-roles:begin -->")
        .expect("the table's begin marker");
    let end = text
        .find("<!-- route-roles:end -->")
        .expect("the table's end marker");
    let mut rows = Vec::new();
    for line in text[begin..end].lines().skip(1) {
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        if cells.len() != 6 {
            panic!("a row of the role table has not 6 cells: {line:?}");
        }
        if cells[0] == "method" || cells[0].starts_with("---") {
            continue;
        }
        let mut allowed = [false; 4];
        for (i, cell) in cells[2..].iter().enumerate() {
            allowed[i] = match *cell {
                "✓" => true,
                "✗" => false,
                other => panic!("a role cell is ✓ or ✗, not {other:?}: {line:?}"),
            };
        }
        rows.push(Row {
            method: cells[0].to_owned(),
            // `/mcp` `tools/list` → /mcp tools/list
            path: cells[1].replace('`', ""),
            allowed,
        });
    }
    rows
}

/// `agentplane keys create` before the server holds the file: the secret.
fn cli_key(sb: &Sandbox, client: &str, role: &str) -> String {
    agentplane_suites::cli_key(sb, client, &[role])
}

fn call(served: &Served, method: Method, path: &str, key: &str) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .request(method, format!("{}{path}", served.base))
        .bearer_auth(key)
        .header("Accept", "application/json, text/event-stream")
        // A bound against a hung server, not a measurement.
        .timeout(Duration::from_secs(60))
}

/// Status and body; an event stream (a route that follows a thread) is not read.
async fn send(request: reqwest::RequestBuilder) -> (u16, String) {
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let streaming = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"));
    if streaming {
        return (status, String::from("(an event stream)"));
    }
    (status, response.text().await.unwrap_or_default())
}

/// Whether an MCP answer is a refusal naming a role: a `FORBIDDEN` tool result
/// (`tools/call`) or a JSON-RPC error whose data says `FORBIDDEN` (`tools/list`).
fn mcp_refused(answer: &Value) -> bool {
    let in_error = answer["error"]["data"]["code"] == "FORBIDDEN";
    let in_result = answer["result"]["isError"] == true
        && answer["result"]["content"][0]["text"]
            .as_str()
            .and_then(|text| serde_json::from_str::<Value>(text).ok())
            .is_some_and(|body| body["code"] == "FORBIDDEN");
    (in_error || in_result) && answer.to_string().contains("role")
}

/// The fixtures a path's parameters name.
struct Ids {
    thread: String,
    turn: String,
    version: String,
    spare_key: String,
}

/// `path` with its parameters replaced by `ids`; a parameter the suite does not know
/// fails it (a new route needs a line here).
fn resolve(path: &str, ids: &Ids) -> String {
    let id = if path.starts_with("/v1/threads/") {
        ids.thread.as_str()
    } else if path.starts_with("/v1/turns/") {
        ids.turn.as_str()
    } else if path.starts_with("/v1/permissions/") {
        NO_PERMISSION
    } else if path.starts_with("/v1/approvals/") {
        NO_APPROVAL
    } else if path.starts_with("/v1/executions/") {
        NO_EXECUTION
    } else if path.starts_with("/v1/keys/") {
        ids.spare_key.as_str()
    } else {
        ""
    };
    let resolved = path
        .replace("{id}", id)
        .replace("{agent}", "chat")
        .replace("{version}", &ids.version)
        // No pinned tool: an allowed role gets 404, a refused one 403 first.
        .replace("{server}", "nowhere")
        .replace("{tool}", "nothing");
    assert!(
        !resolved.contains('{') && !resolved.contains("//"),
        "the suite does not know a parameter of {path}: add it to `resolve`"
    );
    resolved
}

/// Compares one answer with the table; a difference is one line of the report.
fn judge(route: &str, role: &str, allowed: bool, status: u16, text: &str, wrong: &mut Vec<String>) {
    let refused_by_role = status == 403 && text.contains("role");
    let ok = if allowed {
        status != 403 && status != 401
    } else {
        refused_by_role
    };
    if !ok {
        let expected = if allowed {
            "not 403"
        } else {
            "403 naming a role"
        };
        let body: String = text.chars().take(300).collect();
        wrong.push(format!(
            "{route} as {role}: expected {expected}, got {status}: {body}"
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_each_role_as_the_role_table_says() {
    let table = role_table();
    let model = ScriptedServer::start(Scenario::new(vec![Step::text("done")]).repeating(true))
        .await
        .expect("model");
    let url = model.base_url();
    let sb = sandbox("");
    // Made by the CLI, through the runtime, before the server locks the file. One
    // client for all, so every id resolves for every role.
    let keys: Vec<String> = ROLES
        .iter()
        .map(|role| cli_key(&sb, "team", role))
        .collect();
    // A key of its own for the revoke route to revoke.
    cli_key(&sb, "spare", "viewer");
    let served = start(&sb, &url, &[]).await;
    let (admin, operator) = (&keys[0], &keys[1]);

    // The fixtures, by the operator (and the admin for what only it may read).
    let (status, text) = send(
        call(&served, Method::POST, "/v1/threads", operator)
            .json(&json!({"agent": "chat", "cwd": sb.workspace})),
    )
    .await;
    assert_eq!(status, 201, "{text}");
    let thread = serde_json::from_str::<Value>(&text).expect("thread")["id"]
        .as_str()
        .expect("thread id")
        .to_owned();
    let response = call(
        &served,
        Method::POST,
        &format!("/v1/threads/{thread}/turns"),
        operator,
    )
    .json(&json!({"input": "hello"}))
    .send()
    .await
    .expect("turn");
    assert_eq!(response.status(), 200, "{}", served.stderr());
    let events = SseReader::from_response(response)
        .until("turn_completed")
        .await;
    let turn = events
        .iter()
        .find_map(|e| e.data["turn_id"].as_str())
        .expect("a turn id")
        .to_owned();
    let (status, text) = send(call(
        &served,
        Method::GET,
        "/v1/agents/chat/versions",
        admin,
    ))
    .await;
    assert_eq!(status, 200, "{text}");
    let version = serde_json::from_str::<Value>(&text).expect("versions")["versions"][0]["version"]
        .as_str()
        .unwrap_or("1.0.0")
        .to_owned();
    let (status, text) = send(call(&served, Method::GET, "/v1/keys", admin)).await;
    assert_eq!(status, 200, "{text}");
    let listed: Value = serde_json::from_str(&text).expect("keys");
    let spare_key = listed["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .find(|k| k["client"] == "spare")
        .and_then(|k| k["id"].as_str())
        .expect("the spare key")
        .to_owned();
    let ids = Ids {
        thread,
        turn,
        version,
        spare_key,
    };

    // The document and the table name the same routes.
    let (status, text) = send(call(&served, Method::GET, "/openapi.json", admin)).await;
    assert_eq!(status, 200, "{text}");
    let document: Value = serde_json::from_str(&text).expect("the OpenAPI document");
    let mut routes = Vec::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for method in ["get", "post", "put", "patch", "delete"] {
            if item.get(method).is_some() {
                routes.push((method.to_uppercase(), path.clone()));
            }
        }
    }
    let in_document: BTreeSet<(String, String)> = routes.iter().cloned().collect();
    let beyond: BTreeSet<(String, String)> = BEYOND_THE_DOCUMENT
        .iter()
        .map(|(m, p)| ((*m).to_owned(), (*p).to_owned()))
        .collect();
    let in_table: BTreeSet<(String, String)> = table
        .iter()
        .map(|row| (row.method.clone(), row.path.clone()))
        .collect();
    assert_eq!(in_table.len(), table.len(), "a route is twice in the table");
    let missing: Vec<_> = in_document.difference(&in_table).collect();
    assert!(
        missing.is_empty(),
        "routes of /openapi.json missing from the role table in docs/identity.md: {missing:?}"
    );
    let unknown: Vec<_> = in_table
        .difference(&in_document)
        .filter(|route| !beyond.contains(*route))
        .collect();
    assert!(
        unknown.is_empty(),
        "rows of the role table that name no route of /openapi.json: {unknown:?}"
    );
    let absent: Vec<_> = beyond.difference(&in_table).collect();
    assert!(
        absent.is_empty(),
        "rows missing from the role table: {absent:?}"
    );

    // Every route with every key. What deletes or revokes goes last, so the rest
    // still finds its thread.
    let mut wrong = Vec::new();
    let mut rows: Vec<&Row> = table.iter().collect();
    rows.sort_by_key(|row| row.method == "DELETE" || row.path.ends_with("/revoke"));
    let mut checked = 0;
    for row in rows {
        let route = format!("{} {}", row.method, row.path);
        for (i, role) in ROLES.iter().enumerate() {
            let key = &keys[i];
            let allowed = row.allowed[i];
            if row.path.starts_with("/mcp ") {
                let session = mcp_session(&served, key).await;
                let answer = if row.path.ends_with("tools/list") {
                    mcp_request(&served, key, &session, 7, "tools/list", json!({})).await
                } else {
                    let arguments = json!({"task": "say hi", "workspace": sb.workspace});
                    let params = json!({"name": "chat", "arguments": arguments});
                    mcp_request(&served, key, &session, 7, "tools/call", params).await
                };
                let refused = mcp_refused(&answer);
                if refused == allowed {
                    let expected = if allowed { "an answer" } else { "FORBIDDEN" };
                    wrong.push(format!(
                        "{route} as {role}: expected {expected}, got {answer}"
                    ));
                }
                checked += 1;
                continue;
            }
            let method = Method::from_bytes(row.method.as_bytes()).expect("a method");
            let path = resolve(&row.path, &ids);
            let mut request = call(&served, method.clone(), &path, key);
            if row.path == "/openai/v1/chat/completions" {
                request = request.json(&json!({
                    "model": "scripted-model",
                    "messages": [{"role": "user", "content": "hi"}]
                }));
            } else if method != Method::GET && method != Method::DELETE {
                request = request.json(&json!({}));
            }
            let (status, text) = send(request).await;
            judge(&route, role, allowed, status, &text, &mut wrong);
            checked += 1;
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {checked} answers differ from the role table in docs/identity.md:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert_eq!(checked, table.len() * ROLES.len());
}
