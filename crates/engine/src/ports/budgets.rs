//! `BudgetLedger`: where budget accounts and the money held on them live. In memory for
//! one process ([`crate::governance::budget::MemoryLedger`]); in the shared database
//! when replicas share one (PostgreSQL), so that replicas can never jointly pass a cap.
//!
//! An account is a policy's budget for one key (agent and/or client) in one period. It
//! holds what was `settled` (spent) and what is `reserved` by calls in flight. A
//! reservation (a hold) is refused when settled + reserved + its amount would pass the
//! cap of any account it needs; otherwise it is taken on all of them at once.

use async_trait::async_trait;

pub use agentplane_core::HoldId;
use agentplane_core::ReplicaId;

use super::StoreError;

/// One account's identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BudgetAccount {
    pub policy: String,
    /// The budget's key parts (agent and/or client), NUL-separated.
    pub key: String,
    /// The start of the account's period; `None` for a budget without a period.
    pub period_start: Option<String>,
}

/// One account a reservation needs, with its cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountNeed {
    pub account: BudgetAccount,
    pub cap_micros: u64,
    /// What the store's records say was already spent in the account's period, for an
    /// account the ledger may not have opened yet; `None` when it is known to be open.
    /// An account that exists keeps its own figure: this never overwrites it.
    pub opening_micros: Option<u64>,
}

impl AccountNeed {
    /// Whether `amount` more fits this account, which holds `settled` and `reserved`:
    /// an account at or over its cap refuses even 0.
    pub fn admits(&self, settled: u64, reserved: u64, amount: u64) -> Result<(), Exceeded> {
        let committed = settled.saturating_add(reserved);
        if committed >= self.cap_micros || committed.saturating_add(amount) > self.cap_micros {
            return Err(Exceeded {
                policy: self.account.policy.clone(),
                cap_micros: self.cap_micros,
                committed_micros: committed,
            });
        }
        Ok(())
    }
}

/// A refused reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exceeded {
    pub policy: String,
    pub cap_micros: u64,
    /// Settled plus reserved when refused.
    pub committed_micros: u64,
}

impl Exceeded {
    /// The refusal in words.
    pub fn message(&self) -> String {
        format!(
            "budget `{}` of ${:.6} is spent (${:.6} spent or reserved)",
            self.policy,
            agentplane_core::usd_of_micros(self.cap_micros),
            agentplane_core::usd_of_micros(self.committed_micros)
        )
    }
}

/// Budget accounts and holds.
#[async_trait]
pub trait BudgetLedger: Send + Sync {
    /// Holds `amount` micro-dollars on every account in `needs`, or on none: `Ok(Err)`
    /// names the first account whose cap it would pass. An account already at or over
    /// its cap refuses even an amount of 0.
    async fn reserve(
        &self,
        hold: &HoldId,
        needs: &[AccountNeed],
        amount: u64,
    ) -> Result<Result<(), Exceeded>, StoreError>;

    /// Ends a hold: its amount leaves `reserved` and `actual` joins `settled` on each of
    /// its accounts. A hold that is not (or no longer) held is a no-op.
    async fn settle(&self, hold: &HoldId, actual: u64) -> Result<(), StoreError>;

    /// Releases (settles at 0) every hold a replica that died still had; returns how
    /// many. Called by the survivor that claimed it. A ledger in memory has none.
    async fn release_holds_of(&self, replica: &ReplicaId) -> Result<u64, StoreError>;
}
