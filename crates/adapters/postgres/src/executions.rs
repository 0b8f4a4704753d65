//! Executions and their webhook deliveries: the SQL of the `ExecutionStore` port, the
//! same life as on SQLite (`queued` → `running` → terminal, or back to `queued`; a
//! trigger keeps a finished row as it is; finishing enqueues the delivery in the same
//! transaction).
//!
//! Claims across replicas: the oldest due row is taken with `FOR UPDATE SKIP LOCKED`,
//! so concurrent claimers never wait for nor take the same row, and the partial unique
//! index `executions_one_running_per_thread` refuses a second running execution of a
//! thread that two claimers picked at once (the loser tries again and skips it).

use std::time::Duration;

use agentplane_core::{DeliveryId, ErrorCode, ExecutionId, ReplicaId, ThreadId, TurnId};
use agentplane_engine::ports::records::{self, stored_after, stored_now};
use agentplane_engine::ports::{
    CancelOutcome, DeliveryAttempt, DeliveryRecord, DeliveryStatus, ExecutionEnd, ExecutionFailure,
    ExecutionQuery, ExecutionRecord, ExecutionStatus, ExecutionStore, NewExecution, RestartMode,
    StoreError,
};
use async_trait::async_trait;
use tokio_postgres::Row;

use crate::PostgresStore;
use crate::db::Db;
use crate::nul::{enc, enc_opt};
use crate::rows::{opt_text, pg, text, unique_violation};
use crate::store::{in_tx, on_conn};

/// Longest list returned at once.
const MAX_LIST: usize = 1_000;

/// How often a claim tries again after losing a thread to a concurrent claimer.
const CLAIM_TRIES: usize = 8;

const COLUMNS: &str = "id, client_id, agent, input, thread_id, turn_id, status, attempts, \
    max_attempts, output, error_code, error_message, webhook_url, idempotency_key, \
    fingerprint, cancel_requested, created_at, updated_at, started_at, finished_at, \
    next_attempt_at";

const DELIVERY_COLUMNS: &str = "id, execution_id, url, status, attempts, next_attempt_at, \
    last_status, last_error, created_at, delivered_at";

// ----- writes ---------------------------------------------------------------------------

/// Inserts `new`, or returns the client's execution with the same idempotency key
/// (also when another replica inserted it a moment ago).
async fn create(db: Db<'_>, new: NewExecution) -> Result<(ExecutionRecord, bool), StoreError> {
    if let Some(key) = &new.idempotency_key
        && let Some(existing) = by_key(db, &new.client_id, key).await?
    {
        return Ok((existing, false));
    }
    let now = stored_now();
    let max_attempts = i64::from(new.max_attempts.max(1));
    let inserted = db
        .query_opt(
            "INSERT INTO executions (id, client_id, agent, input, thread_id, status,
                 max_attempts, webhook_url, idempotency_key, fingerprint, created_at,
                 updated_at, next_attempt_at)
             VALUES ($1, $2, $3, $4, $5, 'queued', $6, $7, $8, $9, $10, $10, $10)
             ON CONFLICT (client_id, idempotency_key) WHERE idempotency_key IS NOT NULL
             DO NOTHING
             RETURNING id",
            &[
                &new.id.as_str(),
                &enc(&new.client_id),
                &enc(&new.agent),
                &enc(&new.input),
                &new.thread_id.as_str(),
                &max_attempts,
                &enc_opt(new.webhook_url.as_deref()),
                &enc_opt(new.idempotency_key.as_deref()),
                &enc(&new.fingerprint),
                &now,
            ],
        )
        .await;
    match inserted {
        Ok(Some(_)) => Ok((require(db, &new.id).await?, true)),
        Ok(None) => {
            let key = new.idempotency_key.as_deref().unwrap_or_default();
            let existing = by_key(db, &new.client_id, key).await?.ok_or_else(|| {
                StoreError::Backend(format!("execution with key {key:?} vanished"))
            })?;
            Ok((existing, false))
        }
        Err(e) if unique_violation(&e).is_some() => Err(StoreError::Conflict(format!(
            "execution {} already exists",
            new.id
        ))),
        Err(e) => Err(pg(e)),
    }
}

