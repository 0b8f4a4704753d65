//! The ACP client against real agent processes: the SDK peer (npm's official
//! `@agentclientprotocol/sdk`, crates/testkit/peers/acp_agent.mjs), a hostile peer
//! (crates/testkit/peers/acp_hostile.py), and npm's claude ACP adapter without a key.
//! The test plays the turn's side of the port: it answers permissions and capability
//! uses and collects the updates.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use agentplane_acp_client::{AcpAgent, AcpAgentConfig};
use agentplane_core::ThreadId;
use agentplane_engine::ports::external::{
    Availability, ExternalAgent, ExternalEnd, ExternalError, ExternalPrompt, ExternalStop,
    ExternalToolStatus, ExternalUpdate, ToTurn,
};
use agentplane_testkit::peers;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

fn agent(program: (String, Vec<String>), env: &[(&str, &str)], auth: Option<&str>) -> AcpAgent {
    AcpAgent::new(AcpAgentConfig {
        profile: "test".into(),
        command: program.0,
        args: program.1,
        legacy_args: None,
        sandbox: None,
        state_dirs: Vec::new(),
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>(),
        missing_env: Vec::new(),
        auth_method: auth.map(str::to_owned),
        handshake_timeout: Duration::from_secs(10),
        terminal: Some(std::sync::Arc::new(agentplane_tools::ShellEnsemble::new(
            vec!["echo".into()],
        ))),
        terminal_timeout: Duration::from_secs(10),
        terminal_output_cap: 4096,
    })
}

/// What the turn's side saw and how the prompt ended.
struct Seen {
    updates: Vec<ExternalUpdate>,
    permissions: Vec<String>,
    capabilities: Vec<String>,
    security: Vec<String>,
    end: Result<ExternalEnd, ExternalError>,
}

impl Seen {
    fn text(&self) -> String {
        self.updates
            .iter()
            .filter_map(|u| match u {
                ExternalUpdate::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// Runs one prompt; `approve` answers permissions, `allow` capability uses; `cancel_after`
/// cancels once that much text arrived.
async fn prompt(
    agent: &AcpAgent,
    thread: &ThreadId,
    workspace: &Path,
    input: &str,
    approve: bool,
    allow: bool,
    cancel_on: Option<&str>,
) -> Seen {
    let (tx, mut rx) = mpsc::channel(64);
    let cancel = CancellationToken::new();
    let run = agent.prompt(
        ExternalPrompt {
            thread: thread.clone(),
            workspace: workspace.to_path_buf(),
            input: input.to_owned(),
            context: None,
        },
        tx,
        cancel.clone(),
    );
    tokio::pin!(run);
    let mut seen = Seen {
        updates: Vec::new(),
        permissions: Vec::new(),
        capabilities: Vec::new(),
        security: Vec::new(),
        end: Err(ExternalError::Protocol("not ended".into())),
    };
    loop {
        tokio::select! {
            message = rx.recv() => match message {
                Some(ToTurn::Update(update)) => {
                    seen.updates.push(update);
                    if let Some(marker) = cancel_on
                        && seen.text().contains(marker)
                    {
                        cancel.cancel();
                    }
                }
                Some(ToTurn::Permission { ask, answer }) => {
                    seen.permissions.push(ask.tool.clone());
                    let _ = answer.send(approve);
                }
                Some(ToTurn::Capability { request, answer }) => {
                    seen.capabilities.push(request.tool.clone());
                    let _ = answer.send(if allow { Ok(request.arguments) } else { Err("policy says no".into()) });
                }
                Some(ToTurn::CapabilityOutput { output, answer, .. }) => {
                    let _ = answer.send(Ok(output));
                }
                Some(ToTurn::Security { event_type, .. }) => seen.security.push(event_type),
                Some(ToTurn::Record(_)) | None => {}
            },
            end = &mut run => { seen.end = end; break; }
        }
    }
    while let Ok(message) = rx.try_recv() {
        if let ToTurn::Update(update) = message {
            seen.updates.push(update);
        }
    }
    seen
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("notes.txt"), "remember the milk").expect("notes");
    dir
}

#[tokio::test]
async fn sdk_peer_streams_chunks_a_plan_and_a_tool_call_and_reads_through_confinement() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).expect("canonical");
    let agent = agent(peers::acp_sdk_agent(), &[], None);
    let seen = prompt(
        &agent,
        &ThreadId::new(),
        &root,
        "please read and write",
        true,
        true,
        None,
    )
    .await;
    let end = seen.end.as_ref().expect("the prompt ends");
    assert_eq!(end.stop, ExternalStop::EndTurn);
    assert_eq!(end.usage, None, "the stable SDK peer reports no usage");
    assert!(
        seen.text().starts_with("Hello from the SDK peer."),
        "{}",
        seen.text()
    );
    assert!(seen.text().contains("[wrote out.txt]"));
    assert!(
        seen.updates.iter().any(
            |u| matches!(u, ExternalUpdate::Plan(p) if p[0]["content"] == "answer the prompt")
        )
    );
    assert!(seen.updates.iter().any(|u| matches!(u, ExternalUpdate::ToolCall { call_id, tool, .. } if call_id == "call-1" && tool == "read_file")));
    assert!(seen.updates.iter().any(|u| matches!(u,
        ExternalUpdate::ToolCallUpdate { call_id, status: Some(ExternalToolStatus::Completed), output: Some(out), .. }
            if call_id == "call-1" && out == "notes: remember the milk")));
    assert_eq!(seen.capabilities, vec!["read_file", "write_file"]);
    assert_eq!(
        std::fs::read_to_string(root.join("out.txt")).expect("written"),
        "written by the peer\n"
    );
}

#[tokio::test]
async fn a_refused_capability_is_an_error_for_the_agent_and_nothing_is_written() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).expect("canonical");
    let agent = agent(peers::acp_sdk_agent(), &[], None);
    let seen = prompt(&agent, &ThreadId::new(), &root, "write", true, false, None).await;
    // The SDK peer does not catch the refused write: its prompt fails.
    assert!(seen.end.is_err(), "{:?}", seen.end);
    assert!(!root.join("out.txt").exists());
}

