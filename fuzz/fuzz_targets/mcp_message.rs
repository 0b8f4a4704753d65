//! One JSON-RPC message from an MCP peer: as a server's message to our client (with the
//! tool results and tool lists we convert) and as a client's message to our server.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rmcp::model::ClientJsonRpcMessage;

fuzz_target!(|data: &[u8]| {
    agentplane_tools::mcp::fuzzing::server_message(data);
    let _ = serde_json::from_slice::<ClientJsonRpcMessage>(data);
});