/// What one claim attempt found.
enum Claim {
    Claimed(Box<ExecutionRecord>),
    Nothing,
    /// Another claimer took a running execution of the same thread meanwhile.
    Lost,
}

/// Claims the oldest due queued execution whose thread runs no other execution.
async fn claim(db: Db<'_>, worker: &str, replica: &ReplicaId) -> Result<Claim, StoreError> {
    let now = stored_now();
    let claimed = db
        .query_opt(
            "UPDATE executions SET status = 'running', attempts = attempts + 1,
                 claimed_by = $2, replica = $3, updated_at = $1, next_attempt_at = NULL,
                 started_at = COALESCE(started_at, $1)
             WHERE id = (
                 SELECT e.id FROM executions e
                 WHERE e.status = 'queued' AND e.next_attempt_at <= $1
                   AND NOT EXISTS (SELECT 1 FROM executions r
                                   WHERE r.thread_id = e.thread_id AND r.status = 'running')
                 ORDER BY e.next_attempt_at, e.pos LIMIT 1
                 FOR UPDATE SKIP LOCKED)
             RETURNING id",
            &[&now, &enc(worker), &replica.as_str()],
        )
        .await;
    match claimed {
        Ok(Some(row)) => {
            let id = parse_id(&text(&row, 0)?)?;
            Ok(Claim::Claimed(Box::new(require(db, &id).await?)))
        }
        Ok(None) => Ok(Claim::Nothing),
        Err(e) if unique_violation(&e) == Some("executions_one_running_per_thread") => {
            Ok(Claim::Lost)
        }
        Err(e) => Err(pg(e)),
    }
}

async fn set_turn(db: Db<'_>, id: &ExecutionId, turn: &TurnId) -> Result<(), StoreError> {
    let changed = db
        .execute(
            "UPDATE executions SET turn_id = $2, updated_at = $3
             WHERE id = $1 AND status = 'running'",
            &[&id.as_str(), &turn.as_str(), &stored_now()],
        )
        .await
        .map_err(pg)?;
    if changed == 0 {
        return Err(not_running(db, id).await);
    }
    Ok(())
}

/// Ends a running execution and enqueues its webhook delivery.
async fn finish(
    db: Db<'_>,
    id: &ExecutionId,
    end: ExecutionEnd,
) -> Result<ExecutionRecord, StoreError> {
    let output = end.stored_output(id)?;
    let now = stored_now();
    let changed = db
        .execute(
            "UPDATE executions SET status = $2, turn_id = COALESCE($3, turn_id), output = $4,
                 error_code = $5, error_message = $6, updated_at = $7, finished_at = $7,
                 next_attempt_at = NULL, claimed_by = NULL
             WHERE id = $1 AND status = 'running'",
            &[
                &id.as_str(),
                &end.status.as_str(),
                &end.turn_id.as_ref().map(TurnId::as_str),
                &output,
                &end.error.as_ref().map(|e| e.code.as_str()),
                &enc_opt(end.error.as_ref().map(|e| e.message.as_str())),
                &now,
            ],
        )
        .await
        .map_err(pg)?;
    if changed == 0 {
        return Err(not_running(db, id).await);
    }
    enqueue_delivery(db, id, &end.delivery, &now).await
}

/// Inserts the pending delivery of a just-finished execution that has a webhook URL.
async fn enqueue_delivery(
    db: Db<'_>,
    id: &ExecutionId,
    delivery: &DeliveryId,
    now: &str,
) -> Result<ExecutionRecord, StoreError> {
    let record = require(db, id).await?;
    if let Some(url) = &record.webhook_url {
        db.execute(
            "INSERT INTO webhook_deliveries (id, execution_id, url, status, created_at,
                 next_attempt_at)
             VALUES ($1, $2, $3, 'pending', $4, $4)",
            &[&delivery.as_str(), &id.as_str(), url, &now],
        )
        .await
        .map_err(pg)?;
    }
    Ok(record)
}

