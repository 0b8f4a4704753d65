//! The MCP gateway's log: a call is recorded once (one per approval), read back
//! exactly with hostile text, listed newest first per client or by approval, summed
//! into costs when it was charged, and never changed or deleted behind the store's
//! back.

use std::sync::Arc;

use agentplane_core::{ApprovalId, McpCallId};
use agentplane_engine::ports::{CostQuery, McpCallQuery, McpCallRecord, StoreError};
use serde_json::json;

use crate::fixtures::{RawSql, Store};

pub(crate) fn call(client: &str, tool: &str, usd_micros: u64) -> McpCallRecord {
    McpCallRecord {
        id: McpCallId::new(),
        ts: String::new(),
        client: client.into(),
        agent: "mcp-gateway".into(),
        server: "everything".into(),
        tool: tool.into(),
        status: "ok".into(),
        detail: None,
        policy: None,
        approval: None,
        duration_ms: 3,
        usd_micros,
        result: None,
    }
}

pub async fn calls_are_listed_per_client_and_by_approval<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let first = call("alice", "everything__echo", 0);
    store.record_mcp_call(first.clone()).await.expect("record");
    let approval = ApprovalId::new();
    let hostile = McpCallRecord {
        status: "rejected".into(),
        detail: Some("nul \0 quote ' emoji 🦀 \u{202e}".into()),
        policy: Some("p'; DROP TABLE mcp_calls; --".into()),
        approval: Some(approval.clone()),
        duration_ms: u64::MAX,
        result: Some(json!({"text": "a\0b", "is_error": true})),
        ..call("alice", "everything__get-sum", 0)
    };
    store
        .record_mcp_call(hostile.clone())
        .await
        .expect("record");
    store
        .record_mcp_call(call("bob", "everything__echo", 0))
        .await
        .expect("record");

    let alice = store
        .mcp_calls(&McpCallQuery {
            client: Some("alice".into()),
            ..McpCallQuery::default()
        })
        .await
        .expect("list");
    assert_eq!(alice.len(), 2);
    assert_eq!(alice[0].id, hostile.id, "newest first");
    assert_eq!(alice[0].detail, hostile.detail);
    assert_eq!(alice[0].policy, hostile.policy);
    assert_eq!(alice[0].result, hostile.result);
    assert_eq!(alice[0].duration_ms, i64::MAX as u64, "clamped");
    assert!(!alice[0].ts.is_empty(), "stamped by the store");
    assert_eq!(alice[1].id, first.id);
    let by_approval = store
        .mcp_calls(&McpCallQuery {
            approval: Some(approval.clone()),
            ..McpCallQuery::default()
        })
        .await
        .expect("by approval");
    assert_eq!(by_approval.len(), 1);
    assert_eq!(by_approval[0].id, hostile.id);
    let limited = store
        .mcp_calls(&McpCallQuery {
            limit: 1,
            ..McpCallQuery::default()
        })
        .await
        .expect("limited");
    assert_eq!(limited.len(), 1);
    assert_eq!(limited[0].client, "bob");

    // One call per id, and one per approval.
    assert!(matches!(
        store.record_mcp_call(first.clone()).await,
        Err(StoreError::Conflict(_))
    ));
    let again = McpCallRecord {
        approval: Some(approval),
        ..call("alice", "everything__get-sum", 0)
    };
    assert!(matches!(
        store.record_mcp_call(again).await,
        Err(StoreError::Conflict(_))
    ));
}

pub async fn charged_calls_count_in_costs<S: Store>(store: Arc<S>, _raw: &dyn RawSql) {
    store
        .record_mcp_call(call("alice", "everything__get-sum", 250_000))
        .await
        .expect("record");
    store
        .record_mcp_call(call("alice", "everything__get-sum", 250_000))
        .await
        .expect("record");
    // Free calls add no cost row.
    store
        .record_mcp_call(call("alice", "everything__echo", 0))
        .await
        .expect("record");
    let rows = store
        .costs(&CostQuery {
            client: Some("alice".into()),
            ..CostQuery::default()
        })
        .await
        .expect("costs");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].provider, "mcp");
    assert_eq!(rows[0].model, "everything__get-sum");
    assert_eq!(rows[0].agent, "mcp-gateway");
    assert_eq!(rows[0].calls, 2);
    assert_eq!(rows[0].usd_micros, 500_000);
    let bob = store
        .costs(&CostQuery {
            client: Some("bob".into()),
            ..CostQuery::default()
        })
        .await
        .expect("costs");
    assert!(bob.is_empty());
}

pub async fn recorded_mcp_calls_cannot_be_changed_or_deleted<S: Store>(
    store: Arc<S>,
    raw: &dyn RawSql,
) {
    store
        .record_mcp_call(call("alice", "everything__echo", 1))
        .await
        .expect("record");
    assert!(
        raw.execute("UPDATE mcp_calls SET usd_micros = 0")
            .await
            .is_err()
    );
    assert!(raw.execute("DELETE FROM mcp_calls").await.is_err());
}
