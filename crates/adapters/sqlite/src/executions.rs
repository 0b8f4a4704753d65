//! Executions and their webhook deliveries: the SQL of the `ExecutionStore` port, for
//! both writing (run by the writer thread inside its transaction, through
//! `writer::job`) and reading.
//!
//! Life of an execution: `queued` → `running` (claimed once; one more attempt) →
//! `succeeded` | `failed` | `cancelled` | `interrupted`, or back to `queued` for a
//! retry. A trigger keeps a finished row as it is. Finishing enqueues the webhook
//! delivery in the same transaction. Nothing here decides *whether* to retry: the
//! engine does; this module only records it.

use std::time::Duration;

use agentplane_core::{DeliveryId, ErrorCode, ExecutionId, ThreadId, TurnId};
use agentplane_engine::ports::records::{self, stored_after, stored_now};
use agentplane_engine::ports::{
    CancelOutcome, DeliveryAttempt, DeliveryRecord, DeliveryStatus, ExecutionEnd, ExecutionFailure,
    ExecutionQuery, ExecutionRecord, ExecutionStatus, NewExecution, RestartMode, StoreError,
};
use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::rows::{self, backend};
use crate::writer;

/// Longest list returned at once.
const MAX_LIST: usize = 1_000;

const COLUMNS: &str = "id, client_id, agent, input, thread_id, turn_id, status, attempts, \
    max_attempts, output, error_code, error_message, webhook_url, idempotency_key, \
    fingerprint, cancel_requested, created_at, updated_at, started_at, finished_at, \
    next_attempt_at";

const DELIVERY_COLUMNS: &str = "id, execution_id, url, status, attempts, next_attempt_at, \
    last_status, last_error, created_at, delivered_at";

// ----- writes ---------------------------------------------------------------------------

/// Inserts `new`, or returns the client's execution with the same idempotency key.
pub(crate) fn create(
    c: &Connection,
    new: NewExecution,
) -> Result<(ExecutionRecord, bool), StoreError> {
    if let Some(key) = &new.idempotency_key
        && let Some(existing) = by_key(c, &new.client_id, key)?
    {
        return Ok((existing, false));
    }
    let now = stored_now();
    c.prepare_cached(
        "INSERT INTO executions (id, client_id, agent, input, thread_id, status, max_attempts,
             webhook_url, idempotency_key, fingerprint, created_at, updated_at, next_attempt_at)
         VALUES (?1, ?2, ?3, ?4, ?5, 'queued', ?6, ?7, ?8, ?9, ?10, ?10, ?10)",
    )
    .and_then(|mut insert| {
        insert.execute(params![
            new.id.as_str(),
            new.client_id,
            new.agent,
            new.input,
            new.thread_id.as_str(),
            new.max_attempts.max(1),
            new.webhook_url,
            new.idempotency_key,
            new.fingerprint,
            now,
        ])
    })
    .map_err(|e| match e.sqlite_extended_error_code() {
        Some(rows::PRIMARY_KEY_VIOLATION) => {
            StoreError::Conflict(format!("execution {} already exists", new.id))
        }
        _ => backend(e),
    })?;
    let record = require(c, &new.id)?;
    Ok((record, true))
}

/// Claims the oldest due queued execution whose thread runs no other execution.
/// The claim records this process's `replica` beside the worker (ADR 0019).
pub(crate) fn claim(
    c: &Connection,
    worker: &str,
    replica: &str,
) -> Result<Option<ExecutionRecord>, StoreError> {
    let now = stored_now();
    let id: Option<String> = c
        .prepare_cached(
            "UPDATE executions SET status = 'running', attempts = attempts + 1,
                 claimed_by = ?2, replica = ?3, updated_at = ?1, next_attempt_at = NULL,
                 started_at = COALESCE(started_at, ?1)
             WHERE id = (
                 SELECT e.id FROM executions e
                 WHERE e.status = 'queued' AND e.next_attempt_at <= ?1
                   AND NOT EXISTS (SELECT 1 FROM executions r
                                   WHERE r.thread_id = e.thread_id AND r.status = 'running')
                 ORDER BY e.next_attempt_at, e.rowid LIMIT 1)
             RETURNING id",
        )
        .and_then(|mut update| {
            update
                .query_row(params![now, worker, replica], |r| r.get(0))
                .optional()
        })
        .map_err(backend)?;
    match id {
        Some(id) => Ok(Some(require(c, &parse_id(&id)?)?)),
        None => Ok(None),
    }
}

