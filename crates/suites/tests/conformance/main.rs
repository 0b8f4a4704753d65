//! The governance conformance table (issue 49): one set of hostile cases, each run
//! through the real binary against every surface a call can come in by, and every
//! surface must give the same verdict, the same record and the same redaction.
//!
//! Rows are the cases, one test each (a server of its own, so no row's counters or
//! budgets touch another's). Columns are the surfaces (`surfaces.rs`): a native
//! agent's tool call, the MCP gateway (PyPI's `mcp` client), an external ACP agent's
//! permission ask (the ACP SDK's agent), a remote A2A agent (`a2a-sdk`), the model
//! gateway's three routes (chat completions, the Responses API, Anthropic's Messages
//! API), agentplane's agents served over MCP (`/mcp`) and over A2A
//! (`/a2a/{agent}`). A case is run on every surface where it means something: a
//! surface that calls no tools has no tool to deny, and says so in the row. A new
//! surface is a new column; a case one surface fails fails its row, and the failure
//! lists every surface that disagreed, not only the first.
//!
//! The tool cases are the same call on each surface: a native agent's model and a
//! gateway client call `echo` of the `leaky` MCP server (`mcp__leaky__echo` to
//! policies) with `{"text": "main.rs"}`; the ACP agent asks to edit `main.rs`
//! (`write_file` with `{"path": "main.rs"}` to policies). Secrets in every field an
//! upstream controls (text, arguments, names, model, metadata, error messages) have
//! their own suite over the same surfaces, `outgoing.rs`; cross-site requests on every
//! route family in every hostile shape, `ingress.rs`. Here they are one row each.
//!
//! Needs the peers of `scripts/test-peers.sh`.

mod surfaces;

use agentplane_suites::{CLIENT, Sandbox, Served, sandbox, start_with_env};
use agentplane_testkit::{Scenario, ScriptedServer, ScriptedToolCall, Step, peers};
use serde_json::{Value, json};
use surfaces::{Seen, Surface, Verdict};

/// The tool every tool case calls, as policies know it on each surface.
const TOOLS: &str = "[mcp__leaky__echo, write_file]";
/// A card number: what the content cases carry in.
const CARD: &str = "4111 1111 1111 1111";
/// The key the A2A peer requires.
const PEER_KEY: &str = "a2a-conformance-peer-key-7c1d";

/// A row of the table: what each surface gave, against what every one must give.
struct Row {
    case: &'static str,
    failures: Vec<String>,
    seen: usize,
}

impl Row {
    fn new(case: &'static str) -> Self {
        Self {
            case,
            failures: Vec::new(),
            seen: 0,
        }
    }

    /// `surface` gave `want`, and recorded it.
    fn expect(&mut self, surface: Surface, seen: &Seen, want: &Verdict) {
        self.seen += 1;
        if seen.verdict != *want {
            self.failures.push(format!(
                "{surface:?}: {:?}, not {want:?}; answered {}",
                seen.verdict, seen.answer
            ));
        } else if !seen.recorded {
            self.failures.push(format!(
                "{surface:?}: {want:?} but not recorded: {}",
                seen.answer
            ));
        }
    }

    /// `surface` holds for `what`.
    fn check(&mut self, surface: Surface, ok: bool, what: impl Into<String>) {
        self.seen += 1;
        if !ok {
            self.failures.push(format!("{surface:?}: {}", what.into()));
        }
    }

    fn assert_all(self) {
        assert!(self.seen > 0, "{}: no surface was run", self.case);
        assert!(
            self.failures.is_empty(),
            "{}: {} surface(s) disagreed:\n{}",
            self.case,
            self.failures.len(),
            self.failures.join("\n")
        );
    }
}

