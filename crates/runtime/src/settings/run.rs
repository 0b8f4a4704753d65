//! `[run]`: what `agentplane run` does when the command line does not say.
//!
//! ```toml
//! [run]
//! default_agent = "engineering"
//! ```

use serde::Deserialize;

/// The agent `run` uses without `--agent`.
pub const DEFAULT_AGENT: &str = "engineering";

/// `[run]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileRun {
    default_agent: Option<String>,
}

/// The default agent's name (checked against the catalogue when it is used).
pub fn default_agent(file: FileRun) -> String {
    file.default_agent
        .unwrap_or_else(|| DEFAULT_AGENT.to_owned())
}
