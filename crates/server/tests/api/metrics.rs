//! `GET /metrics` on a real server: a turn with a tool call against the scripted model,
//! then the counters a scraper sees (executions, tool calls, HTTP by route template,
//! store operations), checked by `promtool check metrics`; the token in front of it;
//! and no route at all without metrics.
//!
//! The hub here is built like the runtime's, plus what `serve` wires when metrics are
//! on: the store wrapped in `MeteredStore` and `Metrics` as the telemetry sink.

use std::sync::Arc;
use std::time::Duration;

use agentplane_core::{AgentSpec, ThreadId};
use agentplane_engine::TurnDeps;
use agentplane_engine::governance::Governance;
use agentplane_engine::hub::{Hub, HubConfig, Toolbox};
use agentplane_engine::ports::{Ensemble, EventStore};
use agentplane_metrics::{MeteredStore, Metrics};
use agentplane_runtime::config::ConfigSource;
use agentplane_runtime::{Config, Runtime};
use agentplane_server::{RouterOptions, router};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{PATIENCE, SseReader, TOKEN, assert_error_envelope};

/// The builtin ensembles, as the runtime gives them.
struct Builtins;

impl Toolbox for Builtins {
    fn ensembles(
        &self,
        agent: &AgentSpec,
        _thread: &ThreadId,
        _client: &str,
    ) -> Vec<Arc<dyn Ensemble>> {
        agentplane_runtime::ensembles_for(agent)
    }
}

/// A server with metrics (or without), its metrics and what must outlive the test.
struct MeteredApi {
    base: String,
    http: reqwest::Client,
    metrics: Arc<Metrics>,
    _scripted: ScriptedServer,
    _runtime: Runtime,
    _dir: tempfile::TempDir,
    workspace: std::path::PathBuf,
}

async fn start(steps: Vec<Step>, token: Option<&str>, with_metrics: bool) -> MeteredApi {
    let scripted = ScriptedServer::start(Scenario::new(steps))
        .await
        .expect("scripted server");
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    let workspace = root.join("ws");
    std::fs::create_dir(&workspace).expect("workspace");
    std::fs::write(workspace.join("notes.txt"), "remember the milk").expect("file");
    let file = root.join("agentplane.toml");
    std::fs::write(
        &file,
        format!(
            "[llm]\nbase_url = \"{}\"\nmodel = \"scripted-model\"\nmax_retries = 0\n\
             [store]\npath = \"events.db\"\n\
             [agents.reader]\nsystem_prompt = \"Read what you are asked to.\"\n\
             ensembles = [\"fs\"]\n",
            scripted.base_url()
        ),
    )
    .expect("config");
    let env = |_: &str| None;
    let config = Config::load_from(&ConfigSource {
        explicit: Some(&file),
        cwd: &root,
        env: &env,
    })
    .expect("config loads");
    let runtime = Runtime::start(config).await.expect("runtime starts");
    let metrics = Arc::new(Metrics::new());
    let deps = runtime.turn_deps();
    let store: Arc<dyn EventStore> =
        Arc::new(MeteredStore::new(deps.store.clone(), metrics.clone()));
    let governance = Governance {
        telemetry: agentplane_engine::ports::Telemetry::new(vec![metrics.clone()]),
        ..Governance::default()
    };
    let services = Hub::builder(
        TurnDeps {
            store,
            providers: deps.providers.clone(),
            governance: Arc::new(governance),
            workspace: None,
        },
        runtime.agents().clone(),
        Arc::new(Builtins),
        HubConfig {
            default_model: "scripted-model".into(),
            ..HubConfig::default()
        },
    )
    .build();
    let app = router(
        services,
        &RouterOptions {
            auth_token: token.map(str::to_owned),
            metrics: with_metrics.then(|| metrics.clone()),
            ..RouterOptions::default()
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    MeteredApi {
        base: format!("http://{addr}"),
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .expect("client"),
        metrics,
        _scripted: scripted,
        _runtime: runtime,
        _dir: dir,
        workspace,
    }
}

impl MeteredApi {
    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.get(format!("{}{path}", self.base))
    }

    fn post(&self, path: &str, body: Value) -> reqwest::RequestBuilder {
        self.http
            .post(format!("{}{path}", self.base))
            .header("X-Client-ID", "alice")
            .json(&body)
    }

    /// `/metrics` once `series` has reached `at_least` (the tap may see an event just
    /// after a stream delivered it).
    async fn scrape_when(&self, series: &str, at_least: f64) -> String {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let text = self.scrape().await;
            if sample(&text, series).is_some_and(|v| v >= at_least) {
                return text;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{series} never reached {at_least}:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn scrape(&self) -> String {
        let response = self.get("/metrics").send().await.expect("scrape");
        assert_eq!(response.status(), StatusCode::OK);
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
        response.text().await.expect("body")
    }
}

/// The value of the sample written exactly as `series`, if any.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        Some(value.parse().expect("a number"))
    })
}

