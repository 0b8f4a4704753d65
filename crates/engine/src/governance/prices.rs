//! The price table: USD per million input and output tokens, per model, kept in
//! micro-dollars so that costs and their sums are exact integers.
//!
//! A model name in the table is either exact (`gpt-4o`) or a pattern with `*`
//! (`claude-sonnet-4*`, the same matcher policies use). Looking a model up:
//! 1. the operator's entries (`[prices]`) are consulted before the built-in defaults,
//!    so any entry written in the config beats every default;
//! 2. within each of the two, an exact name beats a pattern, and a pattern with more
//!    literal (non-`*`) characters beats one with fewer;
//! 3. among equally specific patterns the one listed first wins.
//!
//! A model that matches nothing costs 0: local models (llama.cpp, Ollama, vLLM) are
//! free to run, and an unknown hosted model is priced by adding it to `[prices]`.
//! Nothing here does I/O.

use agentplane_core::policy::Glob;

/// The price of one model, in micro-dollars per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Price {
    pub input_per_mtok_micros: u64,
    pub output_per_mtok_micros: u64,
}

impl Price {
    /// A price from whole micro-dollars per million tokens (`usd × 1_000_000`).
    pub const fn micros(input_per_mtok_micros: u64, output_per_mtok_micros: u64) -> Self {
        Self {
            input_per_mtok_micros,
            output_per_mtok_micros,
        }
    }
}

/// Built-in list prices in USD micro-dollars per million tokens (input, output), as
/// published by the providers when this table was written. They are a starting point:
/// a contract price, a new model or a price change is an entry in `[prices]`.
const DEFAULTS: &[(&str, u64, u64)] = &[
    // OpenAI.
    ("gpt-4o*", 2_500_000, 10_000_000),
    ("gpt-4o-mini*", 150_000, 600_000),
    ("gpt-4.1*", 2_000_000, 8_000_000),
    ("gpt-4.1-mini*", 400_000, 1_600_000),
    ("gpt-4.1-nano*", 100_000, 400_000),
    ("o3", 2_000_000, 8_000_000),
    ("o3-mini*", 1_100_000, 4_400_000),
    ("o4-mini*", 1_100_000, 4_400_000),
    // Anthropic.
    ("claude-opus-4*", 15_000_000, 75_000_000),
    ("claude-opus-4-5*", 5_000_000, 25_000_000),
    ("claude-sonnet-4*", 3_000_000, 15_000_000),
    ("claude-3-7-sonnet*", 3_000_000, 15_000_000),
    ("claude-3-5-sonnet*", 3_000_000, 15_000_000),
    ("claude-haiku-4-5*", 1_000_000, 5_000_000),
    ("claude-3-5-haiku*", 800_000, 4_000_000),
];

/// How a table entry names models.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ModelName {
    Exact(String),
    Pattern(Glob),
}

impl ModelName {
    /// A name with `*` is a pattern; anything else (also a name the pattern checker
    /// refuses, which then matches only itself) is exact.
    fn parse(name: String) -> Self {
        if name.contains('*')
            && let Ok(glob) = Glob::new(&name)
        {
            return Self::Pattern(glob);
        }
        Self::Exact(name)
    }

    fn matches(&self, model: &str) -> bool {
        match self {
            Self::Exact(name) => name == model,
            Self::Pattern(glob) => glob.matches(model),
        }
    }

    /// Sort key within a tier: exact names first, then patterns with more literal
    /// characters first.
    fn specificity(&self) -> (u8, std::cmp::Reverse<usize>) {
        match self {
            Self::Exact(_) => (0, std::cmp::Reverse(0)),
            Self::Pattern(glob) => (
                1,
                std::cmp::Reverse(glob.as_str().chars().filter(|&c| c != '*').count()),
            ),
        }
    }
}

/// Which source an entry came from; the operator's beats the built-in one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Tier {
    Configured,
    Builtin,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    tier: Tier,
    name: ModelName,
    price: Price,
}

/// Prices by model name or pattern. Entries are kept in lookup order (see the module
/// comment), so the first entry that matches is the price. A model that matches
/// nothing costs nothing. The default table is empty: everything is free.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PriceTable {
    entries: Vec<Entry>,
}

impl PriceTable {
    /// A table of exactly these entries (no built-in defaults); names with `*` are
    /// patterns.
    pub fn new(entries: Vec<(String, Price)>) -> Self {
        Self::from_entries(
            entries
                .into_iter()
                .map(|(name, price)| (Tier::Configured, name, price)),
        )
    }

