//! One prompt on one agent process: start it, `initialize` (nothing else is sent
//! before its answer), `authenticate` when the profile says so, `session/load` (when
//! the agent supports it and we know the thread's session) or `session/new`, then
//! `session/prompt` while `session/update`s stream to the turn. On cancel:
//! `session/cancel`, a short wait for the agent's answer, then the process tree ends —
//! all within 2 s.
//!
//! While `session/load` is pending the agent replays the session's history as
//! `session/update`s: those are earlier turns', not this one's, so they are kept out
//! of the turn (only a replayed `usage_update` is read, as the cost baseline). After a
//! successful load the prompt is the input alone; the thread's context is sent only
//! to a new session, which has no history of its own.
//!
//! Everything the agent sends is untrusted: unknown methods are refused by the SDK,
//! malformed and oversized lines are dropped, and a missing answer is bounded by the
//! handshake timeout or the turn's cancellation.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AuthenticateRequest, CancelNotification, ClientCapabilities, ContentBlock,
    CreateTerminalRequest, CreateTerminalResponse, FileSystemCapabilities, InitializeRequest,
    KillTerminalRequest, KillTerminalResponse, LoadSessionRequest, NewSessionRequest,
    PromptRequest, ReadTextFileRequest, ReadTextFileResponse, ReleaseTerminalRequest,
    ReleaseTerminalResponse, RequestPermissionRequest, RequestPermissionResponse,
    SessionNotification, SessionUpdate, StopReason, TerminalExitStatus, TerminalOutputRequest,
    TerminalOutputResponse, TextContent, WaitForTerminalExitRequest, WaitForTerminalExitResponse,
    WriteTextFileRequest, WriteTextFileResponse,
};
use agent_client_protocol::{Agent, Client, Lines};
use agentplane_core::ThreadId;
use agentplane_engine::ports::external::{
    ExternalEnd, ExternalError, ExternalPrompt, ExternalStop, ToTurn,
};
use agentplane_process::process::{ServerCommand, start_confined_server, start_server};
use tokio::io::AsyncReadExt;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::capabilities::{self, Refused};
use crate::config::AcpAgentConfig;
use crate::confinement::{Confinement, confinement_for};
use crate::lines::{MAX_LINE_BYTES, bounded_lines, line_sink};
use crate::terminals::{Ended, Terminals};
use crate::updates::{map_update, outcome_for, permission_ask};
use crate::usage::UsageSeen;

/// After `session/cancel`, how long the agent gets to answer its prompt…
const CANCEL_ANSWER: Duration = Duration::from_millis(1_000);
/// …and then how long its process tree gets between SIGTERM and SIGKILL.
const TERMINATE_GRACE: Duration = Duration::from_millis(500);
/// Bytes of the agent's stderr kept for error messages.
const STDERR_TAIL: usize = 2_048;

/// Runs one prompt; see the module docs.
pub async fn run(
    config: &AcpAgentConfig,
    sessions: &Arc<Mutex<HashMap<ThreadId, String>>>,
    prompt: ExternalPrompt,
    to_turn: mpsc::Sender<ToTurn>,
    cancel: CancellationToken,
) -> Result<ExternalEnd, ExternalError> {
    let confinement = confinement_for(config, &prompt.workspace)?;
    let mut env = config.env.clone();
    if let Some(confinement) = &confinement {
        env.insert(
            "TMPDIR".to_owned(),
            confinement.tmp.path().display().to_string(),
        );
    }
    let command = ServerCommand {
        program: &config.command,
        args: &config.args,
        env: &env,
        cwd: Some(&prompt.workspace),
    };
    let (started, _tmp) = match confinement {
        Some(Confinement { prepared, tmp }) => {
            (start_confined_server(&command, prepared), Some(tmp))
        }
        None => (start_server(&command), None),
    };
    let started = started.map_err(|e| {
        ExternalError::Unavailable(format!("cannot start `{}`: {e}", config.command))
    })?;
    let mut process = started.process;
    let stderr_tail = Arc::new(Mutex::new(String::new()));
    let stderr_task = tokio::spawn(keep_tail(started.stderr, stderr_tail.clone()));
    let skipped = Arc::new(AtomicU64::new(0));
    let transport = Lines::new(
        line_sink(started.stdin),
        bounded_lines(started.stdout, MAX_LINE_BYTES, skipped.clone()),
    );

    let session = converse(config, sessions, prompt, to_turn, cancel.clone(), transport);
    tokio::pin!(session);
    let outcome = tokio::select! {
        outcome = &mut session => outcome,
        // The session itself answers a cancel; this bounds an agent that ignores it.
        _ = async {
            cancel.cancelled().await;
            tokio::time::sleep(CANCEL_ANSWER + Duration::from_millis(200)).await;
        } => Ok(ExternalEnd { stop: ExternalStop::Cancelled, usage: None }),
    };
    process.terminate(TERMINATE_GRACE).await;
    stderr_task.abort();
    let skipped = skipped.load(Ordering::Relaxed);
    outcome.map_err(|e| {
        let tail = stderr_tail.lock().map(|t| t.clone()).unwrap_or_default();
        let mut message = e.to_string();
        if skipped > 0 {
            message.push_str(&format!(
                " ({skipped} line(s) over {MAX_LINE_BYTES} bytes were skipped)"
            ));
        }
        if !tail.trim().is_empty() {
            message.push_str(&format!("; the agent's stderr ends with: {}", tail.trim()));
        }
        match e {
            ExternalError::Timeout(_) => ExternalError::Timeout(message),
            ExternalError::Unavailable(_) => ExternalError::Unavailable(message),
            ExternalError::Protocol(_) => ExternalError::Protocol(message),
        }
    })
}

