//! `GET /v1/policies` over real HTTP: the set in force with the file of each policy,
//! the latest failed reload (the previous set still listed), and the same bearer
//! token and client id as every `/v1` route.
//!
//! The hub here is built like the runtime's, on the harness's store and model, with a
//! `Governance` whose `ActivePolicies` holds a set parsed from YAML text; changes go
//! through the same `replace` / `reject` the policy watcher calls.

use std::sync::Arc;

use agentplane_core::policy::{PolicyError, PolicySet, PolicySource};
use agentplane_core::{AgentSpec, ThreadId};
use agentplane_engine::TurnDeps;
use agentplane_engine::governance::{ActivePolicies, Governance};
use agentplane_engine::hub::{Hub, HubConfig, Toolbox};
use agentplane_engine::ports::Ensemble;
use agentplane_server::{ServeOptions, serve};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::harness::{Api, PATIENCE, Setup, TOKEN};

const DIR: &str = "/etc/agentplane/policies";
const LOADED_AT: &str = "2026-11-23T10:00:00.000Z";

const EMAIL: &str = "\
# Customer-facing agents need a person before mail goes out.
name: customer-email-approval
type: approval_required
description: \"A \\\"person\\\" decides — über alles\"
targets:
  tags: [customer-facing]
rules:
  tools: [send_email]
  approvers: [lead@example.com]
";

const LIMITS: &str = "\
- name: github-rate
  type: rate_limit
  targets: {tools: ['mcp__github__*'], clients: [ci-bot]}
  rules: {window: 1m, max: 30}
- name: no-delete
  type: tool_access
  targets: {agents: [support]}
  rules: {deny: [mcp__github__delete_repo]}
";

fn parse(sources: &[(&str, &str)]) -> Result<PolicySet, Vec<PolicyError>> {
    let sources: Vec<PolicySource<'_>> = sources
        .iter()
        .map(|(name, text)| PolicySource { name, text })
        .collect();
    PolicySet::parse(&sources)
}

/// No tools: these tests run no turns.
struct NoTools;

impl Toolbox for NoTools {
    fn ensembles(&self, _: &AgentSpec, _: &ThreadId, _: &str) -> Vec<Arc<dyn Ensemble>> {
        Vec::new()
    }
}

/// A server whose hub's governance holds `policies`, next to the harness's server
/// (whose store, model and agents it shares).
struct PolicyServer {
    api: Api,
    base: String,
    stop: Option<oneshot::Sender<()>>,
    served: tokio::task::JoinHandle<Result<(), agentplane_server::ServeError>>,
}

impl PolicyServer {
    async fn start(policies: Arc<ActivePolicies>) -> Self {
        let api = Setup::new(vec![]).token(TOKEN).start().await;
        let deps = api.runtime.turn_deps();
        let services = Hub::builder(
            TurnDeps {
                store: deps.store.clone(),
                providers: deps.providers.clone(),
                governance: Arc::new(Governance {
                    policies,
                    ..Governance::default()
                }),
                workspace: deps.workspace.clone(),
            },
            api.runtime.agents().clone(),
            Arc::new(NoTools),
            HubConfig::default(),
        )
        .build();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (stop, stopped) = oneshot::channel::<()>();
        let served = tokio::spawn(serve(
            services,
            listener,
            ServeOptions {
                listen: addr,
                auth_token: Some(TOKEN.to_owned()),
                allow_public: false,
                shutdown_grace: std::time::Duration::from_secs(1),
                heartbeat: std::time::Duration::from_millis(100),
                metrics: None,
                executions: None,
                stop: None,
                connections: agentplane_server::ConnectionLimits::default(),
                followers: agentplane_server::FollowerLimits::default(),
                allowed_origins: agentplane_server::AllowedOrigins::default(),
                a2a: agentplane_server::A2aOptions::default(),
            },
            async move {
                let _ = stopped.await;
            },
        ));
        Self {
            api,
            base: format!("http://{addr}"),
            stop: Some(stop),
            served,
        }
    }

