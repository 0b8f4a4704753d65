//! The price table: USD per million input and output tokens, per model. Amounts are
//! kept in micro-dollars so sums are exact.

/// The price of one model, in micro-dollars per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Price {
    pub input_per_mtok_micros: u64,
    pub output_per_mtok_micros: u64,
}

/// Prices by model name. A model not in the table costs nothing (local models).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PriceTable {
    entries: Vec<(String, Price)>,
}

impl PriceTable {
    /// A table of exactly these entries.
    pub fn new(entries: Vec<(String, Price)>) -> Self {
        Self { entries }
    }

    /// The price of `model`, if the table has one.
    pub fn price(&self, model: &str) -> Option<Price> {
        self.entries
            .iter()
            .find(|(name, _)| name == model)
            .map(|(_, price)| *price)
    }

    /// What a call with these token counts costs, in micro-dollars, rounded up.
    pub fn cost_micros(&self, model: &str, input_tokens: u64, output_tokens: u64) -> u64 {
        let Some(price) = self.price(model) else {
            return 0;
        };
        let total = u128::from(input_tokens) * u128::from(price.input_per_mtok_micros)
            + u128::from(output_tokens) * u128::from(price.output_per_mtok_micros);
        u64::try_from(total.div_ceil(1_000_000)).unwrap_or(u64::MAX)
    }
}
