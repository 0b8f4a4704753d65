//! Several providers end to end: routing, failover, circuit health and the Anthropic
//! adapter, with real scripted servers on 127.0.0.1 (and a real closed port), a SQLite
//! file and the builtin tools.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agentplane_core::{ErrorCode, Event, EventPayload, StopReason};
use agentplane_engine::NoObserver;
use agentplane_runtime::config::ConfigSource;
use agentplane_runtime::{Config, Runtime, Task};
use agentplane_testkit::{Scenario, ScriptedModel, ScriptedServer, Step};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const AGENTS: &str = r#"
[agents.worker]
system_prompt = "Do the task."
ensembles = ["fs"]
max_steps = 4
# These tests end turns with text answers: no corrective messages (ADR 0032).
max_nudges = 0

[agents.writer]
system_prompt = "Write."

[agents.secretive]
system_prompt = "Keep secrets."
tags = ["pii"]
"#;

struct Harness {
    _dir: tempfile::TempDir,
    workspace: PathBuf,
    runtime: Runtime,
}

fn load(root: &Path, toml: &str) -> Result<Config, agentplane_runtime::ConfigError> {
    let file = root.join("agentplane.toml");
    std::fs::write(&file, toml).expect("config");
    let env = |_: &str| None;
    Config::load_from(&ConfigSource {
        explicit: Some(&file),
        cwd: root,
        env: &env,
    })
}

/// A runtime over `providers_toml` (the `[providers…]` and `[routing…]` sections).
async fn harness(providers_toml: &str) -> Harness {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    let workspace = root.join("ws");
    std::fs::create_dir(&workspace).expect("workspace");
    std::fs::write(workspace.join("a.txt"), "alpha").expect("file");
    std::fs::write(root.join("anthropic.key"), "sk-ant-test-0123456789\n").expect("key");
    let config = load(
        &root,
        &format!(
            "[llm]\nmodel = \"scripted-model\"\n[store]\npath = \"events.db\"\n\
             [secrets.ANTHROPIC_KEY]\nfile = \"anthropic.key\"\n{AGENTS}\n{providers_toml}"
        ),
    )
    .expect("config loads");
    let runtime = Runtime::start(config).await.expect("runtime starts");
    Harness {
        _dir: dir,
        workspace,
        runtime,
    }
}

impl Harness {
    async fn run(&self, agent: &str, input: &str) -> (agentplane_engine::TurnOutcome, Vec<Event>) {
        let outcome = self
            .runtime
            .run_task(
                Task {
                    agent: agent.to_owned(),
                    workspace: self.workspace.clone(),
                    input: input.to_owned(),
                },
                &NoObserver,
                CancellationToken::new(),
            )
            .await
            .expect("turn runs");
        let events = self
            .runtime
            .store()
            .turn_events(&outcome.turn)
            .await
            .expect("events");
        (outcome, events)
    }

    fn health(&self, agent: &str) -> Vec<(String, bool)> {
        let agent = self.runtime.agent(agent).expect("agent").clone();
        self.runtime
            .hub()
            .provider_chain(&agent)
            .into_iter()
            .map(|p| (p.name, p.health.up))
            .collect()
    }
}

/// A port on 127.0.0.1 where nothing listens (bound, then released).
fn closed_port() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr")
}

fn openai(name: &str, url: &str) -> String {
    format!("[providers.{name}]\nkind = \"openai\"\nbase_url = \"{url}\"\nmax_retries = 0\n")
}

async fn server(steps: Vec<Step>) -> ScriptedServer {
    ScriptedServer::start(Scenario::new(steps))
        .await
        .expect("scripted server")
}

/// (kind, provider) of the failover, usage and cost events, in order.
fn provider_trail(events: &[Event]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ProviderFailover { from, to, .. } => {
                Some(("provider_failover".to_owned(), format!("{from}->{to}")))
            }
            EventPayload::Usage { provider, .. } => Some(("usage".to_owned(), provider.clone())),
            EventPayload::Cost { provider, .. } => Some(("cost".to_owned(), provider.clone())),
            _ => None,
        })
        .collect()
}

