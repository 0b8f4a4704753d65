//! The hub through the runtime, with real parts: threads that remember earlier turns,
//! compaction, and permissions that fail closed when nobody can answer.

use agentplane_core::{EventPayload, PermissionDecision, StopReason, ToolErrorKind};
use agentplane_engine::NoObserver;
use agentplane_engine::hub::CreateThread;
use agentplane_runtime::config::ConfigSource;
use agentplane_runtime::{Config, Runtime};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use serde_json::json;
use tokio_util::sync::CancellationToken;

struct Setup {
    server: ScriptedServer,
    _dir: tempfile::TempDir,
    workspace: String,
    runtime: Runtime,
}

async fn setup(steps: Vec<Step>) -> Setup {
    let server = ScriptedServer::start(Scenario::new(steps))
        .await
        .expect("server");
    let dir = tempfile::tempdir().expect("tempdir");
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).expect("ws");
    let file = dir.path().join("agentplane.toml");
    std::fs::write(
        &file,
        format!(
            "[llm]\nbase_url = \"{}\"\nmodel = \"scripted-model\"\nmax_retries = 0\n\
             [store]\npath = \"events.db\"\n\
             [agents.chat]\nsystem_prompt = \"Chat.\"\n\
             [agents.careful]\nsystem_prompt = \"Write carefully.\"\nensembles = [\"fs\"]\n\
             requires_permission = [\"write_file\"]\n\
             [agents.gitter]\nsystem_prompt = \"Git.\"\nensembles = [\"shell\"]\n\
             shell_allow = [\"git\"]\nrequires_permission = [\"run_command\"]\n",
            server.base_url()
        ),
    )
    .expect("config");
    let env = |_: &str| None;
    let config = Config::load_from(&ConfigSource {
        explicit: Some(&file),
        cwd: dir.path(),
        env: &env,
    })
    .expect("config");
    let runtime = Runtime::start(config).await.expect("runtime");
    Setup {
        server,
        workspace: workspace.display().to_string(),
        _dir: dir,
        runtime,
    }
}

#[tokio::test]
async fn later_turns_see_earlier_ones_and_the_summary() {
    let s = setup(vec![
        Step::text("Your name is Ada."),
        Step::text("A short summary: the user is Ada."),
        Step::text("Ada."),
    ])
    .await;
    let hub = s.runtime.hub();
    let thread = hub
        .create_thread(
            "c1",
            CreateThread {
                agent: "chat".into(),
                cwd: s.workspace.clone(),
                title: None,
            },
        )
        .await
        .expect("thread");
    let first = hub
        .run_turn_here(
            "c1",
            &thread.id,
            "I am Ada.".into(),
            &NoObserver,
            CancellationToken::new(),
        )
        .await
        .expect("turn");
    assert_eq!(first.stop_reason, StopReason::TextAnswer);

    let compaction = hub.compact("c1", &thread.id).await.expect("compact");
    assert_eq!(compaction.summary, "A short summary: the user is Ada.");

    hub.run_turn_here(
        "c1",
        &thread.id,
        "Who am I?".into(),
        &NoObserver,
        CancellationToken::new(),
    )
    .await
    .expect("turn");
    let requests = s.server.requests();
    let compact_request = requests[1]["messages"].to_string();
    assert!(compact_request.contains("I am Ada.") && compact_request.contains("Your name is Ada."));
    let third = requests[2]["messages"]
        .as_array()
        .expect("messages")
        .clone();
    let texts: Vec<String> = third
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        texts.iter().any(|t| t.contains("the user is Ada")),
        "summary injected: {texts:?}"
    );
    assert!(
        texts.iter().any(|t| t == "I am Ada."),
        "earlier turn injected: {texts:?}"
    );
    assert_eq!(texts.last().map(String::as_str), Some("Who am I?"));

    // The compaction turn is internal: hidden from history unless asked for.
    let history = hub
        .history("c1", &thread.id, false, false)
        .await
        .expect("history");
    assert_eq!(history.turns.len(), 2);
    let all = hub
        .history("c1", &thread.id, true, true)
        .await
        .expect("history");
    assert_eq!(all.turns.len(), 3);
    assert!(all.turns[1].turn.internal);
    assert!(
        all.turns
            .iter()
            .all(|t| t.events.as_ref().is_some_and(|e| !e.is_empty()))
    );

    // Another client sees none of it.
    assert!(hub.thread("c2", &thread.id).await.is_err());
    assert!(hub.history("c2", &thread.id, false, false).await.is_err());
    assert!(hub.list_threads("c2").await.expect("list").is_empty());
}