pub(crate) fn set_turn(c: &Connection, id: &ExecutionId, turn: &TurnId) -> Result<(), StoreError> {
    let changed = c
        .prepare_cached(
            "UPDATE executions SET turn_id = ?2, updated_at = ?3
             WHERE id = ?1 AND status = 'running'",
        )
        .and_then(|mut u| u.execute(params![id.as_str(), turn.as_str(), stored_now()]))
        .map_err(backend)?;
    if changed == 0 {
        return Err(not_running(c, id));
    }
    Ok(())
}

/// Ends a running execution and enqueues its webhook delivery.
pub(crate) fn finish(
    c: &Connection,
    id: &ExecutionId,
    end: ExecutionEnd,
) -> Result<ExecutionRecord, StoreError> {
    let output = end.stored_output(id)?;
    let now = stored_now();
    let changed = c
        .prepare_cached(
            "UPDATE executions SET status = ?2, turn_id = COALESCE(?3, turn_id), output = ?4,
                 error_code = ?5, error_message = ?6, updated_at = ?7, finished_at = ?7,
                 next_attempt_at = NULL, claimed_by = NULL
             WHERE id = ?1 AND status = 'running'",
        )
        .and_then(|mut u| {
            u.execute(params![
                id.as_str(),
                end.status.as_str(),
                end.turn_id.as_ref().map(TurnId::as_str),
                output,
                end.error.as_ref().map(|e| e.code.as_str()),
                end.error.as_ref().map(|e| e.message.as_str()),
                now,
            ])
        })
        .map_err(backend)?;
    if changed == 0 {
        return Err(not_running(c, id));
    }
    enqueue_delivery(c, id, &end.delivery, &now)
}

/// Inserts the pending delivery of a just-finished execution that has a webhook URL.
fn enqueue_delivery(
    c: &Connection,
    id: &ExecutionId,
    delivery: &DeliveryId,
    now: &str,
) -> Result<ExecutionRecord, StoreError> {
    let record = require(c, id)?;
    if let Some(url) = &record.webhook_url {
        c.prepare_cached(
            "INSERT INTO webhook_deliveries (id, execution_id, url, status, created_at,
                 next_attempt_at)
             VALUES (?1, ?2, ?3, 'pending', ?4, ?4)",
        )
        .and_then(|mut i| i.execute(params![delivery.as_str(), id.as_str(), url, now]))
        .map_err(backend)?;
    }
    Ok(record)
}

pub(crate) fn retry(
    c: &Connection,
    id: &ExecutionId,
    delay: Duration,
    error: ExecutionFailure,
) -> Result<ExecutionRecord, StoreError> {
    let changed = c
        .prepare_cached(
            "UPDATE executions SET status = 'queued', error_code = ?2, error_message = ?3,
                 updated_at = ?4, next_attempt_at = ?5, claimed_by = NULL
             WHERE id = ?1 AND status = 'running'",
        )
        .and_then(|mut u| {
            u.execute(params![
                id.as_str(),
                error.code.as_str(),
                error.message,
                stored_now(),
                stored_after(delay),
            ])
        })
        .map_err(backend)?;
    if changed == 0 {
        return Err(not_running(c, id));
    }
    require(c, id)
}

pub(crate) fn release(c: &Connection, id: &ExecutionId) -> Result<(), StoreError> {
    let now = stored_now();
    let changed = c
        .prepare_cached(
            "UPDATE executions SET status = 'queued', attempts = MAX(attempts - 1, 0),
                 updated_at = ?2, next_attempt_at = ?2, claimed_by = NULL
             WHERE id = ?1 AND status = 'running'",
        )
        .and_then(|mut u| u.execute(params![id.as_str(), now]))
        .map_err(backend)?;
    if changed == 0 {
        return Err(not_running(c, id));
    }
    Ok(())
}

