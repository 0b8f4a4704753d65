//! The sections of `agentplane.toml`, one file each: the raw TOML shape (`File*`,
//! unknown keys refused) and its checked form, by pure functions. `config.rs` puts them
//! together and reports a section's error as `` `section.key`: message `` against the
//! file, or against the variable when the value came from [`overrides::Overrides`].
//!
//! What must not live here: reading files or the process environment (the loader in
//! `config.rs` and `environment.rs` does), and anything built from the settings at
//! run time (clients, ensembles: the composition root's). A section may use another
//! section, never `config` (which uses them all).

pub mod a2a;
pub mod a2a_agents;
pub mod acp;
pub mod agents;
pub mod audit;
pub mod auth;
pub mod cluster;
pub mod context;
pub mod executions;
pub mod gateway;
pub mod governance;
pub mod llm;
pub mod mcp;
pub mod mcp_gateway;
pub mod overrides;
pub mod policies;
pub mod prices;
pub mod providers;
pub mod rate_limits;
pub mod run;
pub mod sandbox;
pub mod secrets;
pub mod server;
pub mod server_limits;
pub mod store;
pub mod telemetry;
pub mod versions;

/// A bad value: the key under the section, and what is wrong.
pub type SettingError = (String, String);

/// A bad value in a section that also reads the environment: a key of the file (under
/// the section), or the variable that overrode it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadValue {
    /// A key under the section, and what is wrong.
    Key(String, String),
    /// An environment variable, and what is wrong.
    Variable(&'static str, String),
}

impl From<SettingError> for BadValue {
    fn from((key, message): SettingError) -> Self {
        Self::Key(key, message)
    }
}

impl From<(&'static str, String)> for BadValue {
    fn from((key, message): (&'static str, String)) -> Self {
        Self::Key(key.to_owned(), message)
    }
}
