//! `agentplane mcp list`: connects to every configured MCP server (all at once, each
//! bounded by its startup timeout), prints its state and tools, and ends it again.
//! Exit 0 when every server answered, 1 when one did not, 2 on a bad configuration.
//! Tool names, descriptions and errors are the upstream's text: each is printed by the
//! one rule of what a person sees (`agentplane_core::visible`), so an escape sequence
//! in a description is shown, not run by the terminal.

use std::path::Path;

use agentplane_core::visible::visible_line;
use agentplane_runtime::{Config, RuntimeError, probe_mcp_servers};
use clap::Args;
use serde_json::json;

use crate::exit::{self, Exit};

#[derive(Args)]
pub struct ListArgs {
    /// Print a JSON array instead of a table.
    #[arg(long)]
    json: bool,
}

pub async fn run(config: Option<&Path>, args: ListArgs) -> Exit {
    let config = match Config::load(config) {
        Ok(config) => config,
        Err(e) => {
            let e = RuntimeError::from(e);
            eprintln!("error [{}]: {e}", e.code());
            return exit::of_error(&e);
        }
    };
    let reports = probe_mcp_servers(&config).await;
    let users = |server: &str| -> Vec<&str> {
        config
            .agents
            .iter()
            .filter(|(_, agent)| agent.ensembles.iter().any(|e| e == server))
            .map(|(name, _)| name.as_str())
            .collect()
    };
    if args.json {
        let list: Vec<_> = reports
            .iter()
            .map(|report| {
                let mut entry = json!({
                    "name": report.name,
                    "transport": report.transport,
                    "agents": users(&report.name),
                });
                match &report.tools {
                    Ok(tools) => {
                        entry["state"] = json!("ok");
                        entry["tools"] = json!(
                            tools
                                .iter()
                                .map(|t| json!({"name": t.name, "description": t.description}))
                                .collect::<Vec<_>>()
                        );
                    }
                    Err(reason) => {
                        entry["state"] = json!("failed");
                        entry["error"] = json!(reason);
                    }
                }
                entry
            })
            .collect();
        println!("{}", serde_json::Value::Array(list));
    } else if reports.is_empty() {
        println!("no MCP servers configured (declare them as [mcp.servers.NAME])");
    } else {
        for report in &reports {
            let agents = users(&report.name);
            let agents = if agents.is_empty() {
                "no agent".to_owned()
            } else {
                agents.join(", ")
            };
            match &report.tools {
                Ok(tools) => {
                    println!(
                        "{:<16} ok      {} tools  [{}]  used by {agents}",
                        report.name,
                        tools.len(),
                        report.transport
                    );
                    for tool in tools {
                        println!("{}", tool_line(&tool.name, &tool.description));
                    }
                }
                Err(reason) => println!(
                    "{:<16} failed  [{}]  used by {agents}\n    {}",
                    report.name,
                    report.transport,
                    visible_line(reason)
                ),
            }
        }
    }
    if reports.iter().all(|r| r.tools.is_ok()) {
        exit::SUCCESS
    } else {
        exit::AGENT_FAILED
    }
}

/// One tool's line: its name and the first line of its description, each escaped.
fn tool_line(name: &str, description: &str) -> String {
    let summary = description.lines().next().unwrap_or_default();
    format!("    {:<48} {}", visible_line(name), visible_line(summary))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upstreams_escape_sequences_are_shown_not_run() {
        let line = tool_line(
            "read\u{1b}]0;pwned\u{7}",
            "Reads \u{1b}[31ma file\u{1b}[0m \u{202e}txt.exe\nsecond line",
        );
        assert!(!line.chars().any(char::is_control), "{line:?}");
        assert!(!line.contains('\u{202e}'), "{line:?}");
        assert!(line.contains("read\\u{1b}]0;pwned\\u{7}"), "{line}");
        assert!(line.contains("\\u{202e}txt.exe"), "{line}");
        assert!(!line.contains("second line"), "{line}");
    }
}
