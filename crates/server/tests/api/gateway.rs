//! The OpenAI-compatible gateway over real HTTP: plain and streamed completions, tools,
//! pass-through of sampling fields, hostile bodies, auth and tenancy, rate limits (429)
//! and budgets (402) under the gateway's agent name, model errors, and gateway calls in
//! `GET /v1/costs`.

use std::time::{Duration, Instant};

use agentplane_testkit::Step;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::harness::{Answer, Api, PATIENCE, Setup, TOKEN, closed_window};

const COMPLETIONS: &str = "/openai/v1/chat/completions";

fn hello(stream: bool) -> Value {
    json!({
        "model": "scripted-model",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": stream,
    })
}

/// Posts to the gateway and reads the raw SSE body of a streamed answer.
async fn stream(api: &Api, client: &str, body: Value) -> (StatusCode, String, Vec<Value>) {
    let response = api
        .request(Method::POST, COMPLETIONS, Some(client))
        .json(&body)
        .send()
        .await
        .expect("request sent");
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let text = response.text().await.expect("body");
    if status.is_success() {
        assert_eq!(content_type, "text/event-stream", "{text}");
    }
    let chunks = text
        .split("\n\n")
        .filter_map(|frame| frame.strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str(data).expect("chunk is JSON"))
        .collect();
    (status, text, chunks)
}

/// Cost rows `(key, calls, usd_micros)` of a client, waiting until `calls` are
/// recorded (gateway calls are written after the answer).
async fn costs_when(api: &Api, client: &str, query: &str, calls: u64) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let answer = api.get(&format!("/v1/costs{query}"), client).await;
        assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
        if answer.body["total"]["calls"] == calls || Instant::now() > deadline {
            return answer.body;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_plain_completion_is_an_openai_document_and_passes_sampling_fields_on() {
    let api = Setup::new(vec![Step::text("Hello there.").with_usage(12, 3)])
        .start()
        .await;
    let mut body = hello(false);
    body["temperature"] = json!(0.25);
    body["max_completion_tokens"] = json!(40);
    body["messages"] = json!([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
    ]);
    body["user"] = json!("extra fields are tolerated");
    let answer = api.post(COMPLETIONS, "alice", body).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    let doc = &answer.body;
    assert_eq!(doc["object"], "chat.completion");
    assert!(
        doc["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("chatcmpl-"))
    );
    assert_eq!(doc["model"], "scripted-model");
    assert_eq!(doc["choices"][0]["message"]["role"], "assistant");
    assert_eq!(doc["choices"][0]["message"]["content"], "Hello there.");
    assert_eq!(doc["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        doc["usage"],
        json!({"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15})
    );
    let sent = api.scripted.requests();
    let upstream = sent.last().expect("the model was called");
    assert_eq!(upstream["model"], "scripted-model");
    assert_eq!(upstream["max_tokens"], 40);
    assert_eq!(upstream["temperature"], 0.25);
    assert_eq!(
        upstream["messages"],
        json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}])
    );
}

#[tokio::test]
async fn a_streamed_completion_sends_deltas_a_finish_reason_usage_and_done() {
    let api = Setup::new(vec![
        Step::text("one two three four")
            .with_split(4)
            .with_usage(5, 4),
    ])
    .start()
    .await;
    let mut body = hello(true);
    body["stream_options"] = json!({"include_usage": true});
    let (status, raw, chunks) = stream(&api, "alice", body).await;
    assert_eq!(status, StatusCode::OK, "{raw}");
    assert!(raw.ends_with("data: [DONE]\n\n"), "{raw}");
    let id = chunks[0]["id"].as_str().expect("id");
    assert!(id.starts_with("chatcmpl-"));
    assert!(
        chunks
            .iter()
            .all(|c| c["id"] == id && c["object"] == "chat.completion.chunk")
    );
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "one two three four");
    let deltas = chunks
        .iter()
        .filter(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|t| !t.is_empty())
        })
        .count();
    assert!(deltas >= 2, "text arrives in several deltas: {raw}");
    let finish = &chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    let usage = chunks.last().expect("usage chunk");
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["total_tokens"], 9);

    // Without include_usage there is no usage chunk.
    let api = Setup::new(vec![Step::text("x")]).start().await;
    let (_, raw, chunks) = stream(&api, "alice", hello(true)).await;
    assert!(chunks.iter().all(|c| c.get("usage").is_none()), "{raw}");
}