pub(crate) fn cancel(
    c: &Connection,
    id: &ExecutionId,
    delivery: &DeliveryId,
) -> Result<CancelOutcome, StoreError> {
    let record = require(c, id)?;
    let now = stored_now();
    match record.status {
        ExecutionStatus::Queued => {
            c.prepare_cached(
                "UPDATE executions SET status = 'cancelled', cancel_requested = 1,
                     updated_at = ?2, finished_at = ?2, next_attempt_at = NULL
                 WHERE id = ?1 AND status = 'queued'",
            )
            .and_then(|mut u| u.execute(params![id.as_str(), now]))
            .map_err(backend)?;
            Ok(CancelOutcome::Cancelled(enqueue_delivery(
                c, id, delivery, &now,
            )?))
        }
        ExecutionStatus::Running => {
            c.prepare_cached(
                "UPDATE executions SET cancel_requested = 1, updated_at = ?2
                 WHERE id = ?1 AND status = 'running'",
            )
            .and_then(|mut u| u.execute(params![id.as_str(), now]))
            .map_err(backend)?;
            Ok(CancelOutcome::Requested(require(c, id)?))
        }
        done => Err(StoreError::Conflict(format!(
            "execution {id} has already finished ({})",
            done.as_str()
        ))),
    }
}

pub(crate) fn recover(
    c: &Connection,
    id: &ExecutionId,
    mode: RestartMode,
    delivery: &DeliveryId,
) -> Result<ExecutionRecord, StoreError> {
    let record = require(c, id)?;
    if record.status != ExecutionStatus::Running {
        return Err(not_running(c, id));
    }
    let retry = mode == RestartMode::Retry
        && record.attempts < record.max_attempts
        && !record.cancel_requested;
    let now = stored_now();
    if retry {
        c.prepare_cached(
            "UPDATE executions SET status = 'queued', error_code = 'INTERNAL',
                 error_message = 'agentplane stopped while this execution ran; retried',
                 updated_at = ?2, next_attempt_at = ?2, claimed_by = NULL
             WHERE id = ?1",
        )
        .and_then(|mut u| u.execute(params![id.as_str(), now]))
        .map_err(backend)?;
        return require(c, id);
    }
    let (status, message) = if record.cancel_requested {
        (
            ExecutionStatus::Cancelled,
            "agentplane stopped while this execution was being cancelled",
        )
    } else {
        (
            ExecutionStatus::Interrupted,
            "agentplane stopped while this execution ran",
        )
    };
    c.prepare_cached(
        "UPDATE executions SET status = ?2, error_code = 'INTERNAL', error_message = ?3,
             updated_at = ?4, finished_at = ?4, next_attempt_at = NULL, claimed_by = NULL
         WHERE id = ?1",
    )
    .and_then(|mut u| u.execute(params![id.as_str(), status.as_str(), message, now]))
    .map_err(backend)?;
    enqueue_delivery(c, id, delivery, &now)
}

pub(crate) fn claim_delivery(
    c: &Connection,
    lease: Duration,
) -> Result<Option<DeliveryRecord>, StoreError> {
    let now = stored_now();
    let id: Option<String> = c
        .prepare_cached(
            "UPDATE webhook_deliveries SET attempts = attempts + 1, next_attempt_at = ?2
             WHERE id = (SELECT id FROM webhook_deliveries
                         WHERE status = 'pending' AND next_attempt_at <= ?1
                         ORDER BY next_attempt_at, rowid LIMIT 1)
             RETURNING id",
        )
        .and_then(|mut u| {
            u.query_row(params![now, stored_after(lease)], |r| r.get(0))
                .optional()
        })
        .map_err(backend)?;
    match id {
        Some(id) => delivery(c, &parse_delivery_id(&id)?),
        None => Ok(None),
    }
}

pub(crate) fn record_delivery(
    c: &Connection,
    id: &DeliveryId,
    attempt: DeliveryAttempt,
) -> Result<DeliveryRecord, StoreError> {
    let (status, next, delivered_at) = attempt.outcome();
    let changed = c
        .prepare_cached(
            "UPDATE webhook_deliveries SET status = ?2, next_attempt_at = ?3, last_status = ?4,
                 last_error = ?5, delivered_at = ?6
             WHERE id = ?1 AND status = 'pending'",
        )
        .and_then(|mut u| {
            u.execute(params![
                id.as_str(),
                status.as_str(),
                next,
                attempt.status,
                attempt.error,
                delivered_at,
            ])
        })
        .map_err(backend)?;
    if changed == 0 {
        return Err(records::delivery_not_pending(id, delivery(c, id)?));
    }
    delivery(c, id)?.ok_or_else(|| StoreError::NotFound(format!("delivery {id}")))
}

// ----- reads ----------------------------------------------------------------------------

