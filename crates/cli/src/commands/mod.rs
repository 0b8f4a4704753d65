//! One module per subcommand.

pub mod acp;
pub mod agents;
pub mod approvals;
pub mod costs;
pub mod history;
pub mod keys;
pub mod mcp;
pub mod policy;
pub mod remote;
pub mod run;
pub mod runlog;
pub mod serve;
pub mod threads;
pub mod versions;

use std::path::Path;

use agentplane_runtime::{Config, Runtime, RuntimeError};

/// Loads the configuration and starts the runtime, or says why not.
pub async fn start(config: Option<&Path>) -> Result<Runtime, RuntimeError> {
    let config = Config::load(config)?;
    Runtime::start(config).await
}
