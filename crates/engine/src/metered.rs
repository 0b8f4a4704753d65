//! One metered model call: the only way the engine calls a model with money at stake.
//!
//! [`reserve`] admits the call and reserves its worst case (every byte sent a token,
//! the whole output cap, ADR 0029), giving a [`Meter`]; [`call`] makes the call through
//! the providers' routing and failover and settles the meter by the rules of
//! `governance::meter` (ADR 0042): an answer is charged its reported usage capped at the
//! worst case; a cancel, or a failure after text arrived, the worst case; a failure
//! before any text nothing. Dropping the future of [`call`] drops the meter unsettled,
//! which charges the worst case (and tells its `on_abandon` hook). The turn (and so an
//! execution's turn) and the gateway both go through here, so a third caller cannot get
//! the guarantee subtly wrong.
//!
//! An answer is screened (`governance::outgoing`: secrets and the content policies of
//! the caller's surface, [`Screen`]) before its span, its charge or its caller sees it:
//! the model name an upstream gives is exported as `gen_ai.response.model` only
//! redacted. So is an error (`outgoing::screen_error`): the body of an upstream's error
//! answer, and each failover's reason, reach the caller (and so its events, its
//! client, its logs) only screened.
//!
//! What must not live here: how a caller records the charge (events in a turn, a
//! `ModelCallRecord` for the gateway), or what it does with the streamed text.

use std::sync::Arc;

use agentplane_core::{ChatRequest, ChatResponse, Usage};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::governance::budget::worst_case_tokens;
use crate::governance::content::{ContentGuard, Found};
use crate::governance::outgoing::{self, Returned};
use crate::governance::rules::RequestContext;
use crate::governance::{AdmissionError, Charge, Governance, Meter, admission};
use crate::models::{Failover, Providers, RouteKey, Routed};
use crate::ports::{CallStore, ModelError, TextSink, telemetry};

/// What admission a call passes before its reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// The whole admission (a policy's denial, the rate limits, the budgets): a call
    /// outside any turn, such as the gateway's.
    Whole,
    /// The budgets only: a call inside a turn that was admitted when it began.
    BudgetsOnly,
}

/// Admits a call of `request` for `ctx` and reserves its worst case: its input bytes
/// as tokens and its output cap (`request.max_tokens`, which the caller always sets).
pub async fn reserve(
    governance: &Arc<Governance>,
    store: &dyn CallStore,
    ctx: &RequestContext<'_>,
    request: &ChatRequest,
    admit: Admit,
) -> Result<Meter, AdmissionError> {
    let worst_tokens = worst_case_tokens(request, request.max_tokens.map_or(0, u64::from));
    let worst = governance
        .prices
        .cost_micros(&request.model, worst_tokens.0, worst_tokens.1);
    let reservation = match admit {
        Admit::Whole => admission::admit(governance, store, ctx, worst).await?,
        Admit::BudgetsOnly => {
            let policies = governance.policies.current();
            governance
                .budgets
                .reserve(store, &policies, ctx, &governance.agent_tags, worst)
                .await?
        }
    };
    Ok(Meter::new(governance.clone(), reservation, worst_tokens))
}

/// What a call is made with.
pub struct Call<'a> {
    pub providers: &'a Providers,
    /// How the providers route it.
    pub route: RouteKey<'a>,
    pub request: &'a ChatRequest,
    /// How its answer is screened before anything records or exports it.
    pub screen: Screen<'a>,
}

/// How a call's answer is screened (`governance::outgoing`: secrets, then the content
/// policies of its surface) before its span, its charge or its caller sees it: the
/// text, the model that answered and the finish reason, always.
pub struct Screen<'a> {
    /// The content policies of the answer's surface (`model_output` in a turn,
    /// `gateway_answer` at the gateway).
    pub guard: &'a ContentGuard<'a>,
    /// Whether the tool calls (ids, names, arguments) are screened too: the gateway
    /// hands them to its client as they came; a turn screens each call's arguments on
    /// `tool_arguments` before it records or runs it (`turn/tool_call.rs`).
    pub tool_calls: bool,
}

/// Why a call gave no answer.
#[derive(Debug)]
pub enum Unanswered {
    /// The caller's cancel token fired.
    Cancelled,
    /// Every provider failed, or the request was refused.
    Failed(ModelError),
}

/// What a call was charged, for the caller to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charged {
    /// The model it is priced as: the one that answered, else the one asked for.
    pub model: String,
    /// The provider that answered; empty when none did.
    pub provider: String,
    /// The usage the server reported, if it answered with any.
    pub usage: Option<Usage>,
    pub charge: Charge,
}

