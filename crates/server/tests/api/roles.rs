//! The role table of `docs/identity.md` against the server: one API key per access
//! role, every route of `/openapi.json` plus `/metrics`, `/openai/v1` and `/mcp`, each
//! asked by each key. A route whose answer is `403` for a role the table allows, or
//! anything else for a role it refuses, fails the test with the route, the role and
//! both answers; so does a route of the document the table does not name, or a row
//! naming a route the document does not have.
//!
//! Path ids are well-formed but unknown (the role is checked before the id is looked
//! up, so an allowed role gets `404`, a refused one `403`), and bodies are `{}` (the
//! role is checked before the body is read), so no allowed request changes anything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use agentplane_core::{ApprovalId, ExecutionId, KeyId, PermissionId, ThreadId, TurnId};
use agentplane_testkit::{Scenario, Step};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::harness::{Api, Setup, TOKEN};

const ROLES: [&str; 4] = ["admin", "operator", "approver", "viewer"];

/// `(method, route)` → whether each role of [`ROLES`] passes the role check.
type Table = BTreeMap<(String, String), [bool; 4]>;

/// The table between the `route-roles` markers of `docs/identity.md`.
fn role_table() -> Table {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/identity.md");
    let text = std::fs::read_to_string(&doc).expect("docs/identity.md");
    let start = text
        .find("<!-- route-roles:begin -->")
        .expect("the route-roles:begin marker");
    let end = text
        .find("<!-- route-roles:end -->")
        .expect("the route-roles:end marker");
    let mut table = Table::new();
    for line in text[start..end].lines().filter(|l| l.starts_with("| ")) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let [method, route, marks @ ..] = cells.as_slice() else {
            continue;
        };
        if *method == "method" || method.starts_with("---") {
            continue;
        }
        assert_eq!(marks.len(), 4, "a row needs one mark per role: {line}");
        let allowed = std::array::from_fn(|i| match marks[i] {
            "✓" => true,
            "✗" => false,
            other => panic!("`{other}` is neither ✓ nor ✗ in: {line}"),
        });
        let route = route.replace('`', "");
        let previous = table.insert((method.to_string(), route.clone()), allowed);
        assert!(previous.is_none(), "{method} {route} is in the table twice");
    }
    assert!(table.len() > 30, "the table was not read: {table:?}");
    table
}

/// A concrete path for a route of the document: unknown but well-formed ids.
fn concrete(route: &str) -> String {
    let id = if route.starts_with("/v1/threads/") {
        ThreadId::new().to_string()
    } else if route.starts_with("/v1/turns/") {
        TurnId::new().to_string()
    } else if route.starts_with("/v1/approvals/") {
        ApprovalId::new().to_string()
    } else if route.starts_with("/v1/executions/") {
        ExecutionId::new().to_string()
    } else if route.starts_with("/v1/keys/") {
        KeyId::new().to_string()
    } else {
        PermissionId::new().to_string()
    };
    route
        .replace("{agent}", "chat")
        .replace("{version}", "9.9.9")
        .replace("{id}", &id)
}

/// A request with no credential and no client id: each call adds its own.
fn raw(api: &Api, method: Method, path: &str) -> reqwest::RequestBuilder {
    api.http.request(method, api.url(path))
}

/// Creates one key per role with the token; returns their secrets in [`ROLES`] order.
async fn keys(api: &Api) -> [String; 4] {
    let mut secrets = Vec::new();
    for role in ROLES {
        let answer = api
            .send(
                raw(api, Method::POST, "/v1/keys")
                    .bearer_auth(TOKEN)
                    .header("X-Client-ID", "setup")
                    .json(&json!({"client": format!("{role}-client"), "roles": [role]})),
            )
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
        secrets.push(
            answer.body["secret"]
                .as_str()
                .expect("the key's secret")
                .to_owned(),
        );
    }
    secrets.try_into().expect("four keys")
}