/// Keeps the last `STDERR_TAIL` bytes the agent wrote to stderr.
async fn keep_tail(mut stderr: tokio::process::ChildStderr, tail: Arc<Mutex<String>>) {
    let mut buffer = [0u8; 4096];
    while let Ok(n) = stderr.read(&mut buffer).await {
        if n == 0 {
            break;
        }
        if let Ok(mut tail) = tail.lock() {
            tail.push_str(&String::from_utf8_lossy(&buffer[..n]));
            if tail.len() > STDERR_TAIL {
                let mut cut = tail.len() - STDERR_TAIL;
                while !tail.is_char_boundary(cut) {
                    cut += 1;
                }
                tail.drain(..cut);
            }
        }
    }
}

fn protocol(what: &str) -> impl Fn(agent_client_protocol::Error) -> ExternalError + '_ {
    move |e| ExternalError::Protocol(format!("the agent failed {what}: {e}"))
}

/// Awaits a handshake step within the profile's timeout.
async fn bounded<T>(
    config: &AcpAgentConfig,
    what: &str,
    step: impl std::future::Future<Output = Result<T, agent_client_protocol::Error>>,
) -> Result<T, ExternalError> {
    match tokio::time::timeout(config.handshake_timeout, step).await {
        Ok(result) => result.map_err(protocol(what)),
        Err(_) => Err(ExternalError::Timeout(format!(
            "the agent did not answer {what} within {} ms",
            config.handshake_timeout.as_millis()
        ))),
    }
}

