//! One model call of a turn: the worst case reserved on the budgets, the call through
//! the providers with text streamed into coalesced `message_delta` events, usage and
//! cost recorded, and Harmony markup turned into tool calls.

use super::*;
use crate::governance::budget::worst_case_tokens;
use crate::governance::{Charge, Meter, Refusal};

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
    /// One model call: streams text into coalesced `message_delta` events while the
    /// call runs, then records its usage.
    pub(super) async fn call_model(
        &mut self,
        chat: &ChatRequest,
        request: &TurnRequest,
        cancel: &CancellationToken,
    ) -> Result<agentplane_core::ChatResponse, Stop> {
        let governance = self.deps.governance.clone();
        let policies = governance.policies.current();
        // The call's worst case: every byte sent a token, and the whole output cap.
        let worst_tokens = worst_case_tokens(chat, chat.max_tokens.map_or(0, u64::from));
        let worst = governance
            .prices
            .cost_micros(&chat.model, worst_tokens.0, worst_tokens.1);
        let reservation = match governance
            .budgets
            .reserve(
                self.deps.store.as_ref(),
                &policies,
                &self.policy_ctx(request, None),
                &governance.agent_tags,
                worst,
            )
            .await
        {
            Ok(reservation) => reservation,
            Err(BudgetError::Exceeded(exceeded)) => {
                let refusal = Refusal::BudgetExceeded(exceeded);
                self.record(refusal.event("a model call", None, None))
                    .await?;
                return Err(failed(
                    ErrorCode::BudgetExceeded,
                    refusal.message("a model call"),
                ));
            }
            Err(BudgetError::Store(e)) => return Err(Stop::Store(e)),
        };
        let meter = Meter::new(governance.clone(), reservation, worst_tokens);
        let mut texted = false;
        let answered = self.stream_model(chat, request, cancel, &mut texted).await;
        let agent = request.agent.name.as_str();
        let (response, provider) = match answered {
            Ok(routed) => (routed.response, routed.provider),
            // Cancelled, or failed after text arrived: the model was asked and worked.
            Err(stop) if texted || matches!(stop, Stop::Cancelled) => {
                let charge = meter.worst_charge();
                meter.settle(&charge, agent, "").await;
                self.record_charge(&chat.model, String::new(), None, &charge)
                    .await?;
                return Err(stop);
            }
            Err(stop) => {
                meter.release().await;
                return Err(stop);
            }
        };
        let usage = response.usage.unwrap_or_default();
        let model = if response.model.is_empty() {
            chat.model.clone()
        } else {
            response.model.clone()
        };
        let charge = meter.price(&model, response.usage);
        meter.settle(&charge, agent, &provider).await;
        self.usage.input_tokens += usage.input_tokens;
        self.usage.output_tokens += usage.output_tokens;
        self.record_charge(&model, provider, response.usage, &charge)
            .await?;
        Ok(response)
    }

    /// Records one call's `usage` and `cost` events (and, when the server claimed more
    /// than the worst case, a `security_event` saying so): the cost is what was charged.
    async fn record_charge(
        &self,
        model: &str,
        provider: String,
        usage: Option<agentplane_core::Usage>,
        charge: &Charge,
    ) -> Result<(), Stop> {
        let reported = usage.unwrap_or_default();
        if charge.over_reported() {
            self.record(EventPayload::SecurityEvent {
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
            })
            .await?;
        }
        self.record(EventPayload::Usage {
            provider: provider.clone(),
            model: model.to_owned(),
            input_tokens: reported.input_tokens,
            output_tokens: reported.output_tokens,
            reported: usage.is_some(),
        })
        .await?;
        self.record(EventPayload::Cost {
            provider,
            model: model.to_owned(),
            input_tokens: reported.input_tokens,
            output_tokens: reported.output_tokens,
            usd_micros: charge.usd_micros,
            usd: usd_of_micros(charge.usd_micros),
        })
        .await?;
        Ok(())
    }

    /// The model call itself, through the providers' routing and failover, streaming
    /// text into coalesced `message_delta` events. A failover is recorded as a
    /// `provider_failover` event after the text the failed attempt streamed (which
    /// stays in the log): the deltas after it restart the answer.
    pub(super) async fn stream_model(
        &self,
        chat: &ChatRequest,
        request: &TurnRequest,
        cancel: &CancellationToken,
        texted: &mut bool,
    ) -> Result<crate::models::Routed, Stop> {
        let (tx, mut rx) = mpsc::unbounded_channel::<Streamed>();
        let providers = self.deps.providers.clone();
        let key = RouteKey {
            agent: &request.agent.name,
            tags: &request.agent.tags,
            size: self
                .size
                .unwrap_or_else(|| TaskSize::estimate(&chat.messages)),
        };
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
            providers
                .chat(&key, chat, &mut on_text, &mut on_failover)
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
                    Streamed::Text(text) => {
                        *texted = true;
                        text
                    }
                    Streamed::Failover(failover) => {
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
            if !pending.is_empty() {
                this.record(EventPayload::MessageDelta { text: pending })
                    .await?;
            }
            Ok::<(), StoreError>(())
        };
        let (response, streamed) = tokio::select! {
            _ = cancel.cancelled() => return Err(Stop::Cancelled),
            both = async { tokio::join!(call, stream_text) } => both,
        };
        streamed?;
        response.map_err(|e| failed(e.code(), e.to_string()))
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
