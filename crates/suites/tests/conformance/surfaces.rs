//! The columns of the conformance table: each surface a governed call comes in by,
//! driven the way its real clients drive it, and what it made of one call read back as
//! a [`Seen`] — the verdict, and whether the surface's own durable record says so.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentplane_suites::{Sandbox, Served, SseReader, api, create_thread, events_of, history};
use serde_json::{Value, json};

/// A surface a governed call comes in by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Surface {
    /// A native agent's tool call in a turn (`POST /v1/threads/{id}/turns`).
    Native,
    /// An MCP client's `tools/call` through `/mcp/gateway` (PyPI's `mcp` client).
    McpGateway,
    /// An external ACP agent's permission ask (`peers/acp_agent.mjs`, the ACP SDK).
    Acp,
    /// A remote A2A agent's turn (`peers/a2a_agent.py`, the `a2a-sdk` server).
    A2aRemote,
    /// The OpenAI-compatible gateway (`/openai/v1/chat/completions`).
    OpenAiGateway,
    /// The gateway's Responses API (`/openai/v1/responses`).
    ResponsesGateway,
    /// The gateway's Anthropic Messages API (`/anthropic/v1/messages`).
    MessagesGateway,
    /// agentplane's own agents as MCP tools (`/mcp`).
    McpServing,
    /// agentplane's own agents over A2A (`/a2a/{agent}`).
    A2aServing,
}

/// What a surface made of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It ran.
    Ran,
    /// A policy refused it: `tool_access` (or a `content` deny).
    Denied(String),
    /// It waits for a person, under this policy.
    Approval(String),
    /// A `rate_limit` policy refused it.
    RateLimited(String),
    /// There is no such tool (for this caller).
    Unknown,
    /// Something else, said as it was seen.
    Other(String),
}

/// One surface's answer to one call.
#[derive(Debug, Clone)]
pub struct Seen {
    pub verdict: Verdict,
    /// The surface's durable record (the thread's events, the gateway's log, the
    /// approvals) holds the verdict, naming the policy.
    pub recorded: bool,
    /// Everything the caller was answered, as text.
    pub answer: String,
}

pub use agentplane_suites::mcp::official_client_call as mcp_client;

/// A thread's events of `kind`.
pub fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

/// A verdict from a thread's events: a refusal's `policy_denied`, an
/// `approval_requested`, an unknown tool's result, or the tool's result.
fn verdict_of_events(events: &[Value]) -> (Verdict, bool) {
    if let Some(denied) = of_kind(events, "policy_denied").first() {
        let policy = denied["policy"].as_str().unwrap_or_default().to_owned();
        let verdict = match denied["policy_type"].as_str() {
            Some("rate_limit") => Verdict::RateLimited(policy),
            _ => Verdict::Denied(policy),
        };
        return (verdict, true);
    }
    if let Some(asked) = of_kind(events, "approval_requested").first() {
        let policy = asked["policy"].as_str().unwrap_or_default().to_owned();
        return (Verdict::Approval(policy), true);
    }
    if let Some(result) = of_kind(events, "tool_call_result").first() {
        return match (result["status"].as_str(), result["error_type"].as_str()) {
            (Some("ok"), _) => (Verdict::Ran, true),
            (_, Some("unknown_tool")) => (Verdict::Unknown, true),
            (status, kind) => (Verdict::Other(format!("{status:?} {kind:?}")), true),
        };
    }
    (Verdict::Other("no call was recorded".into()), false)
}

/// One turn of `agent` on a new thread with `input`, to its end or its suspension:
/// the events it stored and what it streamed.
pub async fn turn(served: &Served, sb: &Sandbox, agent: &str, input: &str) -> (Vec<Value>, String) {
    let thread = create_thread(served, sb, agent, agent).await;
    let streamed = SseReader::open(served, &thread, input)
        .await
        .until_any(&["turn_completed", "approval_requested"])
        .await;
    let text = format!("{:?}", streamed.iter().map(|r| &r.data).collect::<Vec<_>>());
    (events_of(&history(served, &thread).await), text)
}

/// A native agent's turn in which the model makes one tool call (the scenario says
/// which): what the gate made of it.
pub async fn native(served: &Served, sb: &Sandbox, agent: &str) -> Seen {
    let (events, answer) = turn(served, sb, agent, "make the call").await;
    let (verdict, recorded) = verdict_of_events(&events);
    Seen {
        verdict,
        recorded,
        answer,
    }
}