fn trail(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

fn answer_text(outcome: &agentplane_engine::TurnOutcome) -> String {
    outcome.result["text"].as_str().unwrap_or("").to_owned()
}

#[tokio::test]
async fn a_refused_connection_fails_over_to_the_next_provider() {
    let cloud = server(vec![Step::text("from the cloud")]).await;
    let h = harness(&format!(
        "{}{}[routing]\ndefault = [\"local\", \"cloud\"]\n",
        openai("local", &format!("http://{}/v1", closed_port())),
        openai("cloud", &cloud.base_url()),
    ))
    .await;
    let (outcome, events) = h.run("writer", "hello").await;
    assert_eq!(outcome.stop_reason, StopReason::TextAnswer);
    assert_eq!(answer_text(&outcome), "from the cloud");
    assert_eq!(
        provider_trail(&events),
        trail(&[
            ("provider_failover", "local->cloud"),
            ("usage", "cloud"),
            ("cost", "cloud")
        ])
    );
    let failover = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::ProviderFailover { code, message, .. } => Some((*code, message.clone())),
            _ => None,
        })
        .expect("failover event");
    assert_eq!(failover.0, ErrorCode::UpstreamUnavailable);
    assert!(failover.1.contains("cannot reach"), "{}", failover.1);
    let metrics = h.runtime.metrics().encode();
    assert!(
        metrics.contains(r#"provider_failovers_total{from="local",to="cloud"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"provider_requests_total{provider="cloud",outcome="ok"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"provider_requests_total{provider="local",outcome="upstream_error"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"provider_up{provider="local"} 1"#),
        "{metrics}"
    );
    agentplane_testkit::promtool::assert_accepts(&metrics);
}

#[tokio::test]
async fn a_stream_that_dies_midway_fails_over_and_keeps_what_was_streamed() {
    let local = server(vec![
        Step::text("the first half of an answer that never ends")
            .with_split(6)
            .truncated_after(3),
    ])
    .await;
    let cloud = server(vec![Step::text("a whole answer")]).await;
    let h = harness(&format!(
        "{}{}[routing]\ndefault = [\"local\", \"cloud\"]\n",
        openai("local", &local.base_url()),
        openai("cloud", &cloud.base_url()),
    ))
    .await;
    let (outcome, events) = h.run("writer", "hello").await;
    assert_eq!(outcome.stop_reason, StopReason::TextAnswer);
    assert_eq!(answer_text(&outcome), "a whole answer");
    // The failed attempt's text stays in the log, before the failover event.
    let failover_at = events
        .iter()
        .position(|e| e.payload.kind() == "provider_failover")
        .expect("failover");
    let before: String = events[..failover_at]
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::MessageDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let after: String = events[failover_at..]
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::MessageDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        !before.is_empty() && "the first half of an answer that never ends".starts_with(&before),
        "{before:?}"
    );
    assert_eq!(after, "a whole answer");
    assert_eq!(
        provider_trail(&events),
        trail(&[
            ("provider_failover", "local->cloud"),
            ("usage", "cloud"),
            ("cost", "cloud")
        ])
    );
    assert_eq!(
        local.chat_request_count(),
        1,
        "no retry after text was streamed"
    );
}

