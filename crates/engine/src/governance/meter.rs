//! The money of one model call, from its reservation to its settlement: the one place
//! the rules of ADR 0029 and 0042 are applied, for the turn and the gateway alike.
//!
//! - A call is reserved at its worst case before it starts (every byte of the request a
//!   token, the whole output cap), whether or not a budget applies, so the worst case
//!   is known at settlement.
//! - An answered call is charged its reported usage, **each token count capped at what
//!   the call could have used** (input: one token per byte sent plus template
//!   overhead; output: its `max_tokens`), priced as the model that answered; where a
//!   budget holds money, never more than the reservation. Usage reported above the
//!   worst case is recorded as reported and flagged (a `security_event` in a turn,
//!   `agentplane_usage_over_reported_total`, a warning line). A call without reported
//!   usage costs the worst case, never 0.
//! - A call the caller abandons (a cancelled turn, a client that left, a dropped
//!   future) is charged the worst case: the model was asked to do the work.
//! - A call that failed upstream costs nothing if no text had arrived, and the worst
//!   case if some had (the model worked; how much is unknown).
//!
//! What must not live here: admission (policies, rate limits: `admission.rs`), the
//! ledgers (`budget.rs`), how a call is made (`turn`, `gateway`).

use std::sync::Arc;

use agentplane_core::Usage;

use super::{Governance, Reservation};

/// The `security_event` type of usage reported above what a call could have cost (a
/// model call's worst case, an external agent's ceiling: `ceiling.rs`).
pub const USAGE_OVER_REPORTED: &str = "usage_over_reported";

/// What a call is charged, and what its server claimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charge {
    /// What the budgets and the cost records are charged.
    pub usd_micros: u64,
    /// The reported usage priced, when the server reported usage.
    pub reported_micros: Option<u64>,
    /// The worst case reserved for the call.
    pub worst_micros: u64,
    /// The server reported more tokens than the call could have used.
    pub over_reported: bool,
}

impl Charge {
    /// The server reported usage above the call's worst case: it lied, or the worst
    /// case is wrong; either way only what the call could have used was charged.
    pub fn over_reported(&self) -> bool {
        self.over_reported
    }
}

/// Called with the worst case when a call is dropped unsettled (abandoned), so the
/// caller can record what was charged.
pub type OnAbandon = Box<dyn FnOnce(Charge) + Send>;

/// One model call's reservation, held until it is settled. Dropped unsettled, it
/// charges the worst case (in the background) and tells [`Meter::on_abandon`]'s hook.
#[must_use = "a meter settles a call; dropped, it charges the worst case"]
pub struct Meter {
    governance: Arc<Governance>,
    reservation: Option<Reservation>,
    /// The reservation's amount: the worst case priced as the model asked for.
    worst: u64,
    /// The most input and output tokens the call can use.
    worst_tokens: (u64, u64),
    /// Money is held on a budget: nothing above `worst` may ever be charged.
    held: bool,
    on_abandon: Option<OnAbandon>,
}

impl Meter {
    /// A meter over `reservation` (from [`super::BudgetKeeper::reserve`], whose amount
    /// is the call's worst case) for a call of at most `worst_tokens` (input, output:
    /// [`super::budget::worst_case_tokens`]).
    pub fn new(
        governance: Arc<Governance>,
        reservation: Reservation,
        worst_tokens: (u64, u64),
    ) -> Self {
        Self {
            governance,
            worst: reservation.amount(),
            held: reservation.is_held(),
            reservation: Some(reservation),
            worst_tokens,
            on_abandon: None,
        }
    }

    /// The worst case reserved.
    pub fn worst(&self) -> u64 {
        self.worst
    }

    /// What to do when the call is abandoned (dropped unsettled): record it.
    pub fn on_abandon(&mut self, hook: OnAbandon) {
        self.on_abandon = Some(hook);
    }

