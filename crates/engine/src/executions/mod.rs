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
mod worker;

use crate::identity::{Access, AsCaller};

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
    /// Where the queue and outcomes are reported (`ports::telemetry`).
    pub telemetry: crate::ports::Telemetry,
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
    telemetry: crate::ports::Telemetry,
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
            telemetry: ports.telemetry,
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

    /// The signed webhook sender (`[executions] webhook_secret`), for other announcers
    /// of finished work (A2A push notifications); `None` when webhooks are off.
    pub fn webhook_sender(&self) -> Option<Arc<dyn WebhookSender>> {
        self.webhooks.clone()
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
        caller: &(impl AsCaller + ?Sized),
        request: SubmitExecution,
    ) -> Result<Submitted, HubError> {
        let caller =
            self.hub
                .identity()
                .require(caller, Access::Operate, "submitting an execution")?;
        let client = caller.client();
        if self.stopping.is_cancelled() {
            return Err(HubError::ShuttingDown);
        }
        self.check(&request)?;
        if let Some(cwd) = &request.cwd {
            self.hub.check_cwd(&caller, cwd)?;
        }
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
    pub async fn get(
        &self,
        caller: &(impl AsCaller + ?Sized),
        id: &ExecutionId,
    ) -> Result<ExecutionRecord, HubError> {
        let caller = self
            .hub
            .identity()
            .require(caller, Access::Read, "reading an execution")?;
        let client = caller.client();
        match self.store.execution(id).await? {
            Some(record) if record.client_id == client => Ok(record),
            _ => Err(HubError::NotFound(format!("execution {id}"))),
        }
    }

    /// A client's executions, newest first.
    pub async fn list(
        &self,
        caller: &(impl AsCaller + ?Sized),
        query: ListExecutions,
    ) -> Result<Vec<ExecutionRecord>, HubError> {
        let caller = self
            .hub
            .identity()
            .require(caller, Access::Read, "listing executions")?;
        let client = caller.client();
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
        caller: &(impl AsCaller + ?Sized),
        id: &ExecutionId,
    ) -> Result<ExecutionRecord, HubError> {
        let caller =
            self.hub
                .identity()
                .require(caller, Access::Operate, "cancelling an execution")?;
        let client = caller.client();
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
        self.telemetry
            .execution_finished(&record.agent, record.status);
        if record.webhook_url.is_some() {
            self.delivery_due.notify_one();
        }
        self.report_queue().await;
    }

    async fn report_queue(&self) {
        if !self.telemetry.is_empty()
            && let Ok(queued) = self.store.queued_executions().await
        {
            self.telemetry.execution_queue(queued);
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