#[allow(clippy::too_many_lines)]
async fn converse<O, I>(
    config: &AcpAgentConfig,
    sessions: &Arc<Mutex<HashMap<ThreadId, String>>>,
    prompt: ExternalPrompt,
    to_turn: mpsc::Sender<ToTurn>,
    cancel: CancellationToken,
    transport: Lines<O, I>,
) -> Result<ExternalEnd, ExternalError>
where
    O: futures_util::Sink<String, Error = std::io::Error> + Send + 'static,
    I: futures_util::Stream<Item = std::io::Result<String>> + Send + 'static,
{
    let workspace = prompt.workspace.clone();
    let updates = to_turn.clone();
    // Set while `session/load` is pending: the updates that come then are a replay.
    let replaying = Arc::new(AtomicBool::new(false));
    let usage = Arc::new(Mutex::new(UsageSeen::default()));
    let (replay_flag, usage_seen) = (replaying.clone(), usage.clone());
    let asks = to_turn.clone();
    let reads = (to_turn.clone(), workspace.clone());
    let writes = (to_turn.clone(), workspace.clone());
    let terminals = Arc::new(Terminals::new(
        config.terminal.clone(),
        workspace.clone(),
        config.terminal_timeout,
        config.terminal_output_cap,
    ));
    let creates = (to_turn.clone(), terminals.clone());
    let outputs = terminals.clone();
    let waits = terminals.clone();
    let kills = terminals.clone();
    let releases = terminals;
    let result = Client
        .v1()
        .name("agentplane")
        .on_receive_notification(
            async move |notification: SessionNotification, _cx| {
                let replay = replay_flag.load(Ordering::SeqCst);
                if let SessionUpdate::UsageUpdate(update) = &notification.update
                    && let Ok(mut seen) = usage_seen.lock()
                {
                    seen.note(update, replay);
                }
                if replay {
                    return Ok(());
                }
                for update in map_update(notification.update) {
                    // A turn that is gone no longer listens; nothing else to do.
                    let _ = updates.send(ToTurn::Update(update)).await;
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request: RequestPermissionRequest, responder, cx: ConnectionTo<Agent>| {
                let ask = permission_ask(&request);
                let (answer, decision) = oneshot::channel();
                let sent = asks.send(ToTurn::Permission { ask, answer }).await.is_ok();
                // Waiting for a person must not hold the connection's dispatch loop.
                cx.spawn(async move {
                    let approved = sent && decision.await.unwrap_or(false);
                    responder.respond(RequestPermissionResponse::new(outcome_for(
                        &request, approved,
                    )))
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ReadTextFileRequest, responder, cx: ConnectionTo<Agent>| {
                let (to_turn, workspace) = reads.clone();
                cx.spawn(async move {
                    match capabilities::read_text_file(
                        &to_turn,
                        &workspace,
                        &request.path,
                        request.line,
                        request.limit,
                    )
                    .await
                    {
                        Ok(text) => responder.respond(ReadTextFileResponse::new(text)),
                        Err(why) => responder.respond_with_error(why.into_error()),
                    }
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: WriteTextFileRequest, responder, cx: ConnectionTo<Agent>| {
                let (to_turn, workspace) = writes.clone();
                cx.spawn(async move {
                    match capabilities::write_text_file(
                        &to_turn,
                        &workspace,
                        &request.path,
                        &request.content,
                    )
                    .await
                    {
                        Ok(()) => responder.respond(WriteTextFileResponse::new()),
                        Err(why) => responder.respond_with_error(why.into_error()),
                    }
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: CreateTerminalRequest, responder, cx: ConnectionTo<Agent>| {
                let (to_turn, terminals) = creates.clone();
                cx.spawn(async move {
                    if !request.env.is_empty() || request.cwd.is_some() {
                        return responder.respond_with_error(
                            Refused::InvalidParams(
                                "terminals run in the workspace with agentplane's environment; \
                                 `env` and `cwd` are not accepted"
                                    .to_owned(),
                            )
                            .into_error(),
                        );
                    }
                    match terminals
                        .create(&to_turn, request.command, request.args)
                        .await
                    {
                        Ok(id) => responder.respond(CreateTerminalResponse::new(id)),
                        Err(why) => responder.respond_with_error(why.into_error()),
                    }
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: TerminalOutputRequest, responder, _cx: ConnectionTo<Agent>| {
                match outputs.output(&request.terminal_id.0) {
                    Ok(Some(ended)) => responder.respond(
                        TerminalOutputResponse::new(ended.output.clone(), ended.truncated)
                            .exit_status(exit_status(&ended)),
                    ),
                    Ok(None) => responder.respond(TerminalOutputResponse::new("", false)),
                    Err(why) => responder.respond_with_error(why.into_error()),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: WaitForTerminalExitRequest, responder, cx: ConnectionTo<Agent>| {
                let terminals = waits.clone();
                cx.spawn(async move {
                    match terminals.wait(&request.terminal_id.0).await {
                        Ok(ended) => {
                            responder.respond(WaitForTerminalExitResponse::new(exit_status(&ended)))
                        }
                        Err(why) => responder.respond_with_error(why.into_error()),
                    }
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: KillTerminalRequest, responder, _cx: ConnectionTo<Agent>| {
                match kills.stop(&request.terminal_id.0, false) {
                    Ok(()) => responder.respond(KillTerminalResponse::new()),
                    Err(why) => responder.respond_with_error(why.into_error()),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ReleaseTerminalRequest, responder, _cx: ConnectionTo<Agent>| {
                match releases.stop(&request.terminal_id.0, true) {
                    Ok(()) => responder.respond(ReleaseTerminalResponse::new()),
                    Err(why) => responder.respond_with_error(why.into_error()),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
            Ok(drive(config, sessions, prompt, cancel, &replaying, &usage, &cx).await)
        })
        .await;
    match result {
        Ok(inner) => inner,
        Err(e) => Err(ExternalError::Protocol(format!(
            "the connection to the agent failed: {e}"
        ))),
    }
}

/// The requests we send, in order.
async fn drive(
    config: &AcpAgentConfig,
    sessions: &Arc<Mutex<HashMap<ThreadId, String>>>,
    prompt: ExternalPrompt,
    cancel: CancellationToken,
    replaying: &AtomicBool,
    usage: &Mutex<UsageSeen>,
    cx: &ConnectionTo<Agent>,
) -> Result<ExternalEnd, ExternalError> {
    let files = FileSystemCapabilities::new()
        .read_text_file(true)
        .write_text_file(true);
    let capabilities = ClientCapabilities::new()
        .fs(files)
        .terminal(config.terminal.is_some());
    let init = InitializeRequest::new(ProtocolVersion::V1).client_capabilities(capabilities);
    let initialized = bounded(config, "`initialize`", cx.send_request(init).block_task()).await?;

    if let Some(method) = &config.auth_method {
        let offered = initialized
            .auth_methods
            .iter()
            .any(|m| m.id().0.as_ref() == method.as_str());
        if !offered {
            return Err(ExternalError::Protocol(format!(
                "the agent does not offer the authentication method `{method}` of its profile"
            )));
        }
        bounded(
            config,
            "`authenticate`",
            cx.send_request(AuthenticateRequest::new(method.clone()))
                .block_task(),
        )
        .await?;
    }

    let known = sessions
        .lock()
        .ok()
        .and_then(|s| s.get(&prompt.thread).cloned());
    let mut session_id = None;
    if let Some(id) = known
        && initialized.agent_capabilities.load_session
    {
        let load = LoadSessionRequest::new(id.clone(), prompt.workspace.clone());
        // The updates the agent sends until it answers are its replay of the session.
        // Notifications are handled in the order they arrive, before this answer is
        // seen, so clearing the flag here lets none of the replay through.
        replaying.store(true, Ordering::SeqCst);
        let loaded = bounded(config, "`session/load`", cx.send_request(load).block_task()).await;
        replaying.store(false, Ordering::SeqCst);
        // A session the agent no longer has is not an error: start a new one.
        if loaded.is_ok() {
            session_id = Some(id);
        }
    }
    let resumed = session_id.is_some();
    let session_id = match session_id {
        Some(id) => id,
        None => {
            let created = bounded(
                config,
                "`session/new`",
                cx.send_request(NewSessionRequest::new(prompt.workspace.clone()))
                    .block_task(),
            )
            .await?;
            created.session_id.0.to_string()
        }
    };
    if let Ok(mut sessions) = sessions.lock() {
        sessions.insert(prompt.thread.clone(), session_id.clone());
    }

    // A resumed session holds the conversation already; a new one gets ours.
    let text = match &prompt.context {
        Some(context) if !resumed => format!("{context}{}", prompt.input),
        _ => prompt.input.clone(),
    };
    let request = PromptRequest::new(
        session_id.clone(),
        vec![ContentBlock::Text(TextContent::new(text))],
    );
    let answer = cx.send_request(request).block_task();
    tokio::pin!(answer);
    let response = tokio::select! {
        response = &mut answer => response,
        _ = cancel.cancelled() => {
            let _ = cx.send_notification(CancelNotification::new(session_id.clone()));
            // The agent should answer the prompt with `cancelled`; whatever it says,
            // the turn is cancelled.
            let _ = tokio::time::timeout(CANCEL_ANSWER, &mut answer).await;
            return Ok(ExternalEnd { stop: ExternalStop::Cancelled, usage: None });
        }
    };
    let response = response.map_err(protocol("`session/prompt`"))?;
    let usage = usage.lock().ok().and_then(|seen| seen.of_prompt(&response));
    let stop = match response.stop_reason {
        StopReason::EndTurn => ExternalStop::EndTurn,
        StopReason::Cancelled => ExternalStop::Cancelled,
        StopReason::MaxTokens => ExternalStop::Limit("max_tokens".to_owned()),
        StopReason::MaxTurnRequests => ExternalStop::Limit("max_turn_requests".to_owned()),
        StopReason::Refusal => ExternalStop::Limit("refusal".to_owned()),
        other => ExternalStop::Limit(format!("{other:?}")),
    };
    Ok(ExternalEnd { stop, usage })
}

fn exit_status(ended: &Ended) -> TerminalExitStatus {
    TerminalExitStatus::new()
        .exit_code(ended.exit_code)
        .signal(ended.signal.clone())
}
