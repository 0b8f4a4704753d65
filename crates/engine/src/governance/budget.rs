//! Budgets: spending caps per policy, period and key (agent and/or client), enforced
//! by reserve-then-settle with zero overspend. Before a model call the caller reserves
//! the call's worst case ([`worst_case_micros`]: every input byte a token, plus the
//! call's output cap, which is always sent); the reservation is refused when an
//! account's settled spend plus what is reserved plus this would pass the cap. After the
//! call the reservation is replaced by the actual cost, which the output cap keeps at or
//! below the worst case. So concurrent calls, and replicas sharing a ledger, never
//! jointly pass a cap.
//!
//! The accounts live in a [`BudgetLedger`]: [`MemoryLedger`] for one process (nothing
//! survives a crash, so nothing stays held), the shared database's for replicas (holds
//! of a replica that died are released by the survivor that claims it). An account
//! opens with the store's record of what was spent in its period (cost events and
//! gateway calls), read once per account and process.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use agentplane_core::policy::{Budget, BudgetKey, Policy, PolicySet};
use agentplane_core::{ChatRequest, HoldId, ReplicaId};
use async_trait::async_trait;

use super::prices::PriceTable;
use crate::governance::rules::{self, RequestContext};
pub use crate::ports::Exceeded;
use crate::ports::{AccountNeed, BudgetAccount, BudgetLedger, CallStore, CostQuery, StoreError};

/// Tokens the chat template may add around each message (role markers, separators),
/// beyond its bytes.
const TEMPLATE_TOKENS_PER_MESSAGE: u64 = 16;
/// And around the whole request (the tool block's framing, the generation prompt).
const TEMPLATE_TOKENS_PER_REQUEST: u64 = 256;

/// The most tokens a call can use: as input one token per byte of what is sent
/// (messages, tool calls and tool schemas; no tokenizer makes a token of less than one
/// byte, template markers aside), as output `max_output_tokens`.
pub fn worst_case_tokens(request: &ChatRequest, max_output_tokens: u64) -> (u64, u64) {
    let mut bytes: u64 = 0;
    for message in &request.messages {
        bytes += message.content.as_deref().map_or(0, str::len) as u64;
        for call in &message.tool_calls {
            bytes += (call.name.len() + call.arguments.len() + call.id.len()) as u64;
        }
        bytes += message.tool_call_id.as_deref().map_or(0, str::len) as u64;
        bytes += TEMPLATE_TOKENS_PER_MESSAGE;
    }
    for tool in &request.tools {
        bytes += (tool.name.len() + tool.description.len()) as u64;
        bytes += serde_json::to_string(&tool.parameters).map_or(0, |s| s.len()) as u64;
        bytes += TEMPLATE_TOKENS_PER_MESSAGE;
    }
    bytes += TEMPLATE_TOKENS_PER_REQUEST;
    (bytes, max_output_tokens)
}

/// The most a call can cost, priced as the model it asks for: its
/// [`worst_case_tokens`] at the price table's rate. 0 for a model without a price.
pub fn worst_case_micros(
    prices: &PriceTable,
    request: &ChatRequest,
    max_output_tokens: u64,
) -> u64 {
    let (input, output) = worst_case_tokens(request, max_output_tokens);
    prices.cost_micros(&request.model, input, output)
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
    /// `None` when no budget applies.
    hold: Option<HoldId>,
    amount: u64,
}

impl Reservation {
    /// The worst case of a call no budget applies to: nothing held, the amount kept so
    /// the call is still charged within it (`meter.rs`).
    pub fn unbudgeted(amount: u64) -> Self {
        Self { hold: None, amount }
    }

    /// The amount held.
    pub fn amount(&self) -> u64 {
        self.amount
    }

    /// Whether money is held on a budget for it (some budget applies).
    pub fn is_held(&self) -> bool {
        self.hold.is_some()
    }
}

/// The budgets of this process: which accounts it opened, over the ledger that holds
/// them.
pub struct BudgetKeeper {
    ledger: Arc<dyn BudgetLedger>,
    opened: Mutex<HashSet<BudgetAccount>>,
}

impl Default for BudgetKeeper {
    fn default() -> Self {
        Self::new(Arc::new(MemoryLedger::default()))
    }
}

impl BudgetKeeper {
    /// Budgets kept in `ledger`.
    pub fn new(ledger: Arc<dyn BudgetLedger>) -> Self {
        Self {
            ledger,
            opened: Mutex::new(HashSet::new()),
        }
    }

    /// Reserves `amount` micro-dollars on every budget that applies to `ctx`, or on
    /// none. `agent_tags` gives each agent's tags, to count past spending of the agents
    /// a policy selects. An amount of 0 checks that no budget is already spent.
    pub async fn reserve(
        &self,
        store: &dyn CallStore,
        set: &PolicySet,
        ctx: &RequestContext<'_>,
        agent_tags: &BTreeMap<String, Vec<String>>,
        amount: u64,
    ) -> Result<Reservation, BudgetError> {
        let budgets = rules::budgets(set, ctx);
        if budgets.is_empty() {
            return Ok(Reservation::unbudgeted(amount));
        }
        let mut needs = Vec::with_capacity(budgets.len());
        for (name, budget) in &budgets {
            let account = account_key(name, budget, ctx);
            let opening_micros = if self.is_open(&account) {
                None
            } else {
                let Some(policy) = set.get(name) else {
                    continue;
                };
                Some(spent_so_far(store, policy, budget, ctx, &account, agent_tags).await?)
            };
            needs.push(AccountNeed {
                account,
                cap_micros: budget.usd_micros,
                opening_micros,
            });
        }
        // In one order everywhere, so two ledgers' row locks never wait on each other.
        needs.sort_by(|a, b| a.account.cmp(&b.account));
        let hold = HoldId::new();
        match self.ledger.reserve(&hold, &needs, amount).await? {
            Ok(()) => {
                let mut opened = lock(&self.opened);
                opened.extend(needs.into_iter().map(|need| need.account));
                Ok(Reservation {
                    hold: Some(hold),
                    amount,
                })
            }
            Err(exceeded) => Err(BudgetError::Exceeded(exceeded)),
        }
    }