#[tokio::test]
async fn a_turn_with_a_tool_call_shows_in_the_metrics() {
    let api = start(
        vec![
            Step::tool_call("read_file", json!({"path": "notes.txt"})),
            Step::tool_call("finish_task", json!({"summary": "read it"})),
        ],
        None,
        true,
    )
    .await;
    let created = api
        .post(
            "/v1/threads",
            json!({"agent": "reader", "cwd": api.workspace.display().to_string()}),
        )
        .send()
        .await
        .expect("create");
    assert_eq!(created.status(), StatusCode::CREATED);
    let thread: Value = created.json().await.expect("thread");
    let thread = thread["id"].as_str().expect("id").to_owned();
    let response = api
        .post(
            &format!("/v1/threads/{thread}/turns"),
            json!({"input": "read notes.txt"}),
        )
        .send()
        .await
        .expect("turn");
    assert_eq!(response.status(), StatusCode::OK);
    let frames = SseReader::new(response).until_completed().await;
    let last = frames.last().expect("frames").json();
    assert_eq!(last["stop_reason"], "finished", "{frames:?}");
    let missing = api
        .get(&format!("/v1/threads/{}", ThreadId::new()))
        .header("X-Client-ID", "alice")
        .send()
        .await
        .expect("get");
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let unmatched = api.get("/no/such/route").send().await.expect("get");
    assert_eq!(unmatched.status(), StatusCode::NOT_FOUND);

    let text = api
        .scrape_when(
            r#"agent_executions_total{agent="reader",status="finished"}"#,
            1.0,
        )
        .await;
    for (series, value) in [
        (
            r#"agent_executions_total{agent="reader",status="finished"}"#,
            1.0,
        ),
        (
            r#"agent_execution_duration_seconds_count{agent="reader"}"#,
            1.0,
        ),
        (r#"tool_calls_total{tool="read_file",status="ok"}"#, 1.0),
        (r#"tool_call_latency_seconds_count{tool="read_file"}"#, 1.0),
        (
            r#"http_requests_total{method="POST",route="/v1/threads",status="201"}"#,
            1.0,
        ),
        (
            r#"http_requests_total{method="POST",route="/v1/threads/{id}/turns",status="200"}"#,
            1.0,
        ),
        (
            r#"http_requests_total{method="GET",route="/v1/threads/{id}",status="404"}"#,
            1.0,
        ),
        (
            r#"http_requests_total{method="GET",route="unmatched",status="404"}"#,
            1.0,
        ),
        (
            r#"store_operations_total{op="start_turn",outcome="ok"}"#,
            1.0,
        ),
        // The last model call's text, usage and cost go with the turn's end.
        (
            r#"store_operations_total{op="complete_turn_after",outcome="ok"}"#,
            1.0,
        ),
    ] {
        assert_eq!(sample(&text, series), Some(value), "{series}\n{text}");
    }
    // Held events go with the next one (`append_all`, twice in this turn); the rest
    // are single events. A change in how a turn writes shows here.
    for (op, count) in [("append", 2.0), ("append_all", 2.0)] {
        let series = format!(r#"store_operations_total{{op="{op}",outcome="ok"}}"#);
        assert_eq!(sample(&text, &series), Some(count), "{series}\n{text}");
    }
    assert!(!text.contains(&thread), "an id became a label:\n{text}");
    assert!(!text.contains("/no/such/route"), "{text}");
    agentplane_testkit::promtool::assert_accepts(&text);
    // The scrape itself is a request like any other.
    let again = api.scrape().await;
    assert!(
        sample(
            &again,
            r#"http_requests_total{method="GET",route="/metrics",status="200"}"#
        )
        .is_some_and(|n| n >= 1.0),
        "{again}"
    );
    assert_eq!(api.metrics.encode().lines().count(), again.lines().count());
}

#[tokio::test]
async fn metrics_need_the_token_but_no_client_id() {
    let api = start(vec![Step::text("hi")], Some(TOKEN), true).await;
    let bare = api.get("/metrics").send().await.expect("scrape");
    assert_eq!(bare.status(), StatusCode::UNAUTHORIZED);
    assert_error_envelope(&bare.json().await.expect("json"));
    let wrong = api
        .get("/metrics")
        .bearer_auth("not-the-token")
        .send()
        .await
        .expect("scrape");
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    let scraped = api
        .get("/metrics")
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("scrape");
    assert_eq!(scraped.status(), StatusCode::OK);
    let text = scraped.text().await.expect("body");
    assert!(
        text.contains(r#"http_requests_total{method="GET",route="/metrics",status="401"} 2"#),
        "{text}"
    );
    // A client id, when sent, must still be valid.
    let forged = api
        .get("/metrics")
        .bearer_auth(TOKEN)
        .header("X-Client-ID", "a b\"")
        .send()
        .await
        .expect("scrape");
    assert_eq!(forged.status(), StatusCode::BAD_REQUEST);
    assert_error_envelope(&forged.json().await.expect("json"));
    // Refused scrapes are counted, under their route, without the token anywhere.
    let text = api.metrics.encode();
    assert_eq!(
        sample(
            &text,
            r#"http_requests_total{method="GET",route="/metrics",status="401"}"#
        ),
        Some(2.0),
        "{text}"
    );
    assert!(!text.contains(TOKEN));
}

#[tokio::test]
async fn without_metrics_there_is_no_route_and_nothing_is_recorded() {
    let api = start(vec![Step::text("hi")], None, false).await;
    let response = api.get("/metrics").send().await.expect("scrape");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_error_envelope(&response.json().await.expect("json"));
    let healthz = api.get("/healthz").send().await.expect("healthz");
    assert_eq!(healthz.status(), StatusCode::OK);
    let text = api.metrics.encode();
    assert!(!text.contains("http_requests_total{"), "{text}");
}

#[tokio::test]
async fn hostile_methods_and_paths_do_not_become_labels() {
    let api = start(vec![Step::text("hi")], None, true).await;
    let method = reqwest::Method::from_bytes(b"EXFILTRATE").expect("method");
    let odd = api
        .http
        .request(method, format!("{}/v1/threads/thr-%22%0A", api.base))
        .header("X-Client-ID", "alice")
        .send()
        .await
        .expect("request");
    assert!(odd.status().is_client_error(), "{}", odd.status());
    for i in 0..20 {
        let response = api
            .get(&format!("/random/{i}/path"))
            .send()
            .await
            .expect("get");
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
    }
    let text = api.scrape().await;
    assert!(!text.contains("EXFILTRATE"), "{text}");
    assert!(!text.contains("random"), "{text}");
    assert_eq!(
        sample(
            &text,
            r#"http_requests_total{method="GET",route="unmatched",status="404"}"#
        ),
        Some(20.0),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with(r#"http_requests_total{method="other","#)),
        "{text}"
    );
    agentplane_testkit::promtool::assert_accepts(&text);
}
