//! `agentplane policy check DIR`: validates a policies directory exactly the way the
//! server loads it (`agentplane_runtime::policies::load_dir`), for CI. Prints every
//! error as `file:line: field: message` with the file's path as given on the command
//! line (`policies/email.yaml:7: ...`); reading and validation live in the runtime and
//! core, this file only prints.

use std::path::{Path, PathBuf};

use agentplane_core::policy::PolicyError;
use agentplane_runtime::policies::load_dir;
use clap::{Args, Subcommand};

use crate::exit::{self, Exit};

#[derive(Args)]
pub struct PolicyArgs {
    #[command(subcommand)]
    command: PolicyCommand,
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Validate every *.yaml / *.yml file in DIR; exit 2 if any is invalid.
    Check {
        /// The policies directory.
        dir: PathBuf,
    },
}

pub fn run(args: PolicyArgs) -> Exit {
    match args.command {
        PolicyCommand::Check { dir } => check(&dir),
    }
}

fn check(dir: &Path) -> Exit {
    match load_dir(dir) {
        Ok(set) => {
            println!("{} policies OK", set.len());
            for policy in set.policies() {
                println!(
                    "  {} ({})",
                    policy.summary(),
                    dir.join(policy.source()).display()
                );
            }
            exit::SUCCESS
        }
        Err(errors) => {
            for e in &errors {
                eprintln!("{}", located(dir, e));
            }
            exit::CONFIG
        }
    }
}

/// The error with its file named by its path under `dir`; an error about the
/// directory itself (its source is the directory) is shown as `error: ...`.
fn located(dir: &Path, error: &PolicyError) -> String {
    if error.source == dir.display().to_string() {
        return format!("error: {error}");
    }
    PolicyError {
        source: dir.join(&error.source).display().to_string(),
        ..error.clone()
    }
    .to_string()
}