#[tokio::test]
async fn reads_outside_the_workspace_are_refused_as_security_events() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).expect("canonical");
    let agent = agent(peers::acp_sdk_agent(), &[], None);
    let seen = prompt(&agent, &ThreadId::new(), &root, "escape", true, true, None).await;
    assert!(seen.end.is_ok(), "{:?}", seen.end);
    assert!(seen.text().contains("[escape refused:"), "{}", seen.text());
    assert!(!seen.text().contains("READ IT"));
    assert_eq!(seen.security, vec!["sandbox_violation"]);
}

#[tokio::test]
async fn permission_requests_get_the_option_of_the_decision() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).expect("canonical");
    let agent = agent(peers::acp_sdk_agent(), &[], None);
    let allowed = prompt(
        &agent,
        &ThreadId::new(),
        &root,
        "permission",
        true,
        true,
        None,
    )
    .await;
    assert!(
        allowed.text().contains("[permission: allow]"),
        "{}",
        allowed.text()
    );
    assert_eq!(
        allowed.permissions,
        vec!["write_file"],
        "kind `edit` is our write_file"
    );
    let declined = prompt(
        &agent,
        &ThreadId::new(),
        &root,
        "permission",
        false,
        true,
        None,
    )
    .await;
    assert!(
        declined.text().contains("[permission: reject]"),
        "{}",
        declined.text()
    );
}

#[tokio::test]
async fn authentication_is_sent_when_the_profile_says_so() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).expect("canonical");
    let without = agent(peers::acp_sdk_agent(), &[("ACP_PEER_AUTH", "1")], None);
    let seen = prompt(&without, &ThreadId::new(), &root, "hi", true, true, None).await;
    let error = seen.end.expect_err("session/new needs authentication");
    assert!(error.to_string().contains("session/new"), "{error}");

    let with = agent(
        peers::acp_sdk_agent(),
        &[("ACP_PEER_AUTH", "1")],
        Some("test-key"),
    );
    let seen = prompt(&with, &ThreadId::new(), &root, "hi", true, true, None).await;
    assert!(seen.end.is_ok(), "{:?}", seen.end);

    let wrong = agent(
        peers::acp_sdk_agent(),
        &[("ACP_PEER_AUTH", "1")],
        Some("nope"),
    );
    let seen = prompt(&wrong, &ThreadId::new(), &root, "hi", true, true, None).await;
    let error = seen
        .end
        .expect_err("an auth method the agent does not offer");
    assert!(error.to_string().contains("`nope`"), "{error}");
}

#[tokio::test]
async fn a_thread_resumes_its_session_with_session_load() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).expect("canonical");
    let agent = agent(peers::acp_sdk_agent(), &[], None);
    let thread = ThreadId::new();
    let first = prompt(&agent, &thread, &root, "hi", true, true, None).await;
    assert!(!first.text().contains("[loaded"));
    let second = prompt(&agent, &thread, &root, "again", true, true, None).await;
    // Resumed with session/load; what the agent replayed then is not this turn's.
    assert!(
        second.text().contains("[resumed peer-session-1]"),
        "{}",
        second.text()
    );
    assert!(!second.text().contains("[loaded"), "{}", second.text());
}