pub(crate) fn get(c: &Connection, id: &ExecutionId) -> Result<Option<ExecutionRecord>, StoreError> {
    c.prepare_cached(&format!("SELECT {COLUMNS} FROM executions WHERE id = ?1"))
        .and_then(|mut s| s.query_row([id.as_str()], raw).optional())
        .map_err(backend)?
        .map(decode)
        .transpose()
}

pub(crate) fn by_key(
    c: &Connection,
    client: &str,
    key: &str,
) -> Result<Option<ExecutionRecord>, StoreError> {
    c.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM executions WHERE client_id = ?1 AND idempotency_key = ?2"
    ))
    .and_then(|mut s| s.query_row(params![client, key], raw).optional())
    .map_err(backend)?
    .map(decode)
    .transpose()
}

pub(crate) fn list(
    c: &Connection,
    query: &ExecutionQuery,
) -> Result<Vec<ExecutionRecord>, StoreError> {
    let limit = i64::try_from(query.limit.min(MAX_LIST)).unwrap_or(MAX_LIST as i64);
    let mut select = c
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM executions
             WHERE (?1 IS NULL OR client_id = ?1) AND (?2 IS NULL OR status = ?2)
               AND (?3 IS NULL OR agent = ?3) AND (?4 IS NULL OR thread_id = ?4)
             ORDER BY rowid DESC LIMIT ?5"
        ))
        .map_err(backend)?;
    let rows = select
        .query_map(
            params![
                query.client,
                query.status.map(ExecutionStatus::as_str),
                query.agent,
                query.thread.as_ref().map(ThreadId::as_str),
                limit,
            ],
            raw,
        )
        .map_err(backend)?;
    rows.map(|row| row.map_err(backend).and_then(decode))
        .collect()
}

/// The executions `replica` claimed that are still running, oldest first.
pub(crate) fn running_of(
    c: &Connection,
    replica: &str,
) -> Result<Vec<ExecutionRecord>, StoreError> {
    let mut select = c
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM executions WHERE status = 'running' AND replica = ?1
             ORDER BY rowid"
        ))
        .map_err(backend)?;
    let rows = select.query_map([replica], raw).map_err(backend)?;
    rows.map(|row| row.map_err(backend).and_then(decode))
        .collect()
}

pub(crate) fn queued(c: &Connection) -> Result<u64, StoreError> {
    let n: i64 = c
        .prepare_cached("SELECT COUNT(*) FROM executions WHERE status = 'queued'")
        .and_then(|mut s| s.query_row([], |r| r.get(0)))
        .map_err(backend)?;
    Ok(u64::try_from(n).unwrap_or(0))
}

pub(crate) fn delivery(
    c: &Connection,
    id: &DeliveryId,
) -> Result<Option<DeliveryRecord>, StoreError> {
    c.prepare_cached(&format!(
        "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE id = ?1"
    ))
    .and_then(|mut s| s.query_row([id.as_str()], raw_delivery).optional())
    .map_err(backend)?
    .map(decode_delivery)
    .transpose()
}

pub(crate) fn deliveries_of(
    c: &Connection,
    execution: &ExecutionId,
) -> Result<Vec<DeliveryRecord>, StoreError> {
    let mut select = c
        .prepare_cached(&format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE execution_id = ?1
             ORDER BY rowid"
        ))
        .map_err(backend)?;
    let rows = select
        .query_map([execution.as_str()], raw_delivery)
        .map_err(backend)?;
    rows.map(|row| row.map_err(backend).and_then(decode_delivery))
        .collect()
}

// ----- rows -----------------------------------------------------------------------------

fn require(c: &Connection, id: &ExecutionId) -> Result<ExecutionRecord, StoreError> {
    get(c, id)?.ok_or_else(|| StoreError::NotFound(format!("execution {id}")))
}

/// `NotFound` or `Conflict` for an execution a write expected to be running.
fn not_running(c: &Connection, id: &ExecutionId) -> StoreError {
    records::execution_not_running(id, get(c, id))
}

fn parse_id(id: &str) -> Result<ExecutionId, StoreError> {
    ExecutionId::parse(id).map_err(StoreError::Backend)
}

fn parse_delivery_id(id: &str) -> Result<DeliveryId, StoreError> {
    DeliveryId::parse(id).map_err(StoreError::Backend)
}

