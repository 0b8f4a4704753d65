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
//! - `state`: `Governance` itself, the state above held together, which the files that
//!   decide with it read; this file only names the parts.

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
pub mod state;

pub use active::{ActivePolicies, PolicyStatus};
pub use admission::{AdmissionError, Refusal, admit};
pub use budget::{
    BudgetError, BudgetKeeper, Exceeded, MemoryLedger, Reservation, worst_case_micros,
};
pub use meter::{Charge, Meter};
pub use prices::{Price, PriceTable};
pub use rate::{Limited, RateError, RateFacts, RateLimiter, RateLimits};
pub use state::{ArgsRetention, DEFAULT_APPROVAL_TTL, Governance};
