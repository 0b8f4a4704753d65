//! The turn loop end to end with real parts: the scripted model server over HTTP on
//! 127.0.0.1, a SQLite file, the builtin tools on a temp workspace, real processes.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use agentplane_core::{ErrorCode, Event, EventPayload, StopReason, ToolErrorKind, ToolStatus};
use agentplane_engine::TurnObserver;
use agentplane_engine::ports::NewThread;
use agentplane_runtime::config::ConfigSource;
use agentplane_runtime::{Config, Runtime, Task};
use agentplane_testkit::{Scenario, ScriptedModel, ScriptedServer, Step};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Records every event the observer sees.
#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<Event>>,
}

impl TurnObserver for Recorder {
    fn on_event(&self, event: &Event) {
        self.events
            .lock()
            .expect("recorder lock")
            .push(event.clone());
    }
}

struct Harness {
    server: ScriptedServer,
    _dir: tempfile::TempDir,
    root: PathBuf,
    workspace: PathBuf,
    runtime: Runtime,
}

/// Agents the tests use besides the built-ins.
const TEST_AGENTS: &str = r#"
[agents.worker]
system_prompt = "Do the task."
ensembles = ["fs", "shell"]
shell_allow = ["echo", "sleep", "seq", "ls"]
tool_timeout_ms = 400
tool_output_cap_bytes = 2048
max_steps = 3

[agents.chat]
system_prompt = "Answer briefly."
"#;

async fn harness(steps: Vec<Step>) -> Harness {
    harness_with(Scenario::new(steps), "scripted-model").await
}

async fn harness_with(scenario: Scenario, model: &str) -> Harness {
    let server = ScriptedServer::start(scenario)
        .await
        .expect("scripted server");
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    let workspace = root.join("ws");
    std::fs::create_dir(&workspace).expect("workspace");
    let runtime = start(&root, &server.base_url(), model).await;
    Harness {
        server,
        _dir: dir,
        root,
        workspace,
        runtime,
    }
}

async fn start(root: &Path, base_url: &str, model: &str) -> Runtime {
    let file = root.join("agentplane.toml");
    std::fs::write(
        &file,
        format!(
            "[llm]\nbase_url = \"{base_url}\"\nmodel = \"{model}\"\nmax_retries = 1\n\
             [store]\npath = \"events.db\"\n{TEST_AGENTS}"
        ),
    )
    .expect("config");
    let env = |_: &str| None;
    let config = Config::load_from(&ConfigSource {
        explicit: Some(&file),
        cwd: root,
        env: &env,
    })
    .expect("config loads");
    Runtime::start(config).await.expect("runtime starts")
}

impl Harness {
    async fn run(&self, agent: &str, input: &str) -> (agentplane_engine::TurnOutcome, Vec<Event>) {
        let recorder = Recorder::default();
        let outcome = self
            .runtime
            .run_task(
                Task {
                    agent: agent.to_owned(),
                    workspace: self.workspace.clone(),
                    input: input.to_owned(),
                },
                &recorder,
                CancellationToken::new(),
            )
            .await
            .expect("turn runs");
        let stored = self
            .runtime
            .store()
            .turn_events(&outcome.turn)
            .await
            .expect("events");
        let seen = recorder.events.into_inner().expect("recorder");
        assert_eq!(stored, seen, "the observer sees exactly the stored events");
        check_log_shape(&stored);
        (outcome, stored)
    }
}

/// Every turn's log: gapless increasing seq, starts with turn_started, ends with one
/// turn_completed, and every planned call has its result right after it (or after its
/// security event).
fn check_log_shape(events: &[Event]) {
    assert!(!events.is_empty());
    for pair in events.windows(2) {
        assert_eq!(pair[1].seq, pair[0].seq + 1, "seq is gapless");
    }
    assert_eq!(events[0].payload.kind(), "turn_started");
    let completed: Vec<_> = events
        .iter()
        .filter(|e| e.payload.kind() == "turn_completed")
        .collect();
    assert_eq!(completed.len(), 1);
    assert_eq!(
        events.last().map(|e| e.payload.kind()),
        Some("turn_completed")
    );
    let mut open: Option<String> = None;
    for event in events {
        match &event.payload {
            EventPayload::ToolCallPlanned { call_id, .. } => {
                assert!(
                    open.is_none(),
                    "a call was planned before the previous one ended"
                );
                open = Some(call_id.clone());
            }
            EventPayload::ToolCallResult { call_id, .. } => {
                assert_eq!(
                    open.take().as_ref(),
                    Some(call_id),
                    "result without its plan"
                );
            }
            _ => {}
        }
    }
}