#[tokio::test]
async fn cancel_ends_a_cooperative_prompt_as_cancelled() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).expect("canonical");
    let agent = agent(peers::acp_sdk_agent(), &[], None);
    let started = Instant::now();
    let seen = prompt(
        &agent,
        &ThreadId::new(),
        &root,
        "wait",
        true,
        true,
        Some("[waiting]"),
    )
    .await;
    assert_eq!(seen.end.expect("ends").stop, ExternalStop::Cancelled);
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn cancel_ends_a_stubborn_agent_and_its_whole_process_tree() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).expect("canonical");
    let pidfile = ws.path().join("child.pid");
    let pidfile_text = pidfile.display().to_string();
    let agent = agent(
        peers::acp_sdk_agent(),
        &[("ACP_PEER_PIDFILE", &pidfile_text)],
        None,
    );
    let seen = prompt(
        &agent,
        &ThreadId::new(),
        &root,
        "stubborn",
        true,
        true,
        Some("[ignoring cancel]"),
    )
    .await;
    assert_eq!(seen.end.expect("ends").stop, ExternalStop::Cancelled);
    let pid = std::fs::read_to_string(&pidfile).expect("the peer wrote its child's pid");
    // The child (`sleep 300`) was in the agent's tree: it is gone.
    let alive = Path::new(&format!("/proc/{}", pid.trim())).exists()
        && !std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
            .unwrap_or_default()
            .contains(") Z ");
    assert!(!alive, "the agent's child {pid} outlived the cancel");
}

#[tokio::test]
async fn hostile_garbage_wrong_ids_and_oversized_lines_do_not_break_the_turn() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).expect("canonical");
    for mode in ["garbage", "wrong-ids", "oversized"] {
        let agent = agent(peers::acp_hostile_agent(mode), &[], None);
        let seen = prompt(&agent, &ThreadId::new(), &root, "hi", true, true, None).await;
        let end = seen.end.as_ref().unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert_eq!(end.stop, ExternalStop::EndTurn, "{mode}");
        assert_eq!(seen.text(), "partial answer and the rest", "{mode}");
        assert_eq!(
            end.usage,
            Some(agentplane_engine::ports::external::ExternalUsage {
                input_tokens: 1200,
                output_tokens: 300,
                cost_usd_micros: None,
                source: "prompt",
            }),
            "{mode}: the usage the agent reported"
        );
    }
}

#[tokio::test]
async fn an_agent_exiting_mid_turn_is_a_protocol_error() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).expect("canonical");
    let agent = agent(peers::acp_hostile_agent("exit-mid-turn"), &[], None);
    let started = Instant::now();
    let seen = prompt(&agent, &ThreadId::new(), &root, "hi", true, true, None).await;
    let text = seen.text();
    let error = seen.end.expect_err("the agent went away");
    assert!(matches!(error, ExternalError::Protocol(_)), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(text, "partial answer");
}

#[tokio::test]
async fn an_agent_that_never_answers_initialize_times_out() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).expect("canonical");
    let mut config = agent(peers::acp_hostile_agent("silent"), &[], None)
        .config()
        .clone();
    config.handshake_timeout = Duration::from_millis(700);
    let agent = AcpAgent::new(config);
    let seen = prompt(&agent, &ThreadId::new(), &root, "hi", true, true, None).await;
    let error = seen.end.expect_err("no answer");
    assert!(matches!(error, ExternalError::Timeout(_)), "{error:?}");
    assert!(error.to_string().contains("`initialize`"), "{error}");
}

#[tokio::test]
async fn an_agent_that_never_answers_the_prompt_ends_on_cancel() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).expect("canonical");
    let agent = agent(peers::acp_hostile_agent("silent-prompt"), &[], None);
    let (tx, _rx) = mpsc::channel(64);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        trigger.cancel();
    });
    let run = agent.prompt(
        ExternalPrompt {
            thread: ThreadId::new(),
            workspace: root,
            input: "hi".into(),
            context: None,
        },
        tx,
        cancel.clone(),
    );
    let end = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the prompt ends after the cancel")
        .expect("a cancelled end");
    assert_eq!(end.stop, ExternalStop::Cancelled);
}

