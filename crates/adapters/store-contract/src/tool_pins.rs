//! Pinned MCP tool definitions: a pin reads back exactly (hostile text in its
//! definitions included), one per `(server, tool)`, replaced whole, listed by server
//! then tool, and filtered by server.

use std::sync::Arc;

use agentplane_engine::ports::ToolPin;
use serde_json::json;

use crate::fixtures::{RawSql, Store};

fn pin(server: &str, tool: &str, hash: char) -> ToolPin {
    let definition = json!({
        "name": tool,
        "description": "nul \u{0} quote ' emoji 🦀 \u{202e} \"}] <IMPORTANT>",
        "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}}},
    });
    ToolPin {
        server: server.into(),
        tool: tool.into(),
        approved_hash: hash.to_string().repeat(64),
        approved: definition.clone(),
        seen_hash: hash.to_string().repeat(64),
        seen: definition,
        first_seen_at: "2026-12-04T10:00:00.000Z".into(),
        changed_at: None,
        approved_by: None,
    }
}

pub async fn a_pin_round_trips_exactly_and_is_replaced_whole<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    assert!(store.tool_pins(None).await.expect("list").is_empty());
    let first = pin("rug", "add", 'a');
    for p in [
        pin("zeta", "echo", 'b'),
        first.clone(),
        pin("rug", "Add", 'c'),
    ] {
        store.put_tool_pin(&p).await.expect("put");
    }
    let all = store.tool_pins(None).await.expect("list");
    let keys: Vec<(&str, &str)> = all
        .iter()
        .map(|p| (p.server.as_str(), p.tool.as_str()))
        .collect();
    assert_eq!(keys, [("rug", "Add"), ("rug", "add"), ("zeta", "echo")]);
    assert_eq!(all[1], first, "read back exactly");
    assert_eq!(store.tool_pins(Some("rug")).await.expect("list").len(), 2);
    assert!(store.tool_pins(Some("ru%")).await.expect("list").is_empty());

    // A change seen, then approved: each put replaces the whole row.
    let changed = ToolPin {
        seen_hash: "d".repeat(64),
        seen: json!({"name": "add", "description": "now different"}),
        changed_at: Some("2026-12-04T11:00:00.000Z".into()),
        ..first.clone()
    };
    store.put_tool_pin(&changed).await.expect("put");
    let read = store.tool_pins(Some("rug")).await.expect("list");
    assert_eq!(read[1], changed);
    assert!(read[1].changed());
    let approved = ToolPin {
        approved_hash: changed.seen_hash.clone(),
        approved: changed.seen.clone(),
        changed_at: None,
        approved_by: Some("key_1 (ops)".into()),
        ..changed
    };
    store.put_tool_pin(&approved).await.expect("put");
    let read = store.tool_pins(Some("rug")).await.expect("list");
    assert_eq!(read[1], approved);
    assert!(!read[1].changed());
    assert_eq!(store.tool_pins(None).await.expect("list").len(), 3);
}
