//! Model aliases (`[gateway.models]`): a model name a client sends — often hard-coded,
//! as Claude Code's `claude-sonnet-…` or an SDK's `gpt-…` — mapped to the providers and
//! the model the operator chose. A name is matched exactly, else by the longest pattern
//! ending in `*` that begins it; a name no alias matches is routed as it stands
//! (`[routing]`, then resolved on each provider).

/// One `[gateway.models]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelAlias {
    /// The name a client sends: exact, or a prefix followed by `*`.
    pub pattern: String,
    /// The model to ask for instead; `None`: the client's name, as sent.
    pub model: Option<String>,
    /// The providers to try, in failover order; empty: the route's `[routing]` chain.
    pub providers: Vec<String>,
}

impl ModelAlias {
    /// Whether the pattern names one model (no `*`): such aliases are listed by
    /// `/models`, so a client can pick them.
    pub fn is_exact(&self) -> bool {
        !self.pattern.ends_with('*')
    }

    /// How well the pattern matches `name`: `None` when not at all; exact beats any
    /// prefix, a longer prefix beats a shorter one.
    fn fit(&self, name: &str) -> Option<usize> {
        match self.pattern.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix).then_some(prefix.len()),
            None => (self.pattern == name).then_some(usize::MAX),
        }
    }
}

/// The alias `name` lands on, if any.
pub fn lookup<'a>(aliases: &'a [ModelAlias], name: &str) -> Option<&'a ModelAlias> {
    aliases
        .iter()
        .filter_map(|alias| alias.fit(name).map(|fit| (fit, alias)))
        .max_by_key(|(fit, _)| *fit)
        .map(|(_, alias)| alias)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alias(pattern: &str, model: &str) -> ModelAlias {
        ModelAlias {
            pattern: pattern.into(),
            model: Some(model.into()),
            providers: Vec::new(),
        }
    }

    #[test]
    fn exact_beats_the_longest_prefix_which_beats_a_shorter_one() {
        let aliases = [
            alias("claude-*", "any"),
            alias("claude-sonnet-*", "sonnet"),
            alias("claude-sonnet-4-5", "exact"),
            alias("*", "fallback"),
        ];
        let to = |name| lookup(&aliases, name).and_then(|a| a.model.as_deref());
        assert_eq!(to("claude-sonnet-4-5"), Some("exact"));
        assert_eq!(to("claude-sonnet-4-5-20250929"), Some("sonnet"));
        assert_eq!(to("claude-haiku-4-5"), Some("any"));
        assert_eq!(to("gpt-5"), Some("fallback"));
        assert_eq!(lookup(&aliases[..3], "gpt-5"), None);
        assert_eq!(lookup(&aliases[..3], "claude"), None);
        assert!(aliases[2].is_exact() && !aliases[0].is_exact());
    }
}
