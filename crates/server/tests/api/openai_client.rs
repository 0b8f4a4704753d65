//! The official `openai` Python package (a client we did not write) against the
//! gateway: listing, plain and streamed completions, tools and a refusal, against the
//! scripted model and against a real llama.cpp server (scripts/local-model.sh).

use agentplane_testkit::{Step, peers};
use serde_json::Value;

use crate::harness::{Api, Setup, TOKEN};

/// Runs `peers/openai_client.py` against the gateway; returns its exit code and JSON.
async fn run_client(api: &Api, client: &str, extra: &[&str]) -> (Option<i32>, Value) {
    let mut command = std::process::Command::new(peers::python());
    command
        .arg(peers::openai_client_script())
        .args(["--base-url", &api.url("/openai/v1")])
        .args(["--client-id", client])
        .args(extra);
    if let Some(token) = api.token {
        command.args(["--api-key", token]);
    }
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("client task")
        .expect("the openai client runs");
    (output.status.code(), peers::client_json(&output))
}

#[tokio::test]
async fn the_openai_package_completes_plain_streamed_and_tool_calls_through_the_gateway() {
    let api = Setup::new(vec![
        Step::text("Paris.").with_usage(20, 2),
        Step::text("The capital is Paris.")
            .with_split(4)
            .with_usage(20, 5),
        Step::tool_call("get_weather", serde_json::json!({"city": "Paris"})),
        Step::tool_call("get_weather", serde_json::json!({"city": "Paris"})).with_split(3),
        Step::text("Sunny, 21 C."),
    ])
    .token(TOKEN)
    .start()
    .await;
    let (code, out) = run_client(&api, "alice", &["--model", "scripted-model"]).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out["models"]
            .as_array()
            .is_some_and(|m| m.iter().any(|id| id == "scripted-model")),
        "{out}"
    );
    let plain = &out["plain"];
    assert_eq!(plain["content"], "Paris.", "{out}");
    assert_eq!(plain["finish_reason"], "stop");
    assert_eq!(plain["usage"]["total_tokens"], 22);
    assert!(
        plain["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("chatcmpl-"))
    );
    let streamed = &out["streamed"];
    assert_eq!(streamed["content"], "The capital is Paris.", "{out}");
    assert!(streamed["deltas"].as_u64().is_some_and(|n| n >= 2), "{out}");
    assert_eq!(streamed["finish_reason"], "stop");
    assert_eq!(streamed["usage"]["total_tokens"], 25);
    for key in ["tool", "tool_streamed"] {
        let call = &out[key]["tool_calls"][0];
        assert_eq!(out[key]["finish_reason"], "tool_calls", "{key}: {out}");
        assert_eq!(call["name"], "get_weather", "{key}: {out}");
        let arguments: Value =
            serde_json::from_str(call["arguments"].as_str().expect("text")).expect("json");
        assert_eq!(arguments["city"], "Paris");
    }
    assert_eq!(out["after_tool"]["content"], "Sunny, 21 C.", "{out}");
    // The tool's result reached the model as a tool message.
    let last = api.scripted.requests().last().cloned().expect("called");
    assert_eq!(last["messages"][2]["role"], "tool");
    assert_eq!(last["messages"][2]["content"], "sunny, 21 C");
}

#[tokio::test]
async fn the_openai_package_sees_refusals_as_api_errors_with_our_code() {
    let api = Setup::new(vec![Step::text("one")])
        .policy(
            "rate.yaml",
            "name: one-call\ntype: rate_limit\nrules: {window: 10m, max: 1, per: [client]}\n",
        )
        .start()
        .await;
    let (code, out) = run_client(&api, "alice", &["--model", "scripted-model"]).await;
    assert_eq!(code, Some(3), "{out}");
    assert_eq!(out["apiError"]["status"], 429, "{out}");
    assert_eq!(out["apiError"]["code"], "RATE_LIMITED", "{out}");
    assert!(
        out["apiError"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("one-call")),
        "{out}"
    );
}

/// Against a real llama.cpp server: SmolLM2-135M cannot call tools, so only plain and
/// streamed chat; it must answer something, not something in particular. Required in
/// CI; elsewhere it runs when the server is configured.
#[tokio::test]
async fn the_openai_package_completes_through_the_gateway_against_real_llama_cpp() {
    let Some(base_url) = std::env::var("AGENTPLANE_TEST_LLAMA_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        assert!(
            std::env::var("CI").is_err(),
            "CI must provide AGENTPLANE_TEST_LLAMA_URL (scripts/test.sh starts the server)"
        );
        eprintln!(
            "AGENTPLANE_TEST_LLAMA_URL is not set; run ./scripts/test.sh to include this check"
        );
        return;
    };
    let api = Setup::new(vec![]).llm_base_url(base_url).start().await;
    let (code, out) = run_client(
        &api,
        "alice",
        &["--model", "auto", "--skip-tools", "--max-tokens", "24"],
    )
    .await;
    assert_eq!(code, Some(0), "{out}");
    let plain = &out["plain"];
    assert!(
        plain["content"]
            .as_str()
            .is_some_and(|t| !t.trim().is_empty()),
        "{out}"
    );
    assert!(
        plain["usage"]["completion_tokens"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "{out}"
    );
    let streamed = &out["streamed"];
    assert!(
        streamed["content"]
            .as_str()
            .is_some_and(|t| !t.trim().is_empty()),
        "{out}"
    );
    assert!(streamed["deltas"].as_u64().is_some_and(|n| n >= 2), "{out}");
    assert!(
        streamed["usage"]["prompt_tokens"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "{out}"
    );
}