#[tokio::test]
async fn capability_and_request_errors_never_fail_over() {
    for step in [
        Step::no_tools(),
        Step::error(400, r#"{"error":{"message":"bad request"}}"#),
        Step::error(401, r#"{"error":{"message":"bad key"}}"#),
    ] {
        let local = server(vec![step.clone()]).await;
        let cloud = server(vec![Step::text("never")]).await;
        let h = harness(&format!(
            "{}{}[routing]\ndefault = [\"local\", \"cloud\"]\n",
            openai("local", &local.base_url()),
            openai("cloud", &cloud.base_url()),
        ))
        .await;
        let (outcome, events) = h.run("worker", "read a.txt").await;
        assert_eq!(outcome.stop_reason, StopReason::Error, "{step:?}");
        assert!(provider_trail(&events).is_empty(), "{events:?}");
        assert_eq!(cloud.chat_request_count(), 0, "{step:?}");
        let error = outcome.error.expect("error");
        if step.no_tools {
            assert_eq!(error.code, ErrorCode::InvalidArgument);
            assert!(error.message.contains("does not support tool calls"));
        } else {
            assert_eq!(error.code, ErrorCode::UpstreamUnavailable);
        }
        // A request error says nothing about the server's health.
        assert_eq!(
            h.health("worker"),
            vec![("local".to_owned(), true), ("cloud".to_owned(), true)]
        );
    }
}

#[tokio::test]
async fn routing_by_agent_tag_and_size_picks_the_provider() {
    let a = server(vec![Step::text("a"); 4]).await;
    let b = server(vec![Step::text("b"); 4]).await;
    let c = server(vec![Step::text("c"); 4]).await;
    let h = harness(&format!(
        "{}{}{}[routing]\ndefault = [\"a\"]\n\
         [[routing.rules]]\nagent = \"writer\"\nproviders = [\"b\"]\n\
         [[routing.rules]]\ntag = \"pii\"\nproviders = [\"c\"]\n\
         [[routing.rules]]\nsize = \"large\"\nproviders = [\"c\", \"a\"]\n",
        openai("a", &a.base_url()),
        openai("b", &b.base_url()),
        openai("c", &c.base_url()),
    ))
    .await;
    let cases = [
        ("worker", "small".to_owned(), "a"),
        ("writer", "small".to_owned(), "b"),
        ("secretive", "small".to_owned(), "c"),
        ("worker", "x".repeat(20_000), "c"),
    ];
    for (agent, input, expected) in cases {
        let (outcome, events) = h.run(agent, &input).await;
        assert_eq!(answer_text(&outcome), expected, "{agent}");
        assert_eq!(
            provider_trail(&events),
            trail(&[("usage", expected), ("cost", expected)]),
            "{agent}"
        );
    }
    let chain = h.health("worker");
    assert_eq!(chain, vec![("a".to_owned(), true)]);
}

#[tokio::test]
async fn the_circuit_opens_skips_the_provider_and_closes_after_cooldown() {
    let port = closed_port();
    let cloud = server(vec![Step::text("cloud"); 4]).await;
    let h = harness(&format!(
        "{}{}[routing]\ndefault = [\"local\", \"cloud\"]\ncircuit_failures = 2\n\
         circuit_cooldown_secs = 1\n",
        openai("local", &format!("http://{port}/v1")),
        openai("cloud", &cloud.base_url()),
    ))
    .await;
    // Two upstream failures (resolving the model before the turn, then the call)
    // open the circuit; the turn fails over.
    let (_, events) = h.run("writer", "one").await;
    assert_eq!(provider_trail(&events)[0].0, "provider_failover");
    assert_eq!(
        h.health("writer"),
        vec![("local".to_owned(), false), ("cloud".to_owned(), true)]
    );
    let metrics = h.runtime.metrics().encode();
    assert!(
        metrics.contains(r#"provider_up{provider="local"} 0"#),
        "{metrics}"
    );

    // Open: the dead provider is skipped, no failover.
    let (_, events) = h.run("writer", "two").await;
    assert_eq!(
        provider_trail(&events),
        trail(&[("usage", "cloud"), ("cost", "cloud")])
    );
    let chain = {
        let agent = h.runtime.agent("writer").expect("agent").clone();
        h.runtime.hub().provider_chain(&agent)
    };
    assert!(chain[0].health.retry_in_secs.is_some());
    assert!(
        chain[0]
            .health
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("cannot reach")
    );

    // After the cooldown the provider is tried again: now it answers, and it closes.
    let local = ScriptedServer::bind(Scenario::new(vec![Step::text("local is back")]), port)
        .await
        .expect("bind the closed port");
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let (outcome, events) = h.run("writer", "three").await;
    assert_eq!(answer_text(&outcome), "local is back");
    assert_eq!(
        provider_trail(&events),
        trail(&[("usage", "local"), ("cost", "local")])
    );
    assert_eq!(
        h.health("writer"),
        vec![("local".to_owned(), true), ("cloud".to_owned(), true)]
    );
    let metrics = h.runtime.metrics().encode();
    assert!(
        metrics.contains(r#"provider_up{provider="local"} 1"#),
        "{metrics}"
    );
    drop(local);
}

#[tokio::test]
async fn an_anthropic_provider_completes_a_turn_with_a_tool_call() {
    let scenario = Scenario::new(vec![
        Step::tool_call("read_file", json!({"path": "a.txt"}))
            .with_split(3)
            .with_usage(40, 9),
        Step::tool_call("finish_task", json!({"summary": "read alpha"})).with_usage(60, 5),
    ])
    .with_models(vec![ScriptedModel::new("claude-scripted")]);
    let claude = ScriptedServer::start(scenario).await.expect("server");
    let h = harness(&format!(
        "[providers.claude]\nkind = \"anthropic\"\nbase_url = \"{}\"\n\
         api_key_secret = \"ANTHROPIC_KEY\"\nmodel = \"claude-scripted\"\nmax_tokens = 512\n",
        claude.base_url()
    ))
    .await;
    let (outcome, events) = h.run("worker", "read a.txt").await;
    assert_eq!(outcome.stop_reason, StopReason::Finished, "{events:?}");
    assert_eq!(outcome.result["summary"], "read alpha");
    let output = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::ToolCallResult { tool, output, .. } if tool == "read_file" => {
                Some(output.clone())
            }
            _ => None,
        })
        .expect("read_file ran");
    assert!(output.contains("alpha"), "{output}");
    assert_eq!(
        provider_trail(&events),
        trail(&[
            ("usage", "claude"),
            ("cost", "claude"),
            ("usage", "claude"),
            ("cost", "claude")
        ])
    );
    let usage: Vec<(u64, u64)> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::Usage {
                input_tokens,
                output_tokens,
                ..
            } => Some((*input_tokens, *output_tokens)),
            _ => None,
        })
        .collect();
    assert_eq!(usage, vec![(40, 9), (60, 5)]);

    let received = claude.received();
    let chats: Vec<_> = received
        .iter()
        .filter(|r| r.path == "/v1/messages")
        .collect();
    assert_eq!(chats.len(), 2);
    assert!(
        received
            .iter()
            .all(|r| r.authorization.as_deref() == Some("sk-ant-test-0123456789")),
        "the key from [secrets] goes in x-api-key on every request"
    );
    let first = chats[0].body.as_ref().expect("body");
    assert_eq!(first["model"], "claude-scripted");
    assert_eq!(first["max_tokens"], 512);
    assert_eq!(first["system"], "Do the task.");
    assert!(
        first["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .any(|t| t["name"] == "read_file" && t["input_schema"]["type"] == "object")
    );
    let second = chats[1].body.as_ref().expect("body");
    let messages = second["messages"].as_array().expect("messages");
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[1]["content"][0]["type"], "tool_use");
    assert_eq!(messages[1]["content"][0]["input"], json!({"path": "a.txt"}));
    assert_eq!(messages[2]["content"][0]["type"], "tool_result");
    assert_eq!(
        messages[2]["content"][0]["tool_use_id"],
        messages[1]["content"][0]["id"]
    );
    // The key is nowhere in the log.
    let log = serde_json::to_string(&events).expect("json");
    assert!(!log.contains("sk-ant-test"));
}

