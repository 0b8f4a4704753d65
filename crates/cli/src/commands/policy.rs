//! `agentplane policy check DIR`: validates a policies directory exactly the way the
//! server loads it (`agentplane_runtime::policy_dir::load_dir`), for CI. Prints every
//! error of every file as `file:line: field: message` with the file's path as given on
//! the command line (`policies/email.yaml:7: ...`): the lines `serve` reports for the
//! same directory (`policy_dir::error_lines`). Reading and validation live in the runtime
//! and core; this file only prints.

use std::path::{Path, PathBuf};

use agentplane_runtime::policy_dir::{error_lines, load_dir};
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
            // The lines `serve` reports for the same directory.
            for line in error_lines(dir, &errors) {
                eprintln!("{line}");
            }
            exit::CONFIG
        }
    }
}
