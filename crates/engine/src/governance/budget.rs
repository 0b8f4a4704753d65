//! Budgets: reserve before a model call, settle after.
#[derive(Default)]
pub struct BudgetKeeper {}