async fn retry(
    db: Db<'_>,
    id: &ExecutionId,
    delay: Duration,
    error: ExecutionFailure,
) -> Result<ExecutionRecord, StoreError> {
    let changed = db
        .execute(
            "UPDATE executions SET status = 'queued', error_code = $2, error_message = $3,
                 updated_at = $4, next_attempt_at = $5, claimed_by = NULL
             WHERE id = $1 AND status = 'running'",
            &[
                &id.as_str(),
                &error.code.as_str(),
                &enc(&error.message),
                &stored_now(),
                &stored_after(delay),
            ],
        )
        .await
        .map_err(pg)?;
    if changed == 0 {
        return Err(not_running(db, id).await);
    }
    require(db, id).await
}

async fn release(db: Db<'_>, id: &ExecutionId) -> Result<(), StoreError> {
    let changed = db
        .execute(
            "UPDATE executions SET status = 'queued', attempts = GREATEST(attempts - 1, 0),
                 updated_at = $2, next_attempt_at = $2, claimed_by = NULL
             WHERE id = $1 AND status = 'running'",
            &[&id.as_str(), &stored_now()],
        )
        .await
        .map_err(pg)?;
    if changed == 0 {
        return Err(not_running(db, id).await);
    }
    Ok(())
}

async fn cancel(
    db: Db<'_>,
    id: &ExecutionId,
    delivery: &DeliveryId,
) -> Result<CancelOutcome, StoreError> {
    let record = lock(db, id).await?;
    let now = stored_now();
    match record.status {
        ExecutionStatus::Queued => {
            db.execute(
                "UPDATE executions SET status = 'cancelled', cancel_requested = TRUE,
                     updated_at = $2, finished_at = $2, next_attempt_at = NULL
                 WHERE id = $1 AND status = 'queued'",
                &[&id.as_str(), &now],
            )
            .await
            .map_err(pg)?;
            Ok(CancelOutcome::Cancelled(
                enqueue_delivery(db, id, delivery, &now).await?,
            ))
        }
        ExecutionStatus::Running => {
            db.execute(
                "UPDATE executions SET cancel_requested = TRUE, updated_at = $2
                 WHERE id = $1 AND status = 'running'",
                &[&id.as_str(), &now],
            )
            .await
            .map_err(pg)?;
            Ok(CancelOutcome::Requested(require(db, id).await?))
        }
        done => Err(StoreError::Conflict(format!(
            "execution {id} has already finished ({})",
            done.as_str()
        ))),
    }
}

async fn recover(
    db: Db<'_>,
    id: &ExecutionId,
    mode: RestartMode,
    delivery: &DeliveryId,
) -> Result<ExecutionRecord, StoreError> {
    let record = lock(db, id).await?;
    if record.status != ExecutionStatus::Running {
        return Err(not_running(db, id).await);
    }
    let retry = mode == RestartMode::Retry
        && record.attempts < record.max_attempts
        && !record.cancel_requested;
    let now = stored_now();
    if retry {
        db.execute(
            "UPDATE executions SET status = 'queued', error_code = 'INTERNAL',
                 error_message = 'agentplane stopped while this execution ran; retried',
                 updated_at = $2, next_attempt_at = $2, claimed_by = NULL
             WHERE id = $1",
            &[&id.as_str(), &now],
        )
        .await
        .map_err(pg)?;
        return require(db, id).await;
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
    db.execute(
        "UPDATE executions SET status = $2, error_code = 'INTERNAL', error_message = $3,
             updated_at = $4, finished_at = $4, next_attempt_at = NULL, claimed_by = NULL
         WHERE id = $1",
        &[&id.as_str(), &status.as_str(), &message, &now],
    )
    .await
    .map_err(pg)?;
    enqueue_delivery(db, id, delivery, &now).await
}

async fn claim_delivery(db: Db<'_>, lease: Duration) -> Result<Option<DeliveryRecord>, StoreError> {
    let now = stored_now();
    let claimed = db
        .query_opt(
            "UPDATE webhook_deliveries SET attempts = attempts + 1, next_attempt_at = $2
             WHERE id = (SELECT id FROM webhook_deliveries
                         WHERE status = 'pending' AND next_attempt_at <= $1
                         ORDER BY next_attempt_at, pos LIMIT 1
                         FOR UPDATE SKIP LOCKED)
             RETURNING id",
            &[&now, &stored_after(lease)],
        )
        .await
        .map_err(pg)?;
    match claimed {
        Some(row) => delivery(db, &parse_delivery_id(&text(&row, 0)?)?).await,
        None => Ok(None),
    }
}

async fn record_delivery(
    db: Db<'_>,
    id: &DeliveryId,
    attempt: DeliveryAttempt,
) -> Result<DeliveryRecord, StoreError> {
    let (status, next, delivered_at) = attempt.outcome();
    let changed = db
        .execute(
            "UPDATE webhook_deliveries SET status = $2, next_attempt_at = $3, last_status = $4,
                 last_error = $5, delivered_at = $6
             WHERE id = $1 AND status = 'pending'",
            &[
                &id.as_str(),
                &status.as_str(),
                &next,
                &attempt.status.map(i64::from),
                &enc_opt(attempt.error.as_deref()),
                &delivered_at,
            ],
        )
        .await
        .map_err(pg)?;
    if changed == 0 {
        return Err(records::delivery_not_pending(id, delivery(db, id).await?));
    }
    delivery(db, id)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("delivery {id}")))
}

