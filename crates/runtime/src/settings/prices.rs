//! `[prices."MODEL"]`: USD per million input and output tokens, over the built-in list
//! prices (see `agentplane_engine::governance::prices` for how a model is looked up).
//!
//! ```toml
//! [prices."gpt-4o"]            # an exact model name
//! input_per_mtok = 2.50
//! output_per_mtok = 10.00
//!
//! [prices."my-provider/*"]     # a pattern: `*` matches any run of characters
//! input_per_mtok = 0
//! output_per_mtok = 0
//! ```
//!
//! Values are checked here (finite, at least 0, at most 10,000 dollars per million
//! tokens) and stored as whole micro-dollars, rounded to the nearest.

use std::collections::BTreeMap;

use agentplane_core::policy::Glob;
use agentplane_engine::governance::{Price, PriceTable};
use serde::Deserialize;

use super::SettingError;

/// The highest price accepted, in USD per million tokens: far above any real model,
/// low enough that a typo of a few orders of magnitude is caught.
pub const MAX_USD_PER_MTOK: f64 = 10_000.0;

/// The longest model name or pattern accepted.
const MAX_MODEL_NAME_LEN: usize = 256;

/// `[prices]` as written: `[prices."MODEL"]` entries, and `[prices.tools]`, the price
/// of one MCP gateway tool call in USD by its offered name (`SERVER__TOOL`). A model
/// named `tools` cannot be priced.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct FilePrices {
    #[serde(default)]
    tools: BTreeMap<String, f64>,
    #[serde(flatten)]
    models: BTreeMap<String, FilePrice>,
}

/// The highest price of one tool call accepted, in USD.
pub const MAX_USD_PER_TOOL_CALL: f64 = 1_000.0;

/// `[prices.tools]`: micro-dollars per call by offered tool name. Errors name the entry
/// (`tools."NAME"`).
pub fn resolve_tools(prices: &FilePrices) -> Result<BTreeMap<String, u64>, SettingError> {
    let mut table = BTreeMap::new();
    for (tool, usd) in &prices.tools {
        let key = format!("tools.{tool:?}");
        if tool.is_empty()
            || tool.len() > MAX_MODEL_NAME_LEN
            || tool.chars().any(char::is_whitespace)
        {
            return Err((
                key,
                "a tool name is 1 to 256 characters without whitespace".into(),
            ));
        }
        if !usd.is_finite() || *usd < 0.0 || *usd > MAX_USD_PER_TOOL_CALL {
            return Err((
                key,
                format!("must be 0 to {MAX_USD_PER_TOOL_CALL} dollars per call, got {usd}"),
            ));
        }
        table.insert(tool.clone(), (usd * 1_000_000.0).round() as u64);
    }
    Ok(table)
}

/// One `[prices."MODEL"]` entry as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilePrice {
    input_per_mtok: f64,
    output_per_mtok: f64,
}

/// Builds the table: the built-in defaults with the file's entries consulted first.
/// Errors name the entry (`"MODEL".input_per_mtok`, or `"MODEL"` for the name).
pub fn resolve(prices: FilePrices) -> Result<PriceTable, SettingError> {
    let entries = prices.models;
    let mut overrides = Vec::with_capacity(entries.len());
    for (model, price) in entries {
        let key = format!("{model:?}");
        check_model_name(&model).map_err(|m| (key.clone(), m))?;
        let input =
            micros(price.input_per_mtok).map_err(|m| (format!("{key}.input_per_mtok"), m))?;
        let output =
            micros(price.output_per_mtok).map_err(|m| (format!("{key}.output_per_mtok"), m))?;
        overrides.push((model, Price::micros(input, output)));
    }
    Ok(PriceTable::with_defaults(overrides))
}

/// A model name or pattern: what the policy name patterns accept (non-empty,
/// printable, no whitespace), and at most 256 bytes.
fn check_model_name(model: &str) -> Result<(), String> {
    if model.len() > MAX_MODEL_NAME_LEN {
        return Err(format!(
            "a model name is at most {MAX_MODEL_NAME_LEN} bytes"
        ));
    }
    Glob::new(model).map(|_| ())
}