#[tokio::test]
async fn tools_are_offered_and_tool_calls_come_back_plain_and_streamed() {
    let weather = json!({"city": "Paris"});
    let api = Setup::new(vec![
        Step::tool_call("get_weather", weather.clone()).with_usage(20, 5),
        Step::tool_call("get_weather", weather.clone()),
        Step::text("Sunny."),
    ])
    .start()
    .await;
    let tools = json!([{"type": "function", "function": {
        "name": "get_weather", "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    let mut body = hello(false);
    body["tools"] = tools.clone();
    body["tool_choice"] = json!("required");
    let answer = api.post(COMPLETIONS, "alice", body).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    let choice = &answer.body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], Value::Null);
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "get_weather");
    let arguments: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().expect("text")).expect("json");
    assert_eq!(arguments, weather);
    let upstream = api.scripted.requests().last().cloned().expect("called");
    assert_eq!(upstream["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(upstream["tool_choice"], "required");

    let mut body = hello(true);
    body["tools"] = tools.clone();
    let (status, raw, chunks) = stream(&api, "alice", body).await;
    assert_eq!(status, StatusCode::OK, "{raw}");
    let calls: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].as_array())
        .flatten()
        .collect();
    assert_eq!(calls.len(), 1, "{raw}");
    assert_eq!(calls[0]["index"], 0);
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    assert!(raw.contains("\"finish_reason\":\"tool_calls\""), "{raw}");

    // The conversation goes on with the tool's result, as OpenAI clients send it.
    let mut body = hello(false);
    body["tools"] = tools;
    body["messages"] = json!([
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]);
    let answer = api.post(COMPLETIONS, "alice", body).await;
    assert_eq!(answer.body["choices"][0]["message"]["content"], "Sunny.");
    let upstream = api.scripted.requests().last().cloned().expect("called");
    assert_eq!(upstream["messages"][2]["tool_call_id"], "call_1");
    assert_eq!(upstream["messages"][1]["tool_calls"][0]["id"], "call_1");
}

