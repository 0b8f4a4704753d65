//! One model call of a turn: the worst case reserved on the budgets, the call through
//! the providers with text streamed into coalesced `message_delta` events, usage and
//! cost recorded, and Harmony markup turned into tool calls.

use super::*;
use crate::governance::{Refusal, worst_case_micros};

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
        let worst = worst_case_micros(
            &governance.prices,
            chat,
            chat.max_tokens.map_or(0, u64::from),
        );
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
        let answered = self.stream_model(chat, request, cancel).await;
        let (response, provider) = match answered {
            Ok(routed) => (routed.response, routed.provider),
            Err(stop) => {
                governance.budgets.settle(reservation, 0).await;
                return Err(stop);
            }
        };
        let usage = response.usage.unwrap_or_default();
        let model = if response.model.is_empty() {
            chat.model.clone()
        } else {
            response.model.clone()
        };
        // A call whose usage the server did not report costs its worst case, never 0.
        let usd_micros = match response.usage {
            Some(_) => {
                governance
                    .prices
                    .cost_micros(&model, usage.input_tokens, usage.output_tokens)
            }
            None => worst,
        };
        governance.budgets.settle(reservation, usd_micros).await;
        self.usage.input_tokens += usage.input_tokens;
        self.usage.output_tokens += usage.output_tokens;
        self.record(EventPayload::Usage {
            provider: provider.clone(),
            model: model.clone(),
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            reported: response.usage.is_some(),
        })
        .await?;
        self.record(EventPayload::Cost {
            provider,
            model,
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            usd_micros,
            usd: usd_of_micros(usd_micros),
        })
        .await?;
        Ok(response)
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
                    Streamed::Text(text) => text,
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
