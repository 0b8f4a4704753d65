//! Traces through the real binary: `serve` with `[telemetry] otlp_endpoint` pointing at
//! an OTLP receiver on 127.0.0.1 that decodes with the official OpenTelemetry protobuf
//! definitions (PyPI's `opentelemetry-proto`, `peers/otlp_receiver.py`). A turn with
//! one tool call, started with a `traceparent`: its spans arrive named and nested as the
//! GenAI conventions say, under the caller's trace; the model server received the
//! model call's `traceparent`. With the collector gone, turns run and the drop counter
//! rises.
//!
//! Needs the peers of `scripts/test-peers.sh`.

use std::path::Path;
use std::time::{Duration, Instant};

use agentplane_suites::otlp::{receiver, spans};
use agentplane_suites::{Served, api, create_thread, free_port, sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use serde_json::{Value, json};

const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const PARENT: &str = "b7ad6b7169203331";

/// A turn of `lister` (one `list_files` call, then an answer), started with our
/// `traceparent`, read to its end.
async fn traced_turn(served: &Served, thread: &str) {
    let response = api(
        served,
        reqwest::Method::POST,
        &format!("/v1/threads/{thread}/turns"),
    )
    .header("traceparent", format!("00-{TRACE}-{PARENT}-01"))
    .json(&json!({"input": "list the files"}))
    .send()
    .await
    .expect("turn");
    assert_eq!(response.status(), 200);
    let body = response.text().await.expect("the stream");
    assert!(body.contains("turn_completed"), "{body}");
}

fn scenario() -> Scenario {
    Scenario::new(vec![
        Step::tool_call("list_files", json!({"path": "."})),
        Step::tool_call("read_file", json!({"path": "secret.txt"})),
        Step::text("two files"),
    ])
}

/// A policy that refuses `read_file`, and a content policy that looks at tool results.
const POLICIES: &str = "\
- name: no-reading
  type: tool_access
  rules: {deny: [read_file]}
- name: watch-results
  type: content
  rules: {detectors: [email], surfaces: [tool_results], action: flag}
";

const AGENT: &str = "[agents.lister]\nsystem_prompt = \"You list.\"\nensembles = [\"fs\"]\n";

#[tokio::test]
async fn a_turn_is_exported_in_the_genai_conventions_under_the_callers_trace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("spans.jsonl");
    let collector = receiver(&out);
    let model = ScriptedServer::start(scenario()).await.expect("model");
    let sb = sandbox(&format!(
        "{AGENT}[policies]\ndir = \"policies\"\n[telemetry]\notlp_endpoint = \"http://127.0.0.1:{}\"\n",
        collector.port
    ));
    std::fs::create_dir(sb.root.join("policies")).expect("policies");
    std::fs::write(sb.root.join("policies/p.yaml"), POLICIES).expect("policy");
    let served = start(&sb, &model.base_url(), &[]).await;
    let thread = create_thread(&served, &sb, "lister", "traced").await;
    traced_turn(&served, &thread).await;

    let deadline = Instant::now() + Duration::from_secs(20);
    let received = loop {
        let received = spans(&out);
        if received.iter().any(|s| s["name"] == "invoke_agent lister")
            && received
                .iter()
                .filter(|s| s["name"] == "chat scripted-model")
                .count()
                == 3
        {
            break received;
        }
        assert!(Instant::now() < deadline, "spans so far: {received:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let named =
        |name: &str| -> Vec<&Value> { received.iter().filter(|s| s["name"] == name).collect() };
    let turn = named("invoke_agent lister")[0];
    let request = received
        .iter()
        .find(|s| s["span_id"] == turn["parent_span_id"])
        .unwrap_or_else(|| panic!("the turn's parent: {received:#?}"));
    assert_eq!(request["name"], "POST /v1/threads/{id}/turns");
    assert_eq!(
        request["parent_span_id"], PARENT,
        "the caller's span is the parent"
    );
    let of_turn = [
        "POST /v1/threads/{id}/turns",
        "invoke_agent lister",
        "chat scripted-model",
        "execute_tool list_files",
        "execute_tool read_file",
        "apply_guardrail tool_results",
    ];
    for span in received
        .iter()
        .filter(|s| of_turn.iter().any(|n| s["name"] == *n))
    {
        assert_eq!(span["trace_id"], TRACE, "one trace: {span}");
    }
    let attributes = &turn["attributes"];
    assert_eq!(attributes["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(attributes["gen_ai.agent.name"], "lister");
    assert_eq!(attributes["gen_ai.conversation.id"], thread.as_str());
    assert_eq!(turn["resource"]["service.name"], "agentplane");

    let chats = named("chat scripted-model");
    for chat in &chats {
        assert_eq!(chat["parent_span_id"], turn["span_id"], "{chat}");
        let a = &chat["attributes"];
        assert_eq!(a["gen_ai.operation.name"], "chat");
        assert_eq!(a["gen_ai.request.model"], "scripted-model");
        assert!(a["gen_ai.provider.name"].is_string(), "{chat}");
        assert!(a["gen_ai.usage.input_tokens"].is_i64(), "{chat}");
        assert!(a["gen_ai.usage.output_tokens"].is_i64(), "{chat}");
        let reasons = a["gen_ai.response.finish_reasons"]
            .as_array()
            .unwrap_or_else(|| panic!("finish reasons as a string array: {chat}"));
        assert_eq!(reasons.len(), 1, "{chat}");
        assert!(reasons[0].is_string(), "{chat}");
        assert_eq!(chat["kind"], 3, "a client span");
    }
    let reasons: Vec<&Value> = chats
        .iter()
        .map(|c| &c["attributes"]["gen_ai.response.finish_reasons"][0])
        .collect();
    assert!(reasons.contains(&&json!("tool_calls")), "{reasons:?}");
    assert!(reasons.contains(&&json!("stop")), "{reasons:?}");
    let tool = named("execute_tool list_files");
    assert_eq!(tool.len(), 1, "{received:#?}");
    assert_eq!(tool[0]["parent_span_id"], turn["span_id"]);
    assert_eq!(tool[0]["attributes"]["gen_ai.tool.name"], "list_files");
    assert!(tool[0]["attributes"]["gen_ai.tool.call.id"].is_string());
    assert_eq!(tool[0]["attributes"]["agentplane.status"], "ok");
    // A refusal is an event of its tool call's span, naming the policy.
    let refused = named("execute_tool read_file");
    assert_eq!(refused.len(), 1, "{received:#?}");
    assert_eq!(
        refused[0]["attributes"]["agentplane.status"],
        "policy_denied"
    );
    assert_eq!(
        refused[0]["events"][0]["name"], "policy_denied",
        "{}",
        refused[0]
    );
    assert_eq!(
        refused[0]["events"][0]["attributes"]["policy"],
        "no-reading"
    );
    // The content policy ran on both answers there were: the result, and the refused
    // call's error (an error is screened like a result, `governance::outgoing`).
    let guardrails = named("apply_guardrail tool_results");
    assert_eq!(guardrails.len(), 2, "{received:#?}");
    for guardrail in guardrails {
        assert_eq!(
            guardrail["attributes"]["gen_ai.operation.name"],
            "apply_guardrail"
        );
        assert_eq!(guardrail["attributes"]["agentplane.findings"], 0);
        assert_eq!(guardrail["trace_id"], TRACE);
    }
    // Nothing of the conversation is in a span by default.
    let all = serde_json::to_string(&received).expect("json");
    assert!(
        !all.contains("list the files") && !all.contains("two files"),
        "{all}"
    );
    assert!(!all.contains("gen_ai.input.messages"), "{all}");
    assert!(!all.contains("gen_ai.tool.call.arguments"), "{all}");

    // The model server saw each model call's span as its parent.
    let chat_ids: Vec<&str> = chats.iter().filter_map(|c| c["span_id"].as_str()).collect();
    let sent: Vec<String> = model
        .received()
        .into_iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .map(|r| r.traceparent.unwrap_or_default())
        .collect();
    assert_eq!(sent.len(), 3, "{sent:?}");
    for traceparent in &sent {
        let parts: Vec<&str> = traceparent.split('-').collect();
        assert_eq!(parts.len(), 4, "{traceparent}");
        assert_eq!(parts[1], TRACE);
        assert!(
            chat_ids.contains(&parts[2]),
            "{traceparent} not among {chat_ids:?}"
        );
    }
}

#[tokio::test]
async fn with_the_collector_gone_turns_run_and_drops_are_counted() {
    let model = ScriptedServer::start(
        Scenario::new(vec![
            Step::tool_call("list_files", json!({"path": "."})),
            Step::text("done"),
        ])
        .repeating(true),
    )
    .await
    .expect("model");
    // A port nothing listens on.
    let sb = sandbox(&format!(
        "{AGENT}[telemetry]\notlp_endpoint = \"http://127.0.0.1:{}\"\n",
        free_port()
    ));
    let served = start(&sb, &model.base_url(), &[]).await;
    let thread = create_thread(&served, &sb, "lister", "untraced").await;
    for _ in 0..3 {
        traced_turn(&served, &thread).await;
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let metrics = api(&served, reqwest::Method::GET, "/metrics")
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("text");
        let dropped: u64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix("otel_spans_dropped_total "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        // Each turn has at least four spans (request, turn, two model calls, a tool).
        if dropped >= 12 {
            break;
        }
        assert!(Instant::now() < deadline, "dropped {dropped}:\n{metrics}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A secret's value, known to the redactor: it must never reach a span.
const SECRET: &str = "sk-trace-4f9a1c2e8b7d6a5f";

#[tokio::test]
async fn with_content_capture_on_contents_arrive_redacted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("spans.jsonl");
    let collector = receiver(&out);
    // The model writes the secret into a tool call's arguments (a folder named after
    // it) and its answer; the file the tool lists is named after it too.
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::tool_call("list_files", json!({"path": SECRET})),
        Step::text(format!("the key is {SECRET}")),
    ]))
    .await
    .expect("model");
    let sb = sandbox(&format!(
        "{AGENT}[secrets.trace_key]\nenv = \"AGENTPLANE_TRACE_KEY\"\n\
         [telemetry]\notlp_endpoint = \"http://127.0.0.1:{}\"\ncapture_content = true\n",
        collector.port
    ));
    std::fs::create_dir(sb.workspace.join(SECRET)).expect("a folder");
    std::fs::write(sb.workspace.join(SECRET).join(format!("{SECRET}.txt")), "x").expect("a file");
    let served = agentplane_suites::start_with_env(
        &sb,
        &model.base_url(),
        &[],
        &[("AGENTPLANE_TRACE_KEY", SECRET)],
    )
    .await;
    let thread = create_thread(&served, &sb, "lister", "captured").await;
    let response = api(
        &served,
        reqwest::Method::POST,
        &format!("/v1/threads/{thread}/turns"),
    )
    .json(&json!({"input": format!("list the files, my key is {SECRET}")}))
    .send()
    .await
    .expect("turn");
    assert_eq!(response.status(), 200);
    assert!(
        response
            .text()
            .await
            .expect("stream")
            .contains("turn_completed")
    );

    let deadline = Instant::now() + Duration::from_secs(20);
    let received = loop {
        let received = spans(&out);
        if received
            .iter()
            .filter(|s| s["name"] == "chat scripted-model")
            .count()
            == 2
            && received
                .iter()
                .any(|s| s["name"] == "execute_tool list_files")
        {
            break received;
        }
        assert!(Instant::now() < deadline, "spans so far: {received:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let all = serde_json::to_string(&received).expect("json");
    assert!(!all.contains(SECRET), "a secret reached a span: {all}");

    let chats: Vec<&Value> = received
        .iter()
        .filter(|s| s["name"] == "chat scripted-model")
        .collect();
    let text = |span: &Value, key: &str| -> Value {
        let raw = span["attributes"][key]
            .as_str()
            .unwrap_or_else(|| panic!("{key} on {span}"));
        serde_json::from_str(raw).unwrap_or_else(|e| panic!("{key} is JSON ({e}): {raw}"))
    };
    // The first call's input: the system prompt and the user's words, redacted, in the
    // conventions' role-and-parts shape.
    let input = text(chats[0], "gen_ai.input.messages");
    let user = input
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .unwrap_or_else(|| panic!("a user message: {input}"));
    assert_eq!(user["parts"][0]["type"], "text");
    assert_eq!(
        user["parts"][0]["content"],
        "list the files, my key is [REDACTED:trace_key]"
    );
    // Its output: the tool call; the second call's: the answer.
    let outputs: Vec<Value> = chats
        .iter()
        .map(|c| text(c, "gen_ai.output.messages"))
        .collect();
    let parts: Vec<&Value> = outputs
        .iter()
        .flat_map(|o| o[0]["parts"].as_array().into_iter().flatten())
        .collect();
    assert!(
        parts
            .iter()
            .any(|p| p["type"] == "tool_call" && p["name"] == "list_files"),
        "{outputs:?}"
    );
    assert!(
        parts
            .iter()
            .any(|p| p["content"] == "the key is [REDACTED:trace_key]"),
        "{outputs:?}"
    );
    // The tool call: its arguments and its result, both redacted.
    let tool = received
        .iter()
        .find(|s| s["name"] == "execute_tool list_files")
        .expect("the tool span");
    let arguments = text(tool, "gen_ai.tool.call.arguments");
    assert_eq!(arguments["path"], "[REDACTED:trace_key]", "{arguments}");
    let result = tool["attributes"]["gen_ai.tool.call.result"]
        .as_str()
        .unwrap_or_else(|| panic!("a result: {tool}"));
    assert!(result.contains("[REDACTED:trace_key].txt"), "{result}");
}

/// npm-free MCP upstream (`peers/mcp_upstream.py`, PyPI's `mcp`): its base URL; its
/// `GET /record` lists each request's `traceparent` header.
async fn mcp_upstream() -> (tokio::process::Child, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testkit/peers/mcp_upstream.py");
    agentplane_suites::python_peer(&script, &[]).await
}

/// A local HTTP receiver that keeps each request's `traceparent` header and answers 200.
async fn header_receiver() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let kept = kept.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&request).into_owned();
                let traceparent = text
                    .lines()
                    .find_map(|l| {
                        let (name, value) = l.split_once(':')?;
                        name.eq_ignore_ascii_case("traceparent")
                            .then(|| value.trim().to_owned())
                    })
                    .unwrap_or_default();
                kept.lock().expect("lock").push(traceparent);
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            });
        }
    });
    (url, seen)
}