#[tokio::test]
async fn availability_says_what_is_missing_without_starting_anything() {
    let missing_program = AcpAgent::new(AcpAgentConfig {
        legacy_args: None,
        sandbox: None,
        state_dirs: Vec::new(),
        profile: "codex".into(),
        command: "codex-acp-surely-not-installed".into(),
        args: Vec::new(),
        env: BTreeMap::new(),
        missing_env: Vec::new(),
        auth_method: None,
        handshake_timeout: Duration::from_secs(1),
        terminal: None,
        terminal_timeout: Duration::from_secs(1),
        terminal_output_cap: 1024,
    });
    match missing_program.availability().await {
        Availability::Unavailable(why) => assert!(why.starts_with("program missing"), "{why}"),
        Availability::Available => panic!("a missing program is available"),
    }
    let claude = peers::claude_acp_adapter();
    let no_key = AcpAgent::new(AcpAgentConfig {
        legacy_args: None,
        sandbox: None,
        state_dirs: Vec::new(),
        profile: "claude".into(),
        command: claude.0,
        args: claude.1,
        env: BTreeMap::new(),
        missing_env: vec!["ANTHROPIC_API_KEY (secret `ANTHROPIC_API_KEY` is not set)".into()],
        auth_method: None,
        handshake_timeout: Duration::from_secs(1),
        terminal: None,
        terminal_timeout: Duration::from_secs(1),
        terminal_output_cap: 1024,
    });
    let started = Instant::now();
    match no_key.availability().await {
        Availability::Unavailable(why) => {
            assert!(why.contains("key missing: ANTHROPIC_API_KEY"), "{why}")
        }
        Availability::Available => panic!("no key, yet available"),
    }
    assert!(started.elapsed() < Duration::from_secs(1));
    // A prompt is refused with the same reason, before any process starts.
    let (tx, _rx) = mpsc::channel(1);
    let error = no_key
        .prompt(
            ExternalPrompt {
                thread: ThreadId::new(),
                workspace: std::env::temp_dir(),
                input: "hi".into(),
                context: None,
            },
            tx,
            CancellationToken::new(),
        )
        .await
        .expect_err("unavailable");
    assert!(matches!(error, ExternalError::Unavailable(_)), "{error:?}");
}

#[tokio::test]
async fn terminals_run_allowed_programs_through_our_shell_and_refuse_others() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).expect("canonical");
    let agent = agent(peers::acp_sdk_agent(), &[], None);
    let seen = prompt(
        &agent,
        &ThreadId::new(),
        &root,
        "terminal",
        true,
        true,
        None,
    )
    .await;
    assert!(seen.end.is_ok(), "{:?}", seen.end);
    let text = seen.text();
    assert!(
        text.contains("[terminal exit 0: hello from a terminal]"),
        "{text}"
    );
    assert!(text.contains("[sh refused:"), "{text}");
    assert_eq!(seen.capabilities, vec!["run_command", "run_command"]);
    assert_eq!(seen.security, vec!["command_not_allowed"]);
}

/// Runs one prompt with our thread context, as the engine sends it.
async fn prompt_with_context(
    agent: &AcpAgent,
    thread: &ThreadId,
    root: &Path,
    input: &str,
) -> Seen {
    let (tx, mut rx) = mpsc::channel(64);
    let run = agent.prompt(
        ExternalPrompt {
            thread: thread.clone(),
            workspace: root.to_path_buf(),
            input: input.to_owned(),
            context: Some(
                "[Earlier in this conversation]\nuser: hi\nassistant: hello\n\n[Current request]\n"
                    .to_owned(),
            ),
        },
        tx,
        CancellationToken::new(),
    );
    tokio::pin!(run);
    let mut seen = Seen {
        updates: Vec::new(),
        permissions: Vec::new(),
        capabilities: Vec::new(),
        security: Vec::new(),
        end: Err(ExternalError::Protocol("not ended".into())),
    };
    loop {
        tokio::select! {
            message = rx.recv() => match message {
                Some(ToTurn::Update(update)) => seen.updates.push(update),
                Some(ToTurn::Capability { request, answer }) => {
                    seen.capabilities.push(request.tool.clone());
                    let _ = answer.send(Ok(request.arguments));
                }
                Some(ToTurn::CapabilityOutput { output, answer, .. }) => {
                    let _ = answer.send(Ok(output));
                }
                Some(ToTurn::Permission { answer, .. }) => { let _ = answer.send(false); }
                Some(ToTurn::Security { event_type, .. }) => seen.security.push(event_type),
                Some(ToTurn::Record(_)) | None => {}
            },
            end = &mut run => { seen.end = end; break; }
        }
    }
    while let Ok(message) = rx.try_recv() {
        if let ToTurn::Update(update) = message {
            seen.updates.push(update);
        }
    }
    seen
}