#[tokio::test]
async fn permissions_fail_closed_when_nobody_can_answer() {
    let s = setup(vec![
        Step::tool_call("write_file", json!({"path": "x.txt", "content": "x"})),
        Step::tool_call("finish_task", json!({"summary": "could not write"})),
    ])
    .await;
    let hub = s.runtime.hub();
    let thread = hub
        .create_thread(
            "local",
            CreateThread {
                agent: "careful".into(),
                cwd: s.workspace.clone(),
                title: None,
            },
        )
        .await
        .expect("thread");
    let outcome = hub
        .run_turn_here(
            "local",
            &thread.id,
            "write".into(),
            &NoObserver,
            CancellationToken::new(),
        )
        .await
        .expect("turn");
    assert_eq!(outcome.stop_reason, StopReason::Finished);
    assert!(!std::path::Path::new(&s.workspace).join("x.txt").exists());
    let events = s
        .runtime
        .store()
        .turn_events(&outcome.turn)
        .await
        .expect("events");
    let kinds: Vec<&str> = events.iter().map(|e| e.payload.kind()).collect();
    let asked = kinds
        .iter()
        .position(|k| *k == "permission_required")
        .expect("asked");
    assert_eq!(kinds[asked + 1], "permission_resolved");
    assert!(matches!(
        &events[asked + 1].payload,
        EventPayload::PermissionResolved { decision: PermissionDecision::Declined, reason, .. } if reason.contains("nobody")
    ));
    assert!(events.iter().any(|e| matches!(
        &e.payload,
        EventPayload::ToolCallResult {
            error_type: Some(ToolErrorKind::PermissionDenied),
            ..
        }
    )));
}

#[tokio::test]
async fn threads_refuse_bad_working_directories_and_agents() {
    let s = setup(vec![]).await;
    let hub = s.runtime.hub();
    for (agent, cwd) in [
        ("chat", "relative/path"),
        ("chat", ""),
        ("chat", "/definitely/not/here"),
        ("ghost", s.workspace.as_str()),
    ] {
        let err = hub
            .create_thread(
                "c",
                CreateThread {
                    agent: agent.into(),
                    cwd: cwd.into(),
                    title: None,
                },
            )
            .await
            .expect_err(cwd);
        assert_eq!(
            err.code(),
            agentplane_core::ErrorCode::InvalidArgument,
            "{err}"
        );
    }
}

/// The person asked to permit a harmless-looking `git status --short` sees what would
/// really run: the resolved program, git's pinned configuration and the sandbox.
#[tokio::test]
async fn a_permission_shows_what_will_actually_run() {
    let s = setup(vec![
        Step::tool_call(
            "run_command",
            json!({"program": "git", "args": ["status", "--short"]}),
        ),
        Step::tool_call("finish_task", json!({"summary": "asked"})),
    ])
    .await;
    let hub = s.runtime.hub();
    let thread = hub
        .create_thread(
            "local",
            CreateThread {
                agent: "gitter".into(),
                cwd: s.workspace.clone(),
                title: None,
            },
        )
        .await
        .expect("thread");
    let outcome = hub
        .run_turn_here(
            "local",
            &thread.id,
            "status".into(),
            &NoObserver,
            CancellationToken::new(),
        )
        .await
        .expect("turn");
    let events = s
        .runtime
        .store()
        .turn_events(&outcome.turn)
        .await
        .expect("events");
    let runs = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::PermissionRequired { runs, .. } => runs.clone(),
            _ => None,
        })
        .expect("a permission with what runs");
    let git = agentplane_process::process::find_program("git").expect("git on PATH");
    for needle in [
        git.display().to_string().as_str(),
        "\"status\" \"--short\"",
        "GIT_CONFIG_NOSYSTEM=\"1\"",
        "core.fsmonitor",
        "core.hooksPath",
        "landlock ABI",
    ] {
        assert!(runs.contains(needle), "{needle:?} not in {runs}");
    }
}

/// A protocol request (A2A) is recorded in the running turn it names, beside the
/// turn's own events; once the turn has ended the store takes nothing more, and
/// another client's turn is not found.
#[tokio::test]
async fn protocol_requests_are_recorded_in_running_turns_only() {
    let s = setup(vec![Step::text("Slowly.").with_delay_ms(1_500)]).await;
    let hub = s.runtime.hub();
    let thread = hub
        .create_thread(
            "c1",
            CreateThread {
                agent: "chat".into(),
                cwd: s.workspace.clone(),
                title: None,
            },
        )
        .await
        .expect("thread");
    let mut started = hub
        .start_turn("c1", &thread.id, "hello".into())
        .await
        .expect("turn");
    let request = |outcome: &str| EventPayload::A2aRequest {
        direction: "in".into(),
        method: "GetTask".into(),
        task: Some(started.turn.to_string()),
        context: Some(thread.id.to_string()),
        protocol_version: "1.0".into(),
        outcome: outcome.into(),
    };
    assert!(
        hub.record_request("c1", &started.turn, request("ok"))
            .await
            .expect("recorded")
    );
    assert!(
        hub.record_request("c2", &started.turn, request("ok"))
            .await
            .is_err(),
        "another client's turn is not found"
    );
    assert!(
        hub.record_request(
            "c1",
            &started.turn,
            EventPayload::Plan { entries: json!([]) }
        )
        .await
        .is_err(),
        "only protocol requests"
    );
    let mut kinds = Vec::new();
    while let Some(event) = started.events.next().await {
        kinds.push(event.expect("event").payload.kind());
    }
    assert!(kinds.contains(&"a2a_request"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"turn_completed"));
    assert!(
        !hub.record_request("c1", &started.turn, request("-32001"))
            .await
            .expect("answered"),
        "an ended turn takes no more events"
    );
    let stored = hub
        .turn_with_events("c1", &started.turn)
        .await
        .expect("turn");
    let recorded: Vec<_> = stored
        .events
        .expect("events")
        .into_iter()
        .filter(|e| e.payload.kind() == "a2a_request")
        .collect();
    assert_eq!(recorded.len(), 1);
    assert!(hub.turn_with_events("c2", &started.turn).await.is_err());
}
