//! A turn's tools: each tool it may call, where it comes from and its schema
//! (`ToolEntry`, gathered once by `collect_tools`), and what running one gave
//! (`Executed`). Plain data for the call (`tool_call.rs`) and its gate
//! (`tool_gate.rs`), which both read it; nothing here runs a tool.

use std::collections::HashMap;
use std::sync::Arc;

use agentplane_core::{AgentSpec, ErrorCode, FINISH_TASK, ToolSpec};
use serde_json::Value;

use super::progress::{Stop, failed};
use crate::ports::Ensemble;
use crate::schema::Schema;

/// Where a tool of this turn comes from.
pub(super) enum ToolSource {
    Finish,
    Ensemble(usize),
}

pub(super) struct ToolEntry {
    pub(super) source: ToolSource,
    pub(super) schema: Schema,
    /// The schema as JSON, kept for approvals.
    pub(super) parameters: Value,
    /// From the tool's spec: a shadow run never executes it.
    pub(super) side_effects: bool,
}

pub(super) enum Executed {
    Finished(Value),
    Output {
        content: String,
        truncated: bool,
        /// Breaches the tool saw though it succeeded (a connection the egress proxy
        /// refused): each a `security_event`.
        security: Vec<crate::ports::SecurityViolation>,
        /// The connections the egress proxy decided: each an `egress` event.
        egress: Vec<crate::ports::EgressDecision>,
    },
}

/// The tools of a turn: the ensembles' tools plus `finish_task` when the agent has an
/// output schema; names unique.
pub(super) fn collect_tools(
    agent: &AgentSpec,
    ensembles: &[Arc<dyn Ensemble>],
) -> Result<(Vec<ToolSpec>, HashMap<String, ToolEntry>), Stop> {
    let mut specs = Vec::new();
    let mut tools = HashMap::new();
    let finish = agent.output_schema.as_ref().map(|schema| ToolSpec {
        name: FINISH_TASK.to_owned(),
        description: "Call this exactly once when the task is done. Its arguments are the \
                      final result of the task."
            .to_owned(),
        parameters: schema.clone(),
        side_effects: false,
    });
    let sources = ensembles
        .iter()
        .enumerate()
        .flat_map(|(i, e)| {
            e.tools()
                .into_iter()
                .map(move |t| (ToolSource::Ensemble(i), t))
        })
        .chain(finish.map(|f| (ToolSource::Finish, f)));
    for (source, spec) in sources {
        let schema = Schema::compile(&spec.parameters).map_err(|e| {
            failed(
                ErrorCode::InvalidArgument,
                format!("tool `{}` of agent `{}`: {e}", spec.name, agent.name),
            )
        })?;
        if tools
            .insert(
                spec.name.clone(),
                ToolEntry {
                    source,
                    schema,
                    parameters: spec.parameters.clone(),
                    side_effects: spec.side_effects,
                },
            )
            .is_some()
        {
            return Err(failed(
                ErrorCode::InvalidArgument,
                format!("agent `{}` has two tools named `{}`", agent.name, spec.name),
            ));
        }
        specs.push(spec);
    }
    Ok((specs, tools))
}
