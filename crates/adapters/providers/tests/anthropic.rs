//! The Anthropic Messages adapter against the scripted server's `/v1/messages` over
//! real HTTP: streamed and whole answers, tool calls, headers, retries, error mapping,
//! hostile streams (garbage, truncation, error events, huge lines) and the key's secrecy.

use std::time::Duration;

use agentplane_core::{ChatMessage, ChatRequest, ChatResponse, ToolSpec, Usage};
use agentplane_engine::ports::{ChatModel, ModelError};
use agentplane_providers::{ANTHROPIC_VERSION, Anthropic, AnthropicConfig};
use agentplane_testkit::{Scenario, ScriptedModel, ScriptedServer, Step};
use serde_json::json;

const KEY: &str = "sk-ant-test-0123456789-secret";

async fn serve(steps: Vec<Step>) -> ScriptedServer {
    ScriptedServer::start(Scenario::new(steps))
        .await
        .expect("start scripted server")
}

fn model_with(server: &ScriptedServer, stream: bool) -> Anthropic {
    let mut config = AnthropicConfig::new(server.base_url());
    config.api_key = Some(KEY.to_owned());
    config.max_retries = 2;
    config.retry_base_delay = Duration::from_millis(1);
    config.request_timeout = Duration::from_secs(10);
    config.stream = stream;
    Anthropic::new(config).expect("client")
}

fn request() -> ChatRequest {
    ChatRequest {
        model: "claude-test".to_owned(),
        messages: vec![ChatMessage::system("be brief"), ChatMessage::user("read x")],
        tools: vec![ToolSpec {
            name: "read_file".to_owned(),
            description: "Reads a file".to_owned(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            side_effects: false,
        }],
        temperature: Some(0.2),
        max_tokens: None,
        tool_choice: None,
        response_schema: None,
    }
}

async fn call(model: &Anthropic) -> (Result<ChatResponse, ModelError>, Vec<String>) {
    let mut deltas = Vec::new();
    let result = model
        .chat_with(&request(), &mut |text: &str| deltas.push(text.to_owned()))
        .await;
    (result, deltas)
}

#[tokio::test]
async fn a_streamed_answer_with_a_tool_call_is_assembled() {
    let server = serve(vec![
        Step {
            text: Some("Let me read it.".to_owned()),
            ..Step::tool_call("read_file", json!({"path": "x"}))
        }
        .with_split(4)
        .with_usage(30, 7),
    ])
    .await;
    let (result, deltas) = call(&model_with(&server, true)).await;
    let response = result.expect("answer");
    assert!(deltas.len() > 1, "{deltas:?}");
    assert_eq!(deltas.concat(), "Let me read it.");
    assert_eq!(response.content, "Let me read it.");
    assert_eq!(response.tool_calls.len(), 1);
    assert_eq!(response.tool_calls[0].name, "read_file");
    assert_eq!(response.tool_calls[0].arguments, r#"{"path":"x"}"#);
    assert_eq!(response.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(
        response.usage,
        Some(Usage {
            input_tokens: 30,
            output_tokens: 7
        })
    );
    let body = server.requests().remove(0);
    assert_eq!(body["system"], "be brief");
    assert_eq!(body["stream"], true);
    assert_eq!(body["max_tokens"], 4096);
    assert_eq!(body["tools"][0]["name"], "read_file");
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "read x"}]}])
    );
    let received = server.received();
    assert_eq!(received[0].path, "/v1/messages");
    assert_eq!(received[0].authorization.as_deref(), Some(KEY));
}

#[tokio::test]
async fn a_whole_answer_is_read_when_not_streaming() {
    let server = serve(vec![Step::text("hello").with_usage(3, 1)]).await;
    let (result, deltas) = call(&model_with(&server, false)).await;
    let response = result.expect("answer");
    assert_eq!(response.content, "hello");
    assert_eq!(deltas, ["hello"]);
    assert_eq!(response.finish_reason.as_deref(), Some("stop"));
    assert_eq!(server.requests()[0]["stream"], false);
}

