//! `agentplane runlog TURN_ID`: a turn's events as JSON Lines, straight from the store.

use std::io::Write;
use std::path::Path;

use agentplane_core::TurnId;
use clap::Args;

use crate::exit::{self, Exit};

#[derive(Args)]
pub struct RunlogArgs {
    /// The turn to export (`turn_…`, printed at the end of `agentplane run`).
    turn_id: String,
}

pub async fn run(config: Option<&Path>, args: RunlogArgs) -> Exit {
    let turn = match TurnId::parse(&args.turn_id) {
        Ok(turn) => turn,
        Err(e) => {
            eprintln!("error [INVALID_ARGUMENT]: {e}");
            return exit::CONFIG;
        }
    };
    let runtime = match super::started(config).await {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let store = runtime.store();
    match store.turn(&turn).await {
        Ok(Some(_)) => {}
        Ok(None) => {
            eprintln!("error [NOT_FOUND]: turn {turn} not found");
            return exit::CONFIG;
        }
        Err(e) => {
            eprintln!("error [{}]: {e}", e.code());
            return exit::INTERNAL;
        }
    }
    let events = match store.turn_events(&turn).await {
        Ok(events) => events,
        Err(e) => {
            eprintln!("error [{}]: {e}", e.code());
            return exit::INTERNAL;
        }
    };
    let mut out = std::io::stdout().lock();
    for event in events {
        let line = match serde_json::to_string(&event) {
            Ok(line) => line,
            Err(e) => {
                eprintln!(
                    "error [INTERNAL]: event {} cannot be written: {e}",
                    event.seq
                );
                return exit::INTERNAL;
            }
        };
        if writeln!(out, "{line}").is_err() {
            // The reader went away (`| head`); that is not our failure.
            return exit::SUCCESS;
        }
    }
    exit::SUCCESS
}
