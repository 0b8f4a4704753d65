//! The money of one call whose cost is known only after it ran: a turn of an external
//! agent (ACP or A2A), which calls its own models and tells us afterwards what it spent.
//! Its **ceiling** (`[agents.NAME] max_cost_usd`, `AgentLimits::max_cost_micros`) is its
//! worst case, and the rules are the model call's (`meter.rs`) with the ceiling in place
//! of the priced token caps:
//!
//! - The ceiling is reserved on every budget that applies before the agent is asked; a
//!   turn whose ceiling does not fit is refused (`BUDGET_EXCEEDED`). So concurrent turns
//!   never jointly pass a cap, whatever they report later.
//! - A budget applies and the agent has no ceiling: the turn is refused, fail-closed,
//!   with a message naming the key ([`CeilingError::Unbounded`]). Nothing that could
//!   spend an unknown amount runs against a cap.
//! - A reported cost is charged, **never more than the ceiling**: an agent that reports
//!   more is charged the ceiling, and the report is kept and flagged (a `security_event`
//!   of type [`USAGE_OVER_REPORTED`], the `usage_over_reported_total` metric, a warning
//!   line). The ceiling is the operator's statement of the most a turn may cost; the
//!   budget was promised to hold to it.
//! - No cost reported: the ceiling if the agent worked (it answered, or was cancelled,
//!   or failed after it had sent anything), nothing if it failed before it sent anything
//!   (unreachable, refused the request, could not start).
//! - Dropped unsettled (the turn's future dropped, the store failing mid-turn): the
//!   ceiling, settled in the background, so a hold never outlives its turn.
//! - No ceiling and no budget: the reported cost as reported, none reported nothing.
//!
//! What must not live here: how the charge is recorded (the turn's events,
//! `external_turn.rs`), the ledgers (`budget.rs`).

use std::sync::Arc;

pub use super::meter::USAGE_OVER_REPORTED;
use super::rules::{self, RequestContext};
use super::{BudgetError, Governance, Reservation};
use crate::ports::CallStore;

/// Why a turn's ceiling could not be reserved.
#[derive(Debug, thiserror::Error)]
pub enum CeilingError {
    /// A budget applies to an agent that has no ceiling: its cost cannot be reserved.
    #[error("budget `{policy}` applies to an agent without `max_cost_usd`")]
    Unbounded { policy: String },
    #[error(transparent)]
    Budget(#[from] BudgetError),
}

impl CeilingError {
    /// The refusal of an unbounded agent in words, naming the key to set.
    pub fn unbounded_message(policy: &str, agent: &str) -> String {
        format!(
            "budget `{policy}` applies to agent `{agent}`, whose cost is known only after \
             it ran: set `[agents.{agent}] max_cost_usd` (the most one turn may cost) so \
             the budget can reserve it; until then its turns are refused"
        )
    }
}

/// Reserves `ceiling` (micro-dollars; `None`: the agent has none) for a call of `ctx`
/// on every budget that applies, or refuses it.
pub async fn reserve(
    governance: &Arc<Governance>,
    store: &dyn CallStore,
    ctx: &RequestContext<'_>,
    ceiling: Option<u64>,
) -> Result<CeilingMeter, CeilingError> {
    let policies = governance.policies.current();
    if ceiling.is_none()
        && let Some((policy, _)) = rules::budgets(&policies, ctx).first()
    {
        return Err(CeilingError::Unbounded {
            policy: (*policy).to_owned(),
        });
    }
    let reservation = governance
        .budgets
        .reserve(
            store,
            &policies,
            ctx,
            &governance.agent_tags,
            ceiling.unwrap_or(0),
        )
        .await?;
    Ok(CeilingMeter {
        governance: governance.clone(),
        reservation: Some(reservation),
        ceiling,
    })
}

/// What a call under a ceiling is charged, and what it claimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CeilingCharge {
    /// What the budgets and the cost records are charged.
    pub usd_micros: u64,
    /// What the agent said it cost, when it said.
    pub reported_micros: Option<u64>,
    /// The ceiling reserved, if the agent has one.
    pub ceiling_micros: Option<u64>,
}

