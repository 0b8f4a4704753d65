//! `agentplane policy check DIR`: validates a policies directory the way the server
//! will load it, for CI. Reads every `*.yaml` / `*.yml` file directly in DIR (not
//! recursive), refuses files over 1 MiB before reading them whole, and prints every
//! error as `file:line: field: message`. Parsing and validation live in
//! `agentplane_core::policy`; this file only reads and prints.

use std::io::Read;
use std::path::{Path, PathBuf};

use agentplane_core::policy::{MAX_SOURCE_BYTES, PolicySet, PolicySource};
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
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            eprintln!(
                "error: cannot read policies directory {}: {e}",
                dir.display()
            );
            return exit::CONFIG;
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    paths.sort();
    let mut texts = Vec::new();
    let mut read_errors = Vec::new();
    for path in &paths {
        let name = path.display().to_string();
        match read_limited(path) {
            Ok(text) => texts.push((name, text)),
            Err(message) => read_errors.push(format!("{name}: {message}")),
        }
    }
    let sources: Vec<PolicySource<'_>> = texts
        .iter()
        .map(|(name, text)| PolicySource { name, text })
        .collect();
    let result = PolicySet::parse(&sources);
    for e in &read_errors {
        eprintln!("{e}");
    }
    match result {
        Ok(set) if read_errors.is_empty() => {
            println!("{} policies OK", set.len());
            for policy in set.policies() {
                println!("  {} ({})", policy.summary(), policy.source());
            }
            exit::SUCCESS
        }
        Ok(_) => exit::CONFIG,
        Err(errors) => {
            for e in &errors {
                eprintln!("{e}");
            }
            exit::CONFIG
        }
    }
}

/// Reads a file of at most `MAX_SOURCE_BYTES` as UTF-8 text, or says why not.
fn read_limited(path: &Path) -> Result<String, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read: {e}"))?;
    let mut bytes = Vec::new();
    file.take(MAX_SOURCE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() > MAX_SOURCE_BYTES {
        return Err(format!("file is larger than {MAX_SOURCE_BYTES} bytes"));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}
