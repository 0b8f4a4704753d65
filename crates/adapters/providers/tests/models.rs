//! `list_models` against the scripted server: the OpenAI listing, enriched with
//! Ollama's parameter sizes and families, and its failures.

use std::time::Duration;

use agentplane_engine::ports::{ChatModel, ModelError, ModelInfo};
use agentplane_providers::{OpenAiCompatible, OpenAiConfig};
use agentplane_testkit::{Scenario, ScriptedModel, ScriptedServer, Step};

fn client(base_url: String, api_key: Option<&str>) -> OpenAiCompatible {
    let mut config = OpenAiConfig::new(base_url);
    config.api_key = api_key.map(str::to_owned);
    config.retry_base_delay = Duration::from_millis(1);
    OpenAiCompatible::new(config).expect("client")
}

#[tokio::test]
async fn models_come_with_ollama_sizes_and_families() {
    let scenario = Scenario::new(vec![]).with_models(vec![
        ScriptedModel::new("llama3.1:8b")
            .with_parameter_size("8.0B")
            .with_families(&["llama"]),
        ScriptedModel::new("smollm:135m").with_parameter_size("135M"),
        ScriptedModel::new("nomic-embed-text:latest").with_families(&["nomic-bert"]),
    ]);
    let server = ScriptedServer::start(scenario).await.expect("start");
    let models = client(server.base_url(), Some("k"))
        .list_models()
        .await
        .expect("models");
    assert_eq!(
        models,
        vec![
            ModelInfo {
                id: "llama3.1:8b".to_owned(),
                parameter_size: Some("8.0B".to_owned()),
                families: vec!["llama".to_owned()],
            },
            ModelInfo {
                id: "smollm:135m".to_owned(),
                parameter_size: Some("135M".to_owned()),
                families: vec![],
            },
            ModelInfo {
                id: "nomic-embed-text:latest".to_owned(),
                parameter_size: None,
                families: vec!["nomic-bert".to_owned()],
            },
        ]
    );
    let received = server.received();
    let paths: Vec<&str> = received.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths, vec!["/v1/models", "/api/tags"]);
    assert!(
        received
            .iter()
            .all(|r| r.authorization.as_deref() == Some("Bearer k"))
    );
}

#[tokio::test]
async fn listing_failures_and_non_ollama_roots() {
    let server = ScriptedServer::start(Scenario::new(vec![]))
        .await
        .expect("start");
    let models = client(server.base_url(), None)
        .list_models()
        .await
        .expect("models");
    assert_eq!(models.len(), 1);
    assert_eq!(models[0].id, "scripted-model");

    // A base URL not ending in /v1 is not Ollama's: no /api/tags. A 404 is final.
    let other_root = format!("http://{}/openai", server.addr());
    let err = client(other_root, None)
        .list_models()
        .await
        .expect_err("no such listing");
    assert!(
        matches!(err, ModelError::Upstream { status: 404, .. }),
        "{err:?}"
    );
    let paths: Vec<String> = server.received().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, vec!["/v1/models", "/api/tags", "/openai/models"]);
}

#[tokio::test]
async fn chat_steps_are_not_consumed_by_listing() {
    let server = ScriptedServer::start(Scenario::new(vec![Step::text("only")]))
        .await
        .expect("start");
    let model = client(server.base_url(), None);
    model.list_models().await.expect("models");
    assert!(server.requests().is_empty());
}
