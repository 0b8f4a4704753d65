//! `BudgetLedger` on PostgreSQL: the budget accounts every replica shares, so that
//! replicas can never jointly pass a cap. A reservation locks the rows of the accounts
//! it needs (`SELECT … FOR UPDATE`, always in the accounts' order, so two reservations
//! never wait on each other in a circle), checks them and takes its hold in one
//! transaction. Holds name their replica: the survivor that claims a dead replica
//! releases what it still held.

use std::collections::BTreeMap;

use agentplane_core::{HoldId, ReplicaId};
use agentplane_engine::ports::{AccountNeed, BudgetAccount, BudgetLedger, Exceeded, StoreError};
use async_trait::async_trait;
use deadpool_postgres::{Object, Pool};

use crate::db::Db;
use crate::nul::enc;
use crate::rows::pg;

/// The budget accounts of one database, as one replica uses them.
pub struct PostgresLedger {
    pool: Pool,
    replica: ReplicaId,
}

impl PostgresLedger {
    pub(crate) fn new(pool: Pool, replica: ReplicaId) -> Self {
        Self { pool, replica }
    }

    async fn conn(&self) -> Result<Object, StoreError> {
        self.pool
            .get()
            .await
            .map_err(|e| StoreError::Backend(format!("no PostgreSQL connection: {e}")))
    }
}

/// Micro-dollars as stored (BIGINT); amounts beyond `i64::MAX` are held as the maximum.
fn micros(amount: u64) -> i64 {
    i64::try_from(amount).unwrap_or(i64::MAX)
}

fn period(account: &BudgetAccount) -> &str {
    account.period_start.as_deref().unwrap_or("")
}

#[async_trait]
impl BudgetLedger for PostgresLedger {
    async fn reserve(
        &self,
        hold: &HoldId,
        needs: &[AccountNeed],
        amount: u64,
    ) -> Result<Result<(), Exceeded>, StoreError> {
        if needs.is_empty() {
            return Ok(Ok(()));
        }
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await.map_err(pg)?;
        let db = Db::Tx(&tx);
        let mut sorted: Vec<&AccountNeed> = needs.iter().collect();
        sorted.sort_by(|a, b| a.account.cmp(&b.account));
        for need in &sorted {
            let account = &need.account;
            let key = enc(&account.key);
            db.execute(
                "INSERT INTO budget_accounts (policy, key, period_start, settled, reserved)
                 VALUES ($1, $2, $3, $4, 0) ON CONFLICT DO NOTHING",
                &[
                    &account.policy,
                    &key,
                    &period(account),
                    &micros(need.opening_micros.unwrap_or(0)),
                ],
            )
            .await
            .map_err(pg)?;
            let row = db
                .query_opt(
                    "SELECT settled, reserved FROM budget_accounts
                     WHERE policy = $1 AND key = $2 AND period_start = $3 FOR UPDATE",
                    &[&account.policy, &key, &period(account)],
                )
                .await
                .map_err(pg)?
                .ok_or_else(|| StoreError::Backend("a budget account vanished".into()))?;
            let settled: i64 = row.get(0);
            let reserved: i64 = row.get(1);
            let stored = |v: i64| u64::try_from(v).unwrap_or(0);
            if let Err(exceeded) = need.admits(stored(settled), stored(reserved), amount) {
                // Nothing was held; the transaction rolls back when dropped.
                return Ok(Err(exceeded));
            }
        }
        for need in &sorted {
            let account = &need.account;
            let key = enc(&account.key);
            db.execute(
                "UPDATE budget_accounts SET reserved = reserved + $4
                 WHERE policy = $1 AND key = $2 AND period_start = $3",
                &[&account.policy, &key, &period(account), &micros(amount)],
            )
            .await
            .map_err(pg)?;
            db.execute(
                "INSERT INTO budget_holds (hold, replica, policy, key, period_start, amount)
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &hold.as_str(),
                    &self.replica.as_str(),
                    &account.policy,
                    &key,
                    &period(account),
                    &micros(amount),
                ],
            )
            .await
            .map_err(pg)?;
        }
        tx.commit().await.map_err(pg)?;
        Ok(Ok(()))
    }

    async fn settle(&self, hold: &HoldId, actual: u64) -> Result<(), StoreError> {
        end_holds(
            &self.pool,
            "DELETE FROM budget_holds WHERE hold = $1
             RETURNING policy, key, period_start, amount",
            hold.as_str(),
            actual,
        )
        .await
        .map(|_| ())
    }

    async fn release_holds_of(&self, replica: &ReplicaId) -> Result<u64, StoreError> {
        end_holds(
            &self.pool,
            "DELETE FROM budget_holds WHERE replica = $1
             RETURNING policy, key, period_start, amount",
            replica.as_str(),
            0,
        )
        .await
    }
}

/// Deletes the holds `delete` selects by `id` and takes their amounts off their
/// accounts' `reserved`, adding `actual` to each account's `settled` once per hold.
/// Accounts are updated in their order, as reservations lock them. Returns how many
/// holds ended.
async fn end_holds(pool: &Pool, delete: &str, id: &str, actual: u64) -> Result<u64, StoreError> {
    let mut conn = pool
        .get()
        .await
        .map_err(|e| StoreError::Backend(format!("no PostgreSQL connection: {e}")))?;
    let tx = conn.transaction().await.map_err(pg)?;
    let db = Db::Tx(&tx);
    let rows = db.query(delete, &[&id]).await.map_err(pg)?;
    // (policy, stored key, period) → (amount released, holds)
    let mut ended: BTreeMap<(String, String, String), (i64, i64)> = BTreeMap::new();
    for row in &rows {
        let entry = ended
            .entry((row.get(0), row.get(1), row.get(2)))
            .or_default();
        entry.0 = entry.0.saturating_add(row.get::<_, i64>(3));
        entry.1 += 1;
    }
    for ((policy, key, period_start), (amount, holds)) in &ended {
        let settled = micros(actual).saturating_mul(*holds);
        db.execute(
            "UPDATE budget_accounts
             SET reserved = GREATEST(reserved - $4, 0), settled = settled + $5
             WHERE policy = $1 AND key = $2 AND period_start = $3",
            &[policy, key, period_start, amount, &settled],
        )
        .await
        .map_err(pg)?;
    }
    tx.commit().await.map_err(pg)?;
    Ok(rows.len() as u64)
}