// ----- reads ----------------------------------------------------------------------------

async fn get(db: Db<'_>, id: &ExecutionId) -> Result<Option<ExecutionRecord>, StoreError> {
    db.query_opt(
        &format!("SELECT {COLUMNS} FROM executions WHERE id = $1"),
        &[&id.as_str()],
    )
    .await
    .map_err(pg)?
    .map(|row| decode(&row))
    .transpose()
}

/// The execution, its row locked until the transaction ends; `NotFound` without it.
async fn lock(db: Db<'_>, id: &ExecutionId) -> Result<ExecutionRecord, StoreError> {
    db.query_opt(
        &format!("SELECT {COLUMNS} FROM executions WHERE id = $1 FOR UPDATE"),
        &[&id.as_str()],
    )
    .await
    .map_err(pg)?
    .map(|row| decode(&row))
    .transpose()?
    .ok_or_else(|| StoreError::NotFound(format!("execution {id}")))
}

async fn by_key(
    db: Db<'_>,
    client: &str,
    key: &str,
) -> Result<Option<ExecutionRecord>, StoreError> {
    db.query_opt(
        &format!("SELECT {COLUMNS} FROM executions WHERE client_id = $1 AND idempotency_key = $2"),
        &[&enc(client), &enc(key)],
    )
    .await
    .map_err(pg)?
    .map(|row| decode(&row))
    .transpose()
}

async fn list(db: Db<'_>, query: &ExecutionQuery) -> Result<Vec<ExecutionRecord>, StoreError> {
    let limit = i64::try_from(query.limit.min(MAX_LIST)).unwrap_or(MAX_LIST as i64);
    db.query(
        &format!(
            "SELECT {COLUMNS} FROM executions
             WHERE ($1::TEXT IS NULL OR client_id = $1) AND ($2::TEXT IS NULL OR status = $2)
               AND ($3::TEXT IS NULL OR agent = $3) AND ($4::TEXT IS NULL OR thread_id = $4)
             ORDER BY pos DESC LIMIT $5"
        ),
        &[
            &enc_opt(query.client.as_deref()),
            &query.status.map(ExecutionStatus::as_str),
            &enc_opt(query.agent.as_deref()),
            &query.thread.as_ref().map(ThreadId::as_str),
            &limit,
        ],
    )
    .await
    .map_err(pg)?
    .iter()
    .map(decode)
    .collect()
}

/// The executions `replica` claimed that are still running, oldest first.
pub(crate) async fn running_of(
    db: Db<'_>,
    replica: &ReplicaId,
) -> Result<Vec<ExecutionRecord>, StoreError> {
    db.query(
        &format!(
            "SELECT {COLUMNS} FROM executions WHERE status = 'running' AND replica = $1
             ORDER BY pos"
        ),
        &[&replica.as_str()],
    )
    .await
    .map_err(pg)?
    .iter()
    .map(decode)
    .collect()
}

async fn queued(db: Db<'_>) -> Result<u64, StoreError> {
    let n: i64 = db
        .query_opt(
            "SELECT COUNT(*) FROM executions WHERE status = 'queued'",
            &[],
        )
        .await
        .map_err(pg)?
        .map(|row| row.try_get(0))
        .transpose()
        .map_err(pg)?
        .unwrap_or(0);
    Ok(u64::try_from(n).unwrap_or(0))
}

