//! The OpenAI-compatible adapter against the scripted server over real HTTP: streamed
//! and whole answers, tool-call assembly, leniency, retries, error mapping, limits and
//! secrecy of the API key.

use std::time::Duration;

use agentplane_core::{ChatMessage, ChatRequest, ChatResponse, ToolCall, ToolSpec, Usage};
use agentplane_engine::ports::{ChatModel, ModelError};
use agentplane_providers::{OpenAiCompatible, OpenAiConfig};
use agentplane_testkit::{Scenario, ScriptedServer, ScriptedToolCall, Step};
use serde_json::json;

const KEY: &str = "sk-test-0123456789-secret";

async fn serve(steps: Vec<Step>) -> ScriptedServer {
    ScriptedServer::start(Scenario::new(steps))
        .await
        .expect("start scripted server")
}

fn config(base_url: String) -> OpenAiConfig {
    let mut config = OpenAiConfig::new(base_url);
    config.max_retries = 2;
    config.retry_base_delay = Duration::from_millis(1);
    config.request_timeout = Duration::from_secs(10);
    config
}

fn model(server: &ScriptedServer) -> OpenAiCompatible {
    OpenAiCompatible::new(config(server.base_url())).expect("client")
}

fn request() -> ChatRequest {
    ChatRequest {
        model: "m1".to_owned(),
        messages: vec![
            ChatMessage::system("be brief"),
            ChatMessage::user("write a file"),
            ChatMessage::assistant(
                None,
                vec![ToolCall {
                    id: "c1".to_owned(),
                    name: "read_file".to_owned(),
                    arguments: r#"{"path":"x"}"#.to_owned(),
                }],
            ),
            ChatMessage::tool_result("c1", "contents"),
        ],
        tools: vec![ToolSpec {
            name: "write_file".to_owned(),
            description: "Writes a file".to_owned(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            side_effects: true,
        }],
        temperature: None,
        max_tokens: None,
        tool_choice: None,
        response_schema: None,
    }
}

/// Runs one call, collecting the deltas passed to `on_text`.
async fn call(
    model: &OpenAiCompatible,
    request: &ChatRequest,
) -> (Result<ChatResponse, ModelError>, Vec<String>) {
    let mut deltas = Vec::new();
    let result = model
        .chat_with(request, &mut |text: &str| deltas.push(text.to_owned()))
        .await;
    (result, deltas)
}

fn protocol_message(result: Result<ChatResponse, ModelError>) -> String {
    match result {
        Err(ModelError::Protocol(message)) => message,
        other => panic!("expected a protocol error, got {other:?}"),
    }
}

#[tokio::test]
async fn streamed_text_arrives_in_deltas_with_usage() {
    let server = serve(vec![
        Step::text("hello world").with_split(3).with_usage(10, 3),
    ])
    .await;
    let (result, deltas) = call(&model(&server), &request()).await;
    let answer = result.expect("answer");
    assert_eq!(deltas, vec!["hell", "o wo", "rld"]);
    assert_eq!(answer.content, "hello world");
    assert_eq!(answer.finish_reason.as_deref(), Some("stop"));
    assert_eq!(
        answer.usage,
        Some(Usage {
            input_tokens: 10,
            output_tokens: 3
        })
    );
    assert_eq!(answer.model, "m1");
    assert!(answer.tool_calls.is_empty());

    let sent = &server.requests()[0];
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"], json!({"include_usage": true}));
    assert_eq!(sent["model"], "m1");
    assert_eq!(
        sent["tools"][0],
        json!({"type": "function", "function": {
            "name": "write_file",
            "description": "Writes a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        }})
    );
    assert_eq!(
        sent["messages"][0],
        json!({"role": "system", "content": "be brief"})
    );
    assert_eq!(sent["messages"][2]["tool_calls"][0]["type"], "function");
    assert_eq!(sent["messages"][2]["tool_calls"][0]["id"], "c1");
    assert_eq!(
        sent["messages"][3],
        json!({"role": "tool", "content": "contents", "tool_call_id": "c1"})
    );
    assert_eq!(server.received()[0].authorization, None);
}

#[tokio::test]
async fn whole_answer_without_streaming() {
    let server = serve(vec![Step::text("complete").with_usage(7, 2)]).await;
    let mut config = config(server.base_url());
    config.stream = false;
    let model = OpenAiCompatible::new(config).expect("client");
    let mut plain = request();
    plain.tools.clear();
    let (result, deltas) = call(&model, &plain).await;
    let answer = result.expect("answer");
    assert_eq!(deltas, vec!["complete"]);
    assert_eq!(answer.content, "complete");
    assert_eq!(
        answer.usage,
        Some(Usage {
            input_tokens: 7,
            output_tokens: 2
        })
    );
    let sent = &server.requests()[0];
    assert_eq!(sent["stream"], false);
    assert!(sent.get("stream_options").is_none());
    assert!(sent.get("tools").is_none(), "empty tools are omitted");
}

#[tokio::test]
async fn tool_calls_split_across_many_chunks_are_reassembled() {
    let calls = vec![
        ScriptedToolCall {
            id: Some("call_a".to_owned()),
            name: "write_file".to_owned(),
            arguments: json!({"path": "notes/a.txt", "content": "line one\nline two ünïcode"}),
        },
        ScriptedToolCall {
            id: Some("call_b".to_owned()),
            name: "finish_task".to_owned(),
            arguments: json!({"summary": "done"}),
        },
    ];
    let step = Step {
        text: Some("Let me write it.".to_owned()),
        ..Step::tool_calls(calls)
    }
    .with_split(9);
    for stream in [true, false] {
        let server = serve(vec![step.clone()]).await;
        let mut config = config(server.base_url());
        config.stream = stream;
        let model = OpenAiCompatible::new(config).expect("client");
        let (result, deltas) = call(&model, &request()).await;
        let answer = result.expect("answer");
        assert_eq!(deltas.concat(), "Let me write it.");
        assert_eq!(answer.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(answer.tool_calls.len(), 2, "stream: {stream}");
        assert_eq!(answer.tool_calls[0].id, "call_a");
        assert_eq!(answer.tool_calls[0].name, "write_file");
        let args: serde_json::Value =
            serde_json::from_str(&answer.tool_calls[0].arguments).expect("arguments json");
        assert_eq!(args["content"], "line one\nline two ünïcode");
        assert_eq!(answer.tool_calls[1].id, "call_b");
        assert_eq!(answer.tool_calls[1].arguments, r#"{"summary":"done"}"#);
    }
}

#[tokio::test]
async fn lenient_with_missing_ids_empty_finish_reason_and_missing_usage() {
    let step = Step::tool_calls(vec![
        ScriptedToolCall {
            id: None,
            name: "a".to_owned(),
            arguments: json!("{not json"),
        },
        ScriptedToolCall {
            id: None,
            name: "b".to_owned(),
            arguments: json!({}),
        },
    ])
    .without_ids()
    .with_empty_finish_reason()
    .without_usage()
    .with_split(3);
    for stream in [true, false] {
        let server = serve(vec![step.clone()]).await;
        let mut config = config(server.base_url());
        config.stream = stream;
        let model = OpenAiCompatible::new(config).expect("client");
        let (result, _) = call(&model, &request()).await;
        let answer = result.expect("answer");
        let ids: Vec<&str> = answer.tool_calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, vec!["call_0", "call_1"], "stream: {stream}");
        assert_eq!(answer.tool_calls[0].arguments, "{not json");
        assert_eq!(answer.finish_reason, None);
        assert_eq!(answer.usage, None);
    }
}

#[tokio::test]
async fn the_chat_model_port_returns_the_assembled_answer() {
    let server = serve(vec![Step::tool_call(
        "finish_task",
        json!({"summary": "ok"}),
    )])
    .await;
    let model: Box<dyn ChatModel> = Box::new(model(&server));
    assert_eq!(model.provider(), "openai-compatible");
    let mut ignored = |_: &str| {};
    let answer = model.chat(&request(), &mut ignored).await.expect("answer");
    assert_eq!(answer.tool_calls[0].name, "finish_task");
}

#[tokio::test]
async fn model_without_tools_is_a_clear_error_not_retried() {
    let server = serve(vec![Step::no_tools(), Step::text("unused")]).await;
    let (result, _) = call(&model(&server), &request()).await;
    assert_eq!(
        result.expect_err("no tools"),
        ModelError::NoToolSupport {
            model: "m1".to_owned()
        }
    );
    assert_eq!(server.requests().len(), 1);

    for (status, body) in [
        (
            404,
            r#"{"error":{"message":"Tools is not supported for this model"}}"#,
        ),
        (500, r#"{"error":"tool use is not supported by gemma"}"#),
    ] {
        let server = serve(vec![Step::error(status, body), Step::text("unused")]).await;
        let (result, _) = call(&model(&server), &request()).await;
        assert!(
            matches!(result, Err(ModelError::NoToolSupport { .. })),
            "{status}: {result:?}"
        );
        assert_eq!(server.requests().len(), 1);
    }
}

#[tokio::test]
async fn server_error_then_success_is_retried() {
    let server = serve(vec![
        Step::error(500, r#"{"error":"boom"}"#),
        Step::error(502, "bad gateway"),
        Step::text("recovered"),
    ])
    .await;
    let (result, deltas) = call(&model(&server), &request()).await;
    assert_eq!(result.expect("answer").content, "recovered");
    assert_eq!(deltas, vec!["recovered"]);
    assert_eq!(server.requests().len(), 3);
    assert_eq!(
        server.requests()[0],
        server.requests()[2],
        "same body each attempt"
    );
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let server = serve(vec![
        Step::error(400, r#"{"error":{"message":"bad field"}}"#),
        Step::text("unused"),
    ])
    .await;
    let (result, _) = call(&model(&server), &request()).await;
    match result {
        Err(ModelError::Upstream { status: 400, body }) => assert!(body.contains("bad field")),
        other => panic!("expected Upstream 400, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn rate_limit_storm_ends_as_rate_limited_after_all_attempts() {
    let scenario =
        Scenario::new(vec![Step::error(429, r#"{"error":"slow down"}"#)]).repeating(true);
    let server = ScriptedServer::start(scenario).await.expect("start");
    let mut config = config(server.base_url());
    config.max_retries = 3;
    let model = OpenAiCompatible::new(config).expect("client");
    let (result, _) = call(&model, &request()).await;
    match result {
        Err(ModelError::RateLimited { body }) => assert!(body.contains("slow down")),
        other => panic!("expected RateLimited, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 4);
}

#[tokio::test]
async fn server_error_storm_ends_as_upstream() {
    let scenario = Scenario::new(vec![Step::error(503, "overloaded")]).repeating(true);
    let server = ScriptedServer::start(scenario).await.expect("start");
    let mut config = config(server.base_url());
    config.max_retries = 0;
    let model = OpenAiCompatible::new(config).expect("client");
    let (result, _) = call(&model, &request()).await;
    assert_eq!(
        result.expect_err("fails"),
        ModelError::Upstream {
            status: 503,
            body: "overloaded".to_owned()
        }
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn unreachable_port_names_the_url_without_credentials() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let mut config = config(format!("http://user:hunter2@127.0.0.1:{port}/v1/"));
    config.api_key = Some(KEY.to_owned());
    let model = OpenAiCompatible::new(config).expect("client");
    let (result, _) = call(&model, &request()).await;
    let error = result.expect_err("unreachable");
    match &error {
        ModelError::Unreachable { url, detail } => {
            assert_eq!(url, &format!("http://127.0.0.1:{port}/v1"));
            assert!(!detail.is_empty());
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
    let shown = error.to_string();
    assert!(shown.contains(&format!("127.0.0.1:{port}/v1")), "{shown}");
    assert!(
        !shown.contains("hunter2") && !shown.contains(KEY),
        "{shown}"
    );
    let listed = model.list_models().await.expect_err("unreachable");
    assert!(
        matches!(listed, ModelError::Unreachable { .. }),
        "{listed:?}"
    );
}

#[tokio::test]
async fn api_key_is_sent_as_bearer_and_never_shown() {
    let echo = format!(r#"{{"error":{{"message":"Incorrect API key provided: {KEY}"}}}}"#);
    let server = serve(vec![Step::error(401, &echo), Step::error(500, &echo)]).await;
    let mut config = config(server.base_url());
    config.api_key = Some(KEY.to_owned());
    config.max_retries = 0;
    let model = OpenAiCompatible::new(config.clone()).expect("client");
    for _ in 0..2 {
        let (result, _) = call(&model, &request()).await;
        let error = result.expect_err("refused");
        let shown = format!("{error} {error:?}");
        assert!(!shown.contains(KEY), "{shown}");
        assert!(shown.contains("[redacted]"), "{shown}");
    }
    assert_eq!(
        server.received()[0].authorization.as_deref(),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert!(!format!("{config:?} {model:?}").contains(KEY));
}

#[tokio::test]
async fn malformed_chunk_is_a_protocol_error() {
    let server = serve(vec![Step::raw_sse(&["data: {garbage", "data: [DONE]"])]).await;
    let (result, _) = call(&model(&server), &request()).await;
    let message = protocol_message(result);
    assert!(message.contains("not valid JSON"), "{message}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn stream_cut_after_text_is_a_protocol_error_and_not_replayed() {
    let server = serve(vec![
        Step::text("partial answer")
            .with_split(2)
            .truncated_after(2),
        Step::text("must not be fetched"),
    ])
    .await;
    let (result, deltas) = call(&model(&server), &request()).await;
    let message = protocol_message(result);
    assert!(message.contains("cut off"), "{message}");
    assert_eq!(deltas, vec!["partial", " answer"]);
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn stream_cut_before_any_text_is_retried() {
    let server = serve(vec![
        Step::tool_call("write_file", json!({"path": "a"}))
            .with_split(4)
            .truncated_after(3),
        Step::tool_call("write_file", json!({"path": "b"})),
    ])
    .await;
    let (result, deltas) = call(&model(&server), &request()).await;
    let answer = result.expect("second attempt");
    assert!(deltas.is_empty());
    assert_eq!(answer.tool_calls.len(), 1);
    assert_eq!(answer.tool_calls[0].arguments, r#"{"path":"b"}"#);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn stream_ending_without_done_needs_a_finish_reason() {
    let text = r#"data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}"#;
    let finish = r#"data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#;
    let server = serve(vec![Step::raw_sse(&[text]), Step::raw_sse(&[text, finish])]).await;
    let model = model(&server);
    let (result, deltas) = call(&model, &request()).await;
    let message = protocol_message(result);
    assert!(
        message.contains("ended before it was complete"),
        "{message}"
    );
    assert_eq!(deltas, vec!["hi"]);
    let (result, _) = call(&model, &request()).await;
    let answer = result.expect("finish_reason without [DONE] is accepted");
    assert_eq!(answer.content, "hi");
    assert_eq!(answer.finish_reason.as_deref(), Some("stop"));
}

#[tokio::test]
async fn crlf_comments_keepalives_and_split_events_are_read() {
    let chunks = [
        ": keepalive\r\n\r\n",
        "data:{\"model\":\"real-model\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"He",
        "llo\"}}]}\r",
        "\n\r\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" there\"}}]}\r\n\r\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\r\n\r\n",
        ": ping\n\n",
        "data: [DONE]\r\n\r\n",
    ];
    let server = serve(vec![Step::raw_chunks(&chunks).with_chunk_delay_ms(15)]).await;
    let (result, deltas) = call(&model(&server), &request()).await;
    let answer = result.expect("answer");
    assert_eq!(deltas, vec!["Hello", " there"]);
    assert_eq!(answer.model, "real-model");
    assert_eq!(
        answer.usage,
        Some(Usage {
            input_tokens: 5,
            output_tokens: 2
        })
    );
}

#[tokio::test]
async fn error_inside_a_stream_is_reported() {
    let server = serve(vec![
        Step::raw_sse(&[r#"data: {"error":{"message":"out of memory"}}"#]),
        Step::raw_sse(&[r#"data: {"error":{"message":"model x does not support tools"}}"#]),
    ])
    .await;
    let model = model(&server);
    let message = protocol_message(call(&model, &request()).await.0);
    assert!(message.contains("out of memory"), "{message}");
    let (result, _) = call(&model, &request()).await;
    assert!(
        matches!(result, Err(ModelError::NoToolSupport { .. })),
        "{result:?}"
    );
}

#[tokio::test]
async fn oversized_answers_are_refused() {
    let huge = "x".repeat(9 * 1024 * 1024);
    for stream in [true, false] {
        let server = serve(vec![
            Step::text(huge.clone()).with_split(64),
            Step::text("unused"),
        ])
        .await;
        let mut config = config(server.base_url());
        config.stream = stream;
        let model = OpenAiCompatible::new(config).expect("client");
        let (result, _) = call(&model, &request()).await;
        let message = protocol_message(result);
        assert!(
            message.contains("larger than 8 MiB"),
            "stream {stream}: {message}"
        );
        assert_eq!(server.requests().len(), 1);
    }
}

#[tokio::test]
async fn hostile_non_streamed_bodies_are_protocol_errors() {
    for body in ["not json at all", "{\"choices\": []}", "[1,2,3]"] {
        let server = serve(vec![Step::error(200, body)]).await;
        let mut config = config(server.base_url());
        config.stream = false;
        let model = OpenAiCompatible::new(config).expect("client");
        let (result, _) = call(&model, &request()).await;
        protocol_message(result);
    }
}

#[tokio::test]
async fn slow_servers_time_out() {
    let server = serve(vec![
        Step::text("late").with_delay_ms(1500),
        Step::text("a b c").with_split(3).with_chunk_delay_ms(1500),
    ])
    .await;
    let mut config = config(server.base_url());
    config.request_timeout = Duration::from_millis(300);
    let model = OpenAiCompatible::new(config).expect("client");
    let (result, _) = call(&model, &request()).await;
    assert!(
        matches!(result, Err(ModelError::Timeout { .. })),
        "{result:?}"
    );
    let (result, deltas) = call(&model, &request()).await;
    assert!(
        matches!(result, Err(ModelError::Timeout { .. })),
        "{result:?}"
    );
    assert_eq!(deltas, vec!["a "]);
    assert_eq!(server.requests().len(), 2, "timeouts are not retried");
}
