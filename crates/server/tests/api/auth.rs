//! Health, the bearer token, the client id, and the agents listing.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::harness::{Setup, TOKEN};

#[tokio::test]
async fn healthz_needs_neither_token_nor_client() {
    let api = Setup::new(vec![]).token(TOKEN).start().await;
    let response = api
        .http
        .get(api.url("/healthz"))
        .send()
        .await
        .expect("healthz");
    assert_eq!(response.status(), StatusCode::OK);
    let body: serde_json::Value = response.json().await.expect("json");
    assert_eq!(body, json!({"ok": true}));
}

#[tokio::test]
async fn the_client_id_is_required_and_validated() {
    let api = Setup::new(vec![]).start().await;
    let missing = api
        .send(api.request(Method::GET, "/v1/threads", None))
        .await;
    missing.assert_error(400, "INVALID_ARGUMENT");
    assert!(
        missing.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("X-Client-ID")),
        "{:?}",
        missing.body
    );
    let too_long = "x".repeat(129);
    for bad in ["", "a b", "../etc", "a/b", too_long.as_str()] {
        api.get("/v1/threads", bad)
            .await
            .assert_error(400, "INVALID_ARGUMENT");
    }
    let ok = api.get("/v1/threads", "svc:ci.runner_1@example-org").await;
    assert_eq!(ok.status, StatusCode::OK, "{:?}", ok.body);
    assert_eq!(ok.body, json!({"threads": []}));
}

#[tokio::test]
async fn a_configured_token_is_required_on_v1() {
    let api = Setup::new(vec![]).token(TOKEN).start().await;
    let cases = [
        None,
        Some("Bearer wrong-token"),
        Some("Bearer test-token-012345678"),
        Some(&*format!("Bearer {TOKEN}x")),
        Some(&*format!("Basic {TOKEN}")),
        Some("Bearer"),
    ]
    .map(|c| c.map(str::to_owned));
    for authorization in cases {
        let mut request = api
            .http
            .get(api.url("/v1/threads"))
            .header("X-Client-ID", "alice");
        if let Some(value) = &authorization {
            request = request.header("Authorization", value);
        }
        let answer = api.send(request).await;
        answer.assert_error(401, "UNAUTHORIZED");
        let challenge = answer
            .headers
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok());
        assert_eq!(
            challenge,
            Some("Bearer realm=\"agentplane\""),
            "{authorization:?}"
        );
        assert!(!answer.body.to_string().contains(TOKEN));
    }
    // The token is checked before the client id: nothing else is revealed.
    let no_client = api.send(api.http.get(api.url("/v1/threads"))).await;
    no_client.assert_error(401, "UNAUTHORIZED");

    let ok = api
        .send(
            api.http
                .get(api.url("/v1/threads"))
                .header("X-Client-ID", "alice")
                .header("Authorization", format!("bearer {TOKEN}")),
        )
        .await;
    assert_eq!(ok.status, StatusCode::OK, "{:?}", ok.body);
}

#[tokio::test]
async fn agents_are_listed_with_their_model_status() {
    let api = Setup::new(vec![]).start().await;
    let answer = api.get("/v1/agents", "alice").await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    let agents = answer.body["agents"].as_array().expect("agents");
    let names: Vec<&str> = agents.iter().filter_map(|a| a["id"].as_str()).collect();
    for name in ["chat", "engineering", "research", "writer"] {
        assert!(names.contains(&name), "{names:?}");
    }
    let writer = agents.iter().find(|a| a["id"] == "writer").expect("writer");
    assert_eq!(writer["name"], "writer");
    assert_eq!(writer["ensembles"], json!(["fs"]));
    assert_eq!(
        writer["model"],
        json!({
            "status": "ready",
            "model": "scripted-model",
            "detail": null,
            // What the scripted server's llama.cpp-style `/props` says (ADR 0032).
            "capabilities": {
                "native_tools": true,
                "json_schema": true,
                "source": "llama.cpp /props",
            },
        })
    );
}

#[tokio::test]
async fn a_model_server_that_never_answers_cannot_hang_the_agents_listing() {
    // Accepts connections, reads nothing, answers nothing.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/v1", silent.local_addr().expect("addr"));
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            open.push(socket);
        }
    });
    let api = Setup::new(vec![]).llm_base_url(url).start().await;
    let started = Instant::now();
    let answer = api.get("/v1/agents", "alice").await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    for agent in answer.body["agents"].as_array().expect("agents") {
        assert_eq!(agent["model"]["status"], "unavailable", "{agent}");
        assert!(
            agent["model"]["detail"]
                .as_str()
                .is_some_and(|d| d.contains("did not answer")),
            "{agent}"
        );
    }
    held.abort();
}
