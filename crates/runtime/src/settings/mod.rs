//! Sections of `agentplane.toml` for governance, one file each: the raw TOML shape
//! (`File*`, unknown keys refused) and its checked form. `config.rs` reads them and
//! reports errors as `` `section.key`: message `` against the file.

pub mod acp;
pub mod auth;
pub mod cluster;
pub mod executions;
pub mod gateway;
pub mod governance;
pub mod policies;
pub mod prices;
pub mod providers;
pub mod rate_limits;
pub mod secrets;
pub mod server_limits;
pub mod versions;

/// A bad value: the key under the section, and what is wrong.
pub type SettingError = (String, String);