/// A call through the MCP gateway, and what the gateway's log (`GET /v1/mcp/calls`)
/// or the approvals hold of it.
pub async fn mcp_gateway(served: &Served, tool: &str, arguments: &Value, approval: bool) -> Seen {
    if approval {
        let before = pending_approvals(served, 0).await.len();
        // The call waits for a person: it is watched from the approvals, then left.
        let base = served.base.clone();
        let (tool, arguments) = (tool.to_owned(), arguments.clone());
        let waiting =
            tokio::spawn(async move { mcp_client(&base, "/mcp/gateway", &tool, &arguments).await });
        let pending = pending_approvals(served, before + 1).await;
        waiting.abort();
        let policy = pending
            .iter()
            .find(|a| a["agent"] == "mcp-gateway" || a["thread_id"].is_null())
            .and_then(|a| a["policy"].as_str())
            .unwrap_or_default()
            .to_owned();
        return Seen {
            verdict: if policy.is_empty() {
                Verdict::Other(format!("no approval: {pending:?}"))
            } else {
                Verdict::Approval(policy)
            },
            recorded: pending.len() > before,
            answer: format!("{pending:?}"),
        };
    }
    let called = mcp_client(&served.base, "/mcp/gateway", tool, arguments).await;
    let text = called["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let log = mcp_calls(served).await;
    let last = log.first().cloned().unwrap_or(Value::Null);
    let policy = last["policy"].as_str().unwrap_or_default().to_owned();
    let verdict = match (called["isError"].as_bool(), last["status"].as_str()) {
        (Some(false), Some("ok")) => Verdict::Ran,
        (Some(true), Some("denied")) => Verdict::Denied(policy.clone()),
        (Some(true), Some("rate_limited")) => Verdict::RateLimited(policy.clone()),
        _ if unknown(&text) || called["error"]["message"].as_str().is_some_and(unknown) => {
            Verdict::Unknown
        }
        (error, status) => Verdict::Other(format!("{error:?} {status:?}: {called}")),
    };
    // The log's status said the verdict; a refusal must also name its policy.
    let recorded =
        !matches!(&verdict, Verdict::Denied(p) | Verdict::RateLimited(p) if p.is_empty());
    Seen {
        verdict,
        recorded,
        answer: called.to_string(),
    }
}

/// An answer that says there is no such tool.
fn unknown(text: &str) -> bool {
    let text = text.to_lowercase();
    text.contains("unknown tool") || text.contains("there is no tool")
}

/// The gateway's log, newest first.
pub async fn mcp_calls(served: &Served) -> Vec<Value> {
    let log: Value = api(served, reqwest::Method::GET, "/v1/mcp/calls")
        .send()
        .await
        .expect("calls")
        .json()
        .await
        .expect("calls JSON");
    log["calls"].as_array().cloned().unwrap_or_default()
}

/// The pending approvals of [`agentplane_suites::CLIENT`], once there are `at_least` (or after 20 s).
pub async fn pending_approvals(served: &Served, at_least: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let listed: Value = api(served, reqwest::Method::GET, "/v1/approvals")
            .send()
            .await
            .expect("approvals")
            .json()
            .await
            .expect("approvals JSON");
        let pending = listed["approvals"].as_array().cloned().unwrap_or_default();
        if pending.len() >= at_least || Instant::now() > deadline {
            return pending;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An external ACP agent's turn whose prompt makes it ask permission for an edit of
/// `main.rs` (`write_file` to policies). A refusal is its `policy_denied`; an ask that
/// reaches a person is approved at once through `/v1/permissions/{id}` when `decide`,
/// and read as waiting under the policy its `permission_required` names otherwise.
pub async fn acp(served: &Served, sb: &Sandbox, agent: &str, decide: bool) -> Seen {
    let thread = create_thread(served, sb, agent, agent).await;
    let mut reader = SseReader::open(served, &thread, "permission please").await;
    let mut streamed = reader
        .until_any(&["turn_completed", "permission_required"])
        .await;
    let asked = streamed
        .iter()
        .find(|r| r.event == "permission_required")
        .map(|r| r.data.clone());
    let refused = |events: &[Value]| {
        of_kind(events, "policy_denied").first().map(|denied| {
            let policy = denied["policy"].as_str().unwrap_or_default().to_owned();
            match denied["policy_type"].as_str() {
                Some("rate_limit") => Verdict::RateLimited(policy),
                _ => Verdict::Denied(policy),
            }
        })
    };
    if let Some(ask) = &asked {
        // A policy that refuses the ask declines it at once: nothing to decide.
        if let Some(verdict) = refused(&events_of(&history(served, &thread).await)) {
            let rest = reader.until("turn_completed").await;
            return Seen {
                verdict,
                recorded: true,
                answer: format!(
                    "{ask} {:?}",
                    rest.iter().map(|r| &r.data).collect::<Vec<_>>()
                ),
            };
        }
        if !decide {
            // The turn keeps its client while someone else decides: a stream that
            // goes away declines what it waits for.
            tokio::spawn(async move { while reader.next().await.is_some() {} });
            let policy = ask["policy"].as_str().unwrap_or_default().to_owned();
            return Seen {
                recorded: !policy.is_empty(),
                verdict: Verdict::Approval(policy),
                answer: ask.to_string(),
            };
        }
        let id = ask["permission_id"].as_str().expect("permission id");
        let decided = api(
            served,
            reqwest::Method::POST,
            &format!("/v1/permissions/{id}"),
        )
        .json(&json!({"decision": "approved"}))
        .send()
        .await
        .expect("decide");
        assert_eq!(decided.status(), 200, "deciding {ask}");
        streamed.extend(reader.until("turn_completed").await);
    }
    let answer = format!("{:?}", streamed.iter().map(|r| &r.data).collect::<Vec<_>>());
    let events = events_of(&history(served, &thread).await);
    if let Some(verdict) = refused(&events) {
        return Seen {
            verdict,
            recorded: true,
            answer,
        };
    }
    Seen {
        verdict: if answer.contains("[permission: allow]") {
            Verdict::Ran
        } else {
            Verdict::Other(answer.clone())
        },
        recorded: true,
        answer,
    }
}

/// The gateway's model routes: one governed call, three client APIs.
pub const MODEL_ROUTES: [Surface; 3] = [
    Surface::OpenAiGateway,
    Surface::ResponsesGateway,
    Surface::MessagesGateway,
];

/// A call to the OpenAI-compatible gateway with `body`: its status and answer.
pub async fn completion(served: &Served, body: &Value) -> (u16, Value) {
    model_call(served, Surface::OpenAiGateway, body).await
}

/// The path of a model route.
pub fn route_path(route: Surface) -> &'static str {
    match route {
        Surface::ResponsesGateway => "/openai/v1/responses",
        Surface::MessagesGateway => "/anthropic/v1/messages",
        _ => "/openai/v1/chat/completions",
    }
}

/// A chat-completions `body` as the API of `route` has it: the same messages, tools,
/// output cap and stream flag, in the Responses or the Messages shape.
pub fn body_for(route: Surface, body: &Value) -> Value {
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let mut out = match route {
        Surface::ResponsesGateway => json!({
            "model": body["model"],
            "max_output_tokens": body["max_tokens"],
            "input": messages,
            "tools": tools.iter().map(|t| json!({"type": "function",
                "name": t["function"]["name"], "parameters": t["function"]["parameters"]}))
                .collect::<Vec<_>>(),
        }),
        Surface::MessagesGateway => json!({
            "model": body["model"],
            "max_tokens": body["max_tokens"],
            "messages": messages,
            "tools": tools.iter().map(|t| json!({"name": t["function"]["name"],
                "input_schema": t["function"]["parameters"]}))
                .collect::<Vec<_>>(),
        }),
        _ => return body.clone(),
    };
    if body["stream"] == true {
        out["stream"] = json!(true);
    }
    out
}

/// `body` (chat-completions shaped, see [`body_for`]) sent to the model route
/// `route`: its status and answer (a stream's text as `{"raw": …}`).
pub async fn model_call(served: &Served, route: Surface, body: &Value) -> (u16, Value) {
    let response = api(served, reqwest::Method::POST, route_path(route))
        .json(&body_for(route, body))
        .send()
        .await
        .expect("completion");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|_| json!({ "raw": text })),
    )
}

