//! agentplane as an ACP agent (`agentplane acp`): an editor that speaks the Agent
//! Client Protocol starts us on stdio and uses one of our agents.
//!
//! An ACP session is one of our threads (its id is the thread id), owned by one fixed
//! client; a `session/prompt` is one turn started through the hub exactly as
//! `POST …/turns` starts it. The turn's events become `session/update`s (text chunks,
//! tool calls and their results, plans); a `permission_required` becomes a
//! `session/request_permission` to the editor, and only its explicit allow approves
//! (anything else declines: fail-closed); `session/cancel` cancels the turn.
//!
//! Like the HTTP routes, nothing here decides anything: the hub validates, owns tenancy
//! and runs the turn. This module maps ACP onto hub calls and events onto ACP.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AuthenticateRequest, AuthenticateResponse, CancelNotification, Content,
    ContentBlock, ContentChunk, Implementation, InitializeRequest, InitializeResponse,
    NewSessionRequest, NewSessionResponse, PermissionOption, PermissionOptionKind, PromptRequest,
    PromptResponse, RequestPermissionOutcome, RequestPermissionRequest, SessionNotification,
    SessionUpdate, StopReason as AcpStop, TextContent, ToolCall, ToolCallContent, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields,
};
use agent_client_protocol::{Client, Stdio};
use agentplane_core::{EventPayload, PermissionId, StopReason, ThreadId, ToolStatus, TurnId};
use agentplane_engine::hub::{CreateThread, Hub};
use serde_json::Value;

/// How `agentplane acp` serves.
#[derive(Debug, Clone)]
pub struct AcpServeOptions {
    /// The client that owns every thread of the connection.
    pub client: String,
    /// The agent editors' sessions run on.
    pub agent: String,
    /// The workspace of a `session/new` whose `cwd` is not absolute.
    pub workspace: PathBuf,
}

/// Why serving stopped with an error.
#[derive(Debug, thiserror::Error)]
#[error("the ACP connection failed: {0}")]
pub struct AcpServeError(String);

/// The running turn of each session, to cancel it.
type Running = Arc<Mutex<HashMap<String, TurnId>>>;

