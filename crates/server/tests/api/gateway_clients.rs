//! Clients we did not write against the gateway's other routes (issue 51): PyPI's
//! `anthropic` on `/anthropic/v1/messages`, `openai`'s `responses.create` on
//! `/openai/v1/responses`, and the OpenAI Agents SDK in its default Responses mode,
//! each with a tool, whole and streamed, against the scripted model — including a
//! model that writes its call as text, which every client still gets as a real call.
//! Each call is recorded and priced under the route's own agent name.

use agentplane_testkit::{Step, peers};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

use crate::harness::{Api, PATIENCE, Setup, TOKEN, closed_window};

/// The price of every call here: $1 per million input tokens, $2 per million output.
const PRICED: &str = "[prices.\"scripted-model\"]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\n\
                      [gateway.agents]\nmessages = \"claude-code\"\nresponses = \"codex\"\n";

/// Runs `peers/gateway_clients.py MODE`; returns its exit code and JSON.
async fn run_client(api: &Api, mode: &str) -> (Option<i32>, Value) {
    let mut command = std::process::Command::new(peers::python());
    command
        .arg(peers::gateway_clients_script())
        .arg(mode)
        .args(["--base-url", &api.url("")])
        .args([
            "--client-id",
            "alice",
            "--model",
            "scripted-model",
            "--api-key",
            TOKEN,
        ]);
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("client task")
        .expect("the client runs");
    (output.status.code(), peers::client_json(&output))
}