/// A row as stored, decoded outside rusqlite's closure so errors can be ours.
struct RawExecution {
    id: String,
    client_id: String,
    agent: String,
    input: String,
    thread_id: String,
    turn_id: Option<String>,
    status: String,
    attempts: i64,
    max_attempts: i64,
    output: Option<String>,
    error_code: Option<String>,
    error_message: Option<String>,
    webhook_url: Option<String>,
    idempotency_key: Option<String>,
    fingerprint: String,
    cancel_requested: bool,
    created_at: String,
    updated_at: String,
    started_at: Option<String>,
    finished_at: Option<String>,
    next_attempt_at: Option<String>,
}

fn raw(row: &Row<'_>) -> rusqlite::Result<RawExecution> {
    Ok(RawExecution {
        id: row.get(0)?,
        client_id: row.get(1)?,
        agent: row.get(2)?,
        input: row.get(3)?,
        thread_id: row.get(4)?,
        turn_id: row.get(5)?,
        status: row.get(6)?,
        attempts: row.get(7)?,
        max_attempts: row.get(8)?,
        output: row.get(9)?,
        error_code: row.get(10)?,
        error_message: row.get(11)?,
        webhook_url: row.get(12)?,
        idempotency_key: row.get(13)?,
        fingerprint: row.get(14)?,
        cancel_requested: row.get(15)?,
        created_at: row.get(16)?,
        updated_at: row.get(17)?,
        started_at: row.get(18)?,
        finished_at: row.get(19)?,
        next_attempt_at: row.get(20)?,
    })
}

fn decode(raw: RawExecution) -> Result<ExecutionRecord, StoreError> {
    let id = parse_id(&raw.id)?;
    let corrupt = |what: &str| StoreError::Backend(format!("execution {id}: bad {what}"));
    let status = ExecutionStatus::parse(&raw.status).ok_or_else(|| corrupt("status"))?;
    let output = raw
        .output
        .as_deref()
        .map(serde_json::from_str)
        .transpose()
        .map_err(|_| corrupt("output"))?;
    let error = match (raw.error_code, raw.error_message) {
        (Some(code), message) => Some(ExecutionFailure {
            code: serde_json::from_value::<ErrorCode>(serde_json::Value::String(code))
                .map_err(|_| corrupt("error code"))?,
            message: message.unwrap_or_default(),
        }),
        (None, _) => None,
    };
    Ok(ExecutionRecord {
        thread_id: ThreadId::parse(&raw.thread_id).map_err(|_| corrupt("thread id"))?,
        turn_id: raw
            .turn_id
            .as_deref()
            .map(TurnId::parse)
            .transpose()
            .map_err(|_| corrupt("turn id"))?,
        status,
        attempts: u32::try_from(raw.attempts).map_err(|_| corrupt("attempts"))?,
        max_attempts: u32::try_from(raw.max_attempts).map_err(|_| corrupt("max_attempts"))?,
        output,
        error,
        id,
        client_id: raw.client_id,
        agent: raw.agent,
        input: raw.input,
        webhook_url: raw.webhook_url,
        idempotency_key: raw.idempotency_key,
        fingerprint: raw.fingerprint,
        cancel_requested: raw.cancel_requested,
        created_at: raw.created_at,
        updated_at: raw.updated_at,
        started_at: raw.started_at,
        finished_at: raw.finished_at,
        next_attempt_at: raw.next_attempt_at,
    })
}

type RawDelivery = (
    String,
    String,
    String,
    String,
    i64,
    Option<String>,
    Option<i64>,
    Option<String>,
    String,
    Option<String>,
);

fn raw_delivery(row: &Row<'_>) -> rusqlite::Result<RawDelivery> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
        row.get(6)?,
        row.get(7)?,
        row.get(8)?,
        row.get(9)?,
    ))
}

fn decode_delivery(raw: RawDelivery) -> Result<DeliveryRecord, StoreError> {
    let (id, execution, url, status, attempts, next, last_status, last_error, created, done) = raw;
    let id = parse_delivery_id(&id)?;
    let corrupt = |what: &str| StoreError::Backend(format!("delivery {id}: bad {what}"));
    let status = match status.as_str() {
        "pending" => DeliveryStatus::Pending,
        "delivered" => DeliveryStatus::Delivered,
        "failed" => DeliveryStatus::Failed,
        _ => return Err(corrupt("status")),
    };
    Ok(DeliveryRecord {
        execution_id: parse_id(&execution)?,
        url,
        status,
        attempts: u32::try_from(attempts).map_err(|_| corrupt("attempts"))?,
        next_attempt_at: next,
        last_status: last_status
            .map(u16::try_from)
            .transpose()
            .map_err(|_| corrupt("last status"))?,
        last_error,
        created_at: created,
        delivered_at: done,
        id,
    })
}