async fn delivery(db: Db<'_>, id: &DeliveryId) -> Result<Option<DeliveryRecord>, StoreError> {
    db.query_opt(
        &format!("SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE id = $1"),
        &[&id.as_str()],
    )
    .await
    .map_err(pg)?
    .map(|row| decode_delivery(&row))
    .transpose()
}

async fn deliveries_of(
    db: Db<'_>,
    execution: &ExecutionId,
) -> Result<Vec<DeliveryRecord>, StoreError> {
    db.query(
        &format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE execution_id = $1
             ORDER BY pos"
        ),
        &[&execution.as_str()],
    )
    .await
    .map_err(pg)?
    .iter()
    .map(decode_delivery)
    .collect()
}

// ----- rows -----------------------------------------------------------------------------

async fn require(db: Db<'_>, id: &ExecutionId) -> Result<ExecutionRecord, StoreError> {
    get(db, id)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("execution {id}")))
}

/// `NotFound` or `Conflict` for an execution a write expected to be running.
async fn not_running(db: Db<'_>, id: &ExecutionId) -> StoreError {
    records::execution_not_running(id, get(db, id).await)
}

fn parse_id(id: &str) -> Result<ExecutionId, StoreError> {
    ExecutionId::parse(id).map_err(StoreError::Backend)
}

fn parse_delivery_id(id: &str) -> Result<DeliveryId, StoreError> {
    DeliveryId::parse(id).map_err(StoreError::Backend)
}

fn decode(row: &Row) -> Result<ExecutionRecord, StoreError> {
    let id = parse_id(&text(row, 0)?)?;
    let corrupt = |what: &str| StoreError::Backend(format!("execution {id}: bad {what}"));
    let status = ExecutionStatus::parse(&text(row, 6)?).ok_or_else(|| corrupt("status"))?;
    let output = opt_text(row, 9)?
        .as_deref()
        .map(serde_json::from_str)
        .transpose()
        .map_err(|_| corrupt("output"))?;
    let error = match (opt_text(row, 10)?, opt_text(row, 11)?) {
        (Some(code), message) => Some(ExecutionFailure {
            code: serde_json::from_value::<ErrorCode>(serde_json::Value::String(code))
                .map_err(|_| corrupt("error code"))?,
            message: message.unwrap_or_default(),
        }),
        (None, _) => None,
    };
    let attempts: i64 = row.try_get(7).map_err(pg)?;
    let max_attempts: i64 = row.try_get(8).map_err(pg)?;
    Ok(ExecutionRecord {
        thread_id: ThreadId::parse(&text(row, 4)?).map_err(|_| corrupt("thread id"))?,
        turn_id: opt_text(row, 5)?
            .as_deref()
            .map(TurnId::parse)
            .transpose()
            .map_err(|_| corrupt("turn id"))?,
        status,
        attempts: u32::try_from(attempts).map_err(|_| corrupt("attempts"))?,
        max_attempts: u32::try_from(max_attempts).map_err(|_| corrupt("max_attempts"))?,
        output,
        error,
        client_id: text(row, 1)?,
        agent: text(row, 2)?,
        input: text(row, 3)?,
        webhook_url: opt_text(row, 12)?,
        idempotency_key: opt_text(row, 13)?,
        fingerprint: text(row, 14)?,
        cancel_requested: row.try_get(15).map_err(pg)?,
        created_at: text(row, 16)?,
        updated_at: text(row, 17)?,
        started_at: opt_text(row, 18)?,
        finished_at: opt_text(row, 19)?,
        next_attempt_at: opt_text(row, 20)?,
        id,
    })
}

