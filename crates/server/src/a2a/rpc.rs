//! The JSON-RPC methods: each parses its params in the caller's generation, asks the
//! hub, and answers in that generation's shapes. Messages start turns exactly as
//! `POST /v1/threads/{id}/turns` does; tasks are read back from the store.

use std::time::Duration;

use agentplane_a2a::v0_3;
use agentplane_a2a::wire::{
    self, ListTasksRequest, ListTasksResponse, PartContent, SendMessageRequest, Task, codes,
    methods as m,
};
use agentplane_core::{Event, EventPayload, ThreadId, TurnId};
use agentplane_engine::hub::{CreateThread, HistoryTurn, StartedTurn};
use agentplane_engine::ports::TurnStatus;
use axum::response::Response;
use serde_json::Value;
use tokio::sync::mpsc;

use super::call::{Call, find, parse, task_json};
use super::protocol::{Failure, Generation};
use super::targets::Target;
use super::task::task_of;
use super::{push, stream};

/// How long a cancel waits for its turn to end before answering with the task as it
/// stands.
const CANCEL_WAIT: Duration = Duration::from_secs(10);
/// The most tasks one `ListTasks` page holds (the SDK's maximum).
const MAX_PAGE: usize = 100;
/// A page's size when the request names none (the SDK's default).
const DEFAULT_PAGE: usize = 50;

pub(crate) async fn dispatch(call: Call, params: Value) -> Response {
    let result = match call.method {
        m::SEND_MESSAGE => return send(call, params, false).await,
        m::SEND_STREAMING_MESSAGE => return send(call, params, true).await,
        m::SUBSCRIBE_TO_TASK => return stream::subscribe(call, params).await,
        m::GET_TASK => get_task(&call, params).await,
        m::CANCEL_TASK => cancel(&call, params).await,
        m::LIST_TASKS => list(&call, params).await,
        m::GET_EXTENDED_AGENT_CARD => Err(Failure::rpc(
            codes::EXTENDED_AGENT_CARD_NOT_CONFIGURED,
            "Authenticated Extended Card is not configured",
        )),
        // CreateTaskPushNotificationConfig and the other push configuration methods.
        _ => push::method(&call, params).await,
    };
    match result {
        Ok(value) => call.ok(value),
        Err(failure) => {
            call.log(&failure.outcome());
            call.fail(failure)
        }
    }
}

fn task_from(found: &HistoryTurn, history_length: Option<i64>) -> Task {
    task_of(
        &found.turn,
        found.events.as_deref().unwrap_or_default(),
        history_length,
    )
}

/// The turn input of a message: its text parts, and its data parts as JSON text.
fn input_of(request: &SendMessageRequest) -> Result<String, Failure> {
    let mut pieces = Vec::new();
    for part in &request.message.parts {
        match &part.content {
            PartContent::Text(text) => pieces.push(text.clone()),
            PartContent::Data(data) => pieces.push(data.to_string()),
            PartContent::Raw(_) | PartContent::Url(_) => {
                return Err(Failure::rpc(
                    codes::CONTENT_TYPE_NOT_SUPPORTED,
                    "Incompatible content types: this agent reads text and data parts, not files",
                ));
            }
        }
    }
    let input = pieces.join("\n");
    if input.trim().is_empty() {
        return Err(Failure::rpc(
            codes::INVALID_PARAMS,
            "the message has no text or data part",
        ));
    }
    Ok(input)
}

/// The output modes a client accepts must include one we give.
fn check_output_modes(request: &SendMessageRequest) -> Result<(), Failure> {
    let accepted = request
        .configuration
        .as_ref()
        .map(|c| c.accepted_output_modes.as_slice())
        .unwrap_or_default();
    let ours = [
        "text/plain",
        "application/json",
        "text/*",
        "application/*",
        "*/*",
    ];
    if accepted.is_empty() || accepted.iter().any(|mode| ours.contains(&mode.trim())) {
        return Ok(());
    }
    Err(Failure::rpc(
        codes::CONTENT_TYPE_NOT_SUPPORTED,
        "Incompatible content types: this agent answers text/plain and application/json",
    ))
}