/// Dollars per million tokens as whole micro-dollars.
fn micros(usd: f64) -> Result<u64, String> {
    if !usd.is_finite() {
        return Err(format!("must be a finite number of dollars, got {usd}"));
    }
    if usd < 0.0 {
        return Err(format!("must not be negative, got {usd}"));
    }
    if usd > MAX_USD_PER_MTOK {
        return Err(format!(
            "must be at most {MAX_USD_PER_MTOK} dollars per million tokens, got {usd}"
        ));
    }
    // In range [0, 1e10]: exact in f64 and in u64.
    Ok((usd * 1_000_000.0).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> Result<PriceTable, SettingError> {
        #[derive(Deserialize)]
        struct File {
            #[serde(default)]
            prices: FilePrices,
        }
        let file: File = toml::from_str(toml_text).expect("valid TOML");
        resolve(file.prices)
    }

    #[test]
    fn entries_override_defaults_and_patterns_apply() {
        let table = parse(
            r#"
            [prices."gpt-4o"]
            input_per_mtok = 1.25
            output_per_mtok = 5
            [prices."llama*"]
            input_per_mtok = 0.000001
            output_per_mtok = 0.0000004
            "#,
        )
        .expect("valid prices");
        assert_eq!(
            table.price("gpt-4o"),
            Some(Price::micros(1_250_000, 5_000_000))
        );
        // Rounded to the nearest micro-dollar per Mtok.
        assert_eq!(table.price("llama3"), Some(Price::micros(1, 0)));
        // Untouched defaults remain; the rest is free.
        assert_eq!(
            table.price("gpt-4o-mini"),
            Some(Price::micros(150_000, 600_000))
        );
        assert_eq!(table.cost_micros("qwen2.5:7b", 1_000_000, 1_000_000), 0);
    }

    #[test]
    fn no_entries_means_the_defaults() {
        assert_eq!(
            parse("").expect("empty"),
            PriceTable::with_defaults(Vec::new())
        );
    }

    #[test]
    fn bad_values_name_the_entry_and_field() {
        let cases = [
            (
                "input_per_mtok = -1\noutput_per_mtok = 1",
                "\"m\".input_per_mtok",
                "negative",
            ),
            (
                "input_per_mtok = 1\noutput_per_mtok = nan",
                "\"m\".output_per_mtok",
                "finite",
            ),
            (
                "input_per_mtok = inf\noutput_per_mtok = 1",
                "\"m\".input_per_mtok",
                "finite",
            ),
            (
                "input_per_mtok = 1\noutput_per_mtok = -inf",
                "\"m\".output_per_mtok",
                "finite",
            ),
            (
                "input_per_mtok = 10000.01\noutput_per_mtok = 1",
                "\"m\".input_per_mtok",
                "at most",
            ),
            (
                "input_per_mtok = 1\noutput_per_mtok = 1e300",
                "\"m\".output_per_mtok",
                "at most",
            ),
        ];
        for (body, key, message) in cases {
            let (k, m) = parse(&format!("[prices.\"m\"]\n{body}")).expect_err(body);
            assert_eq!(k, key, "{body}");
            assert!(m.contains(message), "{body}: {m}");
        }
        // The limit itself and zero are fine.
        parse("[prices.\"m\"]\ninput_per_mtok = 10000\noutput_per_mtok = -0.0").expect("edge");
    }

    #[test]
    fn bad_names_are_refused() {
        let long = "m".repeat(MAX_MODEL_NAME_LEN + 1);
        for name in ["", "gpt 4o", "tab\there", "new\nline", long.as_str()] {
            let toml_name = format!("{name:?}");
            let text = format!("[prices.{toml_name}]\ninput_per_mtok = 1\noutput_per_mtok = 1");
            let file: toml::Table = toml::from_str(&text).expect("TOML quotes the name");
            let prices: FilePrices = file["prices"].clone().try_into().expect("price entries");
            let (key, _) = resolve(prices).expect_err(name);
            assert_eq!(key, format!("{name:?}"));
        }
        let (key, message) = resolve(FilePrices {
            tools: BTreeMap::new(),
            models: BTreeMap::from([(
                "a\u{7}b".to_owned(),
                FilePrice {
                    input_per_mtok: 1.0,
                    output_per_mtok: 1.0,
                },
            )]),
        })
        .expect_err("control character");
        assert_eq!(key, "\"a\\u{7}b\"");
        assert!(message.contains("control"), "{message}");
    }

    #[test]
    fn tool_prices_are_per_call_and_checked() {
        let prices = |text: &str| -> Result<BTreeMap<String, u64>, SettingError> {
            #[derive(Deserialize)]
            struct File {
                prices: FilePrices,
            }
            let file: File = toml::from_str(text).map_err(|e| (String::new(), e.to_string()))?;
            resolve_tools(&file.prices)
        };
        let table = prices(
            "[prices.tools]\n\"everything__get-sum\" = 0.25\n[prices.\"m\"]\n\
             input_per_mtok = 1\noutput_per_mtok = 1\n",
        )
        .expect("valid");
        assert_eq!(table["everything__get-sum"], 250_000);
        for (text, key) in [
            ("[prices.tools]\nx = -1", "tools.\"x\""),
            ("[prices.tools]\nx = 1001", "tools.\"x\""),
            ("[prices.tools]\nx = nan", "tools.\"x\""),
            ("[prices.tools]\n\"a b\" = 1", "tools.\"a b\""),
        ] {
            assert_eq!(prices(text).expect_err(text).0, key, "{text}");
        }
        assert!(prices("[prices.tools]\nx = \"free\"").is_err());
    }

    #[test]
    fn unknown_fields_are_refused() {
        let text = "[prices.\"m\"]\ninput_per_mtok = 1\noutput_per_mtok = 1\ncached = 1";
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct File {
            prices: BTreeMap<String, FilePrice>,
        }
        assert!(toml::from_str::<File>(text).is_err());
        let missing = "[prices.\"m\"]\ninput_per_mtok = 1";
        assert!(toml::from_str::<File>(missing).is_err());
    }
}
