//! Asynchronous executions: a turn triggered now and run later by a bounded pool of
//! workers from a durable queue, polled, cancelled, retried on upstream failures and
//! announced by a signed webhook.
//!
//! A separate service beside the hub, composed by the runtime: every attempt is an
//! ordinary turn of the execution's thread run through [`Hub::run_turn_here`], so
//! tenancy, policies, budgets, rate limits and events are exactly those of interactive
//! turns. What lives here: validation of a submission, idempotency, the worker loop,
//! the retry decision, cancellation, start-up recovery and the webhook delivery loop.
//! What must not: SQL (the `ExecutionStore` port), HTTP (the `WebhookSender` port),
//! creating directories (the `Workspaces` port), or any rule of the turn itself.

mod backoff;
mod webhooks;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentplane_core::{
    DeliveryId, ErrorCode, Event, EventPayload, ExecutionId, StopReason, ThreadId, TurnId,
};
use tokio::sync::{Notify, Semaphore, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::hub::{CreateThread, Hub, HubError, MAX_INPUT_CHARS};
use crate::ports::{
    CancelOutcome, ExecutionEnd, ExecutionFailure, ExecutionQuery, ExecutionRecord,
    ExecutionStatus, ExecutionStore, NewExecution, RestartMode, TurnStatus,
};
use crate::turn::{TurnObserver, TurnOutcome};

pub use backoff::Backoff;
pub use webhooks::{
    EXECUTION_FINISHED, WebhookOutcome, WebhookRequest, WebhookSender, execution_json, webhook_body,
};

/// Longest idempotency key, in characters.
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 200;
/// Longest webhook URL, in bytes.
pub const MAX_WEBHOOK_URL_LEN: usize = 2048;
/// Most executions one list returns.
pub const MAX_LIST_LIMIT: usize = 1_000;

/// Creates the working directory of an execution that names no thread and no `cwd`.
/// Implemented by the composition root (the engine touches no file).
pub trait Workspaces: Send + Sync {
    /// A new, empty, absolute directory for this execution.
    fn create(&self, execution: &ExecutionId) -> Result<String, String>;
}

/// Counts what executions do, for metrics. Implemented by the metrics adapter.
pub trait ExecutionTap: Send + Sync {
    /// The number of queued executions, after any change.
    fn queue_depth(&self, queued: u64);
    /// An execution reached a terminal status.
    fn finished(&self, agent: &str, status: ExecutionStatus);
}

/// Settings of the execution service (`[executions]`).
#[derive(Debug, Clone)]
pub struct ExecutionConfig {
    /// Executions run at once.
    pub workers: usize,
    /// Turns one execution may take, retries included.
    pub max_attempts: u32,
    /// Delays between attempts.
    pub backoff: Backoff,
    /// What start-up does with executions a stopped process left running.
    pub on_restart: RestartMode,
    /// How often idle workers look for due work (new work wakes them at once).
    pub poll_interval: Duration,
    /// POSTs one webhook delivery may take.
    pub webhook_max_attempts: u32,
    /// Delays between webhook attempts.
    pub webhook_backoff: Backoff,
    /// How long a claimed delivery is held before another attempt may take it (a
    /// process that died mid-POST is retried after this).
    pub webhook_lease: Duration,
    /// Webhook POSTs in flight at once.
    pub webhook_concurrency: usize,
}

impl Default for ExecutionConfig {
    fn default() -> Self {
        Self {
            workers: 2,
            max_attempts: 3,
            backoff: Backoff {
                base: Duration::from_secs(2),
                max: Duration::from_secs(300),
            },
            on_restart: RestartMode::Retry,
            poll_interval: Duration::from_millis(500),
            webhook_max_attempts: 8,
            webhook_backoff: Backoff {
                base: Duration::from_secs(5),
                max: Duration::from_secs(3_600),
            },
            webhook_lease: Duration::from_secs(60),
            webhook_concurrency: 4,
        }
    }
}

/// What the service runs on.
pub struct ExecutionPorts {
    pub store: Arc<dyn ExecutionStore>,
    /// `None`: no webhook secret is configured, and executions with a webhook URL are
    /// refused (webhooks are always signed).
    pub webhooks: Option<Arc<dyn WebhookSender>>,
    pub workspaces: Arc<dyn Workspaces>,
    pub tap: Option<Arc<dyn ExecutionTap>>,
}

/// An execution to submit.
#[derive(Debug, Clone, Default)]
pub struct SubmitExecution {
    pub agent: String,
    pub input: String,
    /// Run as turns of this thread (of the same client and agent).
    pub thread: Option<ThreadId>,
    /// Without a thread: the working directory of the thread created for it (absolute,
    /// existing); without either, a fresh directory under the data directory.
    pub cwd: Option<String>,
    pub webhook_url: Option<String>,
    pub idempotency_key: Option<String>,
}

/// A submitted execution and whether this call created it (`false`: an idempotent
/// replay of an earlier one).
#[derive(Debug, Clone)]
pub struct Submitted {
    pub execution: ExecutionRecord,
    pub created: bool,
}

/// Which of a client's executions to list.
#[derive(Debug, Clone, Default)]
pub struct ListExecutions {
    pub status: Option<ExecutionStatus>,
    pub agent: Option<String>,
    pub thread: Option<ThreadId>,
    /// At most this many (1 to [`MAX_LIST_LIMIT`]), newest first.
    pub limit: usize,
}

/// The execution service. Create one per process with [`Executions::new`], then
/// [`Executions::start`] it.
pub struct Executions {
    hub: Arc<Hub>,
    store: Arc<dyn ExecutionStore>,
    webhooks: Option<Arc<dyn WebhookSender>>,
    workspaces: Arc<dyn Workspaces>,
    tap: Option<Arc<dyn ExecutionTap>>,
    config: ExecutionConfig,
    /// Who claims executions: this process.
    worker_id: String,
    /// Wakes idle workers when an execution is queued.
    queued: Notify,
    /// Wakes the delivery loop when a delivery is enqueued.
    delivery_due: Notify,
    /// Cancels the turn of a running execution of this process.
    running: Mutex<HashMap<ExecutionId, CancellationToken>>,
    /// Cancelled at shutdown: nothing new is claimed or submitted.
    stopping: CancellationToken,
    tasks: TaskTracker,
}

impl Executions {
    /// A service over the hub and the ports; nothing runs until [`Self::start`].
    pub fn new(hub: Arc<Hub>, ports: ExecutionPorts, config: ExecutionConfig) -> Arc<Self> {
        Arc::new(Self {
            hub,
            store: ports.store,
            webhooks: ports.webhooks,
            workspaces: ports.workspaces,
            tap: ports.tap,
            config,
            worker_id: format!(
                "worker-{}",
                ExecutionId::new().as_str().trim_start_matches("exec_")
            ),
            queued: Notify::new(),
            delivery_due: Notify::new(),
            running: Mutex::new(HashMap::new()),
            stopping: CancellationToken::new(),
            tasks: TaskTracker::new(),
        })
    }

    /// The settings.
    pub fn config(&self) -> &ExecutionConfig {
        &self.config
    }

    /// Recovers what a previous process left running (per `on_restart`), then starts
    /// the workers and the webhook delivery loop.
    pub async fn start(self: &Arc<Self>) -> Result<(), HubError> {
        let running = self
            .store
            .list_executions(&ExecutionQuery {
                status: Some(ExecutionStatus::Running),
                limit: usize::MAX,
                ..ExecutionQuery::default()
            })
            .await?;
        self.recover(running).await?;
        self.start_workers().await;
        Ok(())
    }

    /// Starts the workers and the webhook delivery loop without recovering anything:
    /// on a database replicas share, what is left running belongs to live replicas
    /// until one is found dead ([`Self::recover`] then takes its executions).
    pub async fn start_workers(self: &Arc<Self>) {
        for _ in 0..self.config.workers.max(1) {
            let service = self.clone();
            self.tasks.spawn(async move { service.work().await });
        }
        if self.webhooks.is_some() {
            let service = self.clone();
            self.tasks
                .spawn(async move { service.deliver_webhooks().await });
        }
        self.report_queue().await;
    }

    /// Stops claiming work; lets running executions finish within `grace`, then cancels
    /// their turns. Executions cut short stay `running` in the store and are recovered
    /// by the next start (retried or interrupted, per `on_restart`).
    pub async fn shutdown(&self, grace: Duration) {
        self.stopping.cancel();
        self.tasks.close();
        if tokio::time::timeout(grace, self.tasks.wait())
            .await
            .is_err()
        {
            let tokens: Vec<_> = self
                .running
                .lock()
                .map(|r| r.values().cloned().collect())
                .unwrap_or_default();
            for token in tokens {
                token.cancel();
            }
            let _ = tokio::time::timeout(Duration::from_secs(10), self.tasks.wait()).await;
        }
    }

    // ----- the API -------------------------------------------------------------------

    /// Queues an execution, or returns the client's earlier one with the same
    /// idempotency key; the same key with a different request is `Conflict`.
    pub async fn submit(
        &self,
        client: &str,
        request: SubmitExecution,
    ) -> Result<Submitted, HubError> {
        if self.stopping.is_cancelled() {
            return Err(HubError::ShuttingDown);
        }
        self.check(&request)?;
        let fingerprint = serde_json::json!({
            "thread": request.thread,
            "cwd": request.cwd,
            "webhook_url": request.webhook_url,
        })
        .to_string();
        if let Some(key) = &request.idempotency_key
            && let Some(earlier) = self.store.execution_by_key(client, key).await?
        {
            return replay(earlier, &request, &fingerprint);
        }
        let id = ExecutionId::new();
        let (thread, created_thread) = match &request.thread {
            Some(thread) => {
                let record = self.hub.thread(client, thread).await?;
                if record.agent != request.agent {
                    return Err(HubError::InvalidArgument(format!(
                        "thread {thread} belongs to agent `{}`, not `{}`",
                        record.agent, request.agent
                    )));
                }
                (thread.clone(), false)
            }
            None => {
                let cwd = match &request.cwd {
                    Some(cwd) => cwd.clone(),
                    None => self.workspaces.create(&id).map_err(|e| {
                        HubError::Store(crate::ports::StoreError::Backend(format!(
                            "the execution's working directory could not be created: {e}"
                        )))
                    })?,
                };
                let thread = self
                    .hub
                    .create_thread(
                        client,
                        CreateThread {
                            agent: request.agent.clone(),
                            cwd,
                            title: Some(format!("execution {id}")),
                        },
                    )
                    .await?;
                (thread.id, true)
            }
        };
        let (execution, created) = self
            .store
            .create_execution(NewExecution {
                id,
                client_id: client.to_owned(),
                agent: request.agent.clone(),
                input: request.input.clone(),
                thread_id: thread.clone(),
                webhook_url: request.webhook_url.clone(),
                idempotency_key: request.idempotency_key.clone(),
                fingerprint: fingerprint.clone(),
                max_attempts: self.config.max_attempts.max(1),
            })
            .await?;
        if !created {
            // A concurrent submission with the same key won; the thread made for this
            // one has no turn and is not needed.
            if created_thread && let Err(e) = self.hub.delete_thread(client, &thread).await {
                tracing::debug!(%thread, error = %e, "an unused execution thread stays");
            }
            return replay(execution, &request, &fingerprint);
        }
        self.queued.notify_one();
        self.report_queue().await;
        Ok(Submitted {
            execution,
            created: true,
        })
    }

    /// An execution of this client; another client's is `NotFound`.
    pub async fn get(&self, client: &str, id: &ExecutionId) -> Result<ExecutionRecord, HubError> {
        match self.store.execution(id).await? {
            Some(record) if record.client_id == client => Ok(record),
            _ => Err(HubError::NotFound(format!("execution {id}"))),
        }
    }

    /// A client's executions, newest first.
    pub async fn list(
        &self,
        client: &str,
        query: ListExecutions,
    ) -> Result<Vec<ExecutionRecord>, HubError> {
        if query.limit == 0 || query.limit > MAX_LIST_LIMIT {
            return Err(HubError::InvalidArgument(format!(
                "limit must be between 1 and {MAX_LIST_LIMIT}"
            )));
        }
        Ok(self
            .store
            .list_executions(&ExecutionQuery {
                client: Some(client.to_owned()),
                status: query.status,
                agent: query.agent,
                thread: query.thread,
                limit: query.limit,
            })
            .await?)
    }

    /// Cancels an execution: a queued one at once, a running one by cancelling its
    /// turn (its status becomes `cancelled` when the turn has ended). `Conflict` for a
    /// finished one.
    pub async fn cancel(
        &self,
        client: &str,
        id: &ExecutionId,
    ) -> Result<ExecutionRecord, HubError> {
        self.get(client, id).await?;
        match self.store.cancel_execution(id, DeliveryId::new()).await? {
            CancelOutcome::Cancelled(record) => {
                self.finished(&record).await;
                Ok(record)
            }
            CancelOutcome::Requested(record) => {
                let token = self.running.lock().ok().and_then(|r| r.get(id).cloned());
                match token {
                    Some(token) => token.cancel(),
                    // Not run by a worker here: its turn waits for an approval.
                    None => {
                        if let Some(turn) = &record.turn_id
                            && let Err(e) = self.hub.cancel_turn(client, turn).await
                        {
                            tracing::debug!(%turn, error = %e, "cancelling a waiting turn");
                        }
                    }
                }
                Ok(record)
            }
        }
    }

    // ----- checks --------------------------------------------------------------------

    fn check(&self, request: &SubmitExecution) -> Result<(), HubError> {
        let invalid = |m: String| Err(HubError::InvalidArgument(m));
        self.hub.agent(&request.agent)?;
        if request.input.trim().is_empty() {
            return invalid("input must not be empty".to_owned());
        }
        if request.input.chars().count() > MAX_INPUT_CHARS {
            return invalid(format!("input is longer than {MAX_INPUT_CHARS} characters"));
        }
        if request.thread.is_some() && request.cwd.is_some() {
            return invalid("give either thread_id or cwd, not both".to_owned());
        }
        if let Some(key) = &request.idempotency_key
            && (key.is_empty()
                || key.chars().count() > MAX_IDEMPOTENCY_KEY_CHARS
                || key.chars().any(char::is_control))
        {
            return invalid(format!(
                "idempotency_key must be 1 to {MAX_IDEMPOTENCY_KEY_CHARS} characters \
                 without control characters"
            ));
        }
        if let Some(url) = &request.webhook_url {
            let Some(sender) = &self.webhooks else {
                return invalid(
                    "webhooks are off: set `[executions] webhook_secret` to the name of a \
                     secret to sign them with"
                        .to_owned(),
                );
            };
            if url.len() > MAX_WEBHOOK_URL_LEN {
                return invalid(format!(
                    "webhook_url is longer than {MAX_WEBHOOK_URL_LEN} bytes"
                ));
            }
            sender
                .check(url)
                .map_err(|e| HubError::InvalidArgument(format!("webhook_url: {e}")))?;
        }
        Ok(())
    }

    // ----- workers -------------------------------------------------------------------

    /// One worker: claims due executions one at a time until shutdown.
    async fn work(self: Arc<Self>) {
        loop {
            if self.stopping.is_cancelled() {
                return;
            }
            match self.store.claim_execution(&self.worker_id).await {
                Ok(Some(execution)) => {
                    self.report_queue().await;
                    self.run(execution).await;
                    continue;
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "could not claim an execution"),
            }
            tokio::select! {
                () = self.stopping.cancelled() => return,
                () = self.queued.notified() => {}
                () = tokio::time::sleep(self.config.poll_interval) => {}
            }
        }
    }

    /// Runs one attempt of a claimed execution and records what follows from it.
    async fn run(self: &Arc<Self>, execution: ExecutionRecord) {
        let id = execution.id.clone();
        let token = CancellationToken::new();
        if let Ok(mut running) = self.running.lock() {
            running.insert(id.clone(), token.clone());
        }
        // Registered first, read second: a cancel that came before is seen here, one
        // that comes after finds the token.
        let cancelled_before = match self.store.execution(&id).await {
            Ok(Some(record)) => record.cancel_requested,
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(execution = %id, error = %e, "could not read an execution");
                false
            }
        };
        let result = if cancelled_before {
            None
        } else {
            Some(self.attempt(&execution, token).await)
        };
        if let Ok(mut running) = self.running.lock() {
            running.remove(&id);
        }
        let next = match result {
            None => Next::Finish(Ended::cancelled(None)),
            Some(result) => self.judge(&execution, result).await,
        };
        if let Err(e) = self.apply(&execution, next).await {
            tracing::error!(execution = %id, error = %e, "could not record an execution's end");
        }
    }

    /// Runs the turn, recording its id as soon as it begins.
    async fn attempt(
        &self,
        execution: &ExecutionRecord,
        cancel: CancellationToken,
    ) -> Result<TurnOutcome, HubError> {
        let (began, turn) = oneshot::channel();
        let observer = TurnBegan {
            began: Mutex::new(Some(began)),
        };
        let store = self.store.clone();
        let id = execution.id.clone();
        let stop = cancel.clone();
        let recorder = tokio::spawn(async move {
            let Ok(turn) = turn.await else {
                return;
            };
            if let Err(e) = store.set_execution_turn(&id, &turn).await {
                tracing::warn!(execution = %id, error = %e, "could not record the turn");
                return;
            }
            // Recorded first, read second: a cancel on another replica that found no
            // turn to stop (it read the record before this write) flagged the record
            // before this read, and is honoured here (ADR 0027).
            if matches!(store.execution(&id).await, Ok(Some(r)) if r.cancel_requested) {
                stop.cancel();
            }
        });
        let outcome = self
            .hub
            .run_turn_here(
                &execution.client_id,
                &execution.thread_id,
                execution.input.clone(),
                &observer,
                cancel,
            )
            .await;
        drop(observer);
        let _ = recorder.await;
        outcome
    }

    /// What follows from one attempt.
    async fn judge(
        self: &Arc<Self>,
        execution: &ExecutionRecord,
        result: Result<TurnOutcome, HubError>,
    ) -> Next {
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(HubError::ShuttingDown) => return Next::Release,
            Err(e) => {
                let failure = ExecutionFailure {
                    code: e.code(),
                    message: e.to_string(),
                };
                // Only the model being unreachable is retried: refusals (a policy, a
                // budget, a rate limit of ours, a bad thread) would refuse again.
                let upstream = matches!(e, HubError::Model(_)) && is_upstream(&failure);
                return self.fail_or_retry(execution, None, failure, upstream).await;
            }
        };
        if outcome.suspended.is_some() {
            return Next::Watch(outcome.turn);
        }
        self.judge_end(
            execution,
            outcome.turn,
            outcome.stop_reason,
            outcome.error.map(|e| ExecutionFailure {
                code: e.code,
                message: e.message,
            }),
            true,
        )
        .await
    }

    /// What follows from a turn that ended so. `may_retry`: false once a person took
    /// part (an approval), whose decision a new turn would ask for again.
    async fn judge_end(
        &self,
        execution: &ExecutionRecord,
        turn: TurnId,
        stop: StopReason,
        error: Option<ExecutionFailure>,
        may_retry: bool,
    ) -> Next {
        match stop {
            StopReason::Finished | StopReason::TextAnswer => {
                // The stored result: it passed the redacting store, the in-memory one
                // did not.
                let output = match self.hub.deps().store.turn(&turn).await {
                    Ok(Some(record)) => record.result,
                    _ => None,
                };
                Next::Finish(Ended {
                    status: ExecutionStatus::Succeeded,
                    turn: Some(turn),
                    output,
                    error: None,
                })
            }
            StopReason::Cancelled => {
                let requested = self.cancel_requested(&execution.id).await;
                if !requested && self.stopping.is_cancelled() {
                    // Cut short by shutdown, not by its client: the next start
                    // recovers it per `on_restart`.
                    Next::Leave
                } else {
                    Next::Finish(Ended::cancelled(Some(turn)))
                }
            }
            StopReason::Interrupted => Next::Leave,
            StopReason::StepLimit => Next::Finish(Ended::failed(
                Some(turn),
                ExecutionFailure {
                    code: ErrorCode::Internal,
                    message: "the turn used its step limit without a result".to_owned(),
                },
            )),
            StopReason::Error => {
                let failure = error.unwrap_or(ExecutionFailure {
                    code: ErrorCode::Internal,
                    message: "the turn failed".to_owned(),
                });
                let upstream = may_retry && is_upstream(&failure);
                self.fail_or_retry(execution, Some(turn), failure, upstream)
                    .await
            }
        }
    }

    async fn fail_or_retry(
        &self,
        execution: &ExecutionRecord,
        turn: Option<TurnId>,
        mut failure: ExecutionFailure,
        retryable: bool,
    ) -> Next {
        // Kept in the store and shown to clients and webhooks: no secret in it, as in
        // the turn's own `error` event.
        failure.message = agentplane_core::secret::redact(&failure.message).into_owned();
        if retryable
            && execution.attempts < execution.max_attempts
            && !self.cancel_requested(&execution.id).await
        {
            Next::Retry(self.config.backoff.delay(execution.attempts), failure)
        } else {
            Next::Finish(Ended::failed(turn, failure))
        }
    }

    async fn cancel_requested(&self, id: &ExecutionId) -> bool {
        matches!(self.store.execution(id).await, Ok(Some(r)) if r.cancel_requested)
    }

    async fn apply(
        self: &Arc<Self>,
        execution: &ExecutionRecord,
        next: Next,
    ) -> Result<(), HubError> {
        let id = &execution.id;
        match next {
            Next::Finish(ended) => {
                let record = self
                    .store
                    .finish_execution(
                        id,
                        ExecutionEnd {
                            status: ended.status,
                            turn_id: ended.turn,
                            output: ended.output,
                            error: ended.error,
                            delivery: DeliveryId::new(),
                        },
                    )
                    .await?;
                self.finished(&record).await;
            }
            Next::Retry(delay, failure) => {
                tracing::info!(execution = %id, attempt = execution.attempts, code = %failure.code,
                    delay_ms = delay.as_millis() as u64, "execution attempt failed; retrying");
                self.store.retry_execution(id, delay, failure).await?;
                self.report_queue().await;
                // A sleeping worker polls; wake one at the due time for short delays.
                let service = self.clone();
                self.tasks.spawn(async move {
                    tokio::select! {
                        () = service.stopping.cancelled() => {}
                        () = tokio::time::sleep(delay) => service.queued.notify_one(),
                    }
                });
            }
            Next::Release => {
                self.store.release_execution(id).await?;
            }
            Next::Leave => {}
            Next::Watch(turn) => self.watch(execution.clone(), turn),
        }
        Ok(())
    }

    /// Follows a turn suspended on an approval (no worker held) and records the
    /// execution's end when the turn ends.
    fn watch(self: &Arc<Self>, execution: ExecutionRecord, turn: TurnId) {
        let service = self.clone();
        self.tasks.spawn(async move {
            loop {
                tokio::select! {
                    () = service.stopping.cancelled() => return,
                    () = tokio::time::sleep(service.config.poll_interval) => {}
                }
                let record = match service.hub.deps().store.turn(&turn).await {
                    Ok(Some(record)) => record,
                    Ok(None) => return,
                    Err(e) => {
                        tracing::warn!(%turn, error = %e, "could not read a waiting turn");
                        continue;
                    }
                };
                let TurnStatus::Ended(stop) = record.status else {
                    continue;
                };
                let error = service.turn_error(&turn).await;
                let next = service
                    .judge_end(&execution, turn.clone(), stop, error, false)
                    .await;
                if let Err(e) = service.apply(&execution, next).await {
                    tracing::error!(execution = %execution.id, error = %e,
                        "could not record an execution's end");
                }
                return;
            }
        });
    }

    /// The `error` event of an ended turn.
    async fn turn_error(&self, turn: &TurnId) -> Option<ExecutionFailure> {
        let events = self.hub.deps().store.turn_events(turn).await.ok()?;
        events.into_iter().rev().find_map(|e| match e.payload {
            EventPayload::Error { code, message } => Some(ExecutionFailure { code, message }),
            _ => None,
        })
    }

    /// Executions a stopped process left `running` (all of them at a start on a
    /// database of one process; a dead replica's on a shared one, after its turns were
    /// interrupted): each is retried or interrupted per `on_restart`, except one whose
    /// turn waits for an approval (still running in the store after the turns'
    /// recovery), which is followed again from here, and one whose turn had ended by
    /// itself before the process stopped (between the turn's end and the execution's,
    /// two writes), which ends from its turn as it would have: a finished turn is never
    /// run again nor reported interrupted. Returns how many were recovered.
    pub async fn recover(
        self: &Arc<Self>,
        running: Vec<ExecutionRecord>,
    ) -> Result<usize, HubError> {
        let mut recovered = 0usize;
        for execution in running {
            if let Some(turn) = &execution.turn_id
                && let Some(record) = self.hub.deps().store.turn(turn).await?
            {
                match record.status {
                    TurnStatus::Running => {
                        self.watch(execution.clone(), turn.clone());
                        continue;
                    }
                    TurnStatus::Ended(
                        stop @ (StopReason::Finished
                        | StopReason::TextAnswer
                        | StopReason::StepLimit
                        | StopReason::Error),
                    ) => {
                        let error = self.turn_error(turn).await;
                        let next = self
                            .judge_end(&execution, turn.clone(), stop, error, true)
                            .await;
                        self.apply(&execution, next).await?;
                        continue;
                    }
                    // Interrupted with the process, or cancelled by a graceful stop:
                    // `on_restart` decides.
                    TurnStatus::Ended(_) => {}
                }
            }
            let record = self
                .store
                .recover_execution(&execution.id, self.config.on_restart, DeliveryId::new())
                .await?;
            recovered += 1;
            if record.status.is_terminal() {
                self.finished(&record).await;
            }
        }
        if recovered > 0 {
            // Retried ones are queued again: idle workers need not wait for their poll.
            self.queued.notify_waiters();
            tracing::warn!(
                count = recovered,
                mode = ?self.config.on_restart,
                "executions left running by a stopped process were recovered"
            );
        }
        Ok(recovered)
    }

    // ----- webhooks ------------------------------------------------------------------

    /// Sends due deliveries, a bounded number at once, until shutdown.
    async fn deliver_webhooks(self: Arc<Self>) {
        let Some(sender) = self.webhooks.clone() else {
            return;
        };
        let slots = Arc::new(Semaphore::new(self.config.webhook_concurrency.max(1)));
        loop {
            if self.stopping.is_cancelled() {
                return;
            }
            let Ok(slot) = slots.clone().acquire_owned().await else {
                return;
            };
            match self.store.claim_delivery(self.config.webhook_lease).await {
                Ok(Some(delivery)) => {
                    let service = self.clone();
                    let sender = sender.clone();
                    self.tasks.spawn(async move {
                        let id = delivery.id.clone();
                        if let Err(e) = webhooks::deliver(
                            service.store.as_ref(),
                            sender.as_ref(),
                            delivery,
                            service.config.webhook_max_attempts.max(1),
                            service.config.webhook_backoff,
                        )
                        .await
                        {
                            tracing::warn!(delivery = %id, error = %e, "could not record a delivery");
                        }
                        drop(slot);
                        service.delivery_due.notify_one();
                    });
                    continue;
                }
                Ok(None) => drop(slot),
                Err(e) => {
                    drop(slot);
                    tracing::warn!(error = %e, "could not claim a webhook delivery");
                }
            }
            tokio::select! {
                () = self.stopping.cancelled() => return,
                () = self.delivery_due.notified() => {}
                () = tokio::time::sleep(self.config.poll_interval) => {}
            }
        }
    }

    // ----- reporting -----------------------------------------------------------------

    async fn finished(&self, record: &ExecutionRecord) {
        if let Some(tap) = &self.tap {
            tap.finished(&record.agent, record.status);
        }
        if record.webhook_url.is_some() {
            self.delivery_due.notify_one();
        }
        self.report_queue().await;
    }

    async fn report_queue(&self) {
        if let Some(tap) = &self.tap
            && let Ok(queued) = self.store.queued_executions().await
        {
            tap.queue_depth(queued);
        }
    }
}