/// The thread a message goes to: its task's, its context, or a new one of the caller's
/// on the published agent in `[a2a] workspace`.
async fn thread_for(call: &Call, request: &SendMessageRequest) -> Result<ThreadId, Failure> {
    let message = &request.message;
    let context = message.context_id.as_deref().filter(|c| !c.is_empty());
    if let Some(task) = message.task_id.as_deref().filter(|t| !t.is_empty()) {
        let found = find(call, task).await?;
        if let Some(context) = context
            && context != found.turn.thread_id.as_str()
        {
            return Err(Failure::rpc(
                codes::INVALID_PARAMS,
                format!("task {task} is not in context {context}"),
            ));
        }
        return Ok(found.turn.thread_id);
    }
    if let Some(context) = context {
        let unknown = || {
            Failure::rpc(
                codes::INVALID_PARAMS,
                format!("context {context} not found"),
            )
        };
        let thread = ThreadId::parse(context).map_err(|_| unknown())?;
        let record =
            call.state.hub.thread(&call.caller, &thread).await.map_err(
                |e| match Failure::from(e) {
                    Failure::Rpc(codes::TASK_NOT_FOUND, _) => unknown(),
                    other => other,
                },
            )?;
        if record.agent != call.agent {
            return Err(Failure::rpc(
                codes::INVALID_PARAMS,
                format!("context {context} belongs to another agent"),
            ));
        }
        return Ok(thread);
    }
    let thread = call
        .state
        .hub
        .create_thread(
            &call.caller,
            CreateThread {
                agent: call.agent.clone(),
                cwd: call.state.options.workspace.clone(),
                title: Some("A2A context".into()),
            },
        )
        .await
        .map_err(|e| match e {
            agentplane_engine::hub::HubError::NotFound(m) => Failure::Rpc(codes::INTERNAL_ERROR, m),
            other => Failure::from(other),
        })?;
    Ok(thread.id)
}

/// Keeps the turn's disconnect guard until the turn ends (the A2A client may go away
/// while it waits for input; its approvals and permissions are decided elsewhere, and
/// expire as always), forwards the turn's events to whoever still listens, and sends
/// the task's push notifications when it pauses and when it ends.
fn hold(call: &Call, started: StartedTurn, push: Option<Target>) -> mpsc::UnboundedReceiver<Event> {
    let (tx, rx) = mpsc::unbounded_channel();
    let guard = started.guard;
    let mut events = started.events;
    let turn = started.turn.clone();
    let task = turn.to_string();
    let pushes = call.state.pushes.clone();
    pushes.follow(&task, push);
    let webhooks = call.state.webhooks.clone();
    let hub = call.state.hub.clone();
    let caller = call.caller.clone();
    tokio::spawn(async move {
        let _guard = guard;
        while let Some(Ok(event)) = events.next().await {
            let (pause, end) = match event.payload {
                EventPayload::TurnCompleted { .. } => (false, true),
                EventPayload::ApprovalRequested { .. }
                | EventPayload::PermissionRequired { .. } => (true, false),
                _ => (false, false),
            };
            // Nobody listens any more: the turn still runs to its end.
            let _ = tx.send(event);
            if !(pause || end) {
                continue;
            }
            let targets = if end {
                pushes.finish(&task)
            } else {
                pushes.current(&task)
            };
            if let Some(sender) = &webhooks
                && !targets.is_empty()
                && let Ok(found) = hub.turn_with_events(&caller, &turn).await
            {
                push::notify(sender.clone(), targets, task_from(&found, None)).await;
            }
            if end {
                break;
            }
        }
        pushes.finish(&task);
    });
    rx
}

/// `SendMessage` / `message/send`, and the streaming variants.
async fn send(call: Call, params: Value, streaming: bool) -> Response {
    match start(&call, params).await {
        Ok((request, turn, thread, rx)) => {
            call.record(turn.as_str(), Some(thread.as_str()), "ok")
                .await;
            if streaming {
                return stream::follow_started(call, turn, rx).await;
            }
            let immediately = request
                .configuration
                .as_ref()
                .is_some_and(|c| c.return_immediately);
            let history_length = request
                .configuration
                .as_ref()
                .and_then(|c| c.history_length);
            match answer_send(&call, &turn, rx, immediately, history_length).await {
                Ok(task) => {
                    let value = match call.generation {
                        Generation::V1 => serde_json::json!({ "task": task }),
                        Generation::V0_3 => task_json(Generation::V0_3, &task),
                    };
                    call.ok(value)
                }
                Err(failure) => call.fail(failure),
            }
        }
        Err(failure) => {
            call.log(&failure.outcome());
            call.fail(failure)
        }
    }
}

type Started = (
    SendMessageRequest,
    TurnId,
    ThreadId,
    mpsc::UnboundedReceiver<Event>,
);

/// Validates the message and starts its turn.
async fn start(call: &Call, params: Value) -> Result<Started, Failure> {
    let request: SendMessageRequest = match call.generation {
        Generation::V1 => parse(params)?,
        Generation::V0_3 => v0_3::send_params_to_v1(&parse::<v0_3::MessageSendParams>(params)?),
    };
    let push = match request
        .configuration
        .as_ref()
        .and_then(|c| c.task_push_notification_config.as_ref())
    {
        Some(config) => {
            let sender = push::sender(call)?;
            Some(Target::of(config, call.generation, sender.as_ref())?)
        }
        None => None,
    };
    check_output_modes(&request)?;
    let input = input_of(&request)?;
    let thread = thread_for(call, &request).await?;
    let started = call
        .state
        .hub
        .start_turn(&call.caller, &thread, input)
        .await?;
    let turn = started.turn.clone();
    let rx = hold(call, started, push);
    Ok((request, turn, thread, rx))
}