#[tokio::test]
async fn an_anthropic_error_event_mid_stream_fails_over() {
    let claude = server(vec![Step::raw_sse(&[
        r#"data: {"type":"message_start","message":{"model":"m","usage":{"input_tokens":1}}}"#,
        r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}"#,
        r#"data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    ])])
    .await;
    let local = server(vec![Step::text("local answer")]).await;
    let h = harness(&format!(
        "[providers.claude]\nkind = \"anthropic\"\nbase_url = \"{}\"\nmax_retries = 0\n{}\
         [routing]\ndefault = [\"claude\", \"local\"]\n",
        claude.base_url(),
        openai("local", &local.base_url()),
    ))
    .await;
    let (outcome, events) = h.run("writer", "hi").await;
    assert_eq!(answer_text(&outcome), "local answer");
    assert_eq!(
        provider_trail(&events),
        trail(&[
            ("provider_failover", "claude->local"),
            ("usage", "local"),
            ("cost", "local")
        ])
    );
}

#[tokio::test]
async fn provider_config_errors_name_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let base = "[providers.a]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n";
    let cases: Vec<(String, &str)> = vec![
        (
            "[providers.a]\nkind = \"gemini\"\nbase_url = \"http://x/v1\"\n".into(),
            "`providers.a.kind`",
        ),
        (
            "[providers.a]\nbase_url = \"http://x/v1\"\n".into(),
            "`providers.a.kind`",
        ),
        (
            "[providers.a]\nkind = \"openai\"\n".into(),
            "`providers.a.base_url`",
        ),
        (
            "[providers.a]\nkind = \"openai\"\nbase_url = \"ftp://x\"\n".into(),
            "`providers.a.base_url`",
        ),
        (
            format!("{base}api_key_secret = \"NOPE\"\n"),
            "`providers.a.api_key_secret`",
        ),
        (
            format!("{base}api_key = \"sk-literal\"\n"),
            "unknown field `api_key`",
        ),
        (
            format!("{base}max_retries = 99\n"),
            "`providers.a.max_retries`",
        ),
        (
            format!("{base}max_tokens = 5\n"),
            "`providers.a.max_tokens`",
        ),
        (
            format!("{base}request_timeout_secs = 0\n"),
            "`providers.a.request_timeout_secs`",
        ),
        (format!("{base}model = \" \"\n"), "`providers.a.model`"),
        (
            "[providers.\"a b\"]\nkind = \"openai\"\nbase_url = \"http://x/v1\"\n".into(),
            "`providers.a b`",
        ),
        (
            format!("{base}[providers.b]\nkind = \"openai\"\nbase_url = \"http://x/v1\"\n"),
            "`routing.default`",
        ),
        (
            format!("{base}[routing]\ndefault = [\"zz\"]\n"),
            "`routing.default`",
        ),
        (
            format!("{base}[routing]\ndefault = []\n"),
            "`routing.default`",
        ),
        (
            format!("{base}[routing]\ndefault = [\"a\", \"a\"]\n"),
            "`routing.default`",
        ),
        (
            format!("{base}[[routing.rules]]\nsize = \"huge\"\nproviders = [\"a\"]\n"),
            "`routing.rules[0].size`",
        ),
        (
            format!("{base}[[routing.rules]]\nagent = \"x\"\ntag = \"y\"\nproviders = [\"a\"]\n"),
            "`routing.rules[0]`",
        ),
        (
            format!("{base}[[routing.rules]]\nagent = \"x\"\nproviders = [\"b\"]\n"),
            "`routing.rules[0].providers`",
        ),
        (
            format!("{base}[routing]\ncircuit_failures = 0\n"),
            "`routing.circuit_failures`",
        ),
        ("[routing]\ndefault = [\"a\"]\n".into(), "`routing`"),
        (
            format!("[llm]\nbase_url = \"http://127.0.0.1:2/v1\"\n{base}"),
            "`llm.base_url`",
        ),
    ];
    for (toml, expected) in cases {
        let err = load(root, &toml).expect_err(&toml);
        assert!(err.to_string().contains(expected), "{toml}\n=> {err}");
    }
    // A literal key in place of a secret name is refused without echoing it.
    let err =
        load(root, &format!("{base}api_key_secret = \"sk-live-AAAA\"\n")).expect_err("refused");
    assert!(err.to_string().contains("[secrets]"), "{err}");
    assert!(!err.to_string().contains("sk-live"), "{err}");
}
