//! `budget`: a USD amount per period. Money is kept in whole micro-dollars so later
//! reserve/settle arithmetic is exact; spending and checking are a later part's job.

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer};

use super::time_window::Zone;

/// The most a budget may be: one billion dollars (a typo guard, not a business rule).
const MAX_USD: f64 = 1e9;

impl Budget {
    /// When the period holding `at` began, in UTC; `None` for `total` (since forever).
    /// Periods start at local midnight in the budget's zone: a day, a week from
    /// Monday, a month from the 1st.
    pub fn period_start(&self, at: jiff::Timestamp) -> Option<jiff::Timestamp> {
        let local = at.to_zoned(self.timezone.tz().clone());
        let day = local.start_of_day().ok()?;
        let start = match self.period {
            BudgetPeriod::Total => return None,
            BudgetPeriod::Day => day,
            BudgetPeriod::Week => {
                let back = i64::from(local.weekday().to_monday_zero_offset());
                day.checked_sub(jiff::Span::new().days(back))
                    .ok()?
                    .start_of_day()
                    .ok()?
            }
            BudgetPeriod::Month => day.first_of_month().ok()?.start_of_day().ok()?,
        };
        Some(start.timestamp())
    }
}

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
