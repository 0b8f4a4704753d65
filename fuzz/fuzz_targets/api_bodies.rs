//! Request bodies of every POST, PUT and PATCH route, through the real router in
//! process (runtime on a temp SQLite file, a model server that refuses connections):
//! the first byte picks the route, the second the content type, the rest is the body.
//! No answer may be a 5xx other than the 502/503/504 of a route that had to reach the
//! model, and no handler may panic (libFuzzer reports a panic on any thread).
#![no_main]

use std::sync::OnceLock;

use agentplane_core::{ApprovalId, ExecutionId, PermissionId, TurnId};
use agentplane_runtime::config::ConfigSource;
use agentplane_runtime::{Config, Runtime};
use agentplane_server::{RouterOptions, router};
use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use libfuzzer_sys::fuzz_target;
use tower::ServiceExt;

/// Whether a route calls the model server (which here refuses every connection).
#[derive(Clone, Copy, PartialEq)]
enum Reaches {
    Model,
    Nothing,
}

struct Api {
    tokio: tokio::runtime::Runtime,
    router: Router,
    routes: Vec<(Method, String, Reaches)>,
    _runtime: Runtime,
    _dir: tempfile::TempDir,
}

fn api() -> &'static Api {
    static API: OnceLock<Api> = OnceLock::new();
    API.get_or_init(|| {
        let tokio = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let dir = tempfile::tempdir().expect("a temp dir");
        let root = dir.path().to_path_buf();
        let workspace = root.join("ws");
        std::fs::create_dir(&workspace).expect("the workspace");
        let file = root.join("agentplane.toml");
        std::fs::write(
            &file,
            "[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"fuzz-model\"\n\
             max_retries = 0\nconnect_timeout_secs = 1\nrequest_timeout_secs = 2\n\
             [store]\npath = \"events.db\"\n\
             [server]\npermission_timeout_secs = 1\n",
        )
        .expect("the config file");
        let env = |_: &str| None;
        let config = Config::load_from(&ConfigSource {
            explicit: Some(&file),
            cwd: &root,
            env: &env,
        })
        .expect("the config loads");
        let (runtime, router, thread) = tokio.block_on(async {
            let runtime = Runtime::start(config).await.expect("the runtime starts");
            let router = router(
                runtime.services().clone(),
                &RouterOptions {
                    executions: Some(runtime.executions().clone()),
                    ..RouterOptions::default()
                },
            );
            let body = serde_json::json!({
                "agent": "engineering",
                "cwd": workspace,
                "title": "fuzz",
            });
            let response = router
                .clone()
                .oneshot(request(
                    Method::POST,
                    "/v1/threads",
                    Some("application/json"),
                    body.to_string().into_bytes(),
                ))
                .await
                .expect("the router answers");
            assert_eq!(
                response.status(),
                StatusCode::CREATED,
                "a thread is created"
            );
            let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
                .await
                .expect("the body");
            let thread: serde_json::Value = serde_json::from_slice(&bytes).expect("JSON");
            let thread = thread["id"].as_str().expect("an id").to_owned();
            (runtime, router, thread)
        });
        let agent = "engineering";
        let routes = vec![
            (Method::POST, "/v1/threads".to_owned(), Reaches::Nothing),
            (
                Method::POST,
                format!("/v1/threads/{thread}/turns"),
                Reaches::Model,
            ),
            (
                Method::POST,
                format!("/v1/threads/{thread}/compact"),
                Reaches::Model,
            ),
            (
                Method::POST,
                format!("/v1/turns/{}/cancel", TurnId::new()),
                Reaches::Nothing,
            ),
            (
                Method::POST,
                format!("/v1/permissions/{}", PermissionId::new()),
                Reaches::Nothing,
            ),
            (
                Method::POST,
                format!("/v1/approvals/{}", ApprovalId::new()),
                Reaches::Nothing,
            ),
            (Method::POST, "/v1/executions".to_owned(), Reaches::Model),
            (
                Method::POST,
                format!("/v1/executions/{}/cancel", ExecutionId::new()),
                Reaches::Nothing,
            ),
            (
                Method::POST,
                format!("/v1/agents/{agent}/versions"),
                Reaches::Nothing,
            ),
            (
                Method::PATCH,
                format!("/v1/agents/{agent}/versions/1.0.0"),
                Reaches::Nothing,
            ),
            (
                Method::POST,
                format!("/v1/agents/{agent}/versions/1.0.0/promote"),
                Reaches::Nothing,
            ),
            (
                Method::PUT,
                format!("/v1/agents/{agent}/traffic"),
                Reaches::Nothing,
            ),
            (
                Method::POST,
                format!("/v1/agents/{agent}/traffic/rollback"),
                Reaches::Nothing,
            ),
            (
                Method::PUT,
                format!("/v1/agents/{agent}/shadow"),
                Reaches::Nothing,
            ),
            (Method::POST, "/mcp".to_owned(), Reaches::Model),
            (
                Method::POST,
                "/openai/v1/chat/completions".to_owned(),
                Reaches::Model,
            ),
        ];
        Api {
            tokio,
            router,
            routes,
            _runtime: runtime,
            _dir: dir,
        }
    })
}

fn request(method: Method, path: &str, content_type: Option<&str>, body: Vec<u8>) -> Request<Body> {
    let mut builder = Request::builder()
        .method(method)
        .uri(path)
        .header("x-client-id", "fuzz")
        .header(header::ACCEPT, "application/json, text/event-stream");
    if let Some(content_type) = content_type {
        builder = builder.header(header::CONTENT_TYPE, content_type);
    }
    builder.body(Body::from(body)).expect("a request")
}

fuzz_target!(|data: &[u8]| {
    let [route, kind, body @ ..] = data else {
        return;
    };
    let api = api();
    let (method, path, reaches) = &api.routes[usize::from(*route) % api.routes.len()];
    let content_type = match kind % 4 {
        0 | 1 => Some("application/json"),
        2 => Some("text/plain"),
        _ => None,
    };
    let response = api.tokio.block_on(api.router.clone().oneshot(request(
        method.clone(),
        path,
        content_type,
        body.to_vec(),
    )));
    let Ok(response) = response;
    let status = response.status();
    let upstream = matches!(
        status,
        StatusCode::BAD_GATEWAY | StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT
    );
    assert!(
        !status.is_server_error() || (upstream && *reaches == Reaches::Model),
        "{method} {path}: {status}"
    );
});