#[tokio::test]
async fn hostile_bodies_are_400_in_the_envelope_and_never_reach_the_model() {
    let api = Setup::new(vec![Step::text("never")]).start().await;
    let user = json!([{"role": "user", "content": "hi"}]);
    let bodies = [
        json!({}),
        json!([]),
        json!("text"),
        json!({"model": 7, "messages": user}),
        json!({"model": "", "messages": user}),
        json!({"model": "m", "messages": []}),
        json!({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}),
        json!({"model": "m", "messages": [{"role": "user", "content": {"a": 1}}]}),
        json!({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}),
        json!({"model": "m", "messages": [{"role": "tool", "content": "x"}]}),
        json!({"model": "m", "messages": user, "tools": [{"type": "function", "function": {"name": "../etc"}}]}),
        json!({"model": "m", "messages": user, "tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}]}),
        json!({"model": "m", "messages": user, "tool_choice": {"type": "function", "function": {"name": "nope"}}}),
        json!({"model": "m", "messages": user, "temperature": 9}),
        json!({"model": "m", "messages": user, "temperature": "warm"}),
        json!({"model": "m", "messages": user, "max_tokens": 0}),
        json!({"model": "m", "messages": user, "max_tokens": 1e30}),
        json!({"model": "m", "messages": user, "stream": 1}),
        json!({"model": "m", "messages": user, "n": 3}),
    ];
    for body in bodies {
        let answer = api.post(COMPLETIONS, "alice", body.clone()).await;
        answer.assert_error(400, "INVALID_ARGUMENT");
        assert!(
            !answer.body["error"]["message"]
                .as_str()
                .unwrap_or("")
                .is_empty(),
            "{body}"
        );
    }
    for raw in [
        "{",
        "not json",
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\\ud800\"}",
        "",
    ] {
        let answer = api
            .send(
                api.request(Method::POST, COMPLETIONS, Some("alice"))
                    .header("content-type", "application/json")
                    .body(raw),
            )
            .await;
        answer.assert_error(400, "INVALID_ARGUMENT");
    }
    let answer = api
        .send(
            api.request(Method::POST, COMPLETIONS, Some("alice"))
                .body("{}"),
        )
        .await;
    answer.assert_error(415, "INVALID_ARGUMENT");
    let huge = json!({"model": "m", "messages": [{"role": "user", "content": "x".repeat(2 * 1024 * 1024)}]});
    api.post(COMPLETIONS, "alice", huge)
        .await
        .assert_error(413, "INVALID_ARGUMENT");
    assert_eq!(api.scripted.chat_request_count(), 0);
}

#[tokio::test]
async fn the_gateway_takes_the_same_token_and_client_id_as_v1() {
    let api = Setup::new(vec![Step::text("ok")])
        .token(TOKEN)
        .start()
        .await;
    let without = api
        .send(
            api.http
                .post(api.url(COMPLETIONS))
                .header("X-Client-ID", "alice")
                .json(&hello(false)),
        )
        .await;
    without.assert_error(401, "UNAUTHORIZED");
    let wrong = api
        .send(
            api.http
                .post(api.url(COMPLETIONS))
                .header("X-Client-ID", "alice")
                .bearer_auth("not-the-token")
                .json(&hello(false)),
        )
        .await;
    wrong.assert_error(401, "UNAUTHORIZED");
    let models = api
        .send(
            api.http
                .get(api.url("/openai/v1/models"))
                .header("X-Client-ID", "alice"),
        )
        .await;
    models.assert_error(401, "UNAUTHORIZED");
    let anonymous = api
        .send(
            api.request(Method::POST, COMPLETIONS, None)
                .json(&hello(false)),
        )
        .await;
    anonymous.assert_error(400, "INVALID_ARGUMENT");
    let bad_client = api
        .send(
            api.request(Method::POST, COMPLETIONS, Some("../bob"))
                .json(&hello(false)),
        )
        .await;
    bad_client.assert_error(400, "INVALID_ARGUMENT");
    assert_eq!(api.scripted.chat_request_count(), 0);
    let ok = api.post(COMPLETIONS, "alice", hello(false)).await;
    assert_eq!(ok.status, StatusCode::OK, "{:?}", ok.body);
}

#[tokio::test]
async fn models_are_listed_the_openai_way() {
    let api = Setup::new(vec![]).start().await;
    let answer = api.get("/openai/v1/models", "alice").await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    assert_eq!(answer.body["object"], "list");
    let ids: Vec<&str> = answer.body["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|m| {
            assert_eq!(m["object"], "model");
            m["id"].as_str().expect("id")
        })
        .collect();
    assert!(ids.contains(&"scripted-model"), "{ids:?}");
}

#[tokio::test]
async fn a_rate_limit_on_the_gateway_agent_is_429_with_retry_after_per_client() {
    let api = Setup::new(vec![Step::text("one"), Step::text("two")])
        .policy(
            "rate.yaml",
            "name: one-call\ntype: rate_limit\ntargets: {agents: [proxy]}\n\
             rules: {window: 10m, max: 1, per: [client]}\n",
        )
        .extra_config("[gateway]\nagent = \"proxy\"\n")
        .start()
        .await;
    let first = api.post(COMPLETIONS, "alice", hello(false)).await;
    assert_eq!(first.status, StatusCode::OK, "{:?}", first.body);
    let refused = api.post(COMPLETIONS, "alice", hello(false)).await;
    refused.assert_error(429, "RATE_LIMITED");
    let wait: u64 = refused.headers["retry-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("seconds");
    assert!((1..=600).contains(&wait), "{wait}");
    // A streamed request is refused the same way, before any stream starts.
    let (status, raw, _) = stream(&api, "alice", hello(true)).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{raw}");
    // Another client has its own window.
    let bob = api.post(COMPLETIONS, "bob", hello(false)).await;
    assert_eq!(bob.status, StatusCode::OK, "{:?}", bob.body);
    assert_eq!(api.scripted.chat_request_count(), 2);
}

#[tokio::test]
async fn a_spent_budget_is_402_and_gateway_calls_show_in_costs_for_their_client_only() {
    // 4,000 output tokens at $100/M: $0.40 of the $0.50; the next call's worst case
    // (4,096 tokens, $0.41) no longer fits.
    let api = Setup::new(vec![Step::text("pricey").with_usage(0, 4_000)])
        .policy(
            "budget.yaml",
            "name: tiny\ntype: budget\ntargets: {tags: [external]}\n\
             rules: {usd: 0.5, period: day, per: [client]}\n",
        )
        .extra_config(
            "[gateway]\ntags = [\"external\"]\n\
             [prices.\"scripted-model\"]\ninput_per_mtok = 0.0\noutput_per_mtok = 100.0\n",
        )
        .start()
        .await;
    let first = api.post(COMPLETIONS, "alice", hello(false)).await;
    assert_eq!(first.status, StatusCode::OK, "{:?}", first.body);
    let refused = api.post(COMPLETIONS, "alice", hello(false)).await;
    refused.assert_error(402, "BUDGET_EXCEEDED");
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("tiny")),
        "{:?}",
        refused.body
    );
    let (status, _, _) = stream(&api, "alice", hello(true)).await;
    assert_eq!(status, StatusCode::PAYMENT_REQUIRED);
    assert_eq!(api.scripted.chat_request_count(), 1);

    let costs = costs_when(&api, "alice", "?group_by=agent", 1).await;
    assert_eq!(costs["rows"][0]["key"], "gateway", "{costs}");
    assert_eq!(costs["rows"][0]["calls"], 1, "{costs}");
    assert_eq!(costs["rows"][0]["usd_micros"], 400_000, "{costs}");
    assert_eq!(costs["total"]["output_tokens"], 4_000, "{costs}");
    let bob = api.get("/v1/costs", "bob").await;
    assert_eq!(bob.body["total"]["calls"], 0, "{:?}", bob.body);
}

