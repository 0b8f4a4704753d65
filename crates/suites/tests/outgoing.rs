//! Everything that comes out of a call is screened, on every surface, through the real
//! binary: a hostile MCP server (`peers/mcp_hostile.py leaky`) answering a JSON-RPC
//! error, an `isError: true` result and a plain result, each holding a card number, an
//! e-mail address and an `sk-` key, called by a native turn and through the MCP gateway
//! (PyPI's official `mcp` client); and a scripted model answering the OpenAI-compatible
//! gateway with tool calls whose arguments and names hold those values and whose
//! `model` field holds a `[secrets]` value, whole and streamed. The clients' answers,
//! the thread's stream and history, `GET /v1/mcp/calls`, the SQLite files, the next
//! model request and the OTLP export (`peers/otlp_receiver.py`, contents captured)
//! carry only the redacted form.
//!
//! The same for what else comes out: an upstream model server's error answers (a
//! native turn's error, the gateway's answer whole and streamed), an external ACP
//! agent's and a remote A2A agent's reports (text, plan, tool-call titles, arguments
//! and outputs, a failed task's message); and on the way in, a card number or a key
//! used as an object key in tool arguments (a native call, an MCP gateway call, a
//! gateway request's earlier tool calls) is screened like a value.
//!
//! Needs the peers of `scripts/test-peers.sh`.

use std::time::{Duration, Instant};

use agentplane_suites::attacks::{file_contains, store_files};
use agentplane_suites::mcp::official_client_call;
use agentplane_suites::otlp::{receiver, spans};
use agentplane_suites::{
    CLIENT, SseReader, api, create_thread, events_of, history, sandbox, start_with_env,
};
use agentplane_testkit::{Scenario, ScriptedServer, ScriptedToolCall, Step, peers};
use serde_json::{Value, json};

/// What `mcp_hostile.py leaky` gives away (its `LEAK`).
const CARD: &str = "4111 1111 1111 1111";
const MAIL: &str = "victim@example.com";
const KEY: &str = "sk-live-Zx9Qw8Er7Ty6Ui5Op4As3Df";
/// A `[secrets]` value the scripted model puts in its `model` field.
const KNOWN: &str = "modelsecret-Hq4Vn7Kd2Lp";

/// Every raw value, and pieces of them that no redacted form contains. A piece is
/// never a short run of digits or hex: ids, trace ids and timestamps in the export
/// and the database hold one by chance (a run once failed on "4111"); the card without
/// its spaces is long enough not to.
const NEEDLES: [&str; 7] = [
    CARD,
    MAIL,
    KEY,
    KNOWN,
    "4111 1111",
    "4111111111111111",
    "Zx9Qw8",
];

const POLICIES: &str = "\
- name: redact-everything
  type: content
  rules: {detectors: [card, email, secret], action: redact}
";

/// What failed so far: every place is checked before the test fails, so one run
/// names every leak.
#[derive(Default)]
struct Checks(Vec<String>);

impl Checks {
    /// `text`, seen at `place`, holds none of the raw values.
    fn clean(&mut self, place: &str, text: &str) {
        for needle in NEEDLES {
            self.expect(!text.contains(needle), format!("{place} holds {needle:?}"));
        }
    }

    fn expect(&mut self, ok: bool, failure: String) {
        if !ok {
            self.0.push(failure);
        }
    }

    fn assert_none(&self) {
        assert!(
            self.0.is_empty(),
            "{} failed:\n{}",
            self.0.len(),
            self.0.join("\n")
        );
    }
}

/// The official `mcp` client calls `mcp__leaky__echo` through `/mcp/gateway` as
/// [`CLIENT`]; its printed document.
async fn gateway_call(base: &str, text: &str) -> Value {
    gateway_call_with(base, json!({ "text": text })).await
}

/// [`gateway_call`] with these arguments.
async fn gateway_call_with(base: &str, arguments: Value) -> Value {
    official_client_call(base, "/mcp/gateway", "leaky__echo", &arguments).await
}

/// One hostile answer of the model to the gateway: a `send` whose arguments hold the
/// card and the address, a second call named after the address, and the secret as the
/// model's name.
fn hostile_answer() -> Step {
    Step {
        model: Some(format!("scripted-{KNOWN}")),
        ..Step::tool_calls(vec![
            ScriptedToolCall {
                id: None,
                name: "send".into(),
                arguments: json!({"to": MAIL, "card": CARD, "note": format!("key {KEY}")}),
            },
            ScriptedToolCall {
                id: None,
                name: format!("forward {MAIL}"),
                arguments: json!({}),
            },
        ])
    }
}

