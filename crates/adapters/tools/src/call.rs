//! What every ensemble does with a call before its own work: the typed arguments, and
//! the error for a tool it does not offer. Each ensemble's module uses these; nothing
//! here knows an ensemble.

use agentplane_core::ToolErrorKind;
use agentplane_engine::ports::ToolError;
use serde::de::DeserializeOwned;

/// Turns a tool's JSON arguments into its argument struct. The engine has already
/// checked them against the schema; this is the second, typed check, so a schema that
/// drifted from the struct fails as `InvalidArguments` instead of misbehaving.
pub(crate) fn parse_args<T: DeserializeOwned>(
    tool: &str,
    args: serde_json::Value,
) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| {
        ToolError::new(
            ToolErrorKind::InvalidArguments,
            format!("invalid arguments for {tool}: {e}"),
        )
    })
}

/// The error for a tool name this ensemble does not offer.
pub(crate) fn unknown_tool(ensemble: &str, tool: &str) -> ToolError {
    ToolError::new(
        ToolErrorKind::UnknownTool,
        format!("the {ensemble} ensemble has no tool named {tool:?}"),
    )
}
