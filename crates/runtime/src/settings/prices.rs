//! `[prices."MODEL"]`: USD per million input and output tokens.

use std::collections::BTreeMap;

use agentplane_engine::governance::{Price, PriceTable};
use serde::Deserialize;

use super::SettingError;

/// One `[prices."MODEL"]` entry as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilePrice {
    input_per_mtok: f64,
    output_per_mtok: f64,
}

/// Builds the table from the file's entries.
pub fn resolve(entries: BTreeMap<String, FilePrice>) -> Result<PriceTable, SettingError> {
    let mut table = Vec::new();
    for (model, price) in entries {
        let micros = |usd: f64| (usd * 1_000_000.0).round() as u64;
        table.push((
            model,
            Price {
                input_per_mtok_micros: micros(price.input_per_mtok),
                output_per_mtok_micros: micros(price.output_per_mtok),
            },
        ));
    }
    Ok(PriceTable::new(table))
}
