//! `budget`: a USD amount per period. Money is kept in whole micro-dollars so later
//! reserve/settle arithmetic is exact; spending and checking are a later part's job.

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer};

use super::time_window::Zone;

/// The most a budget may be: one billion dollars (a typo guard, not a business rule).
const MAX_USD: f64 = 1e9;

/// A spending cap per period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    /// The cap in micro-dollars (1 USD = 1,000,000), more than zero.
    pub usd_micros: u64,
    /// How often the budget resets.
    pub period: BudgetPeriod,
    /// The zone whose midnight starts a period (default UTC).
    pub timezone: Zone,
    /// Which request facts get separate budgets (agent and/or client); empty means one
    /// budget shared by everything the policy selects.
    pub per: Vec<BudgetKey>,
}

/// A budget's reset period, on calendar boundaries in the budget's zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetPeriod {
    /// Resets at local midnight.
    Day,
    /// Resets at local midnight between Sunday and Monday.
    Week,
    /// Resets at local midnight on the first of the month.
    Month,
    /// Never resets.
    Total,
}

/// A request fact that keys a separate budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetKey {
    /// One budget per agent.
    Agent,
    /// One budget per client.
    Client,
}

/// A positive USD amount, parsed from a YAML number, at micro-dollar precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsdMicros(pub u64);

impl<'de> Deserialize<'de> for UsdMicros {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct UsdVisitor;
        impl Visitor<'_> for UsdVisitor {
            type Value = UsdMicros;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a USD amount")
            }
            fn visit_f64<E: de::Error>(self, usd: f64) -> Result<UsdMicros, E> {
                if !usd.is_finite() || usd <= 0.0 {
                    return Err(E::custom("must be more than 0"));
                }
                if usd > MAX_USD {
                    return Err(E::custom("must be at most 1000000000"));
                }
                // In range by the checks above, so the cast neither saturates nor wraps.
                let micros = (usd * 1e6).round() as u64;
                if micros == 0 {
                    return Err(E::custom("must be at least 0.000001"));
                }
                Ok(UsdMicros(micros))
            }
            fn visit_i64<E: de::Error>(self, usd: i64) -> Result<UsdMicros, E> {
                self.visit_f64(usd as f64)
            }
            fn visit_u64<E: de::Error>(self, usd: u64) -> Result<UsdMicros, E> {
                self.visit_f64(usd as f64)
            }
        }
        deserializer.deserialize_f64(UsdVisitor)
    }
}
