//! The state governance keeps at run time: one `Governance` per process, shared by every
//! turn, and the settings it is built with. Its field types live in their own files
//! (`active`, `rate`, `budget`, `prices`); what is decided with it (admission, metering,
//! a tool call's verdict) lives beside, in files that read it from here. Nothing here
//! decides anything.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agentplane_core::Event;

use super::active::ActivePolicies;
use super::budget::BudgetKeeper;
use super::prices::PriceTable;
use super::rate::{RateLimiter, RateLimits};

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
