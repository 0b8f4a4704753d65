//! One module per subcommand.

pub mod acp;
pub mod agents;
pub mod approvals;
pub mod audit;
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

use std::fmt::Display;
use std::path::{Path, PathBuf};

use agentplane_runtime::{Config, Runtime, RuntimeError};

use crate::exit::{self, Exit};

/// Loads the configuration and starts the runtime, or says why not.
pub async fn start(config: Option<&Path>) -> Result<Runtime, RuntimeError> {
    let config = Config::load(config)?;
    Runtime::start(config).await
}

/// [`start`], with a failure said on stderr and turned into the exit code.
pub async fn started(config: Option<&Path>) -> Result<Runtime, Exit> {
    start(config).await.map_err(|e| failed_to_start(&e))
}

/// The runtime of an already loaded configuration, serving callers from outside whose
/// workspaces are confined (`default_root`: see `Runtime::start_serving`), or the exit
/// code of why not.
pub async fn started_serving(config: Config, default_root: Option<&Path>) -> Result<Runtime, Exit> {
    Runtime::start_serving(config, default_root)
        .await
        .map_err(|e| failed_to_start(&e))
}

fn failed_to_start(e: &RuntimeError) -> Exit {
    eprintln!("error [{}]: {e}", e.code());
    exit::of_error(e)
}

/// The workspace of a command's calls: `--workspace` made absolute, else the current
/// directory.
pub fn workspace_or_current(dir: Option<PathBuf>) -> Result<PathBuf, Exit> {
    match dir {
        Some(dir) => Ok(std::path::absolute(&dir).unwrap_or(dir)),
        None => std::env::current_dir().map_err(|e| {
            eprintln!("error [INVALID_ARGUMENT]: no current directory ({e}); pass --workspace");
            exit::CONFIG
        }),
    }
}

/// Ends a serving command: the runtime's one ordered shutdown, then the exit code of
/// what was served.
pub async fn finish(runtime: &Runtime, served: Result<(), impl Display>) -> Exit {
    runtime.shutdown().await;
    match served {
        Ok(()) => exit::SUCCESS,
        Err(e) => {
            eprintln!("error [INTERNAL]: {e}");
            exit::INTERNAL
        }
    }
}
