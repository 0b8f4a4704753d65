//! Model calls outside turns (the gateway's): recorded once, summed with the turns'
//! `cost` events by the cost read under the same filters, left out by a thread filter,
//! extreme values clamped, and never changed or deleted behind the store's back.

use std::sync::Arc;

use agentplane_core::{CompletionId, EventPayload, StopReason, ThreadId, TurnId};
use agentplane_engine::ports::{CostQuery, ModelCallRecord, NewThread, StoreError};

use crate::fixtures::{RawSql, Store};

pub(crate) fn call(client: &str, agent: &str, tokens: u64, usd_micros: u64) -> ModelCallRecord {
    ModelCallRecord {
        id: CompletionId::new(),
        client: client.into(),
        agent: agent.into(),
        provider: "openai-compatible".into(),
        model: "m".into(),
        input_tokens: tokens,
        output_tokens: tokens / 10,
        usd_micros,
    }
}

pub async fn calls_are_summed_with_turn_costs_under_the_same_filters<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    store
        .record_model_call(call("alice", "gateway", 100, 7))
        .await
        .expect("record");
    store
        .record_model_call(call("alice", "gateway", 300, 5))
        .await
        .expect("record");
    store
        .record_model_call(call("bob", "gateway", 1_000, 50))
        .await
        .expect("record");
    // A turn of alice's with one cost event, same provider and model.
    let thread = store
        .create_thread(NewThread {
            agent_version: None,
            id: ThreadId::new(),
            client_id: "alice".into(),
            agent: "chat".into(),
            cwd: "/tmp".into(),
            title: None,
        })
        .await
        .expect("thread")
        .id;
    let turn = TurnId::new();
    store
        .begin_turn(&thread, &turn, "x", false)
        .await
        .expect("turn");
    store
        .append(
            &thread,
            &turn,
            EventPayload::Cost {
                provider: "openai-compatible".into(),
                model: "m".into(),
                input_tokens: 10,
                output_tokens: 1,
                usd_micros: 1,
                usd: 0.000001,
            },
        )
        .await
        .expect("cost");
    store
        .complete_turn(
            &thread,
            &turn,
            StopReason::Finished,
            serde_json::Value::Null,
        )
        .await
        .expect("complete");

    let alice = store
        .costs(&CostQuery {
            client: Some("alice".into()),
            ..CostQuery::default()
        })
        .await
        .expect("costs");
    let gateway = alice
        .iter()
        .find(|r| r.agent == "gateway")
        .expect("gateway row");
    assert_eq!(
        (gateway.calls, gateway.input_tokens, gateway.usd_micros),
        (2, 400, 12)
    );
    assert_eq!(gateway.output_tokens, 40);
    assert_eq!(gateway.thread, None);
    let chat = alice.iter().find(|r| r.agent == "chat").expect("turn row");
    assert_eq!(chat.calls, 1);
    assert_eq!(alice.len(), 2, "{alice:?}");

    let gateway_only = store
        .costs(&CostQuery {
            agent: Some("gateway".into()),
            ..CostQuery::default()
        })
        .await
        .expect("costs");
    let total: u64 = gateway_only.iter().map(|r| r.usd_micros).sum();
    assert_eq!(total, 62);

    let per_turn = store
        .costs(&CostQuery {
            thread: Some(thread.clone()),
            by_turn: true,
            ..CostQuery::default()
        })
        .await
        .expect("costs");
    assert_eq!(
        per_turn.len(),
        1,
        "a thread filter leaves gateway calls out"
    );
    assert_eq!(per_turn[0].turn.as_ref(), Some(&turn));

    let later = store
        .costs(&CostQuery {
            since: Some("2999-01-01T00:00:00Z".into()),
            ..CostQuery::default()
        })
        .await
        .expect("costs");
    assert!(later.is_empty(), "{later:?}");
    let bad = store
        .costs(&CostQuery {
            until: Some("tomorrow".into()),
            ..CostQuery::default()
        })
        .await;
    assert!(bad.is_err());
}

pub async fn an_id_is_recorded_once_and_extremes_are_clamped<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let first = call("alice", "gateway", u64::MAX, u64::MAX);
    store
        .record_model_call(first.clone())
        .await
        .expect("record");
    let again = store.record_model_call(first).await;
    assert!(matches!(again, Err(StoreError::Conflict(_))), "{again:?}");
    let rows = store.costs(&CostQuery::default()).await.expect("costs");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].calls, 1);
    assert_eq!(rows[0].input_tokens, i64::MAX as u64);
    assert_eq!(rows[0].usd_micros, i64::MAX as u64);
}

pub async fn recorded_calls_cannot_be_changed_or_deleted<S: Store>(
    store: Arc<S>,
    raw: &dyn RawSql,
) {
    store
        .record_model_call(call("alice", "gateway", 1, 1))
        .await
        .expect("record");
    assert!(
        raw.execute("UPDATE model_calls SET usd_micros = 0")
            .await
            .is_err()
    );
    assert!(raw.execute("DELETE FROM model_calls").await.is_err());
    assert!(
        raw.execute(
            "INSERT INTO model_calls VALUES ('x', 't', 'c', 'a', 'p', 'm', -1, 0, 0, NULL, NULL)"
        )
        .await
        .is_err(),
        "negative counts are refused"
    );
}
