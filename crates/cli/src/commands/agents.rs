//! `agentplane agents`: every agent, its tools, the model it would use right now and
//! (with `--json`) its provider chain.

use std::path::Path;

use agentplane_core::ToolCallMode;
use agentplane_engine::ports::Capabilities;
use agentplane_runtime::ModelStatus;
use clap::Args;
use serde_json::json;

use crate::exit::{self, Exit};

#[derive(Args)]
pub struct AgentsArgs {
    /// Print a JSON array instead of a table.
    #[arg(long)]
    json: bool,
}

pub async fn run(config: Option<&Path>, args: AgentsArgs) -> Exit {
    let runtime = match super::started(config).await {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let mut rows = Vec::new();
    for agent in runtime.agents().values() {
        let status = runtime.model_status(agent).await;
        let capabilities = match status {
            ModelStatus::Unavailable { .. } => Capabilities::default(),
            _ => runtime.hub().model_capabilities(agent).await,
        };
        rows.push((agent, status, capabilities));
    }
    if args.json {
        let list: Vec<_> = rows
            .iter()
            .map(|(agent, status, capabilities)| {
                let (state, model, detail) = describe(status);
                json!({
                    "name": agent.name,
                    "description": agent.description,
                    "ensembles": agent.ensembles,
                    "sandbox": {"required": agent.sandbox.required, "in_force": agent.sandbox.in_force},
                    "model": {
                        "status": state,
                        "model": model,
                        "detail": detail,
                        "capabilities": capabilities,
                    },
                    "tool_calls": agent.tool_calls.as_str(),
                    "providers": runtime
                        .hub()
                        .provider_chain(agent)
                        .into_iter()
                        .map(|p| p.name)
                        .collect::<Vec<_>>(),
                })
            })
            .collect();
        println!("{}", serde_json::Value::Array(list));
        return exit::SUCCESS;
    }
    let providers = &runtime.config().providers.providers;
    if providers.is_empty() {
        println!("model server: {}", runtime.config().llm.base_url);
    } else {
        let list: Vec<String> = providers
            .iter()
            .map(|(name, p)| format!("{name} ({} at {})", p.kind.as_str(), p.base_url))
            .collect();
        println!("providers: {}", list.join(", "));
    }
    for (agent, status, capabilities) in &rows {
        let (state, model, detail) = describe(status);
        let tools = if agent.ensembles.is_empty() {
            "no tools".to_owned()
        } else {
            agent.ensembles.join(", ")
        };
        println!(
            "{:<14} {:<10} {:<24} [{tools}] {}",
            agent.name, state, model, agent.description
        );
        if let Some(detail) = detail {
            println!("{:<14} {detail}", "");
        }
        if let Some(line) = tool_calls_line(agent.tool_calls, capabilities) {
            println!("{:<14} {line}", "");
        }
        if agent.ensembles.iter().any(|e| e == "shell") {
            println!("{:<14} sandbox: {}", "", agent.sandbox.in_force);
        }
    }
    exit::SUCCESS
}

/// How the agent's tool calls will be read, when the server said what it can do.
fn tool_calls_line(mode: ToolCallMode, capabilities: &Capabilities) -> Option<String> {
    let native = match capabilities.native_tools? {
        true => "native tool calls",
        false => "no native tool calls (calls written as text are recovered)",
    };
    let schema = match capabilities.json_schema {
        Some(true) => ", JSON-schema answers",
        _ => "",
    };
    Some(format!(
        "tool calls: {} mode; server: {native}{schema} ({})",
        mode.as_str(),
        capabilities.source
    ))
}

/// (state, model, detail) of a model status.
fn describe(status: &ModelStatus) -> (&'static str, String, Option<String>) {
    match status {
        ModelStatus::Ready { model } => ("ready", model.clone(), None),
        ModelStatus::Substitute { wanted, model } => (
            "substitute",
            model.clone(),
            Some(format!(
                "`{wanted}` is not on the server; `{model}` will be used"
            )),
        ),
        ModelStatus::Unavailable { wanted, error } => {
            ("unavailable", wanted.clone(), Some(error.clone()))
        }
    }
}