/// The cost rows of alice grouped by agent, once `calls` are recorded.
async fn costs_when(api: &Api, calls: u64) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let answer = api.get("/v1/costs?group_by=agent", "alice").await;
        if answer.body["total"]["calls"] == calls || Instant::now() > deadline {
            return answer.body;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn weather() -> Value {
    json!({"city": "Paris"})
}

/// A call to `get_weather` as a small model writes it: JSON in the text.
fn written_call() -> Step {
    Step::text(r#"{"name": "get_weather", "arguments": {"city": "Paris"}}"#).with_split(5)
}

#[tokio::test]
async fn the_anthropic_package_calls_a_tool_whole_and_streamed_and_is_priced_as_its_route() {
    let api = Setup::new(vec![
        Step::tool_call("get_weather", weather()).with_usage(30, 10),
        written_call().with_usage(30, 10),
        Step::text("Sunny, 21 C.").with_split(3).with_usage(40, 5),
    ])
    .token(TOKEN)
    .extra_config(PRICED)
    .start()
    .await;
    let (code, out) = run_client(&api, "anthropic").await;
    assert_eq!(code, Some(0), "{out}");
    let whole = &out["whole"];
    assert_eq!(whole["stop_reason"], "tool_use", "{out}");
    assert_eq!(whole["tool_uses"][0]["name"], "get_weather", "{out}");
    assert_eq!(whole["tool_uses"][0]["input"], weather(), "{out}");
    assert_eq!(whole["usage"]["input_tokens"], 30, "{out}");
    // The model wrote its call as text: the client gets a tool_use block, never the JSON.
    let streamed = &out["streamed"];
    assert_eq!(streamed["stop_reason"], "tool_use", "{out}");
    assert_eq!(streamed["tool_uses"][0]["input"], weather(), "{out}");
    assert_eq!(streamed["text"], "", "{out}");
    assert!(
        streamed["tool_uses"][0]["id"]
            .as_str()
            .is_some_and(|id| id.starts_with(agentplane_engine::gateway::RECOVERED_ID)),
        "{out}"
    );
    let events: Vec<&str> = streamed["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(events.first(), Some(&"message_start"), "{out}");
    assert_eq!(events.last(), Some(&"message_stop"), "{out}");
    let after = &out["after_tool"];
    assert_eq!(after["text"], "Sunny, 21 C.", "{out}");
    assert_eq!(after["stop_reason"], "end_turn", "{out}");
    assert!(out["count"].as_u64().is_some_and(|n| n > 0), "{out}");
    // The tool result reached the model as a tool message.
    let last = api.scripted.requests().last().cloned().expect("a request");
    let messages = last["messages"].as_array().expect("messages");
    assert!(
        messages
            .iter()
            .any(|m| m["role"] == "tool" && m["content"] == "sunny, 21 C"),
        "{last}"
    );
    let costs = costs_when(&api, 3).await;
    assert_eq!(costs["rows"][0]["key"], "claude-code", "{costs}");
    assert_eq!(costs["total"]["calls"], 3, "{costs}");
    assert_eq!(costs["total"]["input_tokens"], 100, "{costs}");
    // 100 input tokens at $1/M and 25 output at $2/M.
    assert_eq!(costs["total"]["usd_micros"], 150, "{costs}");
}

#[tokio::test]
async fn the_openai_packages_responses_api_calls_a_tool_whole_and_streamed() {
    let api = Setup::new(vec![
        Step::tool_call("get_weather", weather()).with_usage(30, 10),
        written_call().with_usage(30, 10),
        Step::text("Sunny, 21 C.").with_split(3).with_usage(40, 5),
    ])
    .token(TOKEN)
    .extra_config(PRICED)
    .start()
    .await;
    let (code, out) = run_client(&api, "responses").await;
    assert_eq!(code, Some(0), "{out}");
    let whole = &out["whole"];
    assert_eq!(whole["status"], "completed", "{out}");
    assert!(
        whole["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("resp_")),
        "{out}"
    );
    assert_eq!(whole["calls"][0]["name"], "get_weather", "{out}");
    assert_eq!(
        serde_json::from_str::<Value>(whole["calls"][0]["arguments"].as_str().unwrap_or("")).ok(),
        Some(weather()),
        "{out}"
    );
    assert_eq!(whole["usage"]["total_tokens"], 40, "{out}");
    let streamed = &out["streamed"];
    assert_eq!(streamed["calls"][0]["name"], "get_weather", "{out}");
    assert_eq!(
        streamed["text"], "",
        "the call written as text is not prose: {out}"
    );
    let events = streamed["events"].as_array().expect("events");
    assert_eq!(events.first(), Some(&json!("response.created")), "{out}");
    assert_eq!(events.last(), Some(&json!("response.completed")), "{out}");
    assert_eq!(out["after_tool"]["text"], "Sunny, 21 C.", "{out}");
    // The instructions went as a system message.
    let first = api.scripted.requests().first().cloned().expect("a request");
    assert_eq!(first["messages"][0]["role"], "system", "{first}");
    let costs = costs_when(&api, 3).await;
    assert_eq!(costs["rows"][0]["key"], "codex", "{costs}");
    assert_eq!(costs["total"]["usd_micros"], 150, "{costs}");
}

#[tokio::test]
async fn the_agents_sdk_runs_a_function_tool_over_the_responses_api() {
    let api = Setup::new(vec![
        Step::tool_call("get_weather", weather()).with_split(2),
        Step::text("It is sunny and 21 C in Paris.").with_split(4),
    ])
    .token(TOKEN)
    .start()
    .await;
    let (code, out) = run_client(&api, "agents").await;
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(out["tool_called_with"], json!(["Paris"]), "{out}");
    assert_eq!(
        out["final_output"], "It is sunny and 21 C in Paris.",
        "{out}"
    );
    assert_eq!(out["responses"], 2, "{out}");
    assert_eq!(api.scripted.chat_request_count(), 2);
}

#[tokio::test]
async fn a_policy_on_one_routes_agent_refuses_its_client_in_its_own_shape_and_spares_the_other() {
    let api = Setup::new(vec![
        Step::tool_call("get_weather", weather()),
        Step::text("Sunny."),
        Step::text("Sunny, 21 C."),
    ])
    .token(TOKEN)
    .policy(
        "hours.yaml",
        &closed_window("no-claude-code", "claude-code"),
    )
    .extra_config(PRICED)
    .start()
    .await;
    let (code, out) = run_client(&api, "anthropic").await;
    assert_eq!(code, Some(3), "{out}");
    assert_eq!(out["apiError"]["status"], 403, "{out}");
    assert_eq!(out["apiError"]["type"], "permission_error", "{out}");
    assert!(
        out["apiError"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no-claude-code")),
        "{out}"
    );
    assert_eq!(
        api.scripted.chat_request_count(),
        0,
        "refused before the model"
    );
    // The Responses route runs as `codex`, which the policy does not name.
    let (code, out) = run_client(&api, "responses").await;
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(api.scripted.chat_request_count(), 3, "{out}");
}

#[tokio::test]
async fn hostile_bodies_on_the_new_routes_are_400_and_never_reach_the_model() {
    let api = Setup::new(vec![Step::text("never")]).start().await;
    let user = json!([{"role": "user", "content": "hi"}]);
    let responses = [
        json!({}),
        json!({"model": "m"}),
        json!({"model": "", "input": "hi"}),
        json!({"model": "m", "input": {"a": 1}}),
        json!({"model": "m", "input": []}),
        json!({"model": "m", "input": [{"role": "wizard", "content": "x"}]}),
        json!({"model": "m", "input": [{"type": "function_call_output", "output": "x"}]}),
        json!({"model": "m", "input": [{"type": "computer_call"}]}),
        json!({"model": "m", "input": "hi", "tools": [{"type": "file_search"}]}),
        json!({"model": "m", "input": "hi", "tools": [{"type": "function", "name": "../x"}]}),
        json!({"model": "m", "input": "hi", "max_output_tokens": 0}),
        json!({"model": "m", "input": "hi", "temperature": 9}),
        json!({"model": "m", "input": "hi", "previous_response_id": ""}),
        json!({"model": "m", "input": "hi", "stream": "yes"}),
    ];
    for body in responses {
        let answer = api
            .post("/openai/v1/responses", "alice", body.clone())
            .await;
        answer.assert_error(400, "INVALID_ARGUMENT");
    }
    // An id never given: not found, in the envelope, the id as the client sent it.
    let unknown = api
        .post(
            "/openai/v1/responses",
            "alice",
            json!({"model": "m", "input": "hi", "previous_response_id": "resp_x"}),
        )
        .await;
    unknown.assert_error(404, "NOT_FOUND");
    let said = unknown.body["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        said.contains("`resp_x`") && !said.contains("chatcmpl"),
        "{said}"
    );
    let messages = [
        json!({}),
        json!({"model": "m", "messages": user}),
        json!({"model": "m", "max_tokens": 5, "messages": []}),
        json!({"model": "m", "max_tokens": 5, "messages": [{"role": "system", "content": "x"}]}),
        json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "document"}]}]}),
        json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "text"}]}]}),
        json!({"model": "m", "max_tokens": 5, "messages": user, "tools": [{"type": "bash_20250124", "name": "bash"}]}),
        json!({"model": "m", "max_tokens": 5, "messages": user, "tool_choice": {"type": "tool"}}),
        json!({"model": "m", "max_tokens": 0, "messages": user}),
    ];
    for body in messages {
        let answer = api
            .post("/anthropic/v1/messages", "alice", body.clone())
            .await;
        assert_eq!(answer.status, 400, "{body}: {:?}", answer.body);
        // Anthropic's shape, with agentplane's code beside it.
        assert_eq!(answer.body["type"], "error", "{body}: {:?}", answer.body);
        assert_eq!(
            answer.body["error"]["type"], "invalid_request_error",
            "{:?}",
            answer.body
        );
        assert_eq!(
            answer.body["error"]["code"], "INVALID_ARGUMENT",
            "{:?}",
            answer.body
        );
    }
    for path in ["/openai/v1/responses", "/anthropic/v1/messages"] {
        for raw in ["{", "not json", ""] {
            let answer = api
                .send(
                    api.request(reqwest::Method::POST, path, Some("alice"))
                        .header("content-type", "application/json")
                        .body(raw),
                )
                .await;
            assert_eq!(answer.status, 400, "{path} {raw:?}: {:?}", answer.body);
        }
    }
    assert_eq!(api.scripted.chat_request_count(), 0);
}

