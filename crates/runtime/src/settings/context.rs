//! `[context]`: how much of a thread's history a turn sends the model (the engine's
//! `ContextBudget`).
//!
//! ```toml
//! [context]
//! max_chars = 24000   # at least 1000
//! recent_turns = 8    # the latest turns kept in full
//! ```

use agentplane_engine::context::ContextBudget;
use serde::Deserialize;

use super::SettingError;

/// `[context]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileContext {
    max_chars: Option<usize>,
    recent_turns: Option<usize>,
}

/// Checks `[context]` over the engine's defaults.
pub fn resolve(file: FileContext) -> Result<ContextBudget, SettingError> {
    let defaults = ContextBudget::default();
    let context = ContextBudget {
        max_chars: file.max_chars.unwrap_or(defaults.max_chars),
        recent_turns: file.recent_turns.unwrap_or(defaults.recent_turns),
    };
    if context.max_chars < 1_000 {
        return Err(("max_chars".into(), "must be at least 1000".into()));
    }
    Ok(context)
}
