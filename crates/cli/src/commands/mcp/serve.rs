//! `agentplane mcp serve` (being built).

use std::path::Path;

use clap::Args;

use crate::exit::{self, Exit};

#[derive(Args)]
pub struct ServeArgs {}

pub async fn run(_config: Option<&Path>, _args: ServeArgs) -> Exit {
    eprintln!("error: `agentplane mcp serve` is not built yet");
    exit::INTERNAL
}
