//! Several providers over HTTP: a turn that fails over, streamed as SSE, and the
//! provider chains with their health in `GET /v1/agents`.

use agentplane_testkit::Step;
use reqwest::StatusCode;
use serde_json::json;

use crate::harness::Setup;

#[tokio::test]
async fn the_agents_listing_shows_the_one_llm_provider_by_default() {
    let api = Setup::new(vec![]).start().await;
    let answer = api.get("/v1/agents", "alice").await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    let writer = answer.body["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .find(|a| a["id"] == "writer")
        .expect("writer")
        .clone();
    let providers = writer["providers"].as_array().expect("providers");
    assert_eq!(providers.len(), 1);
    assert_eq!(providers[0]["name"], "default");
    assert_eq!(providers[0]["kind"], "openai-compatible");
    assert_eq!(providers[0]["up"], true);
    assert_eq!(providers[0]["consecutive_failures"], 0);
}

#[tokio::test]
async fn a_turn_fails_over_and_its_stream_records_both_providers() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr");
    let api = Setup::new(vec![Step::text("answered by the cloud")])
        .providers(&format!(
            "[providers.local]\nkind = \"openai\"\nbase_url = \"http://{closed}/v1\"\n\
             max_retries = 0\n\
             [providers.cloud]\nkind = \"openai\"\nbase_url = \"{{scripted}}\"\nmax_retries = 0\n\
             [routing]\ndefault = [\"local\", \"cloud\"]\n"
        ))
        .start()
        .await;
    let thread = api.create_thread("alice", "writer").await;
    let frames = api
        .start_turn("alice", &thread, "hello")
        .await
        .until_completed()
        .await;
    let kinds: Vec<&str> = frames.iter().filter_map(|f| f.event.as_deref()).collect();
    let failover = kinds
        .iter()
        .position(|k| *k == "provider_failover")
        .expect("a provider_failover frame");
    let usage = kinds.iter().position(|k| *k == "usage").expect("usage");
    assert!(failover < usage, "{kinds:?}");
    let failover = frames[failover].json();
    assert_eq!(failover["from"], "local");
    assert_eq!(failover["to"], "cloud");
    assert_eq!(failover["code"], "UPSTREAM_UNAVAILABLE");
    assert_eq!(frames[usage].json()["provider"], "cloud");
    let completed = frames.last().expect("completed").json();
    assert_eq!(
        completed["result"],
        json!({"text": "answered by the cloud"})
    );

    let answer = api.get("/v1/agents", "alice").await;
    let writer = answer.body["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .find(|a| a["id"] == "writer")
        .expect("writer")
        .clone();
    let chain: Vec<&str> = writer["providers"]
        .as_array()
        .expect("providers")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(chain, ["local", "cloud"]);
    let local = &writer["providers"][0];
    assert!(
        local["consecutive_failures"].as_u64().expect("count") >= 2,
        "{local}"
    );
    assert!(
        local["last_error"]
            .as_str()
            .expect("error")
            .contains("cannot reach"),
        "{local}"
    );
    assert!(writer["providers"][1]["last_success"].is_string());
    // The model status reports the provider that answers.
    assert_eq!(writer["model"]["status"], "ready");
}

#[tokio::test]
async fn a_size_hint_routes_the_turn_and_a_bad_one_is_refused() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr");
    // Small tasks go to a dead provider only; large ones to the scripted server.
    let api = Setup::new(vec![Step::text("a large answer")])
        .providers(&format!(
            "[providers.small]\nkind = \"openai\"\nbase_url = \"http://{closed}/v1\"\n\
             max_retries = 0\n\
             [providers.big]\nkind = \"openai\"\nbase_url = \"{{scripted}}\"\nmax_retries = 0\n\
             [routing]\ndefault = [\"small\"]\n\
             [[routing.rules]]\nsize = \"large\"\nproviders = [\"big\"]\n"
        ))
        .start()
        .await;
    let thread = api.create_thread("alice", "writer").await;
    let path = format!("/v1/threads/{thread}/turns");
    for bad in [
        json!({"input": "hi", "size": "huge"}),
        json!({"input": "hi", "size": 3}),
        json!({"input": "hi", "size": null, "sise": "large"}),
    ] {
        let answer = api.post(&path, "alice", bad.clone()).await;
        answer.assert_error(400, "INVALID_ARGUMENT");
    }
    let response = api
        .request(reqwest::Method::POST, &path, Some("alice"))
        .json(&json!({"input": "a short question", "size": "large"}))
        .send()
        .await
        .expect("turn");
    assert_eq!(response.status(), StatusCode::OK);
    let frames = crate::harness::SseReader::new(response)
        .until_completed()
        .await;
    let usage = frames
        .iter()
        .find(|f| f.event.as_deref() == Some("usage"))
        .expect("usage")
        .json();
    assert_eq!(usage["provider"], "big");
    assert!(
        frames
            .iter()
            .all(|f| f.event.as_deref() != Some("provider_failover"))
    );
}

#[tokio::test]
async fn a_turn_resumed_after_an_approval_keeps_its_size_hint() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr");
    let api = Setup::new(vec![
        Step::tool_call("write_file", json!({"path": "out.txt", "content": "x"})),
        Step::text("written"),
    ])
    .policy(
        "review.yaml",
        "name: review\ntype: approval_required\nrules: {tools: [write_file]}\n",
    )
    .extra_config(
        "\n[agents.reviewed]\nsystem_prompt = \"Write.\"\nensembles = [\"fs\"]\nmax_steps = 4\nmax_nudges = 0\n",
    )
    .providers(&format!(
        "[providers.small]\nkind = \"openai\"\nbase_url = \"http://{closed}/v1\"\n\
         max_retries = 0\n\
         [providers.big]\nkind = \"openai\"\nbase_url = \"{{scripted}}\"\nmax_retries = 0\n\
         [routing]\ndefault = [\"small\"]\n\
         [[routing.rules]]\nsize = \"large\"\nproviders = [\"big\"]\n"
    ))
    .start()
    .await;
    let thread = api.create_thread("alice", "reviewed").await;
    let response = api
        .request(
            reqwest::Method::POST,
            &format!("/v1/threads/{thread}/turns"),
            Some("alice"),
        )
        .json(&json!({"input": "write out.txt", "size": "large"}))
        .send()
        .await
        .expect("turn");
    assert_eq!(response.status(), StatusCode::OK);
    let mut stream = crate::harness::SseReader::new(response);
    let before = stream.until("approval_requested").await;
    let approval = before.last().expect("requested").json()["approval_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let decided = api
        .post(
            &format!("/v1/approvals/{approval}"),
            "alice",
            json!({"decision": "approve"}),
        )
        .await;
    assert!(decided.status.is_success(), "{:?}", decided.body);
    let after = stream.until_completed().await;
    let completed = after.last().expect("completed").json();
    assert_eq!(
        completed["result"],
        json!({"text": "written"}),
        "{completed}"
    );
    let providers: Vec<String> = before
        .iter()
        .chain(after.iter())
        .filter(|f| f.event.as_deref() == Some("usage"))
        .map(|f| f.json()["provider"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(providers, ["big", "big"]);
}