/// A one-message completion as [`agentplane_suites::CLIENT`].
pub fn ask(text: &str) -> Value {
    json!({"model": "scripted-model", "max_tokens": 500,
           "messages": [{"role": "user", "content": text}]})
}

/// agentplane's agent `agent` called as an MCP tool at `/mcp`.
pub async fn mcp_serving(served: &Served, sb: &Sandbox, agent: &str, task: &str) -> Value {
    mcp_client(
        &served.base,
        "/mcp",
        agent,
        &json!({"task": task, "workspace": sb.workspace}),
    )
    .await
}

/// A message id of its own for every A2A message a row sends.
static MESSAGES: AtomicU64 = AtomicU64::new(0);

/// agentplane's agent `agent` sent one A2A message (`SendMessage`, A2A 1.0): status
/// and answer.
pub async fn a2a_serving(served: &Served, agent: &str, text: &str) -> (u16, Value) {
    let body = json!({"jsonrpc": "2.0", "id": "r1", "method": "SendMessage",
        "params": {"message": {"messageId": format!("m-{}", MESSAGES.fetch_add(1, Ordering::Relaxed)),
                               "role": "ROLE_USER", "parts": [{"text": text}]}}});
    let response = api(served, reqwest::Method::POST, &format!("/a2a/{agent}"))
        .header("A2A-Version", "1.0")
        .json(&body)
        .send()
        .await
        .expect("A2A");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|_| json!({ "raw": text })),
    )
}

/// How many refusals `/metrics` counted for `policy` and `agent`
/// (`policy_denials_total`, every kind): the record every surface shares.
pub async fn counted(served: &Served, policy: &str, agent: &str) -> f64 {
    let labels = [("policy", policy), ("agent", agent)];
    agentplane_suites::metric_sum(served, "policy_denials_total", &labels).await
}