#[tokio::test]
async fn gateway_and_turn_costs_add_up_in_one_report() {
    let api = Setup::new(vec![
        Step::text("turn").with_usage(100, 10),
        Step::text("gateway").with_usage(200, 20),
    ])
    .extra_config("[prices.\"scripted-model\"]\ninput_per_mtok = 1.0\noutput_per_mtok = 1.0\n")
    .start()
    .await;
    let thread = api.create_thread("alice", "chat").await;
    api.start_turn("alice", &thread, "hi")
        .await
        .until_completed()
        .await;
    let answer = api.post(COMPLETIONS, "alice", hello(false)).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    let costs = costs_when(&api, "alice", "?group_by=agent", 2).await;
    assert_eq!(costs["total"]["calls"], 2, "{costs}");
    assert_eq!(costs["total"]["usd_micros"], 330, "{costs}");
    let keys: Vec<&str> = costs["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|r| r["key"].as_str())
        .collect();
    assert_eq!(keys, ["chat", "gateway"], "{costs}");
    // A thread filter shows the thread's turns only.
    let one = api
        .get(&format!("/v1/costs?thread_id={thread}"), "alice")
        .await;
    assert_eq!(one.body["total"]["calls"], 1, "{:?}", one.body);
}

#[tokio::test]
async fn model_failures_are_envelopes_before_and_after_the_stream_begins() {
    let api = Setup::new(vec![
        Step::error(500, "{\"error\":{\"message\":\"boom\"}}"),
        Step::text("partial answer")
            .with_split(3)
            .truncated_after(2),
    ])
    .start()
    .await;
    let plain = api.post(COMPLETIONS, "alice", hello(false)).await;
    plain.assert_error(502, "UPSTREAM_UNAVAILABLE");
    let (status, raw, chunks) = stream(&api, "alice", hello(true)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(!raw.contains("[DONE]"), "{raw}");
    let last = chunks.last().expect("an error frame");
    assert_eq!(last["error"]["code"], "UPSTREAM_UNAVAILABLE", "{raw}");
    // A call that failed before any text costs nothing and is not recorded; one that
    // failed after its text began is recorded at its worst case (free here).
    tokio::time::sleep(Duration::from_millis(100)).await;
    let costs = api.get("/v1/costs", "alice").await;
    assert_eq!(costs.body["total"]["calls"], 1, "{:?}", costs.body);
}

#[tokio::test]
async fn a_closed_time_window_for_the_gateway_is_403_and_spares_other_agents() {
    let api = Setup::new(vec![Step::text("x")])
        .policy("hours.yaml", &closed_window("closed", "gateway"))
        .start()
        .await;
    let refused: Answer = api.post(COMPLETIONS, "alice", hello(false)).await;
    refused.assert_error(403, "FORBIDDEN");
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("closed")),
        "{:?}",
        refused.body
    );
    assert_eq!(api.scripted.chat_request_count(), 0);
}
