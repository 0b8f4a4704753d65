//! A tool call whose cost is known only after it ran (`Ensemble::spending`: a remote
//! A2A agent asked as `a2a__NAME`): its ceiling reserved on the caller's budgets before
//! the call, what it reports charged within the ceiling and recorded as the turn's
//! `cost`, by the rules of a remote agent's turn (`governance::ceiling`): a report
//! above the ceiling is charged the ceiling and flagged (`usage_over_reported`), none
//! reported after the callee was asked is the ceiling, a call dropped mid-way (the
//! turn cancelled) is charged the ceiling in the background.
//!
//! What must not live here: the gate's decisions (`tool_gate.rs`), how a result is
//! screened and recorded (`tool_call.rs`).

use agentplane_core::{EventPayload, ToolCall, ToolErrorKind, usd_of_micros};

use super::active::*;
use super::progress::*;
use super::request::*;
use super::tool_gate::*;
use crate::governance::ceiling::{self, CeilingError, CeilingMeter, USAGE_OVER_REPORTED};
use crate::governance::rules::RequestContext;
use crate::governance::{BudgetError, Refusal};
use crate::ports::Spending;
use crate::ports::{Spent, ToolError};

/// A [`Spending`] tool's ceiling, held for its call.
pub(super) struct Held {
    spending: Spending,
    meter: CeilingMeter,
}

impl ActiveTurn<'_> {
    /// Reserves the ceiling of a call of a [`Spending`] tool for `ctx` (the caller:
    /// agent, client, the tool and its arguments), or refuses it: a budget that cannot
    /// hold the ceiling, or one that applies to a tool without a ceiling, refuses the
    /// call as a `policy_denied` of type `budget`, the callee never asked.
    pub(super) async fn reserve_spending(
        &self,
        call: &ToolCall,
        spending: Spending,
        ctx: &RequestContext<'_>,
    ) -> Result<Result<Held, Gated>, Stop> {
        let governance = &self.deps.governance;
        match ceiling::reserve(
            governance,
            self.deps.store.as_ref(),
            ctx,
            spending.max_micros,
        )
        .await
        {
            Ok(meter) => Ok(Ok(Held { spending, meter })),
            Err(CeilingError::Budget(BudgetError::Exceeded(exceeded))) => Ok(Err(self
                .refuse(call, &Refusal::BudgetExceeded(exceeded))
                .await?)),
            Err(CeilingError::Unbounded { policy }) => {
                let remote = spending
                    .label
                    .split_once(':')
                    .map_or(spending.label.as_str(), |(_, name)| name);
                let message = CeilingError::unbounded_message(&policy, remote);
                crate::ports::telemetry::governance_event("policy_denied", &policy);
                self.record(EventPayload::PolicyDenied {
                    policy,
                    policy_type: "budget".to_owned(),
                    tool: Some(call.name.clone()),
                    call_id: Some(call.id.clone()),
                    detail: message.clone(),
                    explanation: None,
                })
                .await?;
                Ok(Err(Gated::Done(Err(ToolError::new(
                    ToolErrorKind::PolicyDenied,
                    message,
                )))))
            }
            Err(CeilingError::Budget(BudgetError::Store(e))) => Err(Stop::Store(e)),
        }
    }

    /// Settles a held ceiling at what the call reported (`spent`), recording the
    /// charge as the turn's `usage` and `cost` (and a `security_event` when the report
    /// passed the ceiling) before the call's result.
    pub(super) async fn settle_spending(
        &self,
        held: Held,
        spent: Spent,
        request: &TurnRequest,
    ) -> Result<(), Stop> {
        let Held { spending, meter } = held;
        let reported = spent.usage.map(|usage| {
            self.deps
                .governance
                .prices
                .cost_micros(&spending.label, usage.input_tokens, usage.output_tokens)
                .max(usage.cost_usd_micros.unwrap_or(0))
        });
        let charge = meter.price(reported, spent.worked);
        let provider = spending
            .label
            .split(':')
            .next()
            .unwrap_or(&spending.label)
            .to_owned();
        if spent.worked || charge.usd_micros > 0 {
            let usage = spent.usage.unwrap_or_default();
            if charge.over_reported() {
                self.record(EventPayload::SecurityEvent {
                    event_type: USAGE_OVER_REPORTED.to_owned(),
                    tool: None,
                    detail: format!(
                        "`{}` reported ${} for one call, more than its max_cost_usd (${}); \
                         charged the ceiling",
                        spending.label,
                        usd_of_micros(charge.reported_micros.unwrap_or_default()),
                        usd_of_micros(charge.ceiling_micros.unwrap_or_default()),
                    ),
                })
                .await?;
            }
            self.record(EventPayload::Usage {
                provider: provider.clone(),
                model: spending.label.clone(),
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                reported: reported.is_some(),
            })
            .await?;
            self.record(EventPayload::Cost {
                provider: provider.clone(),
                model: spending.label.clone(),
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                usd_micros: charge.usd_micros,
                usd: usd_of_micros(charge.usd_micros),
            })
            .await?;
        }
        meter.settle(&charge, &request.agent.name, &provider).await;
        Ok(())
    }
}