fn results(events: &[Event]) -> Vec<(String, ToolStatus, Option<ToolErrorKind>, String)> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ToolCallResult {
                tool,
                status,
                error_type,
                output,
                ..
            } => Some((tool.clone(), *status, *error_type, output.clone())),
            _ => None,
        })
        .collect()
}

fn security_events(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::SecurityEvent { event_type, .. } => Some(event_type.clone()),
            _ => None,
        })
        .collect()
}

fn finish(summary: &str) -> Step {
    Step::tool_call("finish_task", json!({ "summary": summary }))
}

#[tokio::test]
async fn a_task_writes_a_file_and_finishes() {
    let h = harness(vec![
        Step::tool_call(
            "write_file",
            json!({"path": "notes/hello.txt", "content": "hi there"}),
        )
        .with_split(3),
        finish("wrote the file").with_usage(40, 7),
    ])
    .await;
    let (outcome, events) = h.run("engineering", "write hello").await;

    assert_eq!(outcome.stop_reason, StopReason::Finished);
    assert_eq!(outcome.result["summary"], "wrote the file");
    let written = std::fs::read_to_string(h.workspace.join("notes/hello.txt")).expect("file");
    assert_eq!(written, "hi there");

    let kinds: Vec<&str> = events.iter().map(|e| e.payload.kind()).collect();
    assert_eq!(
        kinds,
        [
            "turn_started",
            "usage",
            "cost",
            "tool_call_planned",
            "tool_call_result",
            "usage",
            "cost",
            "tool_call_planned",
            "tool_call_result",
            // The file it wrote (path, size, hash).
            "workspace_changed",
            "turn_completed"
        ]
    );
    let r = results(&events);
    assert_eq!(r[0].0, "write_file");
    assert_eq!(r[0].1, ToolStatus::Ok);
    assert!(matches!(
        &events[10].payload,
        EventPayload::TurnCompleted { stop_reason: StopReason::Finished, result } if result["summary"] == "wrote the file"
    ));
    assert!(outcome.usage.input_tokens >= 40);

    // The second model call saw the tool result; tools were offered natively.
    let requests = h.server.requests();
    assert_eq!(requests.len(), 2);
    let tools: Vec<&str> = requests[0]["tools"]
        .as_array()
        .expect("tools offered")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(
        tools.contains(&"write_file") && tools.contains(&"finish_task"),
        "{tools:?}"
    );
    let last = requests[1]["messages"].as_array().expect("messages");
    assert!(last.iter().any(|m| m["role"] == "tool"), "{last:?}");
}

#[tokio::test]
async fn an_invalid_result_goes_back_to_the_model() {
    let h = harness(vec![
        Step::tool_call("finish_task", json!({"artifacts": ["x"]})),
        Step::tool_call("finish_task", json!({"summary": 5})),
        finish("fixed"),
    ])
    .await;
    let (outcome, events) = h.run("engineering", "do it").await;
    assert_eq!(outcome.stop_reason, StopReason::Finished);
    let r = results(&events);
    assert_eq!(r.len(), 3);
    assert_eq!(r[0].2, Some(ToolErrorKind::InvalidArguments));
    assert!(r[0].3.contains("summary"), "{}", r[0].3);
    assert_eq!(r[1].2, Some(ToolErrorKind::InvalidArguments));
    assert_eq!(r[2].1, ToolStatus::Ok);
    let second = &h.server.requests()[1];
    let told = second["messages"].to_string();
    assert!(told.contains("output schema"), "{told}");
}

#[tokio::test]
async fn bad_tool_calls_are_tool_errors_not_failures() {
    let h = harness(vec![
        Step::tool_call("write_file", json!({"path": "a.txt"})),
        Step::tool_call("write_file", json!("{\"path\": \"a.txt\", ")),
        Step::tool_call("launch_rockets", json!({})),
        finish("done"),
    ])
    .await;
    let (outcome, events) = h.run("engineering", "x").await;
    assert_eq!(outcome.stop_reason, StopReason::Finished);
    let r = results(&events);
    assert_eq!(r[0].2, Some(ToolErrorKind::InvalidArguments));
    assert!(r[0].3.contains("content"), "{}", r[0].3);
    assert_eq!(r[1].2, Some(ToolErrorKind::InvalidArguments));
    assert!(r[1].3.contains("not valid JSON"), "{}", r[1].3);
    assert_eq!(r[2].2, Some(ToolErrorKind::UnknownTool));
    assert!(
        r[2].3.contains("write_file"),
        "lists the real tools: {}",
        r[2].3
    );
    let planned_null = events.iter().any(|e| {
        matches!(
            &e.payload,
            EventPayload::ToolCallPlanned {
                arguments: Value::Null,
                ..
            }
        )
    });
    assert!(planned_null, "unparseable arguments are recorded as null");
    // Bad arguments are just invalid; a tool that was not offered is a probe.
    assert_eq!(security_events(&events), ["unknown_tool"]);
    assert!(!h.workspace.join("a.txt").exists());
}