/// How a call ended.
#[derive(Debug)]
pub struct Metered {
    /// The answer (its `model` filled with the requested one when the server named
    /// none) and the provider that gave it.
    pub outcome: Result<Routed, Unanswered>,
    /// What was charged; `None` when nothing was (a failure before any text).
    pub charged: Option<Charged>,
    /// What the screen found in the answer (`outcome` holds it redacted).
    pub found: Vec<Found>,
    /// The first `deny` policy that found something in the answer: the caller must
    /// refuse it.
    pub denied_by: Option<String>,
}

/// Makes the call, streaming text to `on_text` and failovers to `on_failover`, and
/// settles `meter`. `on_charged` sees the charge before the settlement starts, so a
/// caller whose future is dropped during the settlement has recorded it already.
pub async fn call(
    meter: Meter,
    call: Call<'_>,
    on_text: &mut TextSink<'_>,
    on_failover: &mut (dyn FnMut(Failover<'_>) + Send),
    on_charged: &mut (dyn FnMut(&Charged) + Send),
    cancel: &CancellationToken,
) -> Metered {
    let agent = call.route.agent;
    let span = telemetry::model_call_span(agent, &call.request.model);
    telemetry::record_model_input(&span, &call.request.messages);
    let mut texted = false;
    // A failover's reason is the failed upstream's words: screened before the caller
    // records or logs it, its findings kept with the call's.
    let mut failover_found = Vec::new();
    let answered = {
        let mut seen = |text: &str| {
            texted = true;
            on_text(text);
        };
        let guard = call.screen.guard;
        let mut screened_failover = |failover: Failover<'_>| {
            let mut error = failover.error.clone();
            let (found, _) = outgoing::screen_error(guard, &mut error);
            failover_found.extend(found);
            on_failover(Failover {
                error: &error,
                ..failover
            });
        };
        let chat = call
            .providers
            .chat(&call.route, call.request, &mut seen, &mut screened_failover)
            .instrument(span.clone());
        tokio::select! {
            () = cancel.cancelled() => None,
            answered = chat => Some(answered),
        }
    };
    let mut ended = settle(meter, &call, answered, texted, on_charged).await;
    failover_found.append(&mut ended.found);
    ended.found = failover_found;
    if !span.is_disabled() {
        let charged = ended.charged.as_ref();
        let usage = charged.and_then(|c| c.usage);
        telemetry::record_model_call(
            &span,
            &telemetry::ModelCallEnd {
                provider: charged.map_or("", |c| c.provider.as_str()),
                model: charged.map_or(call.request.model.as_str(), |c| c.model.as_str()),
                input_tokens: usage.map(|u| u.input_tokens),
                output_tokens: usage.map(|u| u.output_tokens),
                usd_micros: charged.map(|c| c.charge.usd_micros),
                outcome: match &ended.outcome {
                    Ok(_) => "answered",
                    Err(Unanswered::Failed(_)) => "failed",
                    Err(Unanswered::Cancelled) => "cancelled",
                },
                finish_reason: ended
                    .outcome
                    .as_ref()
                    .ok()
                    .and_then(|routed| routed.response.finish_reason.as_deref()),
            },
        );
        if let Ok(routed) = &ended.outcome {
            telemetry::record_model_output(&span, &routed.response);
        }
    }
    ended
}

/// Screens an answer in place (`governance::outgoing`); the findings and the verdict.
fn screen(screen: &Screen<'_>, response: &mut ChatResponse) -> outgoing::Screened {
    let tool_calls = if screen.tool_calls {
        std::mem::take(&mut response.tool_calls)
    } else {
        Vec::new()
    };
    let mut screened = outgoing::screen(
        screen.guard,
        Returned {
            text: Ok(std::mem::take(&mut response.content)),
            tool_calls,
            model: Some(std::mem::take(&mut response.model)),
            metadata: response
                .finish_reason
                .take()
                .map(|reason| ("finish_reason".to_owned(), reason))
                .into_iter()
                .collect(),
        },
    );
    let returned = &mut screened.returned;
    response.content = match std::mem::replace(&mut returned.text, Ok(String::new())) {
        Ok(text) | Err(text) => text,
    };
    if screen.tool_calls {
        response.tool_calls = std::mem::take(&mut returned.tool_calls);
    }
    response.model = returned.model.take().unwrap_or_default();
    response.finish_reason = returned.metadata.pop().map(|(_, reason)| reason);
    screened
}

/// Settles `meter` by how the call ended (`None`: cancelled), telling `on_charged`
/// first.
async fn settle(
    meter: Meter,
    call: &Call<'_>,
    answered: Option<Result<Routed, ModelError>>,
    texted: bool,
    on_charged: &mut (dyn FnMut(&Charged) + Send),
) -> Metered {
    let agent = call.route.agent;
    let asked = || call.request.model.clone();
    match answered {
        Some(Ok(mut routed)) => {
            if routed.response.model.is_empty() {
                routed.response.model = asked();
            }
            // Priced by the name the server gave (a key of our price table, never
            // shown); recorded, exported and answered only screened.
            let charge = meter.price(&routed.response.model, routed.response.usage);
            let screened = screen(&call.screen, &mut routed.response);
            let ChatResponse { model, usage, .. } = &routed.response;
            let charged = Charged {
                charge,
                model: model.clone(),
                provider: routed.provider.clone(),
                usage: *usage,
            };
            on_charged(&charged);
            meter
                .settle(&charged.charge, agent, &charged.provider)
                .await;
            Metered {
                outcome: Ok(routed),
                charged: Some(charged),
                found: screened.found,
                denied_by: screened.denied_by,
            }
        }
        // Failed before any text: the model did no work we saw; nothing is charged.
        Some(Err(mut e)) if !texted => {
            meter.release().await;
            let (found, denied_by) = outgoing::screen_error(call.screen.guard, &mut e);
            Metered {
                outcome: Err(Unanswered::Failed(e)),
                charged: None,
                found,
                denied_by,
            }
        }
        // Cancelled, or failed after text arrived: the model was asked and worked.
        ended => {
            let charged = Charged {
                charge: meter.worst_charge(),
                model: asked(),
                provider: String::new(),
                usage: None,
            };
            on_charged(&charged);
            meter.settle(&charged.charge, agent, "").await;
            let (outcome, found, denied_by) = match ended {
                Some(Err(mut e)) => {
                    let (found, denied_by) = outgoing::screen_error(call.screen.guard, &mut e);
                    (Unanswered::Failed(e), found, denied_by)
                }
                _ => (Unanswered::Cancelled, Vec::new(), None),
            };
            Metered {
                outcome: Err(outcome),
                charged: Some(charged),
                found,
                denied_by,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use agentplane_core::policy::{PolicySet, PolicySource, Surface};
    use agentplane_core::{ChatResponse, ToolCall};

    use super::*;

    const MAIL: &str = "victim@example.com";

    fn answer() -> ChatResponse {
        ChatResponse {
            content: format!("write to {MAIL}"),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: format!("send {MAIL}"),
                arguments: format!("{{\"to\":\"{MAIL}\"}}"),
            }],
            finish_reason: Some(format!("stop {MAIL}")),
            usage: None,
            model: format!("m {MAIL}"),
        }
    }

    /// Screens `answer()` under a redacting e-mail policy.
    fn screened(tool_calls: bool) -> (ChatResponse, outgoing::Screened) {
        let set = PolicySet::parse(&[PolicySource {
            name: "t.yaml",
            text: "- name: mail\n  type: content\n  rules: {detectors: [email], action: redact}\n",
        }])
        .expect("valid");
        let ctx = RequestContext::new("a", &[], "c");
        let guard = ContentGuard::new(&set, &ctx, Surface::GatewayAnswer);
        let mut response = answer();
        let found = screen(
            &Screen {
                guard: &guard,
                tool_calls,
            },
            &mut response,
        );
        (response, found)
    }

    #[test]
    fn an_answer_is_screened_in_place_and_its_tool_calls_only_when_asked() {
        let (gateway, found) = screened(true);
        assert_eq!(gateway.content, "write to [REDACTED:email]");
        assert_eq!(gateway.model, "m [REDACTED:email]");
        assert_eq!(
            gateway.finish_reason.as_deref(),
            Some("stop [REDACTED:email]")
        );
        assert_eq!(gateway.tool_calls[0].name, "send [REDACTED:email]");
        assert_eq!(
            gateway.tool_calls[0].arguments,
            "{\"to\":\"[REDACTED:email]\"}"
        );
        assert_eq!(found.found.len(), 5);

        // A turn screens its calls' arguments on `tool_arguments` before they run.
        let (turn, found) = screened(false);
        assert_eq!(turn.model, "m [REDACTED:email]");
        assert_eq!(turn.tool_calls, answer().tool_calls);
        assert_eq!(found.found.len(), 3);
    }
}
