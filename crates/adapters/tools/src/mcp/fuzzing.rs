//! Entry point for the fuzz targets in `fuzz/` (not an API): one message from an MCP
//! server, as bytes, through rmcp's decoding and what we make of a result. Results are
//! dropped; a fuzz target only looks for panics.

use rmcp::model::{CallToolResult, ListToolsResult, ServerJsonRpcMessage};

use super::catalog::Catalog;
use super::content;

/// Decodes `bytes` as a server's JSON-RPC message; a response's result is also read as
/// a tool call's result (turned into the model's text) and as a tool list (turned into
/// the catalog, compiling each input schema), as the client does with them.
pub fn server_message(bytes: &[u8]) {
    let _ = serde_json::from_slice::<ServerJsonRpcMessage>(bytes);
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes) else {
        return;
    };
    let result = value.get("result").cloned().unwrap_or(value);
    if let Ok(call) = serde_json::from_value::<CallToolResult>(result.clone()) {
        let _ = content::to_output(&call, 4096);
        let _ = content::error_text(&call, 4096);
    }
    if let Ok(list) = serde_json::from_value::<ListToolsResult>(result) {
        let _ = Catalog::new("fuzz", "mcp__fuzz__", list.tools, &Default::default());
    }
}
