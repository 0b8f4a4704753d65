//! One model call of a turn: the worst case reserved on the budgets, the call through
//! the providers with text streamed into coalesced `message_delta` events, usage and
//! cost recorded, and Harmony markup turned into tool calls.

use std::time::{Duration, Instant};

use agentplane_core::policy::Surface;
use agentplane_core::{ChatRequest, ErrorCode, EventPayload, ToolCall, usd_of_micros};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::active::*;
use super::progress::*;
use super::request::*;
use crate::governance::content::ContentGuard;
use crate::governance::{AdmissionError, Meter, Refusal};
use crate::harmony;
use crate::metered::{self, Charged, Unanswered};
use crate::models::{RouteKey, TaskSize};
use crate::ports::StoreError;

/// The `security_event` type of usage reported above a call's worst case.
pub const USAGE_OVER_REPORTED: &str = "usage_over_reported";

/// What the model call passes to the task recording its stream.
pub(super) enum Streamed {
    Text(String),
    /// A `provider_failover` event.
    Failover(Box<EventPayload>),
}

/// Longer than any marker `harmony::contains_harmony` looks for (`<|channel|>`).
pub(super) const HARMONY_MARKER_MAX: usize = 16;

/// Coalesce streamed text into one `message_delta` event per this many bytes…
pub(crate) const DELTA_FLUSH_BYTES: usize = 512;
/// …or per this much time, whichever comes first.
pub(super) const DELTA_FLUSH_AFTER: Duration = Duration::from_millis(50);

