//! `agentplane mcp list` (being built).

use std::path::Path;

use clap::Args;

use crate::exit::{self, Exit};

#[derive(Args)]
pub struct ListArgs {}

pub async fn run(_config: Option<&Path>, _args: ListArgs) -> Exit {
    eprintln!("error: `agentplane mcp list` is not built yet");
    exit::INTERNAL
}