/// The status of `method path` asked with `key` (`{}` as the body where one goes).
async fn status_of(api: &Api, key: &str, method: &str, path: &str) -> StatusCode {
    let method = Method::from_bytes(method.as_bytes()).expect("a method");
    let mut request = raw(api, method.clone(), path).bearer_auth(key);
    if path == "/openai/v1/chat/completions" {
        request = request.json(&json!({
            "model": "scripted-model",
            "messages": [{"role": "user", "content": "hi"}],
        }));
    } else if matches!(method, Method::POST | Method::PUT | Method::PATCH) {
        request = request.json(&json!({}));
    }
    let response = request.send().await.expect("request sent");
    let status = response.status();
    // Read to the end: an event stream of an allowed follower would stay open, but an
    // unknown thread ends it at once.
    let _ = response.bytes().await;
    status
}

/// Whether a JSON-RPC call over `/mcp` with `key` was refused by the role table: the
/// HTTP status, or a tool result with the code `FORBIDDEN`.
async fn mcp_refused(api: &Api, key: &str, call: Value) -> bool {
    let post = |body: Value, session: Option<&str>| {
        let mut request = raw(api, Method::POST, "/mcp")
            .bearer_auth(key)
            .header("Accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(session) = session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-06-18");
        }
        request.send()
    };
    let opened = post(
        json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "roles", "version": "0"}}
        }),
        None,
    )
    .await
    .expect("initialize");
    if opened.status() == StatusCode::FORBIDDEN {
        return true;
    }
    assert_eq!(opened.status(), StatusCode::OK, "initialize");
    let session = opened
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("a session id")
        .to_owned();
    let _ = opened.bytes().await;
    let initialized = post(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        Some(&session),
    )
    .await
    .expect("initialized");
    assert!(initialized.status().is_success());
    let answer = post(call, Some(&session)).await.expect("call");
    if answer.status() == StatusCode::FORBIDDEN {
        return true;
    }
    let text = answer.text().await.expect("body");
    assert!(
        text.contains("\"result\"") || text.contains("\"error\""),
        "{text}"
    );
    text.contains("FORBIDDEN")
}

#[tokio::test]
async fn every_route_answers_each_role_as_the_role_table_says() {
    let mut setup = Setup::new(Vec::new()).token(TOKEN);
    setup.scenario = Scenario::new(vec![Step::text("hello")]).repeating(true);
    let api = setup.start().await;
    let table = role_table();
    let secrets = keys(&api).await;

    let doc = api
        .send(raw(&api, Method::GET, "/openapi.json").bearer_auth(TOKEN))
        .await;
    assert_eq!(doc.status, StatusCode::OK);
    let mut documented = BTreeSet::new();
    for (route, operations) in doc.body["paths"].as_object().expect("paths") {
        for method in operations.as_object().expect("operations").keys() {
            if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                documented.insert((method.to_uppercase(), route.clone()));
            }
        }
    }
    let missing: Vec<_> = documented
        .iter()
        .filter(|route| !table.contains_key(*route))
        .collect();
    assert!(
        missing.is_empty(),
        "routes of /openapi.json missing from docs/identity.md's role table: {missing:?}"
    );

    let mut wrong = Vec::new();
    for ((method, route), allowed) in &table {
        for (i, role) in ROLES.iter().enumerate() {
            let refused = match route.as_str() {
                "/mcp tools/list" => {
                    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
                    mcp_refused(&api, &secrets[i], call).await
                }
                "/mcp tools/call" => {
                    let call = json!({
                        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "no-such-agent", "arguments": {"task": "x"}}
                    });
                    mcp_refused(&api, &secrets[i], call).await
                }
                _ => {
                    let known = documented.contains(&(method.clone(), route.clone()))
                        || [
                            "/metrics",
                            "/openai/v1/models",
                            "/openai/v1/chat/completions",
                        ]
                        .contains(&route.as_str());
                    assert!(known, "{method} {route} is in the table but is no route");
                    let path = concrete(route);
                    let status = status_of(&api, &secrets[i], method, &path).await;
                    assert_ne!(
                        status,
                        StatusCode::UNAUTHORIZED,
                        "{method} {path} as {role}"
                    );
                    status == StatusCode::FORBIDDEN
                }
            };
            if refused == allowed[i] {
                wrong.push(format!(
                    "{method} {route} as {role}: the table says {}, the server {}",
                    if allowed[i] { "allowed" } else { "403" },
                    if refused {
                        "refused (403)"
                    } else {
                        "let it past the role check"
                    },
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