/// An idempotent replay: the earlier execution if the request is the same.
fn replay(
    earlier: ExecutionRecord,
    request: &SubmitExecution,
    fingerprint: &str,
) -> Result<Submitted, HubError> {
    if earlier.agent != request.agent
        || earlier.input != request.input
        || earlier.fingerprint != fingerprint
    {
        return Err(HubError::Conflict(format!(
            "idempotency key {:?} was used for a different request (execution {})",
            request.idempotency_key.as_deref().unwrap_or_default(),
            earlier.id
        )));
    }
    Ok(Submitted {
        execution: earlier,
        created: false,
    })
}

/// The start of `ModelError::Upstream`'s message, followed by the HTTP status.
const UPSTREAM_ANSWERED: &str = "the model server answered ";

/// Failures of the model server that another attempt may not meet: unreachable, a
/// 5xx, an unreadable answer, a timeout, a 429. A 4xx answer (other than 429) is the
/// request's fault and would fail again. A turn's error keeps only its code and
/// message, so the status is read back from `ModelError::Upstream`'s message (a test
/// below pins that format).
fn is_upstream(failure: &ExecutionFailure) -> bool {
    match failure.code {
        ErrorCode::Timeout | ErrorCode::RateLimited => true,
        ErrorCode::UpstreamUnavailable => {
            let status = failure
                .message
                .strip_prefix(UPSTREAM_ANSWERED)
                .and_then(|rest| rest.get(..3))
                .and_then(|digits| digits.parse::<u16>().ok());
            !matches!(status, Some(400..=499))
        }
        _ => false,
    }
}