#[tokio::test]
async fn overload_and_server_errors_are_retried_then_upstream() {
    let server = serve(vec![
        Step::error(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
        Step::error(500, "{}"),
        Step::text("finally"),
    ])
    .await;
    let (result, _) = call(&model_with(&server, true)).await;
    assert_eq!(result.expect("answer after retries").content, "finally");
    assert_eq!(server.chat_request_count(), 3);

    let server = serve(vec![Step::error(529, "overloaded"); 3]).await;
    let (result, _) = call(&model_with(&server, true)).await;
    assert!(
        matches!(result, Err(ModelError::Upstream { status: 529, .. })),
        "{result:?}"
    );
}

#[tokio::test]
async fn request_errors_are_not_retried_and_never_show_the_key() {
    let body = format!(
        r#"{{"type":"error","error":{{"type":"authentication_error","message":"invalid x-api-key {KEY}"}}}}"#
    );
    let server = serve(vec![Step::error(401, body)]).await;
    let (result, _) = call(&model_with(&server, true)).await;
    let error = result.expect_err("401");
    assert!(
        matches!(error, ModelError::Upstream { status: 401, .. }),
        "{error:?}"
    );
    assert!(!error.to_string().contains(KEY), "{error}");
    assert_eq!(server.chat_request_count(), 1);
    assert!(!format!("{:?}", model_with(&server, true)).contains(KEY));
}

#[tokio::test]
async fn hostile_streams_are_protocol_errors() {
    let start =
        r#"data: {"type":"message_start","message":{"model":"m","usage":{"input_tokens":1}}}"#;
    let cases: Vec<(Step, &str)> = vec![
        (Step::raw_sse(&["data: {garbage"]), "not valid JSON"),
        (
            Step::raw_sse(&[
                start,
                r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":"hi"}}"#,
            ]),
            "message_stop",
        ),
        (
            Step::raw_sse(&[
                start,
                r#"data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            ]),
            "overloaded_error",
        ),
        (
            Step::raw_sse(&[
                start,
                r#"data: {"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"x"}}"#,
            ]),
            "content block 3",
        ),
        (Step::raw_chunks(&["data: \u{ff}\n\n"]), "not valid JSON"),
        (
            Step::raw_chunks(&[
                ": keepalive\n\n",
                "event: ping\n",
                "data: {\"type\":\"ping\"}\n\n",
            ]),
            "message_stop",
        ),
        (
            Step::text("cut short").with_split(5).truncated_after(2),
            "cut off",
        ),
    ];
    for (step, expected) in cases {
        let server = serve(vec![step.clone()]).await;
        let mut model = AnthropicConfig::new(server.base_url());
        model.max_retries = 0;
        let model = Anthropic::new(model).expect("client");
        let (result, _) = call(&model).await;
        match result {
            Err(ModelError::Protocol(message)) => {
                assert!(message.contains(expected), "{step:?}: {message}")
            }
            other => panic!("{step:?}: expected a protocol error, got {other:?}"),
        }
    }
    // An invalid request reported mid-stream keeps its meaning: no failover.
    let server = serve(vec![Step::raw_sse(&[
        r#"data: {"type":"error","error":{"type":"invalid_request_error","message":"bad"}}"#,
    ])])
    .await;
    let (result, _) = call(&model_with(&server, true)).await;
    assert!(
        matches!(result, Err(ModelError::Upstream { status: 400, .. })),
        "{result:?}"
    );
}

#[tokio::test]
async fn a_huge_line_is_refused_not_buffered_forever() {
    let huge = format!("data: {}", "x".repeat(9 * 1024 * 1024));
    let server = serve(vec![Step::raw_chunks(&[&huge])]).await;
    let (result, _) = call(&model_with(&server, true)).await;
    match result {
        Err(ModelError::Protocol(message)) => assert!(message.contains("larger than"), "{message}"),
        other => panic!("expected a protocol error, got {other:?}"),
    }
}

#[tokio::test]
async fn models_are_listed_with_the_version_header() {
    let server = ScriptedServer::start(Scenario::new(vec![]).with_models(vec![
        ScriptedModel::new("claude-a"),
        ScriptedModel::new("claude-b"),
    ]))
    .await
    .expect("server");
    let model = model_with(&server, true);
    let listed: Vec<String> = model
        .list_models()
        .await
        .expect("models")
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(listed, ["claude-a", "claude-b"]);
    assert_eq!(model.provider(), "anthropic");
    assert_eq!(ANTHROPIC_VERSION, "2023-06-01");
}

#[tokio::test]
async fn an_unreachable_server_is_unreachable() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr");
    let mut config = AnthropicConfig::new(format!("http://{closed}/v1"));
    config.max_retries = 0;
    let model = Anthropic::new(config).expect("client");
    let (result, _) = call(&model).await;
    assert!(
        matches!(result, Err(ModelError::Unreachable { .. })),
        "{result:?}"
    );
    assert!(Anthropic::new(AnthropicConfig::new("ftp://x")).is_err());
}
