//! The workers: each claims queued executions, runs the execution's turn, judges how it
//! ended (retrying only upstream failures, with backoff), and records the end once; and
//! the recovery of executions whose worker died.

use super::*;
use tracing::Instrument;

impl Executions {
    /// One worker: claims due executions one at a time until shutdown.
    pub(super) async fn work(self: Arc<Self>) {
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
    pub(super) async fn run(self: &Arc<Self>, execution: ExecutionRecord) {
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
            let span = crate::ports::telemetry::execution_span(
                &id.to_string(),
                &execution.agent,
                execution.attempts,
            );
            Some(self.attempt(&execution, token).instrument(span).await)
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
    pub(super) async fn attempt(
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
    pub(super) async fn judge(
        self: &Arc<Self>,
        execution: &ExecutionRecord,
        result: Result<TurnOutcome, HubError>,
    ) -> Next {
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(HubError::ShuttingDown) => return Next::Release,
            Err(e) => {
                // A cancel its client was told was accepted is honoured even when the
                // attempt then failed on the way out (a store connection cut while the
                // cancelled turn was ending): the execution stopped, as asked.
                if self.cancel_requested(&execution.id).await {
                    tracing::warn!(execution = %execution.id, error = %e,
                        "a cancelled execution's attempt failed while stopping; recorded as cancelled");
                    return Next::Finish(Ended::cancelled(None));
                }
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
    pub(super) async fn judge_end(
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

    pub(super) async fn fail_or_retry(
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

    pub(super) async fn cancel_requested(&self, id: &ExecutionId) -> bool {
        matches!(self.store.execution(id).await, Ok(Some(r)) if r.cancel_requested)
    }

    pub(super) async fn apply(
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
    pub(super) fn watch(self: &Arc<Self>, execution: ExecutionRecord, turn: TurnId) {
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
    pub(super) async fn turn_error(&self, turn: &TurnId) -> Option<ExecutionFailure> {
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
}

/// The start of `ModelError::Upstream`'s message, followed by the HTTP status.
const UPSTREAM_ANSWERED: &str = "the model server answered ";

/// Failures of the model server that another attempt may not meet: unreachable, a
/// 5xx, an unreadable answer, a timeout, a 429. A 4xx answer (other than 429) is the
/// request's fault and would fail again. A turn's error keeps only its code and
/// message, so the status is read back from `ModelError::Upstream`'s message (a test
/// below pins that format).
pub(super) fn is_upstream(failure: &ExecutionFailure) -> bool {
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
pub(super) enum Next {
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
pub(super) struct Ended {
    pub(super) status: ExecutionStatus,
    pub(super) turn: Option<TurnId>,
    pub(super) output: Option<serde_json::Value>,
    pub(super) error: Option<ExecutionFailure>,
}

impl Ended {
    pub(super) fn cancelled(turn: Option<TurnId>) -> Self {
        Self {
            status: ExecutionStatus::Cancelled,
            turn,
            output: None,
            error: None,
        }
    }

    pub(super) fn failed(turn: Option<TurnId>, error: ExecutionFailure) -> Self {
        Self {
            status: ExecutionStatus::Failed,
            turn,
            output: None,
            error: Some(error),
        }
    }
}

/// Sends the turn's id once, at its first event.
pub(super) struct TurnBegan {
    pub(super) began: Mutex<Option<oneshot::Sender<TurnId>>>,
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
