//! Entry point for the fuzz targets in `fuzz/` (not an API): an agent's stdout, as
//! bytes, through the bounded line reader, the SDK's decoding of each line and what the
//! session makes of the messages it handles. Results are dropped; a fuzz target only
//! looks for panics.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use agent_client_protocol::v1::schema::{
    AgentNotification, AgentRequest, ClientNotification, ClientRequest, InitializeResponse,
    NewSessionResponse, PromptResponse,
};
use agent_client_protocol::{JsonRpcMessage, RawJsonRpcMessage};
use futures_util::StreamExt;
use serde_json::Value;

use crate::lines::bounded_lines;
use crate::updates;

/// Reads `output` as lines of at most `max_line` bytes and decodes each one as the
/// client side does (and as the agent side does, for `agentplane acp`).
pub async fn agent_output(output: Vec<u8>, max_line: usize) {
    let skipped = Arc::new(AtomicU64::new(0));
    let mut lines = Box::pin(bounded_lines(
        std::io::Cursor::new(output),
        max_line,
        skipped,
    ));
    while let Some(line) = lines.next().await {
        let Ok(line) = line else { return };
        message(&line);
    }
}

fn message(line: &str) {
    // As the SDK's transport does: JSON first, no batches, then the JSON-RPC shape.
    let Ok(value) = serde_json::from_str::<Value>(line) else {
        return;
    };
    if value.is_array() {
        return;
    }
    let _ = serde_json::from_value::<RawJsonRpcMessage>(value.clone());
    if let Some(result) = value.get("result") {
        // The answers the session reads fields of.
        let _ = serde_json::from_value::<InitializeResponse>(result.clone());
        let _ = serde_json::from_value::<NewSessionResponse>(result.clone());
        let _ = serde_json::from_value::<PromptResponse>(result.clone());
        return;
    }
    let Some(method) = value.get("method").and_then(Value::as_str) else {
        return;
    };
    let params = value.get("params").cloned().unwrap_or(Value::Null);
    if AgentNotification::matches_method(method)
        && let Ok(AgentNotification::SessionNotification(note)) =
            AgentNotification::parse_message(method, &params)
    {
        let _ = updates::map_update(note.update);
    }
    if AgentRequest::matches_method(method)
        && let Ok(AgentRequest::RequestPermissionRequest(request)) =
            AgentRequest::parse_message(method, &params)
    {
        let _ = updates::permission_ask(&request);
        let _ = updates::outcome_for(&request, true);
        let _ = updates::outcome_for(&request, false);
    }
    if ClientRequest::matches_method(method) {
        let _ = ClientRequest::parse_message(method, &params);
    }
    if ClientNotification::matches_method(method) {
        let _ = ClientNotification::parse_message(method, &params);
    }
}