/// `[mcp.servers]`, the gateway, and one agent per surface: `worker` (native, the two
/// MCP servers), `outsider` (ACP), `remote` (A2A, when `a2a` names its base URL); `chat`
/// and `careful` (the sandbox's) are served over A2A and MCP.
fn config(a2a: Option<&str>, extra: &str) -> String {
    let (python, leaky) = peers::mcp_hostile_server("leaky");
    let leaky: Vec<String> = leaky.iter().map(|a| format!("{a:?}")).collect();
    let (node, acp) = peers::acp_sdk_agent();
    let acp: Vec<String> = acp.iter().map(|a| format!("{a:?}")).collect();
    let remote = a2a.map_or(String::new(), |base| {
        format!(
            "[agents.remote]\nkind = \"a2a\"\ndescription = \"The SDK's test agent.\"\n\
             url = \"{base}/.well-known/agent-card.json\"\nmax_cost_usd = 0.009\n\
             [agents.remote.a2a]\napi_key = \"peer_key\"\ntimeout_secs = 60\n\
             [secrets.peer_key]\nenv = \"AGENTPLANE_TEST_PEER_KEY\"\n"
        )
    });
    format!(
        "[mcp.servers.leaky]\ncommand = {python:?}\nargs = [{}]\nstartup_timeout_secs = 10\n\
         [mcp.servers.everything]\n{}startup_timeout_secs = 20\n\
         [mcp.gateway]\nservers = [\"leaky\", \"everything\"]\n\
         [agents.worker]\nsystem_prompt = \"You call tools.\"\nensembles = [\"leaky\", \"everything\"]\n\
         max_output_tokens = 500\n\
         [agents.outsider]\nkind = \"acp\"\nprofile = \"opencode\"\nmax_cost_usd = 0.35\n\
         [agents.outsider.acp]\ncommand = {node:?}\nargs = [{}]\n\
         {remote}\
         [a2a]\nagents = [\"chat\", \"careful\"]\nworkspace = \"../ws\"\n\
         [prices.\"scripted-model\"]\ninput_per_mtok = 0.0\noutput_per_mtok = 4.0\n\
         [policies]\ndir = \"policies\"\n{extra}",
        leaky.join(", "),
        peers::mcp_everything_toml(),
        acp.join(", "),
    )
}

/// A sandbox with `policies` (one YAML file) in force.
fn sandbox_with(policies: &str, a2a: Option<&str>, extra: &str) -> Sandbox {
    let sb = sandbox(&config(a2a, extra));
    std::fs::create_dir(sb.root.join("policies")).expect("policies dir");
    std::fs::write(sb.root.join("policies/case.yaml"), policies).expect("policy");
    sb
}

async fn serve(sb: &Sandbox, model: &ScriptedServer) -> Served {
    start_with_env(
        sb,
        &model.base_url(),
        &[],
        &[("AGENTPLANE_TEST_PEER_KEY", PEER_KEY)],
    )
    .await
}

async fn model(steps: Vec<Step>) -> ScriptedServer {
    ScriptedServer::start(Scenario::new(steps))
        .await
        .expect("model")
}

/// The native agent's model: one call of `echo` with `text`, then an answer.
fn echo_turn(text: &str) -> Vec<Step> {
    vec![
        Step::tool_call("mcp__leaky__echo", json!({ "text": text })),
        Step::text("done"),
    ]
}

