//! Webhooks: the `WebhookSender` port, the body a finished execution is announced
//! with, and the delivery of one claimed delivery with its retry decision.
//!
//! The engine decides *what* is sent and *whether* to try again; the adapter does the
//! HTTP POST, screens the address (SSRF) and signs the body with the secret, which the
//! engine never sees.

use agentplane_core::DeliveryId;
use async_trait::async_trait;
use serde_json::{Value, json};
use tracing::Instrument;

use super::backoff::Backoff;
use crate::ports::{DeliveryAttempt, DeliveryRecord, ExecutionRecord, ExecutionStore, StoreError};

/// The event name in every webhook body.
pub const EXECUTION_FINISHED: &str = "execution.finished";

/// One POST to make.
#[derive(Debug, Clone)]
pub struct WebhookRequest<'a> {
    pub url: &'a str,
    /// The same at every attempt of one delivery: receivers dedupe on it.
    pub delivery: &'a DeliveryId,
    pub body: &'a [u8],
    /// The event name, sent as `x-agentplane-event` ([`EXECUTION_FINISHED`] for
    /// executions).
    pub event: &'a str,
    /// Headers the receiver asked for besides ours (an A2A client's notification
    /// token and credentials); a name or value that is not a valid header refuses the
    /// POST. Never logged.
    pub headers: &'a [(&'a str, &'a str)],
}

/// What one POST gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookOutcome {
    /// A 2xx answer.
    Delivered { status: u16 },
    /// Another answer or a network failure: worth another attempt.
    Failed { status: Option<u16>, error: String },
    /// The address is refused (private, bad scheme…): never retried.
    Refused { error: String },
}

/// Sends webhook POSTs. Implemented by an adapter that resolves the host, refuses
/// non-public addresses unless allowed, follows no redirect and signs the body.
#[async_trait]
pub trait WebhookSender: Send + Sync {
    /// Checks a URL when an execution is submitted: scheme, shape, and a host that is
    /// a refused address literal. Names are resolved (and screened) at each POST.
    fn check(&self, url: &str) -> Result<(), String>;

    /// POSTs the body once.
    async fn send(&self, request: WebhookRequest<'_>) -> WebhookOutcome;
}

/// An execution as clients see it: `GET /v1/executions/{id}` and the webhook body's
/// `execution` share this shape.
pub fn execution_json(record: &ExecutionRecord) -> Value {
    json!({
        "id": record.id,
        "status": record.status.as_str(),
        "agent": record.agent,
        "thread_id": record.thread_id,
        "turn_id": record.turn_id,
        "attempts": record.attempts,
        "max_attempts": record.max_attempts,
        "output": record.output,
        "error": record.error.as_ref().map(|e| json!({"code": e.code, "message": e.message})),
        "idempotency_key": record.idempotency_key,
        "webhook_url": record.webhook_url,
        "cancel_requested": record.cancel_requested,
        "created_at": record.created_at,
        "started_at": record.started_at,
        "finished_at": record.finished_at,
        "next_attempt_at": record.next_attempt_at,
    })
}

/// The body of a delivery: the event name and the execution's final state.
pub fn webhook_body(delivery: &DeliveryId, record: &ExecutionRecord) -> Vec<u8> {
    let body = json!({
        "event": EXECUTION_FINISHED,
        "delivery_id": delivery,
        "execution": execution_json(record),
    });
    serde_json::to_vec(&body).unwrap_or_default()
}

/// Makes one attempt of a claimed delivery and records its outcome: delivered, due
/// again after a backoff, or failed for good (refused, or out of attempts).
pub(crate) async fn deliver(
    store: &dyn ExecutionStore,
    sender: &dyn WebhookSender,
    delivery: DeliveryRecord,
    max_attempts: u32,
    backoff: Backoff,
) -> Result<DeliveryRecord, StoreError> {
    let attempt = match store.execution(&delivery.execution_id).await? {
        None => DeliveryAttempt {
            delivered: false,
            status: None,
            error: Some("the execution is gone".to_owned()),
            retry_after: None,
        },
        Some(record) => {
            let body = webhook_body(&delivery.id, &record);
            let span = crate::ports::telemetry::webhook_span(
                delivery.execution_id.as_str(),
                delivery.id.as_str(),
                delivery.attempts,
            );
            let outcome = sender
                .send(WebhookRequest {
                    url: &delivery.url,
                    delivery: &delivery.id,
                    body: &body,
                    event: EXECUTION_FINISHED,
                    headers: &[],
                })
                .instrument(span.clone())
                .await;
            if let WebhookOutcome::Delivered { status }
            | WebhookOutcome::Failed {
                status: Some(status),
                ..
            } = &outcome
            {
                span.record("http.response.status_code", status);
            }
            let retry =
                || (delivery.attempts < max_attempts).then(|| backoff.delay(delivery.attempts));
            match outcome {
                WebhookOutcome::Delivered { status } => DeliveryAttempt {
                    delivered: true,
                    status: Some(status),
                    error: None,
                    retry_after: None,
                },
                WebhookOutcome::Failed { status, error } => DeliveryAttempt {
                    delivered: false,
                    status,
                    error: Some(error),
                    retry_after: retry(),
                },
                WebhookOutcome::Refused { error } => DeliveryAttempt {
                    delivered: false,
                    status: None,
                    error: Some(error),
                    retry_after: None,
                },
            }
        }
    };
    if !attempt.delivered {
        tracing::info!(
            delivery = %delivery.id,
            execution = %delivery.execution_id,
            attempt = delivery.attempts,
            status = ?attempt.status,
            error = attempt.error.as_deref().unwrap_or(""),
            retry = attempt.retry_after.is_some(),
            "webhook not delivered"
        );
    }
    store.record_delivery(&delivery.id, attempt).await
}