/// The task a blocking send answers with: once the turn ends or waits for input (or at
/// once for `returnImmediately` / 0.3's `blocking: false`).
async fn answer_send(
    call: &Call,
    turn: &TurnId,
    mut rx: mpsc::UnboundedReceiver<Event>,
    immediately: bool,
    history_length: Option<i64>,
) -> Result<Task, Failure> {
    if !immediately {
        while let Some(event) = rx.recv().await {
            if matches!(
                event.payload,
                EventPayload::TurnCompleted { .. }
                    | EventPayload::ApprovalRequested { .. }
                    | EventPayload::PermissionRequired { .. }
            ) {
                break;
            }
        }
    }
    let found = find(call, turn.as_str()).await?;
    Ok(task_from(&found, history_length))
}

/// `GetTask` / `tasks/get`.
async fn get_task(call: &Call, params: Value) -> Result<Value, Failure> {
    let (id, history_length) = match call.generation {
        Generation::V1 => {
            let request: wire::GetTaskRequest = parse(params)?;
            (request.id, request.history_length)
        }
        Generation::V0_3 => {
            let request: v0_3::TaskQueryParams = parse(params)?;
            (request.id, request.history_length)
        }
    };
    let found = find(call, &id).await?;
    call.record(&id, Some(found.turn.thread_id.as_str()), "ok")
        .await;
    Ok(task_json(
        call.generation,
        &task_from(&found, history_length),
    ))
}

/// `CancelTask` / `tasks/cancel`: the turn is cancelled through the hub; the answer is
/// the task once its turn has ended (or as it stands after [`CANCEL_WAIT`]).
async fn cancel(call: &Call, params: Value) -> Result<Value, Failure> {
    let id = match call.generation {
        Generation::V1 => parse::<wire::CancelTaskRequest>(params)?.id,
        Generation::V0_3 => parse::<v0_3::TaskIdParams>(params)?.id,
    };
    let found = find(call, &id).await?;
    let context = found.turn.thread_id.to_string();
    let not_cancelable = || Failure::rpc(codes::TASK_NOT_CANCELABLE, "Task cannot be canceled");
    if found.turn.status != TurnStatus::Running {
        return Err(not_cancelable());
    }
    call.record(&id, Some(&context), "ok").await;
    match call
        .state
        .hub
        .cancel_turn(&call.caller, &found.turn.id)
        .await
    {
        Ok(()) => {}
        Err(agentplane_engine::hub::HubError::Conflict(_)) => return Err(not_cancelable()),
        Err(e) => return Err(e.into()),
    }
    let deadline = tokio::time::Instant::now() + CANCEL_WAIT;
    loop {
        let found = find(call, &id).await?;
        if found.turn.status != TurnStatus::Running || tokio::time::Instant::now() >= deadline {
            return Ok(task_json(call.generation, &task_from(&found, None)));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `ListTasks` (1.0 only): the tasks of one of the caller's contexts, newest first.
async fn list(call: &Call, params: Value) -> Result<Value, Failure> {
    let request: ListTasksRequest = parse(params)?;
    let Some(context) = request.context_id.as_deref().filter(|c| !c.is_empty()) else {
        return Err(Failure::rpc(
            codes::INVALID_PARAMS,
            "contextId is required: this server lists the tasks of one context",
        ));
    };
    let unknown = || {
        Failure::rpc(
            codes::INVALID_PARAMS,
            format!("context {context} not found"),
        )
    };
    let thread = ThreadId::parse(context).map_err(|_| unknown())?;
    let history = call
        .state
        .hub
        .history(&call.caller, &thread, true, false)
        .await
        .map_err(|e| match Failure::from(e) {
            Failure::Rpc(codes::TASK_NOT_FOUND, _) => unknown(),
            other => other,
        })?;
    let mut tasks: Vec<Task> = history
        .turns
        .iter()
        .rev()
        .map(|turn| task_from(turn, request.history_length))
        .filter(|task| request.status.is_none_or(|s| s == task.status.state))
        .collect();
    if request.include_artifacts != Some(true) {
        for task in &mut tasks {
            task.artifacts.clear();
        }
    }
    let total = tasks.len();
    let size = request
        .page_size
        .and_then(|s| usize::try_from(s).ok())
        .filter(|s| *s > 0)
        .unwrap_or(DEFAULT_PAGE)
        .min(MAX_PAGE);
    let offset = match request.page_token.as_deref().filter(|t| !t.is_empty()) {
        Some(token) => token
            .parse::<usize>()
            .map_err(|_| Failure::rpc(codes::INVALID_PARAMS, "pageToken is not valid"))?,
        None => 0,
    };
    let page: Vec<Task> = tasks.into_iter().skip(offset).take(size).collect();
    let next = offset + page.len();
    call.log("ok");
    let response = ListTasksResponse {
        next_page_token: if next < total {
            next.to_string()
        } else {
            String::new()
        },
        page_size: i64::try_from(size).unwrap_or(0),
        total_size: i64::try_from(total).unwrap_or(0),
        tasks: page,
    };
    serde_json::to_value(response).map_err(|e| Failure::rpc(codes::INTERNAL_ERROR, e.to_string()))
}
