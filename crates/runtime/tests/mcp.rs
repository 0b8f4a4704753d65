//! MCP servers in real turns: the runtime wires `[mcp.servers.NAME]` into an agent, the
//! scripted model calls `mcp__NAME__TOOL`, npm's `@modelcontextprotocol/server-everything`
//! answers over stdio, and no process of the server outlives the turn. Needs the peers
//! of `scripts/test-peers.sh` (`scripts/test.sh` installs them).

use std::path::{Path, PathBuf};

use agentplane_core::{EventPayload, StopReason, ToolStatus};
use agentplane_engine::NoObserver;
use agentplane_engine::hub::CreateThread;
use agentplane_runtime::config::ConfigSource;
use agentplane_runtime::{Config, Runtime};
use agentplane_testkit::{Scenario, ScriptedServer, Step, peers};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Processes whose working directory is `dir`: the servers started for this test.
fn processes_in(dir: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == dir))
        .collect()
}

struct Setup {
    server: ScriptedServer,
    dir: tempfile::TempDir,
    server_dir: PathBuf,
    runtime: Runtime,
}

async fn setup(steps: Vec<Step>, mcp_server: &str) -> Setup {
    let server = ScriptedServer::start(Scenario::new(steps))
        .await
        .expect("server");
    let dir = tempfile::tempdir().expect("tempdir");
    let server_dir = dir.path().join("mcp-cwd");
    std::fs::create_dir(&server_dir).expect("mcp cwd");
    let server_dir = server_dir.canonicalize().expect("canonical");
    let file = dir.path().join("agentplane.toml");
    std::fs::write(
        &file,
        format!(
            "[llm]\nbase_url = \"{}\"\nmodel = \"scripted-model\"\nmax_retries = 0\n\
             [store]\npath = \"events.db\"\n\
             [mcp.servers.everything]\n{mcp_server}cwd = \"mcp-cwd\"\nstartup_timeout_secs = 20\n\
             [agents.helper]\nsystem_prompt = \"Help.\"\nensembles = [\"everything\"]\n",
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
        dir,
        server_dir,
        runtime,
    }
}

async fn run(s: &Setup, input: &str) -> (agentplane_engine::TurnOutcome, Vec<EventPayload>) {
    let hub = s.runtime.hub();
    let thread = hub
        .create_thread(
            "c1",
            CreateThread {
                agent: "helper".into(),
                cwd: s.dir.path().display().to_string(),
                title: None,
            },
        )
        .await
        .expect("thread");
    let outcome = hub
        .run_turn_here(
            "c1",
            &thread.id,
            input.into(),
            &NoObserver,
            CancellationToken::new(),
        )
        .await
        .expect("turn");
    let events = s
        .runtime
        .store()
        .thread_events(&thread.id, 0, 10_000)
        .await
        .expect("events")
        .into_iter()
        .map(|e| e.payload)
        .collect();
    (outcome, events)
}

#[tokio::test]
async fn an_agent_calls_an_mcp_tool_and_the_server_ends_with_the_turn() {
    let s = setup(
        vec![
            Step::tool_call(
                "mcp__everything__echo",
                json!({"message": "hello over MCP"}),
            ),
            Step::tool_call("finish_task", json!({"summary": "echoed"})),
        ],
        &peers::mcp_everything_toml(),
    )
    .await;
    let (outcome, events) = run(&s, "Echo something.").await;
    assert_eq!(outcome.stop_reason, StopReason::Finished, "{events:?}");

    // The model was offered the server's tools under their prefixed names, with the
    // server's own schema.
    let first = &s.server.requests()[0];
    let tools = first["tools"].as_array().expect("tools");
    let echo = tools
        .iter()
        .find(|t| t["function"]["name"] == "mcp__everything__echo")
        .unwrap_or_else(|| panic!("echo offered: {tools:?}"));
    assert_eq!(
        echo["function"]["parameters"]["properties"]["message"]["type"],
        "string"
    );
    assert!(
        tools
            .iter()
            .any(|t| t["function"]["name"] == "mcp__everything__get-sum")
    );

    let result = events
        .iter()
        .find_map(|e| match e {
            EventPayload::ToolCallResult { status, output, .. } => Some((*status, output.clone())),
            _ => None,
        })
        .expect("a tool result");
    assert_eq!(result.0, ToolStatus::Ok, "{events:?}");
    assert!(result.1.contains("hello over MCP"), "{result:?}");
    // The server (node, in its own cwd) is gone once the turn has ended.
    assert_eq!(processes_in(&s.server_dir), Vec::<u32>::new());
}

#[tokio::test]
async fn arguments_outside_the_servers_schema_never_reach_it() {
    let s = setup(
        vec![
            Step::tool_call("mcp__everything__get-sum", json!({"a": "one", "b": 2})),
            Step::tool_call("finish_task", json!({"summary": "gave up"})),
        ],
        &peers::mcp_everything_toml(),
    )
    .await;
    let (outcome, events) = run(&s, "Add.").await;
    assert_eq!(outcome.stop_reason, StopReason::Finished);
    let status = events.iter().find_map(|e| match e {
        EventPayload::ToolCallResult {
            status, error_type, ..
        } => Some((*status, *error_type)),
        _ => None,
    });
    assert_eq!(
        status,
        Some((
            ToolStatus::Error,
            Some(agentplane_core::ToolErrorKind::InvalidArguments)
        )),
        "{events:?}"
    );
    assert_eq!(processes_in(&s.server_dir), Vec::<u32>::new());
}

#[tokio::test]
async fn a_server_that_cannot_start_fails_the_turn_clearly_and_leaves_nothing() {
    // A program that starts a grandchild, says something on stderr and exits.
    let broken = "command = \"sh\"\nargs = [\"-c\", \"sleep 300 & echo 'no such module: everything' >&2; exit 3\"]\n";
    let s = setup(vec![Step::text("never asked")], broken).await;
    let (outcome, events) = run(&s, "Anything.").await;
    assert_eq!(outcome.stop_reason, StopReason::Error, "{events:?}");
    let message = events
        .iter()
        .find_map(|e| match e {
            EventPayload::Error { message, .. } => Some(message.clone()),
            _ => None,
        })
        .expect("an error event");
    assert!(message.contains("everything"), "{message}");
    assert!(
        message.contains("no such module"),
        "stderr tail shown: {message}"
    );
    assert!(s.server.requests().is_empty(), "the model was never called");
    assert_eq!(processes_in(&s.server_dir), Vec::<u32>::new());
}