/// Serves ACP on stdin/stdout until the editor closes the connection.
pub async fn serve_acp_stdio(hub: Arc<Hub>, options: AcpServeOptions) -> Result<(), AcpServeError> {
    let running: Running = Arc::new(Mutex::new(HashMap::new()));
    let client = options.client.clone();
    let sessions = SessionHandler {
        hub: hub.clone(),
        options: Arc::new(options),
        running: running.clone(),
    };
    let prompts = sessions.clone();
    let cancels = sessions.clone();
    agent_client_protocol::Agent
        .v1()
        .name("agentplane")
        .on_receive_request(
            async move |request: InitializeRequest, responder, _cx: ConnectionTo<Client>| {
                let _ = request;
                responder.respond(
                    InitializeResponse::new(ProtocolVersion::V1)
                        .agent_capabilities(AgentCapabilities::new())
                        .agent_info(Implementation::new("agentplane", env!("CARGO_PKG_VERSION"))),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_request: AuthenticateRequest, responder, _cx: ConnectionTo<Client>| {
                // The editor started us as its own child: it is the local user.
                responder.respond(AuthenticateResponse::new())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest, responder, _cx: ConnectionTo<Client>| {
                match sessions.new_session(request).await {
                    Ok(id) => responder.respond(NewSessionResponse::new(id)),
                    Err(why) => responder.respond_with_error(
                        agent_client_protocol::Error::invalid_params().data(why),
                    ),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest, responder, cx: ConnectionTo<Client>| {
                let handler = prompts.clone();
                let connection = cx.clone();
                // A prompt runs for long: off the dispatch loop, so cancels and
                // permission answers still arrive.
                cx.spawn(async move {
                    match handler.prompt(request, &connection).await {
                        Ok(stop) => responder.respond(PromptResponse::new(stop)),
                        Err(why) => responder.respond_with_internal_error(why),
                    }
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: CancelNotification, _cx: ConnectionTo<Client>| {
                cancels.cancel(&notification.session_id.0).await;
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(Stdio::new())
        .await
        .map_err(|e| AcpServeError(e.to_string()))?;
    // The editor went away: its running turns end as cancelled.
    let left: Vec<TurnId> = running
        .lock()
        .map(|r| r.values().cloned().collect())
        .unwrap_or_default();
    for turn in left {
        let _ = hub.cancel_turn(&client, &turn).await;
    }
    Ok(())
}

#[derive(Clone)]
struct SessionHandler {
    hub: Arc<Hub>,
    options: Arc<AcpServeOptions>,
    running: Running,
}

impl SessionHandler {
    async fn new_session(&self, request: NewSessionRequest) -> Result<String, String> {
        let cwd = if request.cwd.is_absolute() {
            request.cwd
        } else {
            self.options.workspace.join(&request.cwd)
        };
        let thread = self
            .hub
            .create_thread(
                &self.options.client,
                CreateThread {
                    agent: self.options.agent.clone(),
                    cwd: cwd.display().to_string(),
                    title: Some("ACP session".to_owned()),
                },
            )
            .await
            .map_err(|e| e.to_string())?;
        Ok(thread.id.to_string())
    }

    async fn cancel(&self, session: &str) {
        let turn = self
            .running
            .lock()
            .ok()
            .and_then(|r| r.get(session).cloned());
        if let Some(turn) = turn
            && let Err(e) = self.hub.cancel_turn(&self.options.client, &turn).await
        {
            tracing::debug!(%turn, error = %e, "cancelling an ACP session's turn");
        }
    }

    async fn prompt(
        &self,
        request: PromptRequest,
        cx: &ConnectionTo<Client>,
    ) -> Result<AcpStop, String> {
        let session = request.session_id.0.to_string();
        let thread =
            ThreadId::parse(&session).map_err(|_| format!("unknown session `{session}`"))?;
        let input: String = request
            .prompt
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text(text) => Some(text.text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n");
        let client = self.options.client.as_str();
        let started = self
            .hub
            .start_turn(client, &thread, input)
            .await
            .map_err(|e| e.to_string())?;
        if let Ok(mut running) = self.running.lock() {
            running.insert(session.clone(), started.turn.clone());
        }
        // Held until the prompt ends: dropping it early declines pending permissions.
        let _guard = started.guard;
        let mut events = started.events;
        let mut last_error = None;
        let stop = loop {
            let Some(next) = events.next().await else {
                break Err("the turn's events ended before it completed".to_owned());
            };
            let event = next.map_err(|e| e.to_string())?;
            let notify = |update: SessionUpdate| {
                let _ = cx.send_notification(SessionNotification::new(session.clone(), update));
            };
            match event.payload {
                EventPayload::MessageDelta { text } => notify(SessionUpdate::AgentMessageChunk(
                    ContentChunk::new(ContentBlock::Text(TextContent::new(text))),
                )),
                EventPayload::ToolCallPlanned {
                    call_id,
                    tool,
                    arguments,
                    ..
                } => notify(SessionUpdate::ToolCall(
                    ToolCall::new(call_id, tool)
                        .status(ToolCallStatus::InProgress)
                        .raw_input(arguments),
                )),
                EventPayload::ToolCallResult {
                    call_id,
                    status,
                    output,
                    ..
                } => notify(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    call_id,
                    ToolCallUpdateFields::new()
                        .status(match status {
                            ToolStatus::Ok => ToolCallStatus::Completed,
                            ToolStatus::Error => ToolCallStatus::Failed,
                        })
                        .content(vec![ToolCallContent::Content(Content::new(
                            ContentBlock::Text(TextContent::new(output)),
                        ))]),
                ))),
                EventPayload::PermissionRequired {
                    permission_id,
                    call_id,
                    tool,
                    arguments,
                    ..
                } => {
                    // Asked beside the turn: an editor that never answers must not hold
                    // up the events; the hub's timeout declines the permission then.
                    let handler = self.clone();
                    let connection = cx.clone();
                    let session = session.clone();
                    tokio::spawn(async move {
                        handler
                            .ask_editor(
                                &connection,
                                &session,
                                &permission_id,
                                call_id,
                                tool,
                                arguments,
                            )
                            .await;
                    });
                }
                EventPayload::Error { message, .. } => last_error = Some(message),
                EventPayload::TurnCompleted { stop_reason, .. } => {
                    break match stop_reason {
                        StopReason::Finished | StopReason::TextAnswer => Ok(AcpStop::EndTurn),
                        StopReason::Cancelled | StopReason::Interrupted => Ok(AcpStop::Cancelled),
                        StopReason::StepLimit => Ok(AcpStop::MaxTurnRequests),
                        StopReason::Error => Err(last_error
                            .take()
                            .unwrap_or_else(|| "the turn ended in error".to_owned())),
                    };
                }
                _ => {}
            }
        };
        if let Ok(mut running) = self.running.lock() {
            running.remove(&session);
        }
        stop
    }

    /// Our permission request as the editor's: its allow approves, anything else —
    /// a reject, a cancelled request, an error, a malformed answer — declines.
    async fn ask_editor(
        &self,
        cx: &ConnectionTo<Client>,
        session: &str,
        permission_id: &str,
        call_id: String,
        tool: String,
        arguments: Value,
    ) {
        let request = RequestPermissionRequest::new(
            session.to_owned(),
            ToolCallUpdate::new(
                call_id,
                ToolCallUpdateFields::new().title(tool).raw_input(arguments),
            ),
            vec![
                PermissionOption::new("approved", "Allow", PermissionOptionKind::AllowOnce),
                PermissionOption::new("declined", "Reject", PermissionOptionKind::RejectOnce),
            ],
        );
        let answer = cx.send_request(request).block_task().await;
        let decision = match answer {
            Ok(response) => match response.outcome {
                RequestPermissionOutcome::Selected(selected)
                    if selected.option_id.0.as_ref() == "approved" =>
                {
                    "approved"
                }
                _ => "declined",
            },
            Err(_) => "declined",
        };
        let Ok(id) = PermissionId::parse(permission_id) else {
            return;
        };
        if let Err(e) = self
            .hub
            .resolve_permission(&self.options.client, &id, decision)
            .await
        {
            // Already resolved (a timeout won the race): the stored outcome stands.
            tracing::debug!(permission = %permission_id, error = %e, "resolving an ACP permission");
        }
    }
}
