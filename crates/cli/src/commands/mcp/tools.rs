//! `agentplane mcp tools`: upstream MCP tools' pinned definitions (ADR 0062) — which
//! are as approved and which changed, with what changed — and `approve`, which makes a
//! changed tool's last listed definition the approved one (an admin's act).
//!
//! Through the runtime on the store, or, when a running server holds the SQLite file
//! (or with `--key`), as a client of its `/v1/mcp/tools` (`remote.rs`), like `keys`.

use std::path::Path;

use agentplane_engine::identity::Caller;
use agentplane_engine::services::tool_pins::PinView;
use agentplane_runtime::{Config, Runtime, RuntimeError, replicas};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::commands::remote::{Remote, RemoteError, ServerArgs};
use crate::exit::{self, Exit};

/// The client recorded as the approver of definitions approved with this command.
const CLI_CLIENT: &str = "cli";

#[derive(Args)]
pub struct ToolsArgs {
    #[command(subcommand)]
    action: Option<Action>,
    /// Print JSON instead of a table (listing).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Subcommand)]
enum Action {
    /// Approve the definition a changed tool was last listed with.
    Approve {
        /// The configured server.
        server_name: String,
        /// The tool's name on that server.
        tool: String,
        /// Approve only if this is still the definition last listed (its `seen_hash`).
        #[arg(long, value_name = "SHA256")]
        hash: Option<String>,
    },
}

pub async fn run(config: Option<&Path>, args: ToolsArgs) -> Exit {
    let config = match Config::load(config) {
        Ok(config) => config,
        Err(e) => return crate::commands::failed_to_start(&RuntimeError::from(e)),
    };
    let result = if args.server.has_key() || replicas::held_by_a_server(&config.store) {
        let args = ToolsArgs {
            server: args.server.clone().located(&config),
            ..args
        };
        over_api(&args).await
    } else {
        let runtime = match Runtime::start(config).await {
            Ok(runtime) => runtime,
            Err(e) => return crate::commands::failed_to_start(&e),
        };
        let result = locally(&runtime, &args).await;
        runtime.shutdown().await;
        result
    };
    match result {
        Ok(()) => exit::SUCCESS,
        Err(e) => e.report(),
    }
}

async fn locally(runtime: &Runtime, args: &ToolsArgs) -> Result<(), RemoteError> {
    let pins = &runtime.services().tool_pins;
    let caller = Caller::local(CLI_CLIENT);
    let failed = |e: agentplane_engine::hub::HubError| RemoteError::Api {
        code: e.code().as_str().to_owned(),
        message: e.to_string(),
    };
    match &args.action {
        None => {
            let listed = pins.list(&caller, None).await.map_err(failed)?;
            let values: Vec<Value> = listed.iter().map(view_json).collect();
            print_list(&values, args.json);
        }
        Some(Action::Approve {
            server_name,
            tool,
            hash,
        }) => {
            let pin = pins
                .approve(&caller, server_name, tool, hash.as_deref())
                .await
                .map_err(failed)?;
            print_approved(&view_json(&pin));
        }
    }
    Ok(())
}

async fn over_api(args: &ToolsArgs) -> Result<(), RemoteError> {
    let remote = Remote::new(&args.server)?;
    match &args.action {
        None => {
            let listed = remote.get("/v1/mcp/tools", &[]).await?;
            let tools = listed["tools"].as_array().cloned().unwrap_or_default();
            print_list(&tools, args.json);
        }
        Some(Action::Approve {
            server_name,
            tool,
            hash,
        }) => {
            let path = format!(
                "/v1/mcp/tools/{}/{}/approve",
                segment(server_name),
                segment(tool)
            );
            let pin = remote.post(&path, &json!({"hash": hash})).await?;
            print_approved(&pin);
        }
    }
    Ok(())
}

/// A path segment with everything but unreserved characters percent-encoded.
fn segment(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

fn view_json(pin: &PinView) -> Value {
    serde_json::to_value(pin).unwrap_or(Value::Null)
}

fn print_list(tools: &[Value], as_json: bool) {
    if as_json {
        println!("{}", json!({ "tools": tools }));
        return;
    }
    if tools.is_empty() {
        println!("no MCP tool is pinned yet: tools are pinned when first listed");
        return;
    }
    let text = |t: &Value, f: &str| t[f].as_str().unwrap_or("").to_owned();
    println!("{:<20} {:<32} {:<8} SEEN", "SERVER", "TOOL", "STATUS");
    for tool in tools {
        println!(
            "{:<20} {:<32} {:<8} {}",
            text(tool, "server"),
            text(tool, "tool"),
            text(tool, "status"),
            text(tool, "seen_hash").get(..12).unwrap_or("")
        );
        if let Some(diff) = tool["diff"].as_str() {
            println!("    changed {}: {diff}", text(tool, "changed_at"));
        }
    }
}

fn print_approved(pin: &Value) {
    println!(
        "approved `{}` of `{}`: {} (by {})",
        pin["tool"].as_str().unwrap_or(""),
        pin["server"].as_str().unwrap_or(""),
        pin["approved_hash"].as_str().unwrap_or(""),
        pin["approved_by"].as_str().unwrap_or("first sight")
    );
}