/// What the gateway client sends for the same call.
fn echo_args(text: &str) -> Value {
    json!({ "text": text })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_tool() {
    let sb = sandbox_with(
        &format!("name: no-echo\ntype: tool_access\nrules: {{deny: {TOOLS}}}\n"),
        None,
        "",
    );
    let model = model(echo_turn("main.rs")).await;
    let served = serve(&sb, &model).await;
    let want = Verdict::Denied("no-echo".into());
    let mut row = Row::new("a denied tool");
    let native = surfaces::native(&served, &sb, "worker").await;
    row.expect(Surface::Native, &native, &want);
    let gateway = surfaces::mcp_gateway(&served, "leaky__echo", &echo_args("main.rs"), false).await;
    row.expect(Surface::McpGateway, &gateway, &want);
    let acp = surfaces::acp(&served, &sb, "outsider", true).await;
    row.expect(Surface::Acp, &acp, &want);
    for (surface, agent) in [
        (Surface::Native, "worker"),
        (Surface::McpGateway, "mcp-gateway"),
        (Surface::Acp, "outsider"),
    ] {
        let n = surfaces::counted(&served, "no-echo", agent).await;
        row.check(
            surface,
            n == 1.0,
            format!("policy_denials_total {n}, not 1"),
        );
    }
    row.assert_all();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_denied_only_for_some_arguments() {
    let sb = sandbox_with(
        &format!(
            "name: not-main\ntype: tool_access\ntargets: {{tools: {TOOLS}}}\n\
             when: {{any: [{{arg: /text, glob: 'main*'}}, {{arg: /path, glob: 'main*'}}]}}\n\
             rules: {{deny: ['*']}}\n"
        ),
        None,
        "",
    );
    let mut steps = echo_turn("main.rs");
    steps.extend(echo_turn("notes.txt"));
    let model = model(steps).await;
    let served = serve(&sb, &model).await;
    let denied = Verdict::Denied("not-main".into());
    let mut row = Row::new("a tool denied only for some arguments");
    row.expect(
        Surface::Native,
        &surfaces::native(&served, &sb, "worker").await,
        &denied,
    );
    row.expect(
        Surface::Native,
        &surfaces::native(&served, &sb, "worker").await,
        &Verdict::Ran,
    );
    let gateway = |text: &'static str| {
        let served = &served;
        async move { surfaces::mcp_gateway(served, "leaky__echo", &echo_args(text), false).await }
    };
    row.expect(Surface::McpGateway, &gateway("main.rs").await, &denied);
    row.expect(
        Surface::McpGateway,
        &gateway("notes.txt").await,
        &Verdict::Ran,
    );
    row.expect(
        Surface::Acp,
        &surfaces::acp(&served, &sb, "outsider", true).await,
        &denied,
    );
    row.assert_all();
}

/// `client` decides `path` (an approval or a permission): the HTTP status.
async fn decide(served: &Served, path: &str, client: &str, decision: &str) -> u16 {
    reqwest::Client::new()
        .post(format!("{}{path}", served.base))
        .header("X-Client-ID", client)
        .json(&json!({ "decision": decision }))
        .send()
        .await
        .expect("decide")
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval() {
    let sb = sandbox_with(
        &format!(
            "name: ask-first\ntype: approval_required\ntargets: {{tools: {TOOLS}}}\n\
             rules: {{approvers: [reviewer]}}\n"
        ),
        None,
        "",
    );
    let model = model(echo_turn("main.rs")).await;
    let served = serve(&sb, &model).await;
    let want = Verdict::Approval("ask-first".into());
    let mut row = Row::new("an approval");
    row.expect(
        Surface::Native,
        &surfaces::native(&served, &sb, "worker").await,
        &want,
    );
    // The native call's approval is pending now: the gateway's is the second.
    let before = surfaces::pending_approvals(&served, 1).await;
    let gateway = surfaces::mcp_gateway(&served, "leaky__echo", &echo_args("main.rs"), true).await;
    let after = surfaces::pending_approvals(&served, before.len() + 1).await;
    row.expect(Surface::McpGateway, &gateway, &want);
    row.check(
        Surface::McpGateway,
        after.len() == before.len() + 1 && after.iter().all(|a| a["policy"] == "ask-first"),
        format!("one more approval under ask-first: {after:?}"),
    );
    let acp = surfaces::acp(&served, &sb, "outsider", false).await;
    row.expect(Surface::Acp, &acp, &want);

    // Only the approver decides, whatever the surface: the caller is refused, the
    // reviewer is not.
    let mut asks: Vec<(Surface, String)> = Vec::new();
    for approval in &after {
        let surface = if approval["agent"] == "worker" {
            Surface::Native
        } else {
            Surface::McpGateway
        };
        let id = approval["id"].as_str().unwrap_or_default();
        asks.push((surface, format!("/v1/approvals/{id}")));
    }
    let ask: Value = serde_json::from_str(&acp.answer).unwrap_or(Value::Null);
    if let Some(id) = ask["permission_id"].as_str() {
        asks.push((Surface::Acp, format!("/v1/permissions/{id}")));
    }
    row.check(
        Surface::Acp,
        asks.len() == 3,
        format!("three asks: {asks:?}"),
    );
    for (surface, path) in &asks {
        let decision = if path.contains("permissions") {
            "approved"
        } else {
            "approve"
        };
        // A malformed answer by someone who may not decide decides nothing: refused
        // before it is read for a permission (whose malformed answer declines it),
        // `400` for an approval (whose malformed answer never decides); the reviewer
        // still decides below.
        let garbled = decide(&served, path, CLIENT, "approve\u{202e}").await;
        let refused = if path.contains("permissions") {
            403
        } else {
            400
        };
        row.check(
            *surface,
            garbled == refused,
            format!("{path} garbled by the caller: {garbled}"),
        );
        let by_caller = decide(&served, path, CLIENT, decision).await;
        row.check(
            *surface,
            by_caller == 403,
            format!("{path} decided by the caller: {by_caller}"),
        );
        // Ten answers of the reviewer at once: exactly one decides, the rest conflict.
        let answers = (0..10).map(|_| decide(&served, path, "reviewer", decision));
        let statuses = futures_util::future::join_all(answers).await;
        let decided = statuses.iter().filter(|s| **s == 200).count();
        let conflicts = statuses.iter().filter(|s| **s == 409).count();
        row.check(
            *surface,
            decided == 1 && conflicts == 9,
            format!("{path} decided by the reviewer 10 times at once: {statuses:?}"),
        );
    }
    row.assert_all();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit() {
    let sb = sandbox_with(
        &format!(
            "- name: one-call\n  type: rate_limit\n  targets: {{tools: {TOOLS}}}\n  \
             rules: {{window: 1m, max: 1, per: [agent]}}\n\
             - name: one-turn\n  type: rate_limit\n  targets: {{agents: [gateway, chat, careful]}}\n  \
             rules: {{window: 1m, max: 1, per: [agent]}}\n"
        ),
        None,
        "",
    );
    let call = Step::tool_call("mcp__leaky__echo", json!({"text": "notes.txt"}));
    let mut steps = vec![call.clone(), call, Step::text("done")];
    // The gateway's, A2A's and MCP's first turns.
    steps.extend([Step::text("one"), Step::text("two"), Step::text("three")]);
    let model = model(steps).await;
    let served = serve(&sb, &model).await;
    let calls = Verdict::RateLimited("one-call".into());
    let mut row = Row::new("a rate limit");
    // Two calls in one turn: the second is refused.
    row.expect(
        Surface::Native,
        &surfaces::native(&served, &sb, "worker").await,
        &calls,
    );
    let args = echo_args("notes.txt");
    let first = surfaces::mcp_gateway(&served, "leaky__echo", &args, false).await;
    row.expect(Surface::McpGateway, &first, &Verdict::Ran);
    let second = surfaces::mcp_gateway(&served, "leaky__echo", &args, false).await;
    row.expect(Surface::McpGateway, &second, &calls);
    row.expect(
        Surface::Acp,
        &surfaces::acp(&served, &sb, "outsider", true).await,
        &Verdict::Ran,
    );
    row.expect(
        Surface::Acp,
        &surfaces::acp(&served, &sb, "outsider", true).await,
        &calls,
    );
    // Turn-level limits: the second call of each is refused, naming the policy.
    let (status, _) = surfaces::completion(&served, &surfaces::ask("hello")).await;
    row.check(
        Surface::OpenAiGateway,
        status == 200,
        format!("first: {status}"),
    );
    // Every model route is the same `gateway` agent under the same limit.
    for route in surfaces::MODEL_ROUTES {
        let (status, body) = surfaces::model_call(&served, route, &surfaces::ask("again")).await;
        row.check(
            route,
            status == 429 && body.to_string().contains("one-turn"),
            format!("second: {status} {body}"),
        );
    }
    let (status, first) = surfaces::a2a_serving(&served, "chat", "hello").await;
    row.check(
        Surface::A2aServing,
        status == 200,
        format!("first: {first}"),
    );
    let (_, second) = surfaces::a2a_serving(&served, "chat", "again").await;
    row.check(
        Surface::A2aServing,
        second.to_string().contains("one-turn"),
        format!("second names the policy: {second}"),
    );
    let first = surfaces::mcp_serving(&served, &sb, "careful", "hello").await;
    // Its first turn runs (and, answering in text, ends as `careful`'s turns do).
    row.check(
        Surface::McpServing,
        first["progressMessages"]
            .to_string()
            .contains("model answered")
            && !first.to_string().contains("one-turn"),
        format!("first: {first}"),
    );
    let second = surfaces::mcp_serving(&served, &sb, "careful", "again").await;
    row.check(
        Surface::McpServing,
        second["isError"] == true && second.to_string().contains("one-turn"),
        format!("second names the policy: {second}"),
    );
    for (surface, policy, agent) in [
        (Surface::Native, "one-call", "worker"),
        (Surface::McpGateway, "one-call", "mcp-gateway"),
        (Surface::Acp, "one-call", "outsider"),
        (Surface::OpenAiGateway, "one-turn", "gateway"),
        (Surface::A2aServing, "one-turn", "chat"),
        (Surface::McpServing, "one-turn", "careful"),
    ] {
        let n = surfaces::counted(&served, policy, agent).await;
        // The gateway's agent was refused once on each model route.
        let want = if surface == Surface::OpenAiGateway {
            surfaces::MODEL_ROUTES.len() as f64
        } else {
            1.0
        };
        row.check(
            surface,
            n == want,
            format!("policy_denials_total {n}, not {want}"),
        );
    }
    row.assert_all();
}

/// `text` is clean of the card and holds its redacted form.
fn redacted(text: &str) -> bool {
    !text.contains(CARD) && !text.contains("4111111111111111") && text.contains("[REDACTED:card]")
}

/// The model requests that came in since `before`, as text.
fn told_since(model: &ScriptedServer, before: usize) -> String {
    let requests = model.requests();
    serde_json::to_string(&requests[before.min(requests.len())..]).expect("JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_content_policy_on_input() {
    let (_peer, base) = agentplane_suites::python_peer(
        &peers::a2a_agent_script(),
        &["--auth", "bearer", "--key", PEER_KEY],
    )
    .await;
    let sb = sandbox_with(
        "name: no-cards\ntype: content\nrules: {detectors: [card], action: redact}\n",
        Some(&base),
        "",
    );
    let model = ScriptedServer::start(Scenario::new(vec![Step::text("noted")]).repeating(true))
        .await
        .expect("model");
    let served = serve(&sb, &model).await;
    let input = format!("pay with {CARD}");
    let mut row = Row::new("a content policy on input");

    let before = model.requests().len();
    let _ = surfaces::turn(&served, &sb, "chat", &input).await;
    let told = told_since(&model, before);
    row.check(
        Surface::Native,
        redacted(&told),
        format!("the model was told {told}"),
    );

    for route in surfaces::MODEL_ROUTES {
        let before = model.requests().len();
        let (status, answer) = surfaces::model_call(&served, route, &surfaces::ask(&input)).await;
        let told = told_since(&model, before);
        row.check(
            route,
            status == 200 && redacted(&told),
            format!("{status} {answer}; the model was told {told}"),
        );
    }

    let before = model.requests().len();
    let (_, answer) = surfaces::a2a_serving(&served, "chat", &input).await;
    let told = told_since(&model, before);
    row.check(
        Surface::A2aServing,
        redacted(&told),
        format!("{answer}; the model was told {told}"),
    );

    let before = model.requests().len();
    let answer = surfaces::mcp_serving(&served, &sb, "careful", &input).await;
    let told = told_since(&model, before);
    row.check(
        Surface::McpServing,
        redacted(&told),
        format!("{answer}; the model was told {told}"),
    );

    // The remote answers "echo: <what it was sent>".
    let (events, streamed) = surfaces::turn(&served, &sb, "remote", &input).await;
    let answered = surfaces::of_kind(&events, "message_delta")
        .iter()
        .filter_map(|e| e["text"].as_str())
        .collect::<String>();
    row.check(
        Surface::A2aRemote,
        redacted(&answered) && !streamed.contains(CARD),
        format!("the remote was sent: {answered}"),
    );

    // The ACP agent says back what reached it after "echo:".
    let (events, streamed) =
        surfaces::turn(&served, &sb, "outsider", &format!("echo:{input}")).await;
    let heard = surfaces::of_kind(&events, "message_delta")
        .iter()
        .filter_map(|e| e["text"].as_str())
        .collect::<String>();
    row.check(
        Surface::Acp,
        heard.contains("[heard:") && redacted(&heard) && !streamed.contains(CARD),
        format!("the agent heard: {heard}"),
    );

    // The gateway's client: what it sends reaches the server redacted (`everything`'s
    // echo says it back).
    let called = surfaces::mcp_client(
        &served.base,
        "/mcp/gateway",
        "everything__echo",
        &json!({ "message": input }),
    )
    .await;
    row.check(
        Surface::McpGateway,
        redacted(&called["result"].to_string()),
        format!("the server was sent: {called}"),
    );
    row.assert_all();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_content_policy_on_results_errors_and_tool_call_arguments() {
    let sb = sandbox_with(
        "name: no-cards\ntype: content\nrules: {detectors: [card], action: redact}\n",
        None,
        "",
    );
    let mut steps = Vec::new();
    for text in ["rpc-error", "is-error", "ok"] {
        steps.extend(echo_turn(text));
    }
    // A native call whose arguments hold the card: `everything`'s echo says back what
    // it was given.
    steps.push(Step::tool_call(
        "mcp__everything__echo",
        json!({"message": format!("card {CARD}")}),
    ));
    steps.push(Step::text("done"));
    // Each model route's answer, whole and streamed: a tool call holding the card.
    let send = Step::tool_calls(vec![ScriptedToolCall {
        id: None,
        name: "send".into(),
        arguments: json!({"card": CARD}),
    }]);
    for _ in surfaces::MODEL_ROUTES {
        steps.push(send.clone());
        steps.push(send.clone().with_split(3));
    }
    let model = model(steps).await;
    let served = serve(&sb, &model).await;
    let mut row = Row::new("a content policy on results, errors and tool-call arguments");

    for text in ["rpc-error", "is-error", "ok"] {
        let (events, streamed) = surfaces::turn(&served, &sb, "worker", "call").await;
        let result = surfaces::of_kind(&events, "tool_call_result")
            .first()
            .map(|r| r.to_string())
            .unwrap_or_default();
        row.check(
            Surface::Native,
            redacted(&result) && !streamed.contains(CARD),
            format!("{text}: {result}"),
        );
        let called = surfaces::mcp_client(
            &served.base,
            "/mcp/gateway",
            "leaky__echo",
            &echo_args(text),
        )
        .await;
        row.check(
            Surface::McpGateway,
            redacted(&called.to_string()),
            format!("{text}: {called}"),
        );
    }
    let (events, _) = surfaces::turn(&served, &sb, "worker", "call").await;
    let all = serde_json::to_string(&events).expect("JSON");
    row.check(
        Surface::Native,
        redacted(&all),
        format!("a call's arguments: {all}"),
    );
    let called = surfaces::mcp_client(
        &served.base,
        "/mcp/gateway",
        "everything__echo",
        &json!({"message": format!("card {CARD}")}),
    )
    .await;
    row.check(
        Surface::McpGateway,
        redacted(&called.to_string()),
        format!("a call's arguments: {called}"),
    );
    let body = json!({"model": "scripted-model", "max_tokens": 500,
        "messages": [{"role": "user", "content": "pay"}],
        "tools": [{"type": "function", "function": {"name": "send", "parameters": {"type": "object"}}}]});
    for route in surfaces::MODEL_ROUTES {
        let (status, whole) = surfaces::model_call(&served, route, &body).await;
        row.check(
            route,
            status == 200 && redacted(&whole.to_string()),
            format!("whole: {whole}"),
        );
        let mut streamed = body.clone();
        streamed["stream"] = json!(true);
        let (status, pieces) = surfaces::model_call(&served, route, &streamed).await;
        row.check(
            route,
            status == 200
                && !pieces.to_string().contains("4111")
                && pieces.to_string().contains("REDACTED"),
            format!("streamed: {pieces}"),
        );
    }
    row.assert_all();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_tool() {
    let sb = sandbox_with(
        "name: hide-echo\ntype: tool_access\nrules: {deny: [mcp__leaky__echo]}\n",
        None,
        "",
    );
    let model = model(vec![
        Step::tool_call("nothing_here", json!({})),
        Step::text("done"),
    ])
    .await;
    let served = serve(&sb, &model).await;
    let mut row = Row::new("an unknown tool");
    let native = surfaces::native(&served, &sb, "worker").await;
    row.expect(Surface::Native, &native, &Verdict::Unknown);
    row.check(
        Surface::Native,
        !native.answer.contains("leaky__echo"),
        format!("the answer names the hidden tool: {}", native.answer),
    );
    let gateway = surfaces::mcp_gateway(&served, "nothing_here", &json!({}), false).await;
    row.expect(Surface::McpGateway, &gateway, &Verdict::Unknown);
    row.check(
        Surface::McpGateway,
        !gateway.answer.contains("leaky__echo"),
        format!("the answer names the hidden tool: {}", gateway.answer),
    );
    row.assert_all();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cross_site_request() {
    let sb = sandbox_with("[]\n", None, "");
    let model = model(vec![Step::text("never")]).await;
    let served = serve(&sb, &model).await;
    let workspace = sb.workspace.to_string_lossy().into_owned();
    let mut row = Row::new("a cross-site request");
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "page", "version": "1"}}});
    let routes = [
        (
            Surface::Native,
            "/v1/threads",
            json!({"agent": "chat", "cwd": workspace}),
        ),
        (Surface::McpGateway, "/mcp/gateway", initialize.clone()),
        (Surface::McpServing, "/mcp", initialize),
        (
            Surface::OpenAiGateway,
            "/openai/v1/chat/completions",
            surfaces::ask("page text"),
        ),
        (
            Surface::ResponsesGateway,
            "/openai/v1/responses",
            surfaces::body_for(Surface::ResponsesGateway, &surfaces::ask("page text")),
        ),
        (
            Surface::MessagesGateway,
            "/anthropic/v1/messages",
            surfaces::body_for(Surface::MessagesGateway, &surfaces::ask("page text")),
        ),
        (
            Surface::A2aServing,
            "/a2a/chat",
            json!({"jsonrpc": "2.0", "id": "r1", "method": "SendMessage",
                   "params": {"message": {"messageId": "m1", "role": "ROLE_USER",
                                          "parts": [{"text": "page text"}]}}}),
        ),
    ];
    for (surface, path, body) in routes {
        // What a page may send without a preflight: its Origin, a simple content type.
        let response = reqwest::Client::new()
            .post(format!("{}{path}", served.base))
            .header("Origin", "https://evil.example")
            .header("content-type", "text/plain")
            .header("X-Client-ID", CLIENT)
            .body(body.to_string())
            .send()
            .await
            .expect("POST");
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        row.check(
            surface,
            status == 403 && text.contains("FORBIDDEN"),
            format!("{path}: {status} {text}"),
        );
    }
    row.check(
        Surface::A2aServing,
        model.requests().is_empty(),
        "the model was asked",
    );
    row.assert_all();
}

/// `n` callers at once against a budget that pays for one call: exactly one ran,
/// every other was refused naming the budget, and what was settled is within it.
fn raced(row: &mut Row, surface: Surface, ran: usize, refused: &[String], n: usize, policy: &str) {
    row.check(
        surface,
        ran == 1 && refused.len() == n - 1 && refused.iter().all(|r| r.contains(policy)),
        format!("{ran} ran; refused: {refused:?}"),
    );
}

/// The settled spend of `agent` (`GET /v1/costs?agent=`), in micro-dollars.
async fn settled(served: &Served, agent: &str) -> u64 {
    let body: Value = agentplane_suites::api(
        served,
        reqwest::Method::GET,
        &format!("/v1/costs?agent={agent}"),
    )
    .send()
    .await
    .expect("costs")
    .json()
    .await
    .expect("costs JSON");
    body["total"]["usd_micros"].as_u64().unwrap_or(u64::MAX)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_with_ten_concurrent_callers() {
    const N: usize = 10;
    let (_peer, base) = agentplane_suites::python_peer(
        &peers::a2a_agent_script(),
        &["--auth", "bearer", "--key", PEER_KEY],
    )
    .await;
    // Each budget pays for one call: a model call is $0.002 (500 tokens out at $4/M,
    // reserved exactly), the gateway's tool $0.009, the remote $0.009, the ACP agent
    // $0.35.
    let budget = |name: &str, agent: &str, usd: &str| {
        format!(
            "- name: {name}\n  type: budget\n  targets: {{agents: [{agent}]}}\n  \
             rules: {{usd: {usd}, period: month}}\n"
        )
    };
    let policies = [
        budget("native-budget", "worker", "0.003"),
        budget("gateway-budget", "gateway", "0.003"),
        budget("tools-budget", "mcp-gateway", "0.01"),
        budget("remote-budget", "remote", "0.01"),
        budget("acp-budget", "outsider", "0.5"),
    ]
    .concat();
    let sb = sandbox_with(
        &policies,
        Some(&base),
        "[prices.tools]\n\"leaky__echo\" = 0.009\n",
    );
    let paid = Step::text("paid").with_usage(100, 500);
    let model = ScriptedServer::start(Scenario::new(vec![paid]).repeating(true))
        .await
        .expect("model");
    let served = serve(&sb, &model).await;
    let mut row = Row::new("a budget with ten concurrent callers");

    // Turns of native, remote and ACP agents: their `error` names the budget.
    for (surface, agent, input, policy, cap) in [
        (Surface::Native, "worker", "hello", "native-budget", 3_000),
        (
            Surface::A2aRemote,
            "remote",
            "priced=0.009",
            "remote-budget",
            10_000,
        ),
        (Surface::Acp, "outsider", "usage", "acp-budget", 500_000),
    ] {
        let turns = (0..N).map(|_| surfaces::turn(&served, &sb, agent, input));
        let ended = futures_util::future::join_all(turns).await;
        let mut ran = 0;
        let mut refused = Vec::new();
        for (events, _) in &ended {
            match surfaces::of_kind(events, "policy_denied").first() {
                Some(denied) => refused.push(denied.to_string()),
                None if surfaces::of_kind(events, "error").is_empty() => ran += 1,
                None => refused.push(format!("{events:?}")),
            }
        }
        raced(&mut row, surface, ran, &refused, N, policy);
        let spent = settled(&served, agent).await;
        row.check(surface, spent <= cap, format!("settled {spent} > {cap}"));
    }

    // The model routes, at once and all one budget: 402 naming it.
    let hello = surfaces::ask("hello");
    let routes = surfaces::MODEL_ROUTES;
    let calls = (0..N).map(|i| {
        let route = routes[i % routes.len()];
        let hello = &hello;
        let served = &served;
        async move { (route, surfaces::model_call(served, route, hello).await) }
    });
    let answers = futures_util::future::join_all(calls).await;
    let ran = answers
        .iter()
        .filter(|(_, (status, _))| *status == 200)
        .count();
    for route in routes {
        let refused: Vec<String> = answers
            .iter()
            .filter(|(r, (status, _))| *r == route && *status != 200)
            .map(|(_, (status, body))| format!("{status} {body}"))
            .collect();
        row.check(
            route,
            ran == 1
                && refused
                    .iter()
                    .all(|r| r.starts_with("402") && r.contains("gateway-budget")),
            format!("{ran} ran on all routes; refused here: {refused:?}"),
        );
    }
    let spent = settled(&served, "gateway").await;
    row.check(
        Surface::OpenAiGateway,
        spent <= 3_000,
        format!("settled {spent}"),
    );

    // The MCP gateway: a priced tool.
    let ok = echo_args("ok");
    let calls =
        (0..N).map(|_| surfaces::mcp_client(&served.base, "/mcp/gateway", "leaky__echo", &ok));
    let answers = futures_util::future::join_all(calls).await;
    let ran = answers.iter().filter(|a| a["isError"] == false).count();
    let refused: Vec<String> = answers
        .iter()
        .filter(|a| a["isError"] != false)
        .map(Value::to_string)
        .collect();
    raced(
        &mut row,
        Surface::McpGateway,
        ran,
        &refused,
        N,
        "tools-budget",
    );
    let log = surfaces::mcp_calls(&served).await;
    let spent: u64 = log.iter().filter_map(|c| c["usd_micros"].as_u64()).sum();
    row.check(
        Surface::McpGateway,
        spent <= 10_000,
        format!("settled {spent}: {log:?}"),
    );
    row.assert_all();
}

/// How many would-be denials `/metrics` counted for `policy` and `agent`
/// (`policy_audited_total{would="deny"}`; a native turn's admission is one more, a
/// would-be `allow`, since the policy names no tools).
async fn audited(served: &Served, policy: &str, agent: &str) -> f64 {
    let labels = [("policy", policy), ("agent", agent), ("would", "deny")];
    agentplane_suites::metric_sum(served, "policy_audited_total", &labels).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_in_audit_mode() {
    let sb = sandbox_with(
        &format!("name: would-deny\ntype: tool_access\nmode: audit\nrules: {{deny: {TOOLS}}}\n"),
        None,
        "",
    );
    let model = model(echo_turn("main.rs")).await;
    let served = serve(&sb, &model).await;
    let mut row = Row::new("a policy in audit mode");
    // Rehearsed, never enforced: every surface runs the call and counts what the
    // policy would have done.
    row.expect(
        Surface::Native,
        &surfaces::native(&served, &sb, "worker").await,
        &Verdict::Ran,
    );
    let gateway = surfaces::mcp_gateway(&served, "leaky__echo", &echo_args("main.rs"), false).await;
    row.expect(Surface::McpGateway, &gateway, &Verdict::Ran);
    row.expect(
        Surface::Acp,
        &surfaces::acp(&served, &sb, "outsider", true).await,
        &Verdict::Ran,
    );
    for (surface, agent) in [
        (Surface::Native, "worker"),
        (Surface::McpGateway, "mcp-gateway"),
        (Surface::Acp, "outsider"),
    ] {
        let n = audited(&served, "would-deny", agent).await;
        row.check(
            surface,
            n == 1.0,
            format!("policy_audited_total {n}, not 1"),
        );
    }
    row.assert_all();
}