    /// What an answered call of `model` that reported `usage` (or none) is charged:
    /// the reported tokens, each count capped at what the call could have used, priced
    /// as the model that answered; no usage is the worst case. Where a budget holds
    /// money, never more than the reservation, whatever the model answered as.
    pub fn price(&self, model: &str, usage: Option<Usage>) -> Charge {
        let prices = &self.governance.prices;
        let (max_input, max_output) = self.worst_tokens;
        let reported_micros =
            usage.map(|u| prices.cost_micros(model, u.input_tokens, u.output_tokens));
        let over_reported =
            usage.is_some_and(|u| u.input_tokens > max_input || u.output_tokens > max_output);
        let (input, output) = usage.map_or((max_input, max_output), |u| {
            (
                u.input_tokens.min(max_input),
                u.output_tokens.min(max_output),
            )
        });
        let mut usd_micros = prices.cost_micros(model, input, output);
        if self.held {
            usd_micros = usd_micros.min(self.worst);
        }
        Charge {
            usd_micros,
            reported_micros,
            worst_micros: self.worst,
            over_reported,
        }
    }

    /// What an abandoned call, or one that failed after its text began, is charged.
    pub fn worst_charge(&self) -> Charge {
        Charge {
            usd_micros: self.worst,
            reported_micros: None,
            worst_micros: self.worst,
            over_reported: false,
        }
    }

    /// Settles the call at `charge` (from [`Meter::price`] or [`Meter::worst_charge`]).
    /// An over-report is counted and logged here; the turn also records it as an event.
    pub async fn settle(mut self, charge: &Charge, agent: &str, provider: &str) {
        if charge.over_reported() {
            tracing::warn!(
                agent,
                provider,
                reported_micros = charge.reported_micros,
                worst_micros = charge.worst_micros,
                "a model server reported more usage than the call could have used; \
                 charged the worst case"
            );
            self.governance
                .telemetry
                .usage_over_reported(agent, provider);
        }
        if let Some(reservation) = self.reservation.take() {
            let usd_micros = if self.held {
                charge.usd_micros.min(self.worst)
            } else {
                charge.usd_micros
            };
            settle_to_the_end(&self.governance, reservation, usd_micros).await;
        }
    }

    /// The call failed before any text arrived: nothing is charged.
    pub async fn release(mut self) {
        if let Some(reservation) = self.reservation.take() {
            settle_to_the_end(&self.governance, reservation, 0).await;
        }
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        let Some(reservation) = self.reservation.take() else {
            return;
        };
        let charge = self.worst_charge();
        let _ = self
            .governance
            .budgets
            .settle_later(reservation, charge.usd_micros);
        if let Some(hook) = self.on_abandon.take() {
            hook(charge);
        }
    }
}

/// Settles on a task of its own and waits for it: if the caller's future is dropped
/// while the ledger is being written (a client leaves at that moment), the settlement
/// still completes instead of leaving the money held.
async fn settle_to_the_end(governance: &Governance, reservation: Reservation, usd_micros: u64) {
    if let Some(done) = governance.budgets.settle_later(reservation, usd_micros) {
        let _ = done.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::governance::{Price, PriceTable};

    fn meter(worst: u64) -> Meter {
        let prices = PriceTable::new(vec![(
            "m".to_owned(),
            Price {
                input_per_mtok_micros: 1_000_000,
                output_per_mtok_micros: 1_000_000,
            },
        )]);
        let governance = Arc::new(Governance {
            prices,
            ..Governance::default()
        });
        Meter::new(
            governance,
            Reservation::unbudgeted(worst),
            (worst / 2, worst / 2),
        )
    }

    #[tokio::test]
    async fn usage_above_the_worst_case_is_charged_the_worst_case_and_flagged() {
        let m = meter(50);
        let honest = m.price(
            "m",
            Some(Usage {
                input_tokens: 10,
                output_tokens: 20,
            }),
        );
        assert_eq!((honest.usd_micros, honest.over_reported()), (30, false));
        let lying = m.price(
            "m",
            Some(Usage {
                input_tokens: 1_000_000,
                output_tokens: 0,
            }),
        );
        // Input capped at the 25 tokens the call could have sent.
        assert_eq!(lying.usd_micros, 25);
        assert_eq!(lying.reported_micros, Some(1_000_000));
        assert!(lying.over_reported());
        let silent = m.price("m", None);
        assert_eq!((silent.usd_micros, silent.over_reported()), (50, false));
        m.settle(&lying, "a", "p").await;
    }

    #[tokio::test]
    async fn a_dropped_meter_tells_its_hook_the_worst_case() {
        let mut m = meter(70);
        let (tx, rx) = std::sync::mpsc::channel();
        m.on_abandon(Box::new(move |charge| {
            let _ = tx.send(charge.usd_micros);
        }));
        drop(m);
        assert_eq!(rx.recv().ok(), Some(70));
    }
}