async fn completion(base: &str, stream: bool) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{base}/openai/v1/chat/completions"))
        .header("X-Client-ID", CLIENT)
        .json(&json!({
            "model": "scripted-model",
            "stream": stream,
            "messages": [{"role": "user", "content": "mail the customer"}],
            "tools": [{"type": "function", "function": {
                "name": "send", "parameters": {"type": "object"}}}],
        }))
        .send()
        .await
        .expect("completion")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_errors_tool_calls_and_model_names_leave_only_redacted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("spans.jsonl");
    let collector = receiver(&out);
    let echo = |text: &str| Step::tool_call("mcp__leaky__echo", json!({ "text": text }));
    let model = ScriptedServer::start(Scenario::new(vec![
        // The native turn: an error, an `isError` result, a result, then an answer.
        echo("rpc-error"),
        echo("is-error"),
        echo("ok"),
        Step::text("done"),
        // The OpenAI-compatible gateway, whole and streamed in pieces.
        hostile_answer(),
        hostile_answer().with_split(4),
    ]))
    .await
    .expect("model");
    let (python, args) = peers::mcp_hostile_server("leaky");
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    let sb = sandbox(&format!(
        "[secrets.MODEL_SECRET]\nenv = \"AGENTPLANE_SECRET_MODEL\"\n\
         [mcp.servers.leaky]\ncommand = {python:?}\nargs = [{}]\nstartup_timeout_secs = 10\n\
         [mcp.gateway]\nservers = [\"leaky\"]\n\
         [agents.echoer]\nsystem_prompt = \"You echo.\"\nensembles = [\"leaky\"]\n\
         [policies]\ndir = \"policies\"\n\
         [telemetry]\notlp_endpoint = \"http://127.0.0.1:{}\"\ncapture_content = true\n",
        args.join(", "),
        collector.port
    ));
    std::fs::create_dir(sb.root.join("policies")).expect("policies dir");
    std::fs::write(sb.root.join("policies/content.yaml"), POLICIES).expect("policy");
    let served = start_with_env(
        &sb,
        &model.base_url(),
        &[],
        &[("AGENTPLANE_SECRET_MODEL", KNOWN)],
    )
    .await;

    let mut check = Checks::default();
    // 1. A native turn: each answer, error or not, is redacted in the stream, the
    // history, and what the model is told next.
    let thread = create_thread(&served, &sb, "echoer", "leaks").await;
    let streamed = SseReader::open(&served, &thread, "echo three times")
        .await
        .until("turn_completed")
        .await;
    let streamed_text = format!("{:?}", streamed.iter().map(|r| &r.data).collect::<Vec<_>>());
    check.clean("the turn's stream", &streamed_text);
    let all = history(&served, &thread).await;
    check.clean("the history", &all.to_string());
    let events = events_of(&all);
    let results: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "tool_call_result")
        .collect();
    let statuses: Vec<&str> = results
        .iter()
        .map(|r| r["status"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(statuses, ["error", "error", "ok"], "{results:#?}");
    for result in &results {
        let output = result["output"].as_str().unwrap_or_default();
        for redacted in ["[REDACTED:card]", "[REDACTED:email]", "[REDACTED:secret]"] {
            check.expect(output.contains(redacted), format!("{redacted} in {output}"));
        }
    }
    let findings: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "content_finding" && e["surface"] == "tool_results")
        .collect();
    let on_errors = findings.iter().filter(|f| f["pointer"] == "/error").count();
    check.expect(
        findings.len() == 9 && on_errors == 6,
        format!("3 findings in each answer, 6 of them in errors: {findings:?}"),
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 4, "the turn's model calls");
    let told = serde_json::to_string(&requests).expect("json");
    check.clean("the next model requests", &told);
    check.expect(
        told.contains("[REDACTED:card]"),
        format!("redacted: {told}"),
    );

    // 2. The MCP gateway: the error, the `isError` result and the result reach its
    // client and its log redacted, still errors where they were.
    for (text, is_error) in [("rpc-error", true), ("is-error", true), ("ok", false)] {
        let called = gateway_call(&served.base, text).await;
        check.clean(
            &format!("the MCP gateway's {text} answer"),
            &called.to_string(),
        );
        assert_eq!(called["isError"], is_error, "{text}: {called}");
        let answer = called["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{text}: a text answer: {called}"));
        check.expect(
            answer.contains("[REDACTED:card]") && answer.contains("[REDACTED:secret]"),
            format!("{text}: redacted: {answer}"),
        );
    }
    let log: Value = api(&served, reqwest::Method::GET, "/v1/mcp/calls")
        .send()
        .await
        .expect("calls")
        .json()
        .await
        .expect("calls JSON");
    assert_eq!(log["calls"].as_array().map(Vec::len), Some(3), "{log}");
    check.clean("GET /v1/mcp/calls", &log.to_string());

    // 3. The OpenAI-compatible gateway: tool-call arguments, names and the model name,
    // whole and streamed.
    let whole: Value = completion(&served.base, false)
        .await
        .json()
        .await
        .expect("completion JSON");
    check.clean("the whole completion", &whole.to_string());
    let calls = &whole["choices"][0]["message"]["tool_calls"];
    let args: Value = serde_json::from_str(
        calls[0]["function"]["arguments"]
            .as_str()
            .unwrap_or_else(|| panic!("arguments: {whole}")),
    )
    .expect("arguments stay JSON");
    let redacted = json!({"to": "[REDACTED:email]", "card": "[REDACTED:card]", "note": "key [REDACTED:secret]"});
    check.expect(args == redacted, format!("the arguments: {args}"));
    let name = &calls[1]["function"]["name"];
    check.expect(
        name == "forward [REDACTED:email]",
        format!("the name: {name}"),
    );
    check.expect(
        whole["model"] == "scripted-[REDACTED:MODEL_SECRET]",
        format!("the model: {}", whole["model"]),
    );
    let streamed = completion(&served.base, true)
        .await
        .text()
        .await
        .expect("stream");
    assert!(streamed.contains("[DONE]"), "{streamed}");
    check.clean("the streamed completion", &streamed);
    check.expect(
        streamed.contains("[REDACTED:card]") && streamed.contains("forward [REDACTED:email]"),
        format!("streamed redacted: {streamed}"),
    );

    // 4. The OTLP export: every span, the model names and the tool results among them.
    let deadline = Instant::now() + Duration::from_secs(20);
    let received = loop {
        let received = spans(&out);
        let attribute = |name: &str| -> Vec<String> {
            received
                .iter()
                .filter_map(|s| s["attributes"][name].as_str().map(str::to_owned))
                .collect()
        };
        let models = attribute("gen_ai.response.model");
        let gateway_models: Vec<&String> =
            models.iter().filter(|m| *m != "scripted-model").collect();
        if gateway_models.len() == 2 && attribute("gen_ai.tool.call.result").len() == 6 {
            check.expect(
                gateway_models
                    .iter()
                    .all(|m| *m == "scripted-[REDACTED:MODEL_SECRET]"),
                format!("gen_ai.response.model: {gateway_models:?}"),
            );
            break received;
        }
        assert!(Instant::now() < deadline, "spans so far: {received:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    check.clean("the OTLP export", &Value::Array(received).to_string());

    // 5. The store: nothing raw in the database files.
    for file in store_files(&sb) {
        for needle in NEEDLES {
            check.expect(
                !file_contains(&file, needle.as_bytes()),
                format!("{} holds {needle:?}", file.display()),
            );
        }
    }
    check.assert_none();
}

/// Waits (20 s at most) until the export holds `enough` of its spans, then returns
/// them all.
async fn exported(out: &std::path::Path, enough: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let received = spans(out);
        if enough(&received) {
            return received;
        }
        assert!(Instant::now() < deadline, "spans so far: {received:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The database files of `sb` hold none of the raw values.
fn check_store(check: &mut Checks, sb: &agentplane_suites::Sandbox) {
    for file in store_files(sb) {
        for needle in NEEDLES {
            check.expect(
                !file_contains(&file, needle.as_bytes()),
                format!("{} holds {needle:?}", file.display()),
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_server_errors_leave_only_redacted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("spans.jsonl");
    let collector = receiver(&out);
    // Every answer is a 400 whose body holds the card, the address, the key and the
    // `[secrets]` value: a request error, so nothing retries or fails over.
    let body = json!({"error": {"message": format!(
        "no such customer {MAIL} (card {CARD}), key {KEY}, account {KNOWN}"
    )}})
    .to_string();
    let model = ScriptedServer::start(Scenario::new(vec![Step::error(400, body)]).repeating(true))
        .await
        .expect("model");
    let sb = sandbox(&format!(
        "[secrets.MODEL_SECRET]\nenv = \"AGENTPLANE_SECRET_MODEL\"\n\
         [agents.plain]\nsystem_prompt = \"You answer.\"\n\
         [policies]\ndir = \"policies\"\n\
         [telemetry]\notlp_endpoint = \"http://127.0.0.1:{}\"\ncapture_content = true\n",
        collector.port
    ));
    std::fs::create_dir(sb.root.join("policies")).expect("policies dir");
    std::fs::write(sb.root.join("policies/content.yaml"), POLICIES).expect("policy");
    let served = start_with_env(
        &sb,
        &model.base_url(),
        &[],
        &[("AGENTPLANE_SECRET_MODEL", KNOWN)],
    )
    .await;
    let mut check = Checks::default();

    // 1. A native turn: its `error` event, in the stream and the history.
    let thread = create_thread(&served, &sb, "plain", "errors").await;
    let streamed = SseReader::open(&served, &thread, "hello")
        .await
        .until("turn_completed")
        .await;
    let streamed_text = format!("{:?}", streamed.iter().map(|r| &r.data).collect::<Vec<_>>());
    check.clean("the turn's stream", &streamed_text);
    let all = history(&served, &thread).await;
    check.clean("the history", &all.to_string());
    let events = events_of(&all);
    let errors: Vec<&Value> = events.iter().filter(|e| e["kind"] == "error").collect();
    assert_eq!(errors.len(), 1, "{events:#?}");
    let message = errors[0]["message"].as_str().unwrap_or_default();
    for redacted in [
        "[REDACTED:card]",
        "[REDACTED:email]",
        "[REDACTED:secret]",
        "[REDACTED:MODEL_SECRET]",
    ] {
        check.expect(
            message.contains(redacted),
            format!("{redacted} in {message}"),
        );
    }
    let findings = events
        .iter()
        .filter(|e| {
            e["kind"] == "content_finding"
                && e["surface"] == "model_output"
                && e["pointer"] == "/error"
        })
        .count();
    check.expect(
        findings == 3,
        format!("3 findings in the error: {events:#?}"),
    );

    // The provider's health keeps the last error for the agents view: redacted there
    // too, by the built-in detectors (no call's content policies apply outside a call).
    let agents: Value = api(&served, reqwest::Method::GET, "/v1/agents")
        .send()
        .await
        .expect("agents")
        .json()
        .await
        .expect("agents JSON");
    let shown = agents.to_string();
    check.expect(
        shown.contains("last_error") && shown.contains("[REDACTED:MODEL_SECRET]"),
        format!("the provider's last error is kept, redacted: {shown}"),
    );
    check.clean("GET /v1/agents", &shown);

    // 2. The OpenAI-compatible gateway, whole and streamed.
    let whole = completion(&served.base, false).await;
    let status = whole.status();
    let whole = whole.text().await.expect("body");
    check.expect(status.is_server_error(), format!("{status}: {whole}"));
    check.clean("the gateway's error", &whole);
    check.expect(
        whole.contains("[REDACTED:email]"),
        format!("redacted: {whole}"),
    );
    let streamed = completion(&served.base, true)
        .await
        .text()
        .await
        .expect("stream");
    check.clean("the gateway's streamed error", &streamed);
    check.expect(
        streamed.contains("[REDACTED:card]"),
        format!("streamed redacted: {streamed}"),
    );

    // 3. The export (the three failed model calls) and the store.
    let received = exported(&out, |received| {
        received
            .iter()
            .filter(|s| s["attributes"]["agentplane.outcome"] == "failed")
            .count()
            >= 3
    })
    .await;
    check.clean("the OTLP export", &Value::Array(received).to_string());
    check_store(&mut check, &sb);
    check.assert_none();
}

/// `[agents.NAME]` of kind a2a at the peer (its key in `[secrets.peer_key]`).
fn remote_agent(name: &str, base: &str) -> String {
    format!(
        "[agents.{name}]\nkind = \"a2a\"\ndescription = \"The SDK's test agent.\"\n\
         url = \"{base}/.well-known/agent-card.json\"\n\
         [agents.{name}.a2a]\napi_key = \"peer_key\"\ntimeout_secs = 60\n"
    )
}

/// `[agents.NAME]` of kind acp running the SDK peer.
fn acp_agent(name: &str) -> String {
    let (node, args) = peers::acp_sdk_agent();
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    format!(
        "[agents.{name}]\nkind = \"acp\"\nprofile = \"opencode\"\n\
         [agents.{name}.acp]\ncommand = {node:?}\nargs = [{}]\n",
        args.join(", ")
    )
}

/// One turn of `agent` on a new thread: what was streamed, the stored events, the
/// whole history as text.
async fn turn(
    served: &agentplane_suites::Served,
    sb: &agentplane_suites::Sandbox,
    agent: &str,
    input: &str,
) -> (String, Vec<Value>, String) {
    let thread = create_thread(served, sb, agent, input).await;
    let streamed = SseReader::open(served, &thread, input)
        .await
        .until("turn_completed")
        .await;
    let streamed_text = format!("{:?}", streamed.iter().map(|r| &r.data).collect::<Vec<_>>());
    let all = history(served, &thread).await;
    (streamed_text, events_of(&all), all.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_agents_reports_leave_only_redacted() {
    const PEER_KEY: &str = "a2a-outgoing-peer-key-7c1d";
    let (_peer, base) = agentplane_suites::python_peer(
        &peers::a2a_agent_script(),
        &["--auth", "bearer", "--key", PEER_KEY],
    )
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("spans.jsonl");
    let collector = receiver(&out);
    let model = ScriptedServer::start(Scenario::new(vec![Step::text("unused")]).repeating(true))
        .await
        .expect("model");
    let sb = sandbox(&format!(
        "[secrets.peer_key]\nenv = \"AGENTPLANE_TEST_PEER_KEY\"\n{}{}\
         [policies]\ndir = \"policies\"\n\
         [telemetry]\notlp_endpoint = \"http://127.0.0.1:{}\"\ncapture_content = true\n",
        acp_agent("coder"),
        remote_agent("remote", &base),
        collector.port
    ));
    std::fs::create_dir(sb.root.join("policies")).expect("policies dir");
    std::fs::write(sb.root.join("policies/content.yaml"), POLICIES).expect("policy");
    let served = start_with_env(
        &sb,
        &model.base_url(),
        &[],
        &[("AGENTPLANE_TEST_PEER_KEY", PEER_KEY)],
    )
    .await;
    let mut check = Checks::default();

    // An ACP agent: its text, its plan, its tool call's title, arguments (a key among
    // them) and output.
    let (streamed, events, all) = turn(&served, &sb, "coder", "leak").await;
    check.clean("the ACP turn's stream", &streamed);
    check.clean("the ACP turn's history", &all);
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["kind"].as_str()).collect();
    let planned = events
        .iter()
        .find(|e| e["kind"] == "tool_call_planned" && e["call_id"] == "call-leak")
        .unwrap_or_else(|| panic!("the leaking call: {kinds:?}"));
    check.expect(
        planned["title"] == "send to [REDACTED:email]",
        format!("the title: {}", planned["title"]),
    );
    check.expect(
        planned["arguments"]
            == json!({"to": "[REDACTED:email]", "[REDACTED:card]": "[REDACTED:secret]"}),
        format!("the arguments: {}", planned["arguments"]),
    );
    let completed = events
        .iter()
        .rfind(|e| e["kind"] == "turn_completed")
        .expect("the end");
    let result = completed["result"]["text"].as_str().unwrap_or_default();
    check.expect(
        result.contains("[REDACTED:card]") && result.contains("[REDACTED:email]"),
        format!("the result: {result}"),
    );
    for surface in ["model_output", "tool_arguments", "tool_results"] {
        check.expect(
            events
                .iter()
                .any(|e| e["kind"] == "content_finding" && e["surface"] == surface),
            format!("a finding on {surface}: {kinds:?}"),
        );
    }

    // A remote A2A agent: its answer, and a failed task's message.
    let (streamed, events, all) = turn(&served, &sb, "remote", "leak").await;
    check.clean("the A2A turn's stream", &streamed);
    check.clean("the A2A turn's history", &all);
    check.expect(
        all.contains("the customer: card [REDACTED:card]"),
        format!("the answer redacted: {events:#?}"),
    );
    let (streamed, events, all) = turn(&served, &sb, "remote", "leakfail").await;
    check.clean("the failed A2A turn's stream", &streamed);
    check.clean("the failed A2A turn's history", &all);
    let error = events
        .iter()
        .find(|e| e["kind"] == "error")
        .unwrap_or_else(|| panic!("an error: {events:#?}"));
    let message = error["message"].as_str().unwrap_or_default();
    check.expect(
        message.contains("[REDACTED:card]"),
        format!("the error redacted: {message}"),
    );

    let received = exported(&out, |received| {
        received
            .iter()
            .filter(|s| s["attributes"]["gen_ai.operation.name"] == "invoke_agent")
            .count()
            >= 3
    })
    .await;
    check.clean("the OTLP export", &Value::Array(received).to_string());
    check_store(&mut check, &sb);
    check.assert_none();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_or_a_key_used_as_an_object_key_is_screened_like_a_value() {
    let model = ScriptedServer::start(Scenario::new(vec![
        // A native call whose arguments use the card as a key and the `sk-` key as
        // its value.
        Step::tool_call("mcp__leaky__echo", json!({"text": "ok", CARD: KEY})),
        Step::text("done"),
        // The gateway's answer to a request whose earlier tool call does the same.
        Step::text("noted"),
    ]))
    .await
    .expect("model");
    let (python, args) = peers::mcp_hostile_server("leaky");
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    let sb = sandbox(&format!(
        "[mcp.servers.leaky]\ncommand = {python:?}\nargs = [{}]\nstartup_timeout_secs = 10\n\
         [mcp.gateway]\nservers = [\"leaky\"]\n\
         [agents.echoer]\nsystem_prompt = \"You echo.\"\nensembles = [\"leaky\"]\n\
         [policies]\ndir = \"policies\"\n",
        args.join(", ")
    ));
    std::fs::create_dir(sb.root.join("policies")).expect("policies dir");
    std::fs::write(sb.root.join("policies/content.yaml"), POLICIES).expect("policy");
    let served = start_with_env(&sb, &model.base_url(), &[], &[]).await;
    let mut check = Checks::default();

    // 1. A native tool call: recorded, streamed and run with the key redacted.
    let thread = create_thread(&served, &sb, "echoer", "keys").await;
    let streamed = SseReader::open(&served, &thread, "echo")
        .await
        .until("turn_completed")
        .await;
    let streamed_text = format!("{:?}", streamed.iter().map(|r| &r.data).collect::<Vec<_>>());
    check.clean("the turn's stream", &streamed_text);
    let all = history(&served, &thread).await;
    check.clean("the history", &all.to_string());
    let events = events_of(&all);
    let planned = events
        .iter()
        .find(|e| e["kind"] == "tool_call_planned")
        .unwrap_or_else(|| panic!("a call: {events:#?}"));
    check.expect(
        planned["arguments"] == json!({"text": "ok", "[REDACTED:card]": "[REDACTED:secret]"}),
        format!("the arguments: {}", planned["arguments"]),
    );
    let pointers: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "content_finding" && e["surface"] == "tool_arguments")
        .map(|e| &e["pointer"])
        .collect();
    check.expect(
        pointers == [&json!(""), &json!("/[REDACTED:card]")],
        format!("the key's finding at its object, the value's below it: {pointers:?}"),
    );

    // 2. The MCP gateway: a key in a client's arguments.
    let called = gateway_call_with(&served.base, json!({"text": "ok", CARD: MAIL})).await;
    check.clean("the MCP gateway's answer", &called.to_string());
    let log: Value = api(&served, reqwest::Method::GET, "/v1/mcp/calls")
        .send()
        .await
        .expect("calls")
        .json()
        .await
        .expect("calls JSON");
    check.clean("GET /v1/mcp/calls", &log.to_string());

    // 3. The OpenAI-compatible gateway: an earlier tool call's arguments in the
    // conversation reach the upstream redacted, keys and values.
    let answer = reqwest::Client::new()
        .post(format!("{}/openai/v1/chat/completions", served.base))
        .header("X-Client-ID", CLIENT)
        .json(&json!({
            "model": "scripted-model",
            "messages": [
                {"role": "user", "content": "mail the customer"},
                {"role": "assistant", "content": null, "tool_calls": [{
                    "id": "c1", "type": "function", "function": {
                        "name": "send",
                        "arguments": json!({CARD: MAIL, "note": KEY}).to_string(),
                    }}]},
                {"role": "tool", "tool_call_id": "c1", "content": "sent"},
            ],
        }))
        .send()
        .await
        .expect("completion");
    assert_eq!(answer.status(), 200, "{:?}", answer.text().await);
    let requests = model.requests();
    let upstream =
        serde_json::to_string(requests.last().expect("the gateway's request")).expect("json");
    check.clean("the gateway's upstream request", &upstream);
    check.expect(
        upstream.contains("[REDACTED:card]") && upstream.contains("[REDACTED:email]"),
        format!("redacted: {upstream}"),
    );

    check_store(&mut check, &sb);
    check.assert_none();
}

/// What an external agent reaches on our side through its client capabilities passes
/// the same screens as our own tools: a file it reads comes to it as a tool's result
/// (redacted by a `content` policy on `tool_results`), and a file it writes is a
/// tool's arguments (refused by a `deny` policy on `tool_arguments`, and never
/// written), and the path outside the workspace it was refused is recorded as those
/// policies leave it. The SDK peer keeps what it was given in `seen.txt` with node's
/// own fs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_agents_file_reads_and_writes_pass_the_tools_screens() {
    const SCREENS: &str = "\
- name: redact-what-tools-give
  type: content
  rules: {detectors: [card, email, secret], surfaces: [tool_results], action: redact}
- name: no-cards-written
  type: content
  rules: {detectors: [card], surfaces: [tool_arguments], action: deny}
- name: no-keys-in-arguments
  type: content
  rules: {detectors: [secret], surfaces: [tool_arguments], action: redact}
";
    let model = ScriptedServer::start(Scenario::new(vec![Step::text("unused")]).repeating(true))
        .await
        .expect("model");
    let sb = sandbox(&format!(
        "{}[policies]\ndir = \"policies\"\n",
        acp_agent("coder")
    ));
    std::fs::create_dir(sb.root.join("policies")).expect("policies dir");
    std::fs::write(sb.root.join("policies/content.yaml"), SCREENS).expect("policy");
    std::fs::write(
        sb.workspace.join("secrets.txt"),
        format!("card {CARD}, mail {MAIL}, key {KEY}\n"),
    )
    .expect("the file the agent reads");
    let served = start_with_env(&sb, &model.base_url(), &[], &[]).await;
    let mut check = Checks::default();

    let (streamed, events, all) = turn(&served, &sb, "coder", "exfil").await;
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["kind"].as_str()).collect();
    let seen = std::fs::read_to_string(sb.workspace.join("seen.txt"))
        .unwrap_or_else(|e| panic!("the peer kept what it read ({e}): {kinds:?}"));
    check.clean("what the agent read", &seen);
    check.expect(
        seen.contains("[REDACTED:card]")
            && seen.contains("[REDACTED:email]")
            && seen.contains("[REDACTED:secret]"),
        format!("the file's text, redacted: {seen:?}"),
    );
    check.expect(
        !sb.workspace.join("exfil.txt").exists(),
        "a card was written despite the deny policy".to_owned(),
    );
    check.expect(
        streamed.contains("[exfil refused -32603]"),
        format!("the agent was told the write was refused: {streamed}"),
    );
    check.clean("the turn's stream", &streamed);
    check.clean("the turn's history", &all);
    // The path outside the workspace it asked for is refused, and the security event
    // that names it names it redacted.
    let breach = events
        .iter()
        .find(|e| e["kind"] == "security_event" && e["event_type"] != "policy_denied");
    check.expect(
        breach.is_some_and(|e| {
            let detail = e["detail"].as_str().unwrap_or_default();
            detail.contains("/tmp/[REDACTED") && !detail.contains(KEY)
        }),
        format!("the breach recorded, its path redacted: {breach:?}"),
    );
    check.expect(
        events.iter().any(|e| {
            e["kind"] == "content_finding"
                && e["surface"] == "tool_results"
                && e["policy"] == "redact-what-tools-give"
        }),
        format!("a finding on what was read: {kinds:?}"),
    );
    check.expect(
        events.iter().any(|e| {
            e["kind"] == "policy_denied"
                && e["policy"] == "no-cards-written"
                && e["tool"] == "write_file"
        }),
        format!("the write's refusal recorded: {events:#?}"),
    );
    check_store(&mut check, &sb);
    check.assert_none();
}
