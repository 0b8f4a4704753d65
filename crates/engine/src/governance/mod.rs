//! Governance: what policy allows a turn to do, and the state that enforcement needs
//! (rate-limit windows, budget accounts, the active policy set). The turn loop and the
//! hub consult it; nothing here does I/O except through the store port it is given.
//!
//! - `policies`: the active, hot-swappable policy set.
//! - `rate`: exact sliding-window counters in memory (the default `RateLimits`).
//! - `budget`: reserve-then-settle spending accounts.
//! - `meter`: one model call's money, reserved to settled (the turn's and the gateway's).
//! - `ceiling`: the money of a call whose cost is known only afterwards (an external
//!   agent's turn), reserved at its configured ceiling and settled within it.
//! - `prices`: the price table that turns tokens into micro-dollars.
//! - `admission`: the one check before a turn or a gateway call starts.
//! - `audit`: the post-turn comparison of what happened with what policy allows.
//! - `content`: `content` policies on one text or stream of one surface.
//! - `outgoing`: everything a call returned (results, errors, tool calls, model),
//!   screened for secrets and by `content` policies before anything records it.

pub mod active;
pub mod admission;
pub mod audit;
pub mod budget;
pub mod call;
pub mod ceiling;
pub mod content;
pub mod explain;
pub mod meter;
pub mod outgoing;
pub mod prices;
pub mod rate;
pub mod rules;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agentplane_core::Event;

pub use active::{ActivePolicies, PolicyStatus};
pub use admission::{AdmissionError, Refusal, admit};
pub use budget::{
    BudgetError, BudgetKeeper, Exceeded, MemoryLedger, Reservation, worst_case_micros,
};
pub use meter::{Charge, Meter};
pub use prices::{Price, PriceTable};
pub use rate::{Limited, RateError, RateFacts, RateLimiter, RateLimits};

/// How long an approval waits for a decision unless configured otherwise: one day.
pub const DEFAULT_APPROVAL_TTL: Duration = Duration::from_secs(24 * 3600);

/// What events keep of tool-call arguments (`retention.tool_args`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ArgsRetention {
    /// The arguments as called.
    #[default]
    Full,
    /// Only `args_preview_hash`; arguments become `null` in events.
    Hash,
}

/// Everything governance needs at run time. One per process, shared by every turn.
pub struct Governance {
    pub policies: Arc<ActivePolicies>,
    /// The rate-limit counters: in memory by default, shared (Redis) across replicas.
    pub limiter: Arc<dyn RateLimits>,
    pub budgets: BudgetKeeper,
    pub prices: PriceTable,
    pub retention: ArgsRetention,
    /// How long an approval waits before it expires (a rejection).
    pub approval_ttl: Duration,
    /// Where every stored event, refusals outside threads and over-reported usage are
    /// reported (`ports::telemetry`).
    pub telemetry: crate::ports::Telemetry,
    /// Each agent's tags, to count the past spending of the agents a budget selects.
    pub agent_tags: BTreeMap<String, Vec<String>>,
}

impl Default for Governance {
    fn default() -> Self {
        Self {
            policies: Arc::new(ActivePolicies::default()),
            limiter: Arc::new(RateLimiter::default()),
            budgets: BudgetKeeper::default(),
            prices: PriceTable::default(),
            retention: ArgsRetention::Full,
            approval_ttl: DEFAULT_APPROVAL_TTL,
            telemetry: crate::ports::Telemetry::default(),
            agent_tags: BTreeMap::new(),
        }
    }
}

impl Governance {
    /// Reports a stored event of a turn of `agent` to the telemetry.
    pub fn tap(&self, agent: &str, event: &Event) {
        self.telemetry.event(agent, event);
    }
}