#[tokio::test]
async fn escapes_from_the_workspace_are_refused_and_recorded() {
    let outside = tempfile::tempdir().expect("outside");
    let target = outside.path().join("stolen.txt");
    let h = harness(vec![
        Step::tool_call(
            "write_file",
            json!({"path": "../escape.txt", "content": "x"}),
        ),
        Step::tool_call(
            "write_file",
            json!({"path": target.display().to_string(), "content": "x"}),
        ),
        Step::tool_call("read_file", json!({"path": "link/secret"})),
        finish("tried"),
    ])
    .await;
    std::fs::write(outside.path().join("secret"), "top secret").expect("secret");
    std::os::unix::fs::symlink(outside.path(), h.workspace.join("link")).expect("symlink");
    let (outcome, events) = h.run("worker", "escape").await;
    assert_eq!(
        outcome.stop_reason,
        StopReason::StepLimit,
        "worker has 3 steps"
    );

    // worker's max_steps is 3: the three escapes ran, the rest of the script did not.
    let r = results(&events);
    assert_eq!(r.len(), 3);
    for (tool, status, kind, output) in &r {
        assert_eq!(*status, ToolStatus::Error, "{tool}: {output}");
        assert_eq!(
            *kind,
            Some(ToolErrorKind::SandboxViolation),
            "{tool}: {output}"
        );
        assert!(!output.contains("top secret"));
    }
    assert_eq!(security_events(&events).len(), 3);
    assert!(!h.root.join("escape.txt").exists());
    assert!(!target.exists());
}

#[tokio::test]
async fn shell_runs_allowlisted_programs_without_a_shell() {
    let h = harness(vec![
        Step::tool_call(
            "run_command",
            json!({"program": "sh", "args": ["-c", "touch pwned"]}),
        ),
        Step::tool_call(
            "run_command",
            json!({"program": "echo", "args": ["$(touch pwned); rm -rf / | cat `id`"]}),
        ),
        finish("done"),
    ])
    .await;
    let (outcome, events) = h.run("worker", "shell").await;
    assert_eq!(outcome.stop_reason, StopReason::Finished);
    let r = results(&events);
    assert_eq!(r[0].2, Some(ToolErrorKind::NotAllowed));
    assert_eq!(security_events(&events), ["command_not_allowed"]);
    assert_eq!(r[1].1, ToolStatus::Ok);
    assert!(
        r[1].3.contains("$(touch pwned); rm -rf / | cat `id`"),
        "{}",
        r[1].3
    );
    assert!(!h.workspace.join("pwned").exists());
}

#[tokio::test]
async fn slow_tools_time_out_and_huge_outputs_are_capped() {
    let h = harness(vec![
        Step::tool_call("run_command", json!({"program": "sleep", "args": ["20"]})),
        Step::tool_call(
            "run_command",
            json!({"program": "seq", "args": ["1", "200000"]}),
        ),
        finish("done"),
    ])
    .await;
    let (outcome, events) = h.run("worker", "slow").await;
    assert_eq!(outcome.stop_reason, StopReason::Finished);
    let r = results(&events);
    assert_eq!(r[0].2, Some(ToolErrorKind::Timeout), "{}", r[0].3);
    assert_eq!(r[1].1, ToolStatus::Ok);
    assert!(r[1].3.len() < 2048 + 200, "capped: {} bytes", r[1].3.len());
    assert!(r[1].3.contains("truncated"), "{}", r[1].3);
    let truncated = events.iter().any(|e| {
        matches!(
            &e.payload,
            EventPayload::ToolCallResult {
                truncated: true,
                ..
            }
        )
    });
    assert!(truncated);
}

#[tokio::test]
async fn the_step_limit_ends_a_turn_that_never_finishes() {
    let h = harness_with(
        Scenario::new(vec![Step::tool_call("list_files", json!({}))]).repeating(true),
        "scripted-model",
    )
    .await;
    let (outcome, events) = h.run("worker", "loop").await;
    assert_eq!(outcome.stop_reason, StopReason::StepLimit);
    assert_eq!(results(&events).len(), 3);
    assert_eq!(h.server.requests().len(), 3);
}