// ----- the port -------------------------------------------------------------------------

#[async_trait::async_trait]
impl agentplane_engine::ports::ExecutionStore for crate::SqliteStore {
    async fn create_execution(
        &self,
        execution: NewExecution,
    ) -> Result<(ExecutionRecord, bool), StoreError> {
        self.write(|reply| writer::job(move |c| create(c, execution), reply))
            .await
    }

    async fn execution(&self, id: &ExecutionId) -> Result<Option<ExecutionRecord>, StoreError> {
        let id = id.clone();
        self.read(move |c| get(c, &id)).await
    }

    async fn execution_by_key(
        &self,
        client: &str,
        key: &str,
    ) -> Result<Option<ExecutionRecord>, StoreError> {
        let (client, key) = (client.to_owned(), key.to_owned());
        self.read(move |c| by_key(c, &client, &key)).await
    }

    async fn list_executions(
        &self,
        query: &ExecutionQuery,
    ) -> Result<Vec<ExecutionRecord>, StoreError> {
        let query = query.clone();
        self.read(move |c| list(c, &query)).await
    }

    async fn claim_execution(&self, worker: &str) -> Result<Option<ExecutionRecord>, StoreError> {
        let worker = worker.to_owned();
        let replica = self.replica.as_str().to_owned();
        self.write(|reply| writer::job(move |c| claim(c, &worker, &replica), reply))
            .await
    }

    async fn set_execution_turn(&self, id: &ExecutionId, turn: &TurnId) -> Result<(), StoreError> {
        let (id, turn) = (id.clone(), turn.clone());
        self.write(|reply| writer::job(move |c| set_turn(c, &id, &turn), reply))
            .await
    }

    async fn finish_execution(
        &self,
        id: &ExecutionId,
        end: ExecutionEnd,
    ) -> Result<ExecutionRecord, StoreError> {
        let id = id.clone();
        self.write(|reply| writer::job(move |c| finish(c, &id, end), reply))
            .await
    }

    async fn retry_execution(
        &self,
        id: &ExecutionId,
        delay: Duration,
        error: ExecutionFailure,
    ) -> Result<ExecutionRecord, StoreError> {
        let id = id.clone();
        self.write(|reply| writer::job(move |c| retry(c, &id, delay, error), reply))
            .await
    }

    async fn release_execution(&self, id: &ExecutionId) -> Result<(), StoreError> {
        let id = id.clone();
        self.write(|reply| writer::job(move |c| release(c, &id), reply))
            .await
    }

    async fn cancel_execution(
        &self,
        id: &ExecutionId,
        delivery: DeliveryId,
    ) -> Result<CancelOutcome, StoreError> {
        let id = id.clone();
        self.write(|reply| writer::job(move |c| cancel(c, &id, &delivery), reply))
            .await
    }

    async fn recover_execution(
        &self,
        id: &ExecutionId,
        mode: RestartMode,
        delivery: DeliveryId,
    ) -> Result<ExecutionRecord, StoreError> {
        let id = id.clone();
        self.write(|reply| writer::job(move |c| recover(c, &id, mode, &delivery), reply))
            .await
    }

    async fn queued_executions(&self) -> Result<u64, StoreError> {
        self.read(queued).await
    }

    async fn claim_delivery(&self, lease: Duration) -> Result<Option<DeliveryRecord>, StoreError> {
        self.write(|reply| writer::job(move |c| claim_delivery(c, lease), reply))
            .await
    }

    async fn record_delivery(
        &self,
        id: &DeliveryId,
        attempt: DeliveryAttempt,
    ) -> Result<DeliveryRecord, StoreError> {
        let id = id.clone();
        self.write(|reply| writer::job(move |c| record_delivery(c, &id, attempt), reply))
            .await
    }

    async fn deliveries(&self, execution: &ExecutionId) -> Result<Vec<DeliveryRecord>, StoreError> {
        let execution = execution.clone();
        self.read(move |c| deliveries_of(c, &execution)).await
    }
}