/// What to do with an execution after an attempt.
enum Next {
    Finish(Ended),
    Retry(Duration, ExecutionFailure),
    /// Give it back to the queue uncounted (not begun: shutting down).
    Release,
    /// Leave it `running` for the next start's recovery.
    Leave,
    /// Its turn waits for an approval: follow it without holding a worker.
    Watch(TurnId),
}

/// A terminal end.
struct Ended {
    status: ExecutionStatus,
    turn: Option<TurnId>,
    output: Option<serde_json::Value>,
    error: Option<ExecutionFailure>,
}

impl Ended {
    fn cancelled(turn: Option<TurnId>) -> Self {
        Self {
            status: ExecutionStatus::Cancelled,
            turn,
            output: None,
            error: None,
        }
    }

    fn failed(turn: Option<TurnId>, error: ExecutionFailure) -> Self {
        Self {
            status: ExecutionStatus::Failed,
            turn,
            output: None,
            error: Some(error),
        }
    }
}

/// Sends the turn's id once, at its first event.
struct TurnBegan {
    began: Mutex<Option<oneshot::Sender<TurnId>>>,
}

impl TurnObserver for TurnBegan {
    fn on_event(&self, event: &Event) {
        if let Some(began) = self.began.lock().ok().and_then(|mut b| b.take()) {
            let _ = began.send(event.turn_id.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::ModelError;

    fn failure(e: ModelError) -> ExecutionFailure {
        ExecutionFailure {
            code: e.code(),
            message: e.to_string(),
        }
    }

    #[test]
    fn only_upstream_failures_are_retried() {
        let upstream = |status| ModelError::Upstream {
            status,
            body: "x".into(),
        };
        assert!(is_upstream(&failure(upstream(500))));
        assert!(is_upstream(&failure(upstream(503))));
        assert!(!is_upstream(&failure(upstream(400))));
        assert!(!is_upstream(&failure(upstream(401))));
        assert!(is_upstream(&failure(ModelError::Timeout { seconds: 1 })));
        assert!(is_upstream(&failure(ModelError::RateLimited {
            body: "x".into()
        })));
        assert!(is_upstream(&failure(ModelError::Protocol("x".into()))));
        assert!(is_upstream(&failure(ModelError::Unreachable {
            url: "u".into(),
            detail: "d".into()
        })));
        assert!(!is_upstream(&failure(ModelError::NoToolSupport {
            model: "m".into()
        })));
        for code in [
            ErrorCode::InvalidArgument,
            ErrorCode::BudgetExceeded,
            ErrorCode::Forbidden,
            ErrorCode::Internal,
            ErrorCode::Conflict,
        ] {
            assert!(!is_upstream(&ExecutionFailure {
                code,
                message: String::new()
            }));
        }
    }
}