impl CeilingCharge {
    /// The agent reported more than its ceiling: charged the ceiling instead.
    pub fn over_reported(&self) -> bool {
        matches!(
            (self.reported_micros, self.ceiling_micros),
            (Some(reported), Some(ceiling)) if reported > ceiling
        )
    }
}

/// One call's ceiling, held until it is settled. Dropped unsettled, it charges the
/// ceiling in the background.
#[must_use = "a ceiling meter settles a call; dropped, it charges the ceiling"]
pub struct CeilingMeter {
    governance: Arc<Governance>,
    reservation: Option<Reservation>,
    ceiling: Option<u64>,
}

impl CeilingMeter {
    /// What the call is charged when the agent reported `reported` micro-dollars (or
    /// nothing); `worked`: whether it did work we saw, or was asked and not heard to
    /// fail before starting (see the module comment).
    pub fn price(&self, reported: Option<u64>, worked: bool) -> CeilingCharge {
        let usd_micros = match (reported, self.ceiling) {
            (Some(reported), Some(ceiling)) => reported.min(ceiling),
            (Some(reported), None) => reported,
            (None, Some(ceiling)) if worked => ceiling,
            (None, _) => 0,
        };
        CeilingCharge {
            usd_micros,
            reported_micros: reported,
            ceiling_micros: self.ceiling,
        }
    }

    /// Settles the call at `charge` (from [`CeilingMeter::price`]), never above the
    /// ceiling. An over-report is counted and logged here; the turn records it as an
    /// event.
    pub async fn settle(mut self, charge: &CeilingCharge, agent: &str, provider: &str) {
        if charge.over_reported() {
            tracing::warn!(
                agent,
                provider,
                reported_micros = charge.reported_micros,
                ceiling_micros = charge.ceiling_micros,
                "an external agent reported a cost above its max_cost_usd; charged the ceiling"
            );
            self.governance
                .telemetry
                .usage_over_reported(agent, provider);
        }
        let Some(reservation) = self.reservation.take() else {
            return;
        };
        let usd_micros = self
            .ceiling
            .map_or(charge.usd_micros, |c| charge.usd_micros.min(c));
        // On a task of its own: a caller dropped while the ledger is written still
        // leaves nothing held.
        if let Some(done) = self
            .governance
            .budgets
            .settle_later(reservation, usd_micros)
        {
            let _ = done.await;
        }
    }
}

impl Drop for CeilingMeter {
    fn drop(&mut self) {
        if let Some(reservation) = self.reservation.take() {
            let _ = self
                .governance
                .budgets
                .settle_later(reservation, self.ceiling.unwrap_or(0));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meter(ceiling: Option<u64>) -> CeilingMeter {
        CeilingMeter {
            governance: Arc::new(Governance::default()),
            reservation: None,
            ceiling,
        }
    }

    #[test]
    fn a_report_is_charged_up_to_the_ceiling_and_above_it_is_flagged() {
        let m = meter(Some(9_000));
        let within = m.price(Some(4_000), true);
        assert_eq!(within.usd_micros, 4_000);
        assert!(!within.over_reported());
        let above = m.price(Some(12_000), true);
        assert_eq!(above.usd_micros, 9_000);
        assert_eq!(above.reported_micros, Some(12_000));
        assert!(above.over_reported());
    }

    #[test]
    fn no_report_is_the_ceiling_if_the_agent_worked_and_nothing_if_it_never_started() {
        let m = meter(Some(9_000));
        assert_eq!(m.price(None, true).usd_micros, 9_000);
        assert_eq!(m.price(None, false).usd_micros, 0);
    }

    #[test]
    fn without_a_ceiling_the_report_is_charged_as_reported() {
        let m = meter(None);
        assert_eq!(m.price(Some(250_000), true).usd_micros, 250_000);
        assert!(!m.price(Some(250_000), true).over_reported());
        assert_eq!(m.price(None, true).usd_micros, 0);
    }
}