    fn request(&self, token: Option<&str>, client: Option<&str>) -> reqwest::RequestBuilder {
        let mut request = self
            .api
            .http
            .request(Method::GET, format!("{}/v1/policies", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(client) = client {
            request = request.header("X-Client-ID", client);
        }
        request
    }

    async fn list(&self) -> Value {
        let answer = self
            .api
            .send(self.request(Some(TOKEN), Some("alice")))
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
        answer.body
    }

    async fn shut_down(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(PATIENCE, self.served)
            .await
            .expect("serve returns")
            .expect("serve task")
            .expect("serve ends cleanly");
    }
}

fn loaded() -> Arc<ActivePolicies> {
    let set = parse(&[("email.yaml", EMAIL), ("limits.yaml", LIMITS)]).expect("valid");
    Arc::new(ActivePolicies::new(
        set,
        Some(DIR.to_owned()),
        LOADED_AT.to_owned(),
    ))
}

#[tokio::test]
async fn the_active_set_is_listed_with_sources_in_set_order() {
    let server = PolicyServer::start(loaded()).await;
    let body = server.list().await;
    assert_eq!(
        body,
        json!({
            "source": DIR,
            "loaded_at": LOADED_AT,
            "policies": [
                {
                    "name": "customer-email-approval",
                    "type": "approval_required",
                    "description": "A \"person\" decides — über alles",
                    "targets": {"agents": null, "tags": ["customer-facing"], "tools": null, "clients": null},
                    "summary": "customer-email-approval: approval_required [tags=customer-facing] tools send_email",
                    "source": "email.yaml",
                },
                {
                    "name": "github-rate",
                    "type": "rate_limit",
                    "description": null,
                    "targets": {"agents": null, "tags": null, "tools": ["mcp__github__*"], "clients": ["ci-bot"]},
                    "summary": "github-rate: rate_limit [tools=mcp__github__* clients=ci-bot] max 30 per 60s",
                    "source": "limits.yaml",
                },
                {
                    "name": "no-delete",
                    "type": "tool_access",
                    "description": null,
                    "targets": {"agents": ["support"], "tags": null, "tools": null, "clients": null},
                    "summary": "no-delete: tool_access [agents=support] allow * deny mcp__github__delete_repo",
                    "source": "limits.yaml",
                },
            ],
            "reload_error": null,
        })
    );
    // Policies are global: another client sees the same list.
    let bob = server
        .api
        .send(server.request(Some(TOKEN), Some("bob")))
        .await;
    assert_eq!(bob.body, body);
    server.shut_down().await;
}

#[tokio::test]
async fn a_failed_reload_is_reported_and_the_previous_set_stays_listed() {
    let active = loaded();
    let server = PolicyServer::start(active.clone()).await;
    let before = server.list().await;

    let errors = parse(&[
        ("email.yaml", EMAIL),
        (
            "limits.yaml",
            "name: x\ntype: rate_limit\nrules:\n  window: 1m\n  max: 0\n",
        ),
        (
            "z.yaml",
            "name: github-rate\ntype: budget\nrules: {usd: 1, period: day}\n",
        ),
    ])
    .expect_err("broken");
    active.reject(errors, "2026-11-23T11:00:00.000Z".to_owned());
    let body = server.list().await;
    assert_eq!(body["policies"], before["policies"]);
    assert_eq!(body["loaded_at"], LOADED_AT);
    assert_eq!(
        body["reload_error"],
        json!({
            "failed_at": "2026-11-23T11:00:00.000Z",
            "errors": [
                {"source": "limits.yaml", "line": 5, "field": "rules.max", "message": "must be at least 1"},
            ],
        }),
        "{body:#}"
    );

    // A directory-level failure (no line, no field) has the same shape.
    active.reject(
        vec![PolicyError {
            source: DIR.to_owned(),
            line: None,
            field: None,
            message: "cannot read policies directory: gone".to_owned(),
        }],
        "2026-11-23T11:30:00.000Z".to_owned(),
    );
    let body = server.list().await;
    assert_eq!(
        body["reload_error"]["errors"],
        json!([{"source": DIR, "line": null, "field": null, "message": "cannot read policies directory: gone"}])
    );

    // A later successful reload clears the error and lists the new set.
    let fixed = parse(&[(
        "only.yml",
        "name: only\ntype: data_scope\nrules: {hosts: [api.example.com]}\n",
    )])
    .expect("valid");
    active.replace(fixed, "2026-11-23T12:00:00.000Z".to_owned());
    let body = server.list().await;
    assert_eq!(body["reload_error"], Value::Null);
    assert_eq!(body["loaded_at"], "2026-11-23T12:00:00.000Z");
    let listed: Vec<(&str, &str, &str)> = body["policies"]
        .as_array()
        .expect("policies")
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap_or_default(),
                p["type"].as_str().unwrap_or_default(),
                p["source"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(listed, [("only", "data_scope", "only.yml")]);
    server.shut_down().await;
}

#[tokio::test]
async fn the_token_and_the_client_id_are_required() {
    let server = PolicyServer::start(loaded()).await;
    for token in [None, Some("wrong-token"), Some("test-token-012345678")] {
        let answer = server.api.send(server.request(token, Some("alice"))).await;
        answer.assert_error(401, "UNAUTHORIZED");
        assert!(
            !serde_json::to_string(&answer.body)
                .expect("json")
                .contains("customer-email"),
            "no policy leaks without the token"
        );
    }
    server
        .api
        .send(server.request(Some(TOKEN), None))
        .await
        .assert_error(400, "INVALID_ARGUMENT");
    server
        .api
        .send(server.request(Some(TOKEN), Some("../etc")))
        .await
        .assert_error(400, "INVALID_ARGUMENT");
    server.shut_down().await;
}

#[tokio::test]
async fn other_methods_and_odd_queries_do_not_change_anything() {
    let server = PolicyServer::start(loaded()).await;
    let before = server.list().await;
    for method in [Method::POST, Method::PUT, Method::DELETE] {
        let answer = server
            .api
            .send(
                server
                    .api
                    .http
                    .request(method, format!("{}/v1/policies", server.base))
                    .bearer_auth(TOKEN)
                    .header("X-Client-ID", "alice")
                    .body("name: evil\ntype: tool_access\nrules: {deny: ['*']}\n"),
            )
            .await;
        answer.assert_error(405, "INVALID_ARGUMENT");
    }
    let odd = server
        .api
        .send(
            server
                .api
                .http
                .get(format!(
                    "{}/v1/policies?name=%00%ff&{}",
                    server.base,
                    "x=1&".repeat(2000)
                ))
                .bearer_auth(TOKEN)
                .header("X-Client-ID", "alice"),
        )
        .await;
    assert_eq!(odd.status, StatusCode::OK, "{:?}", odd.body);
    assert_eq!(odd.body, before);
    assert_eq!(server.list().await, before);
    server.shut_down().await;
}

#[tokio::test]
async fn the_runtime_without_a_policies_directory_lists_nothing_and_follows_its_handle() {
    let api = Setup::new(vec![]).start().await;
    let body = api.get("/v1/policies", "alice").await;
    assert_eq!(body.status, StatusCode::OK, "{:?}", body.body);
    assert_eq!(body.body["policies"], json!([]));
    assert_eq!(body.body["reload_error"], Value::Null);
    // The route reads the live handle the watcher updates, not a copy taken at start.
    let set = parse(&[("email.yaml", EMAIL)]).expect("valid");
    api.runtime
        .turn_deps()
        .governance
        .policies
        .replace(set, LOADED_AT.to_owned());
    let body = api.get("/v1/policies", "alice").await;
    assert_eq!(body.body["loaded_at"], LOADED_AT);
    assert_eq!(body.body["policies"][0]["source"], "email.yaml");
}

/// `POST /v1/policies/explain` with `body` as alice.
async fn explain(server: &PolicyServer, body: &str) -> (StatusCode, Value) {
    let answer = server
        .api
        .send(
            server
                .api
                .http
                .request(Method::POST, format!("{}/v1/policies/explain", server.base))
                .bearer_auth(TOKEN)
                .header("X-Client-ID", "alice")
                .header("content-type", "application/json")
                .body(body.to_owned()),
        )
        .await;
    (answer.status, answer.body)
}

#[tokio::test]
async fn explain_decides_one_request_against_the_live_set() {
    let server = PolicyServer::start(loaded()).await;
    let (status, body) = explain(
        &server,
        r#"{"agent": "support", "tool": "mcp__github__delete_repo", "args": {"repo": "x"}}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"], "deny");
    assert_eq!(body["decided_by"], "no-delete");
    assert!(
        body["policy_set"]
            .as_str()
            .is_some_and(|h| h.starts_with("sha256:"))
    );
    let considered = body["policies"].as_array().expect("policies");
    assert_eq!(considered.len(), 3, "every policy, matched or not: {body}");
    let rate = considered
        .iter()
        .find(|p| p["name"] == "github-rate")
        .expect("rate");
    assert_eq!(rate["matched"], false);
    assert!(
        rate["why"]
            .as_str()
            .is_some_and(|w| w.contains("client `alice`")),
        "{rate}"
    );
    // The client may be named; tags given replace the agent's.
    let (_, body) = explain(
        &server,
        r#"{"agent": "writer", "tags": ["customer-facing"], "tool": "send_email", "client": "ci-bot"}"#,
    )
    .await;
    assert_eq!(body["decision"], "approval", "{body}");
    // Hostile and malformed bodies: the standard envelope, nothing else.
    for (bad, says) in [
        ("{", "json"),
        (r#"{"tool": "x"}"#, "agent"),
        (r#"{"agent": "a", "surprise": 1}"#, "surprise"),
        (r#"{"agent": "a", "args": {}}"#, "tool"),
        (
            r#"{"agent": "a", "tool": "t", "at": "yesterday"}"#,
            "RFC 3339",
        ),
        (r#"{"agent": 5}"#, "agent"),
    ] {
        let (status, body) = explain(&server, bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.to_lowercase().contains(&says.to_lowercase())),
            "{bad}: {body}"
        );
    }
    // Huge and deep arguments are decided without harm.
    let deep = format!("{}1{}", "[".repeat(100), "]".repeat(100));
    let (status, _) = explain(
        &server,
        &format!(r#"{{"agent": "a", "tool": "t", "args": {{"d": {deep}}}}}"#),
    )
    .await;
    assert!(status == StatusCode::OK || status == StatusCode::BAD_REQUEST);
    server.shut_down().await;
}