#[tokio::test]
async fn x_api_key_is_the_same_credential_as_a_bearer_token() {
    let api = Setup::new(vec![Step::text("ok").with_usage(3, 1)])
        .token(TOKEN)
        .start()
        .await;
    let body = json!({"model": "scripted-model", "max_tokens": 20,
                      "messages": [{"role": "user", "content": "hi"}]});
    let send = |key: Option<&str>| {
        let mut request = api
            .http
            .post(api.url("/anthropic/v1/messages"))
            .header("X-Client-ID", "alice")
            .json(&body);
        if let Some(key) = key {
            request = request.header("x-api-key", key);
        }
        api.send(request)
    };
    let without = send(None).await;
    assert_eq!(without.status, 401, "{:?}", without.body);
    assert_eq!(
        without.body["error"]["type"], "authentication_error",
        "{:?}",
        without.body
    );
    let wrong = send(Some("not-the-token")).await;
    assert_eq!(wrong.status, 401, "{:?}", wrong.body);
    let right = send(Some(TOKEN)).await;
    assert_eq!(right.status, 200, "{:?}", right.body);
    assert_eq!(right.body["content"][0]["text"], "ok", "{:?}", right.body);
    assert_eq!(api.scripted.chat_request_count(), 1);
}

#[tokio::test]
async fn the_openai_packages_embeddings_are_screened_priced_and_budgeted_by_input_tokens() {
    let api = Setup::new(vec![Step::text("unused")])
        .token(TOKEN)
        .policy(
            "cards.yaml",
            "name: no-cards\ntype: content\nrules: {detectors: [card], action: redact}\n",
        )
        .extra_config(
            "[prices.\"scripted-embedding\"]\ninput_per_mtok = 10.0\noutput_per_mtok = 0.0\n\
             [gateway.agents]\nembeddings = \"rag\"\n",
        )
        .start()
        .await;
    let mut command = std::process::Command::new(peers::python());
    command
        .arg(peers::gateway_clients_script())
        .arg("embeddings")
        .args(["--base-url", &api.url("")])
        .args([
            "--client-id",
            "alice",
            "--model",
            "scripted-embedding",
            "--api-key",
            TOKEN,
        ]);
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("client task")
        .expect("the client runs");
    let out = peers::client_json(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    // What the model embedded: the card was redacted before it left.
    let sent: Vec<Value> = api
        .scripted
        .received()
        .into_iter()
        .filter(|r| r.path == "/v1/embeddings")
        .filter_map(|r| r.body)
        .collect();
    assert_eq!(sent.len(), 2, "{sent:?}");
    let inputs = sent[0]["input"].as_array().expect("inputs").clone();
    assert!(!sent[0].to_string().contains("4111"), "{sent:?}");
    // Each vector is the scripted model's for what it was sent, in order, decoded from
    // base64 by the SDK.
    for (i, input) in inputs.iter().enumerate() {
        let want = agentplane_testkit::vector_of(input.as_str().expect("text"));
        let got: Vec<f32> = out["vectors"][i]
            .as_array()
            .expect("vector")
            .iter()
            .map(|x| x.as_f64().expect("number") as f32)
            .collect();
        assert_eq!(got, want, "{out}");
    }
    assert_eq!(out["indexes"], json!([0, 1, 2]), "{out}");
    let float: Vec<f32> = out["float"]
        .as_array()
        .expect("float")
        .iter()
        .map(|x| x.as_f64().expect("number") as f32)
        .collect();
    assert_eq!(float, agentplane_testkit::vector_of("the cat sat"), "{out}");
    let tokens = out["usage"]["prompt_tokens"].as_u64().expect("tokens");
    assert!(tokens > 0, "{out}");
    let costs = costs_when(&api, 2).await;
    assert_eq!(costs["rows"][0]["key"], "rag", "{costs}");
    assert_eq!(costs["total"]["output_tokens"], 0, "{costs}");
    let all_tokens = costs["total"]["input_tokens"].as_u64().expect("tokens");
    assert_eq!(all_tokens, tokens + 3, "\"the cat sat\" is 3 more: {costs}");
    assert_eq!(costs["total"]["usd_micros"], all_tokens * 10, "{costs}");
    assert_eq!(
        api.scripted.chat_request_count(),
        0,
        "no chat step was spent"
    );
}

#[tokio::test]
async fn a_clients_hard_coded_model_name_lands_where_an_alias_says_with_failover() {
    use agentplane_testkit::{Scenario, ScriptedModel, ScriptedServer};
    // The default chain is `cloud`, which would take any name as its largest model.
    let cloud = ScriptedServer::start(
        Scenario::new(vec![Step::text("from the cloud")]).with_models(vec![
            ScriptedModel::new("big").with_parameter_size("8.0B"),
            ScriptedModel::new("renamed-model").with_parameter_size("1.0B"),
        ]),
    )
    .await
    .expect("cloud");
    let down = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr");
    let api = Setup::new(vec![Step::text("from this machine").with_usage(12, 3)])
        .token(TOKEN)
        .providers(&format!(
            "[providers.local]\nkind = \"openai\"\nbase_url = \"{{scripted}}\"\nmax_retries = 0\n\
             [providers.down]\nkind = \"openai\"\nbase_url = \"http://{down}/v1\"\nmax_retries = 0\n\
             [providers.cloud]\nkind = \"openai\"\nbase_url = \"{}\"\nmax_retries = 0\n\
             [routing]\ndefault = [\"cloud\"]\n",
            cloud.base_url()
        ))
        .extra_config(
            "[gateway.models]\n\
             \"claude-*\" = { providers = [\"down\", \"local\"], model = \"scripted-model\" }\n\
             \"gpt-4o\" = \"renamed-model\"\n",
        )
        .start()
        .await;
    // Claude Code's name: pinned to `down` then `local`, failing over past `down`.
    let claude = api
        .post(
            "/anthropic/v1/messages",
            "alice",
            json!({"model": "claude-sonnet-4-5-20250929", "max_tokens": 64,
                   "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(claude.status, 200, "{}", claude.body);
    assert_eq!(claude.body["content"][0]["text"], "from this machine");
    let sent = api.scripted.requests();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["model"], "scripted-model");
    assert!(cloud.requests().is_empty(), "the cloud was not asked");
    // A model-only alias keeps `[routing]` (the cloud) and names the model to use.
    let gpt = api
        .post(
            "/openai/v1/chat/completions",
            "alice",
            json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(gpt.status, 200, "{}", gpt.body);
    assert_eq!(
        gpt.body["choices"][0]["message"]["content"],
        "from the cloud"
    );
    assert_eq!(cloud.requests()[0]["model"], "renamed-model");
    // Exact aliases are listed, so a client can pick them; patterns are not.
    let listed = api.get("/openai/v1/models", "alice").await;
    let ids: Vec<&str> = listed.body["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert_eq!(ids.first(), Some(&"gpt-4o"), "{ids:?}");
    assert!(!ids.contains(&"claude-*"), "{ids:?}");
    // Recorded against the provider that answered and the model it was asked for.
    let deadline = Instant::now() + PATIENCE;
    let costs = loop {
        let answer = api.get("/v1/costs?group_by=provider", "alice").await;
        if answer.body["total"]["calls"] == 2 || Instant::now() > deadline {
            break answer.body;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut providers: Vec<&str> = costs["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|r| r["key"].as_str())
        .collect();
    providers.sort_unstable();
    assert_eq!(providers, ["cloud", "local"], "{costs}");
}

#[tokio::test]
async fn an_alias_naming_an_unknown_provider_or_a_mistyped_key_is_refused_at_startup() {
    for (alias, named) in [
        ("x = { provider = \"nowhere\" }", "`nowhere`"),
        ("x = { modle = \"m\" }", "modle"),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("agentplane.toml");
        std::fs::write(
            &file,
            format!("[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\n[gateway.models]\n{alias}\n"),
        )
        .expect("config");
        let error =
            agentplane_runtime::Config::load_from(&agentplane_runtime::config::ConfigSource {
                explicit: Some(&file),
                cwd: dir.path(),
                env: &|_: &str| None,
            })
            .expect_err(alias);
        let text = error.to_string();
        assert!(
            text.contains("gateway.models") && text.contains(named),
            "{text}"
        );
    }
}

#[tokio::test]
async fn a_kept_answer_is_followed_by_previous_response_id_for_its_client_only() {
    let api = Setup::new(vec![
        Step::tool_call("get_weather", weather()).with_usage(30, 10),
        Step::text("Sunny, 21 C.").with_usage(40, 5),
        Step::text("forgotten").with_usage(5, 1),
    ])
    .token(TOKEN)
    .extra_config(PRICED)
    .start()
    .await;
    let (code, out) = run_client(&api, "chained").await;
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(out["first"]["store"], true, "{out}");
    assert_eq!(out["second"]["text"], "Sunny, 21 C.", "{out}");
    assert_eq!(out["second"]["previous"], out["first"]["id"], "{out}");
    // The second call sent only the tool's output; the model got the whole conversation,
    // the instructions of the first call not carried over (as OpenAI has it).
    let requests = api.scripted.requests();
    assert_eq!(requests.len(), 3, "{requests:?}");
    let roles: Vec<&str> = requests[1]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["role"].as_str())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool"], "{}", requests[1]);
    assert_eq!(
        requests[1]["messages"][1]["tool_calls"][0]["id"],
        out["first"]["call_id"]
    );
    // Another client's id and an answer made with store=False are not found, and
    // neither reached the model.
    for refused in ["as_other_client", "after_unkept"] {
        assert_eq!(out[refused]["status"], 404, "{refused}: {out}");
        assert!(
            out[refused]["message"]
                .as_str()
                .is_some_and(|m| m.contains("previous_response_id")),
            "{out}"
        );
    }
    assert_eq!(out["unkept"]["store"], false, "{out}");
    // Priced with the conversation it carried: the kept messages count as input.
    let costs = costs_when(&api, 3).await;
    assert_eq!(costs["total"]["input_tokens"], 75, "{costs}");
}