#[tokio::test]
async fn a_text_answer_is_the_fallback_result_and_plain_agents_get_no_tools() {
    let h = harness(vec![Step::text("Paris.").with_split(4)]).await;
    let (outcome, events) = h.run("chat", "capital of France?").await;
    assert_eq!(outcome.stop_reason, StopReason::TextAnswer);
    assert_eq!(outcome.result, json!({"text": "Paris."}));
    let streamed: String = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::MessageDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, "Paris.");
    assert!(
        h.server.requests()[0].get("tools").is_none(),
        "no tools for a plain agent"
    );
}

/// Only an ensemble's tools change the workspace, so only a turn with tools is
/// scanned: a file someone else writes while a plain agent's turn runs is not put down
/// to that turn, while the same write during a turn with tools is (the scan cannot
/// tell who wrote it, which is why a turn that could not have is left out).
#[tokio::test]
async fn only_turns_with_tools_record_workspace_changes() {
    let h = harness(vec![
        Step::text("Paris.").with_delay_ms(400),
        finish("Rome.").with_delay_ms(400),
    ])
    .await;
    let h = &h;
    let kinds_with_outside_write = |agent: &'static str, file: &'static str, ends: StopReason| {
        let workspace = h.workspace.clone();
        async move {
            let writer = tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(150)).await;
                std::fs::write(workspace.join(file), "written meanwhile").expect("write");
            });
            let (outcome, events) = h.run(agent, "capital?").await;
            writer.await.expect("writer");
            assert_eq!(outcome.stop_reason, ends);
            events
                .iter()
                .map(|e| e.payload.kind().to_owned())
                .collect::<Vec<_>>()
        }
    };
    let plain = kinds_with_outside_write("chat", "a.txt", StopReason::TextAnswer).await;
    assert!(
        !plain.iter().any(|k| k == "workspace_changed"),
        "a plain agent's turn was scanned: {plain:?}"
    );
    let with_tools = kinds_with_outside_write("worker", "b.txt", StopReason::Finished).await;
    assert!(
        with_tools.iter().any(|k| k == "workspace_changed"),
        "a turn with tools was not scanned: {with_tools:?}"
    );
}

#[tokio::test]
async fn model_failures_end_the_turn_with_a_recorded_error() {
    let cases: Vec<(Step, ErrorCode, &str)> = vec![
        (
            Step::raw_sse(&["data: {garbage", "data: [DONE]"]),
            ErrorCode::UpstreamUnavailable,
            "",
        ),
        (
            Step::text("partial answer that is cut")
                .with_split(5)
                .truncated_after(2),
            ErrorCode::UpstreamUnavailable,
            "",
        ),
        (
            Step::no_tools(),
            ErrorCode::InvalidArgument,
            "scripted-model",
        ),
        (
            Step::error(401, "{\"error\":\"bad key\"}"),
            ErrorCode::UpstreamUnavailable,
            "401",
        ),
    ];
    for (step, code, mention) in cases {
        let h = harness(vec![step]).await;
        let (outcome, events) = h.run("engineering", "x").await;
        assert_eq!(outcome.stop_reason, StopReason::Error);
        let error = outcome.error.expect("error recorded");
        assert_eq!(error.code, code, "{}", error.message);
        assert!(error.message.contains(mention), "{}", error.message);
        assert!(
            events
                .iter()
                .any(|e| matches!(&e.payload, EventPayload::Error { code: c, .. } if *c == code))
        );
    }
}

#[tokio::test]
async fn cancellation_ends_the_turn_promptly_and_is_recorded() {
    let h = harness(vec![Step::text("never seen").with_delay_ms(30_000)]).await;
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        trigger.cancel();
    });
    let outcome = tokio::time::timeout(
        Duration::from_secs(10),
        h.runtime.run_task(
            Task {
                agent: "engineering".into(),
                workspace: h.workspace.clone(),
                input: "wait".into(),
            },
            &Recorder::default(),
            cancel,
        ),
    )
    .await
    .expect("cancellation is prompt")
    .expect("turn recorded");
    assert_eq!(outcome.stop_reason, StopReason::Cancelled);
    let events = h
        .runtime
        .store()
        .turn_events(&outcome.turn)
        .await
        .expect("events");
    check_log_shape(&events);
}

