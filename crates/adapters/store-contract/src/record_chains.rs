//! The record chains (ADR 0048): the gateway's model calls and the MCP gateway's calls
//! each form one gapless chain, under concurrency too; an edited or a removed record is
//! named by verify; records from before the chain are counted, not broken.

use std::sync::Arc;

use agentplane_core::ApprovalId;
use agentplane_core::audit::{BreakReason, RecordChain};
use agentplane_engine::ports::McpCallRecord;
use agentplane_engine::services::reports::{export_records, verify_chains};
use serde_json::json;

use crate::fixtures::{Dialect, RawSql, Store};

const CALLS: usize = 24;

/// `CALLS` model calls and `CALLS` MCP calls recorded at once, some with NULL columns
/// and hostile text.
async fn record_many<S: Store>(store: &Arc<S>) {
    let mut tasks = Vec::new();
    for i in 0..CALLS {
        let store = Arc::clone(store);
        tasks.push(tokio::spawn(async move {
            store
                .record_model_call(crate::model_calls::call("alice", "gateway", i as u64, 7))
                .await
                .expect("a model call");
            let mut mcp = crate::mcp_calls::call("bob", "everything__echo", i as u64);
            if i % 3 == 0 {
                mcp = McpCallRecord {
                    status: "rejected".into(),
                    detail: Some("'; DROP TABLE mcp_calls; -- \u{202e} \"é\"".into()),
                    policy: Some("no-echo".into()),
                    approval: Some(ApprovalId::new()),
                    result: Some(json!({"text": "line\nnext \u{1F600}", "n": i})),
                    ..mcp
                };
            }
            store.record_mcp_call(mcp).await.expect("an MCP call");
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
}

pub async fn record_chains_hold_under_concurrency_and_name_an_edit<S: Store>(
    store: Arc<S>,
    raw: &dyn RawSql,
) {
    record_many(&store).await;
    let report = verify_chains(&*store, None).await.expect("verify");
    assert!(report.holds(), "{report:?}");
    let counts: Vec<_> = report
        .records
        .iter()
        .map(|s| (s.thread_id.as_str(), s.chained, s.unchained))
        .collect();
    assert_eq!(
        counts,
        [
            ("model_calls", CALLS as u64, 0),
            ("mcp_calls", CALLS as u64, 0),
            // The ledger's genesis: a new store has no thread or key yet.
            ("audit_ledger", 1, 0),
        ]
    );
    // The export carries each record's link: consecutive lines link, the first to
    // genesis.
    let mut lines = Vec::new();
    export_records(&*store, None, |line| {
        lines.push(line);
        true
    })
    .await
    .expect("export");
    assert_eq!(lines.len(), 2 * CALLS + 1);
    assert_eq!(lines[0].prev, "0".repeat(64));
    assert_eq!(Some(lines[1].prev.clone()), lines[0].record.hash);

    // What an operator with the database's password could do: lift the guard and
    // lower one call's price.
    let unguard = match raw.dialect() {
        Dialect::Sqlite => "DROP TRIGGER model_calls_never_update",
        Dialect::Postgres => "ALTER TABLE model_calls DISABLE TRIGGER model_calls_audit",
    };
    raw.batch(unguard).await.expect("lift the guard");
    let changed = raw
        .execute("UPDATE model_calls SET usd_micros = 0 WHERE chain_pos = 5")
        .await
        .expect("edit");
    assert_eq!(changed, 1);
    let report = verify_chains(&*store, None).await.expect("verify");
    let broken = report.broken_record.expect("the edit is found");
    assert_eq!((broken.thread_id.as_str(), broken.seq), ("model_calls", 5));
    assert!(matches!(broken.reason, BreakReason::HashMismatch { .. }));
    assert_eq!(report.broken, None, "the event chains are not involved");
    // The walk stops at the break: the chain is not also reported as holding.
    assert!(report.records.is_empty(), "{:?}", report.records);
}

pub async fn a_removed_record_is_named_by_verify<S: Store>(store: Arc<S>, raw: &dyn RawSql) {
    record_many(&store).await;
    let unguard = match raw.dialect() {
        Dialect::Sqlite => "DROP TRIGGER mcp_calls_never_delete",
        Dialect::Postgres => "ALTER TABLE mcp_calls DISABLE TRIGGER mcp_calls_audit",
    };
    raw.batch(unguard).await.expect("lift the guard");
    // The last record: nothing after it links to it, but the chain's tip still does.
    let removed = raw
        .execute(&format!("DELETE FROM mcp_calls WHERE chain_pos = {CALLS}"))
        .await
        .expect("delete");
    assert_eq!(removed, 1);
    let broken = verify_chains(&*store, None)
        .await
        .expect("verify")
        .broken_record
        .expect("the removal is found");
    assert_eq!(
        (broken.thread_id.as_str(), broken.seq, broken.reason),
        (
            "mcp_calls",
            CALLS as u64,
            BreakReason::SeqGap {
                expected: CALLS as u64
            }
        )
    );
    // A record from the middle: the next one no longer follows.
    let removed = raw
        .execute("DELETE FROM mcp_calls WHERE chain_pos = 3")
        .await
        .expect("delete");
    assert_eq!(removed, 1);
    let broken = verify_chains(&*store, None)
        .await
        .expect("verify")
        .broken_record
        .expect("the removal is found");
    assert_eq!(
        (broken.seq, broken.reason),
        (4, BreakReason::SeqGap { expected: 3 })
    );
}

pub async fn an_unchained_record_on_a_chained_store_is_named<S: Store>(
    store: Arc<S>,
    raw: &dyn RawSql,
) {
    store
        .record_model_call(crate::model_calls::call("alice", "gateway", 1, 1))
        .await
        .expect("a chained call");
    assert!(verify_chains(&*store, None).await.expect("verify").holds());
    // A record dressed as one from before the chain (no position, no hash), on a store
    // the chain covered from its first day: the genesis counted none.
    raw.execute(
        "INSERT INTO model_calls (id, ts, client_id, agent, provider, model, input_tokens,
                                  output_tokens, usd_micros)
         VALUES ('cmpl_old', '2026-01-01T00:00:00.000Z', 'alice', 'gateway', 'p', 'm', 1, 1, 1)",
    )
    .await
    .expect("an inserted record");
    let report = verify_chains(&*store, None).await.expect("verify");
    assert!(!report.holds(), "{report:?}");
    assert_eq!(report.broken_record, None, "every link still holds");
    let named: Vec<_> = report
        .mismatches
        .iter()
        .map(|m| (m.subject.as_str(), m.against.as_str()))
        .collect();
    assert_eq!(
        named,
        [("model_calls", "the genesis (ledger record 1)")],
        "{report:?}"
    );
    let tip = store
        .record_chain_tip(RecordChain::ModelCalls)
        .await
        .expect("tip");
    assert_eq!((tip.last_pos, tip.unchained), (1, 1));
}