fn decode_delivery(row: &Row) -> Result<DeliveryRecord, StoreError> {
    let id = parse_delivery_id(&text(row, 0)?)?;
    let corrupt = |what: &str| StoreError::Backend(format!("delivery {id}: bad {what}"));
    let status = match text(row, 3)?.as_str() {
        "pending" => DeliveryStatus::Pending,
        "delivered" => DeliveryStatus::Delivered,
        "failed" => DeliveryStatus::Failed,
        _ => return Err(corrupt("status")),
    };
    let attempts: i64 = row.try_get(4).map_err(pg)?;
    let last_status: Option<i64> = row.try_get(6).map_err(pg)?;
    Ok(DeliveryRecord {
        execution_id: parse_id(&text(row, 1)?)?,
        url: text(row, 2)?,
        status,
        attempts: u32::try_from(attempts).map_err(|_| corrupt("attempts"))?,
        next_attempt_at: opt_text(row, 5)?,
        last_status: last_status
            .map(u16::try_from)
            .transpose()
            .map_err(|_| corrupt("last status"))?,
        last_error: opt_text(row, 7)?,
        created_at: text(row, 8)?,
        delivered_at: opt_text(row, 9)?,
        id,
    })
}

// ----- the port -------------------------------------------------------------------------

#[async_trait]
impl ExecutionStore for PostgresStore {
    async fn create_execution(
        &self,
        execution: NewExecution,
    ) -> Result<(ExecutionRecord, bool), StoreError> {
        in_tx!(self, |db| create(db, execution))
    }

    async fn execution(&self, id: &ExecutionId) -> Result<Option<ExecutionRecord>, StoreError> {
        on_conn!(self, |db| get(db, id))
    }

    async fn execution_by_key(
        &self,
        client: &str,
        key: &str,
    ) -> Result<Option<ExecutionRecord>, StoreError> {
        on_conn!(self, |db| by_key(db, client, key))
    }

    async fn list_executions(
        &self,
        query: &ExecutionQuery,
    ) -> Result<Vec<ExecutionRecord>, StoreError> {
        on_conn!(self, |db| list(db, query))
    }

    async fn claim_execution(&self, worker: &str) -> Result<Option<ExecutionRecord>, StoreError> {
        for _ in 0..CLAIM_TRIES {
            let claimed: Result<Claim, StoreError> =
                in_tx!(self, |db| claim(db, worker, self.replica_id()));
            match claimed? {
                Claim::Claimed(record) => return Ok(Some(*record)),
                Claim::Nothing => return Ok(None),
                Claim::Lost => continue,
            }
        }
        Ok(None)
    }

    async fn set_execution_turn(&self, id: &ExecutionId, turn: &TurnId) -> Result<(), StoreError> {
        in_tx!(self, |db| set_turn(db, id, turn))
    }

    async fn finish_execution(
        &self,
        id: &ExecutionId,
        end: ExecutionEnd,
    ) -> Result<ExecutionRecord, StoreError> {
        in_tx!(self, |db| finish(db, id, end))
    }

    async fn retry_execution(
        &self,
        id: &ExecutionId,
        delay: Duration,
        error: ExecutionFailure,
    ) -> Result<ExecutionRecord, StoreError> {
        in_tx!(self, |db| retry(db, id, delay, error))
    }

    async fn release_execution(&self, id: &ExecutionId) -> Result<(), StoreError> {
        in_tx!(self, |db| release(db, id))
    }

    async fn cancel_execution(
        &self,
        id: &ExecutionId,
        delivery: DeliveryId,
    ) -> Result<CancelOutcome, StoreError> {
        in_tx!(self, |db| cancel(db, id, &delivery))
    }

    async fn recover_execution(
        &self,
        id: &ExecutionId,
        mode: RestartMode,
        delivery: DeliveryId,
    ) -> Result<ExecutionRecord, StoreError> {
        in_tx!(self, |db| recover(db, id, mode, &delivery))
    }

    async fn queued_executions(&self) -> Result<u64, StoreError> {
        on_conn!(self, |db| queued(db))
    }

    async fn claim_delivery(&self, lease: Duration) -> Result<Option<DeliveryRecord>, StoreError> {
        in_tx!(self, |db| claim_delivery(db, lease))
    }

    async fn record_delivery(
        &self,
        id: &DeliveryId,
        attempt: DeliveryAttempt,
    ) -> Result<DeliveryRecord, StoreError> {
        in_tx!(self, |db| record_delivery(db, id, attempt))
    }

    async fn deliveries(&self, execution: &ExecutionId) -> Result<Vec<DeliveryRecord>, StoreError> {
        on_conn!(self, |db| deliveries_of(db, execution))
    }
}