/// The span named `name`, once the receiver has it.
async fn span_named(out: &Path, name: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(span) = spans(out).into_iter().find(|s| s["name"] == name) {
            return span;
        }
        assert!(
            Instant::now() < deadline,
            "no span {name}: {:#?}",
            spans(out)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_requests_over_http_and_webhooks_carry_their_spans_traceparent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("spans.jsonl");
    let collector = receiver(&out);
    let (_upstream, base) = mcp_upstream().await;
    let (hook, hooked) = header_receiver().await;
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::tool_call("mcp__up__stamp", json!({})),
        Step::text("stamped"),
        Step::text("executed"),
    ]))
    .await
    .expect("model");
    let sb = sandbox(&format!(
        "[agents.caller]\nsystem_prompt = \"You stamp.\"\nensembles = [\"up\"]\n\
         [mcp.servers.up]\nurl = \"{base}/mcp\"\n\
         [secrets.HOOK]\nenv = \"AGENTPLANE_SECRET_HOOK\"\n\
         [executions]\nwebhook_secret = \"HOOK\"\nallow_private_webhooks = true\n\
         [telemetry]\notlp_endpoint = \"http://127.0.0.1:{}\"\n",
        collector.port
    ));
    let served = agentplane_suites::start_with_env(
        &sb,
        &model.base_url(),
        &[],
        &[("AGENTPLANE_SECRET_HOOK", "whsec-trace-0123456789")],
    )
    .await;
    let thread = create_thread(&served, &sb, "caller", "mcp traced").await;
    let response = api(
        &served,
        reqwest::Method::POST,
        &format!("/v1/threads/{thread}/turns"),
    )
    .header("traceparent", format!("00-{TRACE}-{PARENT}-01"))
    .json(&json!({"input": "stamp once"}))
    .send()
    .await
    .expect("turn");
    let body = response.text().await.expect("stream");
    assert!(body.contains("stamp 1"), "the tool ran: {body}");

    // The tools/call POST carried the trace of the tool call's span.
    let tool = span_named(&out, "execute_tool mcp__up__stamp").await;
    assert_eq!(tool["trace_id"], TRACE);
    let record: Value = reqwest::get(format!("{base}/record"))
        .await
        .expect("record")
        .json()
        .await
        .expect("record JSON");
    let sent: Vec<&str> = record["requests"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["traceparent"].as_str())
        .collect();
    let wanted = format!(
        "00-{TRACE}-{}-01",
        tool["span_id"].as_str().expect("span id")
    );
    assert!(
        sent.contains(&wanted.as_str()),
        "{wanted} not among {sent:?} ({record})"
    );

    // An execution's webhook: its POST carries the delivery span's traceparent.
    let submitted = api(&served, reqwest::Method::POST, "/v1/executions")
        .json(&json!({"agent": "chat", "input": "run", "webhook_url": hook}))
        .send()
        .await
        .expect("submit");
    assert!(submitted.status().is_success(), "{submitted:?}");
    let delivery = span_named(&out, "POST webhook").await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let traceparent = loop {
        if let Some(t) = hooked.lock().expect("lock").first().cloned() {
            break t;
        }
        assert!(Instant::now() < deadline, "no webhook arrived");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        traceparent,
        format!(
            "00-{}-{}-01",
            delivery["trace_id"].as_str().expect("trace"),
            delivery["span_id"].as_str().expect("span")
        )
    );
    assert_eq!(delivery["kind"], 3, "a client span: {delivery}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn captured_contents_hold_no_secret_under_concurrent_turns_and_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("spans.jsonl");
    let collector = receiver(&out);
    // A secret with characters JSON escapes and URLs encode; the answer names it whole
    // and percent-encoded (as a URL carries it), streamed in pieces that cut it, and
    // every turn's input names it too. Its tail is what must appear nowhere.
    const SECRET: &str = "sk/trace+4f9a\"q1c2e8b7d6a5f";
    const TAIL: &str = "1c2e8b7d6a5f";
    let percent = "sk%2Ftrace%2B4f9a%22q1c2e8b7d6a5f";
    let model = ScriptedServer::start(
        Scenario::new(vec![
            Step::text(format!("key {SECRET} again {percent} end")).with_split(7),
        ])
        .repeating(true),
    )
    .await
    .expect("model");
    let sb = sandbox(&format!(
        "{AGENT}[secrets.trace_key]\nenv = \"AGENTPLANE_TRACE_KEY\"\n\
         [telemetry]\notlp_endpoint = \"http://127.0.0.1:{}\"\ncapture_content = true\n",
        collector.port
    ));
    const TURNS: usize = 8;
    for round in 0..2 {
        // The second round on a restarted server over the same store.
        let served = agentplane_suites::start_with_env(
            &sb,
            &model.base_url(),
            &[],
            &[("AGENTPLANE_TRACE_KEY", SECRET)],
        )
        .await;
        let mut threads = Vec::new();
        for i in 0..TURNS {
            threads.push(create_thread(&served, &sb, "lister", &format!("r{round} t{i}")).await);
        }
        let turns = threads.iter().map(|thread| {
            api(
                &served,
                reqwest::Method::POST,
                &format!("/v1/threads/{thread}/turns"),
            )
            .json(&json!({"input": format!("my key is {SECRET}, or {percent}")}))
            .send()
        });
        for response in futures_util::future::join_all(turns).await {
            let body = response.expect("turn").text().await.expect("stream");
            assert!(body.contains("turn_completed"), "{body}");
            assert!(!body.contains(TAIL), "an answer held the secret: {body}");
        }
        // The spans leave in batches: wait for this round's before the restart.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let chats = spans(&out)
                .iter()
                .filter(|s| s["name"] == "chat scripted-model")
                .count();
            if chats >= (round + 1) * TURNS {
                break;
            }
            assert!(Instant::now() < deadline, "{chats} chat spans so far");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        drop(served);
    }
    let received = spans(&out);
    let all = serde_json::to_string(&received).expect("json");
    assert!(
        !all.contains(TAIL),
        "a secret, in some form, reached a span"
    );
    // The contents were captured, redacted, not dropped.
    let redacted = received
        .iter()
        .filter(|s| {
            s["attributes"]["gen_ai.output.messages"]
                .as_str()
                .is_some_and(|m| m.contains("[REDACTED:trace_key]"))
        })
        .count();
    assert_eq!(redacted, 2 * TURNS, "every answer captured, redacted");
}
