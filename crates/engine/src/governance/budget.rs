//! Budgets: spending caps per policy, period and key (agent and/or client), enforced
//! by reserve-then-settle. Before a model call the caller reserves an estimate; the
//! reservation is refused when the account's settled spend plus what is reserved would
//! pass the cap. After the call the reservation is replaced by the actual cost. So
//! concurrent runs can jointly overspend by at most what each in-flight call costs
//! beyond its estimate: one call each.
//!
//! An account starts from the store's record of what was spent in its period (cost
//! events), read once per account; from then on this process keeps it exact.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use agentplane_core::policy::{Budget, BudgetKey, Policy, PolicySet};

use crate::policy::{self, RequestContext};
use crate::ports::{CostQuery, EventStore, StoreError};

/// One account: a policy's budget for one key in one period.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct AccountKey {
    policy: String,
    key: String,
    period_start: Option<String>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Account {
    settled: u64,
    reserved: u64,
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

/// Why a reservation failed.
#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    #[error("{}", .0.message())]
    Exceeded(Exceeded),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Money held for one call until it settles.
#[derive(Debug, Default)]
#[must_use = "a reservation must be settled, or its amount stays held"]
pub struct Reservation {
    accounts: Vec<AccountKey>,
    amount: u64,
}

/// Every budget account of this process.
#[derive(Default)]
pub struct BudgetKeeper {
    accounts: Mutex<HashMap<AccountKey, Account>>,
}

impl BudgetKeeper {
    /// Reserves `estimate` micro-dollars on every budget that applies to `ctx`, or on
    /// none. `agent_tags` gives each agent's tags, to count past spending of the agents
    /// a policy selects.
    pub async fn reserve(
        &self,
        store: &dyn EventStore,
        set: &PolicySet,
        ctx: &RequestContext<'_>,
        agent_tags: &BTreeMap<String, Vec<String>>,
        estimate: u64,
    ) -> Result<Reservation, BudgetError> {
        let budgets = policy::budgets(set, ctx);
        if budgets.is_empty() {
            return Ok(Reservation::default());
        }
        let mut wanted = Vec::with_capacity(budgets.len());
        for (name, budget) in &budgets {
            let key = account_key(name, budget, ctx);
            if !self.has(&key) {
                let Some(policy) = set.get(name) else {
                    continue;
                };
                let spent = spent_so_far(store, policy, budget, ctx, &key, agent_tags).await?;
                self.open(&key, spent);
            }
            wanted.push((key, budget.usd_micros));
        }
        let mut accounts = self.lock();
        for (key, cap) in &wanted {
            let account = accounts.get(key).copied().unwrap_or_default();
            let committed = account.settled.saturating_add(account.reserved);
            if committed >= *cap || committed.saturating_add(estimate) > *cap {
                return Err(BudgetError::Exceeded(Exceeded {
                    policy: key.policy.clone(),
                    cap_micros: *cap,
                    committed_micros: committed,
                }));
            }
        }
        for (key, _) in &wanted {
            let account = accounts.entry(key.clone()).or_default();
            account.reserved = account.reserved.saturating_add(estimate);
        }
        Ok(Reservation {
            accounts: wanted.into_iter().map(|(key, _)| key).collect(),
            amount: estimate,
        })
    }

    /// Replaces a reservation by what the call actually cost (0 when it failed).
    pub fn settle(&self, reservation: Reservation, actual: u64) {
        if reservation.accounts.is_empty() {
            return;
        }
        let mut accounts = self.lock();
        for key in reservation.accounts {
            let account = accounts.entry(key).or_default();
            account.reserved = account.reserved.saturating_sub(reservation.amount);
            account.settled = account.settled.saturating_add(actual);
        }
    }

    fn has(&self, key: &AccountKey) -> bool {
        self.lock().contains_key(key)
    }

    /// Opens an account with what the store says was spent, unless another call opened
    /// it meanwhile (that one is as fresh and may already hold reservations).
    fn open(&self, key: &AccountKey, spent: u64) {
        self.lock().entry(key.clone()).or_insert(Account {
            settled: spent,
            reserved: 0,
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<AccountKey, Account>> {
        match self.accounts.lock() {
            Ok(accounts) => accounts,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

fn account_key(policy: &str, budget: &Budget, ctx: &RequestContext<'_>) -> AccountKey {
    let mut key = String::new();
    for part in &budget.per {
        key.push('\u{0}');
        key.push_str(match part {
            BudgetKey::Agent => ctx.agent,
            BudgetKey::Client => ctx.client,
        });
    }
    AccountKey {
        policy: policy.to_owned(),
        key,
        period_start: budget.period_start(ctx.at).map(|t| t.to_string()),
    }
}

/// What the store recorded as spent in the account's period by the requests the
/// policy selects and the account's key covers.
async fn spent_so_far(
    store: &dyn EventStore,
    policy: &Policy,
    budget: &Budget,
    ctx: &RequestContext<'_>,
    key: &AccountKey,
    agent_tags: &BTreeMap<String, Vec<String>>,
) -> Result<u64, StoreError> {
    let per_agent = budget.per.contains(&BudgetKey::Agent);
    let per_client = budget.per.contains(&BudgetKey::Client);
    let rows = store
        .costs(&CostQuery {
            client: per_client.then(|| ctx.client.to_owned()),
            agent: per_agent.then(|| ctx.agent.to_owned()),
            since: key.period_start.clone(),
            ..CostQuery::default()
        })
        .await?;
    let no_tags = Vec::new();
    Ok(rows
        .iter()
        .filter(|row| {
            let tags = agent_tags.get(&row.agent).unwrap_or(&no_tags);
            policy
                .targets()
                .matches(&row.agent, tags, None, &row.client)
        })
        .map(|row| row.usd_micros)
        .fold(0u64, u64::saturating_add))
}