impl ActiveTurn<'_> {
    /// One model call, metered (`crate::metered`): streams text into coalesced
    /// `message_delta` events while the call runs, then records what it was charged.
    pub(super) async fn call_model(
        &mut self,
        chat: &ChatRequest,
        request: &TurnRequest,
        cancel: &CancellationToken,
    ) -> Result<agentplane_core::ChatResponse, Stop> {
        let meter = match metered::reserve(
            &self.deps.governance,
            self.deps.store.as_ref(),
            &self.policy_ctx(request, None),
            chat,
            metered::Admit::BudgetsOnly,
        )
        .await
        {
            Ok(meter) => meter,
            Err(AdmissionError::Refused(refusal)) => {
                self.record(refusal.event("a model call", None, None))
                    .await?;
                return Err(failed(
                    ErrorCode::BudgetExceeded,
                    refusal.message("a model call"),
                ));
            }
            Err(AdmissionError::Store(e)) => return Err(Stop::Store(e)),
            Err(AdmissionError::RateLimitsUnavailable(e)) => {
                return Err(failed(ErrorCode::UpstreamUnavailable, e.to_string()));
            }
        };
        // Content policies on the answer: its stream as it passes, then the whole
        // answer (text, model, finish reason) screened before anything records it.
        let policies = self.deps.governance.policies.current();
        let guard = ContentGuard::new(
            &policies,
            &self.policy_ctx(request, None),
            Surface::ModelOutput,
        );
        let ended = self
            .stream_model(meter, chat, request, &guard, cancel)
            .await?;
        if let Some(charged) = &ended.charged {
            if ended.outcome.is_ok() {
                let usage = charged.usage.unwrap_or_default();
                self.usage.input_tokens += usage.input_tokens;
                self.usage.output_tokens += usage.output_tokens;
            }
            self.record_charge(charged);
        }
        for event in guard.events(&ended.found, None) {
            self.record(event).await?;
        }
        match ended.outcome {
            Ok(routed) => match &ended.denied_by {
                Some(policy) => {
                    let refusal = Refusal::content(&policies, policy, &ended.found, "the answer");
                    let what = "the model's answer";
                    self.record(refusal.event(what, None, None)).await?;
                    Err(failed(ErrorCode::Forbidden, refusal.message(what)))
                }
                None => Ok(routed.response),
            },
            Err(Unanswered::Cancelled) => Err(Stop::Cancelled),
            // The error is screened like an answer (`metered`): redacted, or refused
            // when a `deny` policy found something in it.
            Err(Unanswered::Failed(e)) => match &ended.denied_by {
                Some(policy) => {
                    let refusal = Refusal::content(&policies, policy, &ended.found, "the error");
                    let what = "the model server's error";
                    self.record(refusal.event(what, None, None)).await?;
                    Err(failed(ErrorCode::Forbidden, refusal.message(what)))
                }
                None => Err(failed(e.code(), e.to_string())),
            },
        }
    }

    /// Records one call's `usage` and `cost` events (and, when the server claimed more
    /// than the worst case, a `security_event` saying so): the cost is what was charged.
    /// Held for the turn's next write (`hold`).
    fn record_charge(&self, charged: &Charged) {
        let Charged {
            model,
            provider,
            usage,
            charge,
        } = charged;
        let reported = usage.unwrap_or_default();
        // Held for the turn's next write: the answer's next step, or the turn's end.
        if charge.over_reported() {
            self.hold(EventPayload::SecurityEvent {
                event_type: USAGE_OVER_REPORTED.to_owned(),
                tool: None,
                detail: format!(
                    "the model server reported {} input and {} output tokens (${}), more \
                     than this call could have used (${}); charged the worst case",
                    reported.input_tokens,
                    reported.output_tokens,
                    usd_of_micros(charge.reported_micros.unwrap_or_default()),
                    usd_of_micros(charge.worst_micros),
                ),
            });
        }
        self.hold(EventPayload::Usage {
            provider: provider.clone(),
            model: model.clone(),
            input_tokens: reported.input_tokens,
            output_tokens: reported.output_tokens,
            reported: usage.is_some(),
        });
        self.hold(EventPayload::Cost {
            provider: provider.clone(),
            model: model.clone(),
            input_tokens: reported.input_tokens,
            output_tokens: reported.output_tokens,
            usd_micros: charge.usd_micros,
            usd: usd_of_micros(charge.usd_micros),
        });
    }

    /// The metered call itself (`crate::metered::call`: routing, failover, settling),
    /// streaming text into coalesced `message_delta` events. A failover is recorded as a
    /// `provider_failover` event after the text the failed attempt streamed (which stays
    /// in the log): the deltas after it restart the answer. Fails only if the store does.
    pub(super) async fn stream_model(
        &self,
        meter: Meter,
        chat: &ChatRequest,
        request: &TurnRequest,
        guard: &ContentGuard<'_>,
        cancel: &CancellationToken,
    ) -> Result<metered::Metered, Stop> {
        let (tx, mut rx) = mpsc::unbounded_channel::<Streamed>();
        let route = RouteKey {
            agent: &request.agent.name,
            tags: &request.agent.tags,
            size: self
                .size
                .unwrap_or_else(|| TaskSize::estimate(&chat.messages)),
            pinned: &[],
        };
        let providers = &self.deps.providers;
        // Content policies on model output: what they would change is held back only
        // while it could still become a finding.
        let mut content = guard.stream();
        let call = async move {
            let failovers = tx.clone();
            let mut on_text = move |text: &str| {
                // The receiver lives until this future ends; a send can only fail after.
                let _ = tx.send(Streamed::Text(text.to_owned()));
            };
            let mut on_failover = move |failover: crate::models::Failover<'_>| {
                let _ = failovers.send(Streamed::Failover(Box::new(
                    EventPayload::ProviderFailover {
                        from: failover.from.to_owned(),
                        to: failover.to.to_owned(),
                        code: failover.error.code(),
                        message: failover.error.to_string(),
                    },
                )));
            };
            let call = metered::Call {
                providers,
                route,
                request: chat,
                // A call's arguments are screened on `tool_arguments` before it runs.
                screen: metered::Screen {
                    guard,
                    tool_calls: false,
                },
            };
            // The turn records the charge as events once the call has settled.
            let mut on_charged = |_: &metered::Charged| {};
            metered::call(
                meter,
                call,
                &mut on_text,
                &mut on_failover,
                &mut on_charged,
                cancel,
            )
            .await
        };
        let this = self;
        let stream_text = async move {
            let mut pending = String::new();
            let mut seen = String::new();
            let mut markup = false;
            let mut last_flush = Instant::now();
            while let Some(streamed) = rx.recv().await {
                let text = match streamed {
                    Streamed::Text(text) => match content.as_mut() {
                        Some(content) => content.push(&text),
                        None => text,
                    },
                    Streamed::Failover(failover) => {
                        if let Some(content) = content.as_mut() {
                            let rest = content.finish();
                            if !markup && !rest.is_empty() {
                                this.observer.on_text(&rest);
                                pending.push_str(&rest);
                            }
                        }
                        if !pending.is_empty() {
                            let text = std::mem::take(&mut pending);
                            this.record(EventPayload::MessageDelta { text }).await?;
                        }
                        this.record(*failover).await?;
                        // The next provider's answer starts from nothing.
                        seen.clear();
                        markup = false;
                        last_flush = Instant::now();
                        continue;
                    }
                };
                if text.is_empty() {
                    continue;
                }
                this.observer.on_text(&text);
                // Harmony markup is parsed after the call; never stream it as text. Only
                // the new text and a marker's length before it are searched, so a long
                // answer is not rescanned on every delta.
                let from = seen.len().saturating_sub(HARMONY_MARKER_MAX);
                seen.push_str(&text);
                let from = (0..=from)
                    .rev()
                    .find(|&i| seen.is_char_boundary(i))
                    .unwrap_or(0);
                markup = markup
                    || seen.trim_start().starts_with("<|")
                    || harmony::contains_harmony(&seen[from..]);
                if markup {
                    pending.clear();
                    continue;
                }
                pending.push_str(&text);
                if pending.len() >= DELTA_FLUSH_BYTES || last_flush.elapsed() >= DELTA_FLUSH_AFTER {
                    let text = std::mem::take(&mut pending);
                    this.record(EventPayload::MessageDelta { text }).await?;
                    last_flush = Instant::now();
                }
            }
            if let Some(content) = content.as_mut() {
                let rest = content.finish();
                if !markup && !rest.is_empty() {
                    this.observer.on_text(&rest);
                    pending.push_str(&rest);
                }
            }
            // The answer's last text goes with its usage and cost (`hold`).
            if !pending.is_empty() {
                this.hold(EventPayload::MessageDelta { text: pending });
            }
            Ok::<(), StoreError>(())
        };
        // A cancel ends the call (charged), which ends the text's channel and its task.
        let (ended, streamed) = tokio::join!(call, stream_text);
        streamed?;
        Ok(ended)
    }
}

/// Native tool calls win; Harmony markup in the text is parsed only when the server
/// returned none, so a model is never asked to use two protocols at once.
pub(super) fn split_harmony(
    step: u32,
    content: String,
    native: Vec<ToolCall>,
) -> (String, Vec<PlannedCall>) {
    if !native.is_empty() || !harmony::contains_harmony(&content) {
        return (
            content,
            native.into_iter().map(PlannedCall::Ready).collect(),
        );
    }
    let parsed = harmony::parse(&content);
    let calls = parsed
        .calls
        .into_iter()
        .enumerate()
        .map(|(i, call)| match call {
            // The parser numbers calls per response; the step makes ids unique per turn.
            Ok(call) => PlannedCall::Ready(ToolCall {
                id: format!("{}_s{step}", call.id),
                ..call
            }),
            Err(error) => {
                let placeholder = ToolCall {
                    id: format!("harmony_error_{i}_s{step}"),
                    name: error.tool.clone().unwrap_or_else(|| "unknown".to_owned()),
                    arguments: String::new(),
                };
                PlannedCall::Refused(placeholder, error)
            }
        })
        .collect();
    (parsed.text, calls)
}