    /// The built-in list prices, with `overrides` (the `[prices]` entries) consulted
    /// first.
    pub fn with_defaults(overrides: Vec<(String, Price)>) -> Self {
        let configured = overrides
            .into_iter()
            .map(|(name, price)| (Tier::Configured, name, price));
        let builtin = DEFAULTS.iter().map(|&(name, input, output)| {
            (Tier::Builtin, name.to_owned(), Price::micros(input, output))
        });
        Self::from_entries(configured.chain(builtin))
    }

    fn from_entries(entries: impl Iterator<Item = (Tier, String, Price)>) -> Self {
        let mut entries: Vec<Entry> = entries
            .map(|(tier, name, price)| Entry {
                tier,
                name: ModelName::parse(name),
                price,
            })
            .collect();
        // Stable: equally specific entries keep the order they were given in.
        entries.sort_by_key(|e| (e.tier, e.name.specificity()));
        Self { entries }
    }

    /// The price of `model`: the first match in lookup order, if any.
    pub fn price(&self, model: &str) -> Option<Price> {
        self.entries
            .iter()
            .find(|entry| entry.name.matches(model))
            .map(|entry| entry.price)
    }

    /// What a call with these token counts costs, in micro-dollars, rounded up (a
    /// call is never free because it was small). Saturates at `u64::MAX`; an unpriced
    /// model costs 0.
    pub fn cost_micros(&self, model: &str, input_tokens: u64, output_tokens: u64) -> u64 {
        let Some(price) = self.price(model) else {
            return 0;
        };
        // Configured prices are at most 10^10 micro-dollars, so this is exact for any
        // token count; only a hand-built extreme `Price` can reach the saturation.
        let total = (u128::from(input_tokens) * u128::from(price.input_per_mtok_micros))
            .saturating_add(u128::from(output_tokens) * u128::from(price.output_per_mtok_micros));
        u64::try_from(total.div_ceil(1_000_000)).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usd(input: f64, output: f64) -> Price {
        Price::micros(
            (input * 1_000_000.0).round() as u64,
            (output * 1_000_000.0).round() as u64,
        )
    }

    #[test]
    fn defaults_price_common_hosted_models_and_local_ones_are_free() {
        let table = PriceTable::with_defaults(Vec::new());
        assert_eq!(table.price("gpt-4o"), Some(usd(2.5, 10.0)));
        assert_eq!(table.price("gpt-4o-2024-08-06"), Some(usd(2.5, 10.0)));
        assert_eq!(table.price("gpt-4o-mini"), Some(usd(0.15, 0.6)));
        assert_eq!(table.price("gpt-4o-mini-2024-07-18"), Some(usd(0.15, 0.6)));
        assert_eq!(table.price("gpt-4.1"), Some(usd(2.0, 8.0)));
        assert_eq!(table.price("gpt-4.1-mini"), Some(usd(0.4, 1.6)));
        assert_eq!(table.price("o3-mini"), Some(usd(1.1, 4.4)));
        assert_eq!(
            table.price("claude-sonnet-4-20250514"),
            Some(usd(3.0, 15.0))
        );
        assert_eq!(
            table.price("claude-3-5-haiku-20241022"),
            Some(usd(0.8, 4.0))
        );
        assert_eq!(table.price("claude-opus-4-1"), Some(usd(15.0, 75.0)));
        assert_eq!(table.price("claude-opus-4-5"), Some(usd(5.0, 25.0)));
        for local in [
            "qwen2.5:7b",
            "llama3.1:8b",
            "SmolLM2-135M",
            "",
            "scripted-model",
        ] {
            assert_eq!(table.price(local), None, "{local}");
            assert_eq!(table.cost_micros(local, 1_000_000, 1_000_000), 0);
        }
        // Names are case-sensitive and anchored: no accidental prefix or suffix match.
        assert_eq!(table.price("GPT-4O"), None);
        assert_eq!(table.price("my-gpt-4o"), None);
        assert_eq!(table.price("o3-pro"), None);
    }

    #[test]
    fn an_exact_name_beats_patterns_and_the_longer_pattern_wins() {
        let table = PriceTable::new(vec![
            ("*".into(), usd(9.0, 9.0)),
            ("m*".into(), usd(1.0, 1.0)),
            ("model-*".into(), usd(2.0, 2.0)),
            ("model-x".into(), usd(3.0, 3.0)),
            ("*-x*".into(), usd(4.0, 4.0)),
        ]);
        assert_eq!(table.price("model-x"), Some(usd(3.0, 3.0)));
        assert_eq!(table.price("model-y"), Some(usd(2.0, 2.0)));
        assert_eq!(table.price("mo"), Some(usd(1.0, 1.0)));
        assert_eq!(table.price("other"), Some(usd(9.0, 9.0)));
        // `model-*` (6 literal characters) beats `*-x*` (2).
        assert_eq!(table.price("model-xl"), Some(usd(2.0, 2.0)));
        // Equally specific patterns: the one given first wins.
        let tie = PriceTable::new(vec![
            ("a*".into(), usd(1.0, 1.0)),
            ("*b".into(), usd(2.0, 2.0)),
        ]);
        assert_eq!(tie.price("ab"), Some(usd(1.0, 1.0)));
    }

    #[test]
    fn configured_entries_beat_every_default() {
        let table = PriceTable::with_defaults(vec![
            ("gpt-4o*".into(), usd(1.0, 2.0)),
            ("llama*".into(), usd(0.01, 0.02)),
            ("claude-sonnet-4-5".into(), Price::default()),
        ]);
        // The configured pattern beats the built-in exact-or-longer entries.
        assert_eq!(table.price("gpt-4o"), Some(usd(1.0, 2.0)));
        assert_eq!(table.price("gpt-4o-mini"), Some(usd(1.0, 2.0)));
        assert_eq!(table.price("llama3.1:8b"), Some(usd(0.01, 0.02)));
        assert_eq!(table.price("claude-sonnet-4-5"), Some(Price::default()));
        assert_eq!(table.cost_micros("claude-sonnet-4-5", 10_000, 10_000), 0);
        // Defaults still apply where nothing configured matches.
        assert_eq!(table.price("gpt-4.1"), Some(usd(2.0, 8.0)));
    }

    #[test]
    fn costs_round_up_to_the_next_micro_dollar() {
        let table = PriceTable::new(vec![("m".into(), usd(2.5, 10.0))]);
        // 1 input token at $2.50/Mtok is 2.5 micro-dollars: 3.
        assert_eq!(table.cost_micros("m", 1, 0), 3);
        assert_eq!(table.cost_micros("m", 0, 1), 10);
        assert_eq!(table.cost_micros("m", 0, 0), 0);
        // 1,000 in + 500 out = 2,500 + 5,000 micro-dollars exactly.
        assert_eq!(table.cost_micros("m", 1_000, 500), 7_500);
        // A million of each: $12.50.
        assert_eq!(table.cost_micros("m", 1_000_000, 1_000_000), 12_500_000);
        // One micro-dollar per Mtok: a single token still costs 1 (rounded up).
        let cheap = PriceTable::new(vec![("c".into(), Price::micros(1, 1))]);
        assert_eq!(cheap.cost_micros("c", 1, 0), 1);
        assert_eq!(cheap.cost_micros("c", 1_000_000, 0), 1);
        assert_eq!(cheap.cost_micros("c", 1_000_001, 0), 2);
    }

    #[test]
    fn huge_token_counts_saturate_instead_of_overflowing() {
        let table = PriceTable::new(vec![
            ("max".into(), Price::micros(10_000_000_000, 10_000_000_000)),
            ("one".into(), Price::micros(1, 0)),
        ]);
        assert_eq!(table.cost_micros("max", u64::MAX, u64::MAX), u64::MAX);
        assert_eq!(table.cost_micros("max", u64::MAX, 0), u64::MAX);
        // u64::MAX tokens at one micro-dollar per Mtok fits: ceil(u64::MAX / 10^6).
        assert_eq!(
            table.cost_micros("one", u64::MAX, u64::MAX),
            u64::MAX.div_ceil(1_000_000)
        );
        let extreme = PriceTable::new(vec![("x".into(), Price::micros(u64::MAX, u64::MAX))]);
        assert_eq!(extreme.cost_micros("x", u64::MAX, u64::MAX), u64::MAX);
    }

    #[test]
    fn an_invalid_pattern_matches_only_its_own_text() {
        let table = PriceTable::new(vec![("bad *".into(), usd(1.0, 1.0))]);
        assert_eq!(table.price("bad *"), Some(usd(1.0, 1.0)));
        assert_eq!(table.price("bad x"), None);
    }
}