#[tokio::test]
async fn a_loaded_sessions_replay_stays_out_of_the_turn_and_no_context_is_sent_again() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).expect("canonical");
    let agent = agent(peers::acp_sdk_agent(), &[], None);
    let thread = ThreadId::new();
    let first = prompt_with_context(&agent, &thread, &root, "hello").await;
    assert!(first.end.is_ok(), "{:?}", first.end);
    assert!(
        first.text().contains("[context sent]"),
        "a new session gets our context: {}",
        first.text()
    );

    let second = prompt_with_context(&agent, &thread, &root, "usage").await;
    let end = second.end.as_ref().expect("the second prompt ends");
    let text = second.text();
    assert!(text.starts_with("Hello from the SDK peer."), "{text}");
    assert!(!text.contains("[loaded"), "the replay leaked: {text}");
    assert!(
        !text.contains("earlier answer"),
        "the replay leaked: {text}"
    );
    assert!(
        !text.contains("[context sent]"),
        "context sent twice: {text}"
    );
    assert!(
        !second.updates.iter().any(
            |u| matches!(u, ExternalUpdate::ToolCall { call_id, .. } | ExternalUpdate::ToolCallUpdate { call_id, .. } if call_id == "call-0")
        ),
        "the earlier turn's tool call was replayed into this one"
    );
    // usage_update: tokens in context, and the cost since the replayed baseline.
    let usage = end.usage.expect("usage from usage_update");
    assert_eq!(usage.input_tokens, 1500);
    assert_eq!(usage.source, "usage_update");
    assert_eq!(usage.cost_usd_micros, Some(100_000), "$0.35 - $0.25");
}

#[tokio::test]
async fn arguments_sent_late_quota_usage_and_a_missing_file_reach_the_turn() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).expect("canonical");
    let agent = agent(peers::acp_sdk_agent(), &[], None);
    let seen = prompt(
        &agent,
        &ThreadId::new(),
        &root,
        "rawinput quota missing",
        true,
        true,
        None,
    )
    .await;
    let end = seen.end.as_ref().expect("the prompt ends");
    assert!(seen.updates.iter().any(|u| matches!(u,
        ExternalUpdate::ToolCall { call_id, tool, title: Some(title), arguments }
            if call_id == "call-3" && tool == "write_file" && title == "edit a.txt" && arguments == &serde_json::json!({}))));
    assert!(seen.updates.iter().any(|u| matches!(u,
        ExternalUpdate::ToolCallUpdate { call_id, arguments: Some(args), .. }
            if call_id == "call-3" && args["filePath"] == "a.txt")));
    let usage = end.usage.expect("usage from _meta.quota");
    assert_eq!(
        (usage.input_tokens, usage.output_tokens, usage.source),
        (90, 12, "quota")
    );
    let text = seen.text();
    assert!(
        text.contains("[missing: -32002 Resource not found: "),
        "a missing file is resource-not-found: {text}"
    );
    assert!(seen.security.is_empty(), "a missing file is no breach");
}

/// A stand-in for an installed gemini: its `--help` lists `help`, it records the
/// arguments it was started with in `args.txt`, then runs the SDK peer.
fn fake_gemini(dir: &Path, help: &str) -> String {
    let (node, peer) = peers::acp_sdk_agent();
    let script = dir.join(format!("gemini-{}", help.len()));
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nif [ \"$1\" = --help ]; then echo '{help}'; exit 0; fi\n\
             echo \"$@\" > {}/args.txt\nexec {node} {}\n",
            dir.display(),
            peer.join(" ")
        ),
    )
    .expect("script");
    let mut perms = std::fs::metadata(&script).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&script, perms).expect("chmod");
    script.display().to_string()
}

#[tokio::test]
async fn the_gemini_profile_uses_acp_when_the_installed_version_has_it() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).expect("canonical");
    let bin = tempfile::tempdir().expect("bin");
    for (help, expected) in [
        (
            "  --acp  Starts the agent in ACP mode\n  --experimental-acp  deprecated",
            "--acp",
        ),
        (
            "  --experimental-acp  Starts the agent in ACP mode",
            "--experimental-acp",
        ),
    ] {
        let program = fake_gemini(bin.path(), help);
        let mut gemini = agent((program, vec!["--acp".into()]), &[], None);
        let mut config = gemini.config().clone();
        config.legacy_args = Some(vec!["--experimental-acp".into()]);
        gemini = AcpAgent::new(config);
        let seen = prompt(&gemini, &ThreadId::new(), &root, "hi", true, true, None).await;
        assert!(seen.end.is_ok(), "{help}: {:?}", seen.end);
        let args = std::fs::read_to_string(bin.path().join("args.txt")).expect("args");
        assert_eq!(args.trim(), expected, "help: {help}");
    }
}