#[tokio::test]
async fn harmony_markup_becomes_tool_calls() {
    let write = r#"<|start|>assistant<|channel|>commentary to=functions.write_file <|constrain|>json<|message|>{"path":"h.txt","content":"from harmony"}<|call|>"#;
    let done = r#"<|start|>assistant<|channel|>commentary to=functions.finish_task <|constrain|>json<|message|>{"summary":"ok"}<|call|>"#;
    // Split so that markers straddle streamed chunks.
    let h = harness(vec![Step::text(write).with_split(7), Step::text(done)]).await;
    let (outcome, events) = h.run("engineering", "harmony").await;
    assert_eq!(outcome.stop_reason, StopReason::Finished, "{events:?}");
    assert_eq!(
        std::fs::read_to_string(h.workspace.join("h.txt")).expect("file"),
        "from harmony"
    );
    assert!(
        !events.iter().any(
            |e| matches!(&e.payload, EventPayload::MessageDelta { text } if text.contains("<|"))
        )
    );
}

#[tokio::test]
async fn oversized_harmony_payloads_are_tool_errors() {
    let big = format!(
        r#"<|start|>assistant<|channel|>commentary to=functions.write_file <|constrain|>json<|message|>{{"path":"b.txt","content":"{}"}}<|call|>"#,
        "x".repeat(9000)
    );
    let h = harness(vec![Step::text(big), finish("gave up")]).await;
    let (outcome, events) = h.run("engineering", "big").await;
    assert_eq!(outcome.stop_reason, StopReason::Finished);
    assert_eq!(
        results(&events)[0].2,
        Some(ToolErrorKind::ToolPayloadTooLarge)
    );
    assert!(!h.workspace.join("b.txt").exists());
}

#[tokio::test]
async fn a_missing_model_falls_back_to_the_best_offered() {
    let scenario = Scenario::new(vec![Step::text("hi")]).with_models(vec![
        ScriptedModel::new("tiny").with_parameter_size("135M"),
        ScriptedModel::new("big").with_parameter_size("8.0B"),
        ScriptedModel::new("nomic-embed-text")
            .with_parameter_size("137M")
            .with_families(&["nomic-bert"]),
    ]);
    let h = harness_with(scenario, "qwen2.5:7b").await;
    let (outcome, _) = h.run("chat", "hi").await;
    assert_eq!(outcome.stop_reason, StopReason::TextAnswer);
    assert_eq!(h.server.requests()[0]["model"], "big");
}

#[tokio::test]
async fn unknown_agents_and_workspaces_are_refused_before_a_turn() {
    let h = harness(vec![]).await;
    let task = |agent: &str, workspace: PathBuf| Task {
        agent: agent.to_owned(),
        workspace,
        input: "x".to_owned(),
    };
    let err = h
        .runtime
        .run_task(
            task("nobody", h.workspace.clone()),
            &Recorder::default(),
            CancellationToken::new(),
        )
        .await
        .expect_err("unknown agent");
    assert_eq!(err.code(), ErrorCode::InvalidArgument, "{err}");
    assert!(err.to_string().contains("unknown agent `nobody`"), "{err}");
    assert!(err.to_string().contains("engineering"), "{err}");
    let err = h
        .runtime
        .run_task(
            task("engineering", h.root.join("missing")),
            &Recorder::default(),
            CancellationToken::new(),
        )
        .await
        .expect_err("missing workspace");
    assert_eq!(err.code(), ErrorCode::InvalidArgument);
    assert!(h.server.requests().is_empty(), "no model call was made");
}

#[tokio::test]
async fn turns_left_running_are_interrupted_at_the_next_start() {
    let h = harness(vec![]).await;
    let store = h.runtime.store().clone();
    let thread = store
        .create_thread(NewThread {
            agent_version: None,
            id: agentplane_core::ThreadId::new(),
            client_id: "local".into(),
            agent: "engineering".into(),
            cwd: h.workspace.display().to_string(),
            title: None,
        })
        .await
        .expect("thread");
    let turn = agentplane_core::TurnId::new();
    store
        .begin_turn(&thread.id, &turn, "crashing", false)
        .await
        .expect("turn");
    drop(store);
    let Harness {
        server,
        _dir,
        root,
        runtime,
        ..
    } = h;
    drop(runtime);
    let runtime = start(&root, &server.base_url(), "scripted-model").await;
    let events = runtime.store().turn_events(&turn).await.expect("events");
    assert!(matches!(
        events.last().map(|e| &e.payload),
        Some(EventPayload::TurnCompleted {
            stop_reason: StopReason::Interrupted,
            ..
        })
    ));
    drop(_dir);
}