    /// Replaces a reservation by what the call actually cost (0 when it failed or was
    /// never sent). A ledger that cannot be written is logged: the hold stays until
    /// this replica's holds are released.
    pub async fn settle(&self, reservation: Reservation, actual: u64) {
        let Some(hold) = reservation.hold else {
            return;
        };
        if let Err(e) = self.ledger.settle(&hold, actual).await {
            tracing::error!(%hold, error = %e, "a budget reservation could not be settled");
        }
    }

    /// Releases a reservation from where no `await` is possible (a drop): settled at 0
    /// on a task of its own.
    pub fn release_later(&self, reservation: Reservation) {
        let _ = self.settle_later(reservation, 0);
    }

    /// Settles `reservation` at `actual` on a task of its own, which goes on whatever
    /// happens to the caller: for a reservation dropped where nothing can be awaited
    /// (an abandoned call's meter), and for a settlement that must not be cut off
    /// half-way when the caller's future is dropped. The handle, if a task was started,
    /// says when it is done.
    pub fn settle_later(
        &self,
        reservation: Reservation,
        actual: u64,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let hold = reservation.hold?;
        let ledger = self.ledger.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => Some(runtime.spawn(async move {
                if let Err(e) = ledger.settle(&hold, actual).await {
                    tracing::error!(%hold, error = %e, "a budget reservation could not be settled");
                }
            })),
            Err(_) => {
                tracing::error!(%hold, "a budget reservation was dropped outside a runtime");
                None
            }
        }
    }

    /// Releases the holds of a replica that died (see [`BudgetLedger::release_holds_of`]).
    pub async fn release_holds_of(&self, replica: &ReplicaId) -> Result<u64, StoreError> {
        self.ledger.release_holds_of(replica).await
    }

    fn is_open(&self, account: &BudgetAccount) -> bool {
        lock(&self.opened).contains(account)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Account {
    settled: u64,
    reserved: u64,
}

#[derive(Default)]
struct Ledger {
    accounts: HashMap<BudgetAccount, Account>,
    holds: HashMap<HoldId, (Vec<BudgetAccount>, u64)>,
}

/// The ledger of one process, in memory: exact under concurrency (every decision under
/// one lock), and nothing held survives the process.
#[derive(Default)]
pub struct MemoryLedger {
    ledger: Mutex<Ledger>,
}

#[async_trait]
impl BudgetLedger for MemoryLedger {
    async fn reserve(
        &self,
        hold: &HoldId,
        needs: &[AccountNeed],
        amount: u64,
    ) -> Result<Result<(), Exceeded>, StoreError> {
        let mut ledger = lock(&self.ledger);
        for need in needs {
            let account = ledger
                .accounts
                .entry(need.account.clone())
                .or_insert(Account {
                    settled: need.opening_micros.unwrap_or(0),
                    reserved: 0,
                });
            if let Err(exceeded) = need.admits(account.settled, account.reserved, amount) {
                return Ok(Err(exceeded));
            }
        }
        for need in needs {
            if let Some(account) = ledger.accounts.get_mut(&need.account) {
                account.reserved = account.reserved.saturating_add(amount);
            }
        }
        let accounts = needs.iter().map(|need| need.account.clone()).collect();
        ledger.holds.insert(hold.clone(), (accounts, amount));
        Ok(Ok(()))
    }

    async fn settle(&self, hold: &HoldId, actual: u64) -> Result<(), StoreError> {
        let mut ledger = lock(&self.ledger);
        let Some((accounts, amount)) = ledger.holds.remove(hold) else {
            return Ok(());
        };
        for key in accounts {
            let account = ledger.accounts.entry(key).or_default();
            account.reserved = account.reserved.saturating_sub(amount);
            account.settled = account.settled.saturating_add(actual);
        }
        Ok(())
    }

    async fn release_holds_of(&self, _replica: &ReplicaId) -> Result<u64, StoreError> {
        Ok(0)
    }
}

fn account_key(policy: &str, budget: &Budget, ctx: &RequestContext<'_>) -> BudgetAccount {
    let mut key = String::new();
    for part in &budget.per {
        key.push('\u{0}');
        key.push_str(match part {
            BudgetKey::Agent => ctx.agent_name(),
            BudgetKey::Client => ctx.client_id(),
        });
    }
    BudgetAccount {
        policy: policy.to_owned(),
        key,
        period_start: budget.period_start(ctx.instant()).map(|t| t.to_string()),
    }
}

/// What the store recorded as spent in the account's period by the requests the
/// policy selects and the account's key covers.
async fn spent_so_far(
    store: &dyn CallStore,
    policy: &Policy,
    budget: &Budget,
    ctx: &RequestContext<'_>,
    key: &BudgetAccount,
    agent_tags: &BTreeMap<String, Vec<String>>,
) -> Result<u64, StoreError> {
    let per_agent = budget.per.contains(&BudgetKey::Agent);
    let per_client = budget.per.contains(&BudgetKey::Client);
    let rows = store
        .costs(&CostQuery {
            client: per_client.then(|| ctx.client_id().to_owned()),
            agent: per_agent.then(|| ctx.agent_name().to_owned()),
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
