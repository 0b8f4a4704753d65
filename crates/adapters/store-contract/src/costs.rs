//! The cost report's read: `cost` events appended on real turns, summed per agent,
//! client, provider, model and day; filters; tenancy through the client filter;
//! deleted threads still counted; extreme and damaged values.

use std::sync::Arc;

use agentplane_core::{EventPayload, StopReason, ThreadId, TurnId};
use agentplane_engine::ports::{CostQuery, CostRow, NewThread, StoreError};

use crate::fixtures::{RawSql, Store};

fn cost(model: &str, input_tokens: u64, output_tokens: u64, usd_micros: u64) -> EventPayload {
    EventPayload::Cost {
        provider: "openai".into(),
        model: model.into(),
        input_tokens,
        output_tokens,
        usd_micros,
        usd: usd_micros as f64 / 1e6,
    }
}

/// A thread of `client` running `agent`, with a running turn.
async fn turn_of<S: Store>(store: &S, client: &str, agent: &str) -> (ThreadId, TurnId) {
    let thread = store
        .create_thread(NewThread {
            agent_version: None,
            id: ThreadId::new(),
            client_id: client.into(),
            agent: agent.into(),
            cwd: "/tmp/work".into(),
            title: None,
        })
        .await
        .expect("create thread")
        .id;
    let turn = TurnId::new();
    store
        .begin_turn(&thread, &turn, "spend", false)
        .await
        .expect("begin turn");
    (thread, turn)
}

async fn spend<S: Store>(store: &S, at: &(ThreadId, TurnId), payload: EventPayload) {
    store
        .append(&at.0, &at.1, payload)
        .await
        .expect("append cost");
}

async fn finish<S: Store>(store: &S, at: &(ThreadId, TurnId)) {
    store
        .complete_turn(&at.0, &at.1, StopReason::Finished, serde_json::Value::Null)
        .await
        .expect("complete turn");
}

fn all() -> CostQuery {
    CostQuery::default()
}

fn today() -> String {
    let now = time::OffsetDateTime::now_utc();
    format!(
        "{:04}-{:02}-{:02}",
        now.year(),
        u8::from(now.month()),
        now.day()
    )
}

fn totals(rows: &[CostRow]) -> (u64, u64, u64, u64) {
    rows.iter().fold((0, 0, 0, 0), |t, r| {
        (
            t.0 + r.calls,
            t.1 + r.input_tokens,
            t.2 + r.output_tokens,
            t.3 + r.usd_micros,
        )
    })
}

pub async fn an_empty_store_has_no_costs<S: Store>(store: Arc<S>, _raw: &dyn RawSql) {
    assert_eq!(store.costs(&all()).await.unwrap(), Vec::new());
    // Turns without cost events (a local model, or a turn that failed before a call)
    // add nothing either.
    let at = turn_of(&*store, "local", "coder").await;
    store
        .append(
            &at.0,
            &at.1,
            EventPayload::MessageDelta { text: "hi".into() },
        )
        .await
        .unwrap();
    finish(&*store, &at).await;
    assert_eq!(store.costs(&all()).await.unwrap(), Vec::new());
}

pub async fn calls_are_summed_per_agent_client_provider_model_and_day<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let a1 = turn_of(&*store, "alice", "coder").await;
    spend(&*store, &a1, cost("gpt-4o", 100, 10, 350)).await;
    spend(&*store, &a1, cost("gpt-4o", 200, 20, 700)).await;
    spend(&*store, &a1, cost("gpt-4o-mini", 1_000, 100, 210)).await;
    finish(&*store, &a1).await;
    // A second thread of the same client and agent joins the same groups.
    let a2 = turn_of(&*store, "alice", "coder").await;
    spend(&*store, &a2, cost("gpt-4o", 1, 1, 13)).await;
    let b = turn_of(&*store, "bob", "writer").await;
    spend(&*store, &b, cost("gpt-4o", 5, 5, 63)).await;
    store
        .append(
            &b.0,
            &b.1,
            EventPayload::Cost {
                provider: "anthropic".into(),
                model: "claude-sonnet-4".into(),
                input_tokens: 7,
                output_tokens: 3,
                usd_micros: 66,
                usd: 0.000066,
            },
        )
        .await
        .unwrap();

    let rows = store.costs(&all()).await.unwrap();
    let day = today();
    let row = |agent: &str, client: &str, provider: &str, model: &str, n: [u64; 4]| CostRow {
        agent: agent.into(),
        client: client.into(),
        provider: provider.into(),
        model: model.into(),
        day: day.clone(),
        thread: None,
        turn: None,
        calls: n[0],
        input_tokens: n[1],
        output_tokens: n[2],
        usd_micros: n[3],
    };
    // Sorted by agent, client, provider, model, day.
    assert_eq!(
        rows,
        vec![
            row("coder", "alice", "openai", "gpt-4o", [3, 301, 31, 1_063]),
            row(
                "coder",
                "alice",
                "openai",
                "gpt-4o-mini",
                [1, 1_000, 100, 210]
            ),
            row(
                "writer",
                "bob",
                "anthropic",
                "claude-sonnet-4",
                [1, 7, 3, 66]
            ),
            row("writer", "bob", "openai", "gpt-4o", [1, 5, 5, 63]),
        ]
    );
}

pub async fn by_turn_splits_rows_per_thread_and_turn<S: Store>(store: Arc<S>, _raw: &dyn RawSql) {
    let first = turn_of(&*store, "alice", "coder").await;
    spend(&*store, &first, cost("gpt-4o", 10, 1, 100)).await;
    spend(&*store, &first, cost("gpt-4o", 10, 1, 100)).await;
    finish(&*store, &first).await;
    let second = TurnId::new();
    store
        .begin_turn(&first.0, &second, "again", false)
        .await
        .unwrap();
    spend(
        &*store,
        &(first.0.clone(), second.clone()),
        cost("gpt-4o", 1, 1, 7),
    )
    .await;
    let other = turn_of(&*store, "alice", "coder").await;
    spend(&*store, &other, cost("gpt-4o", 2, 2, 9)).await;

    let per_turn = store
        .costs(&CostQuery {
            thread: Some(first.0.clone()),
            by_turn: true,
            ..all()
        })
        .await
        .unwrap();
    assert_eq!(per_turn.len(), 2, "{per_turn:?}");
    let of = |turn: &TurnId| {
        per_turn
            .iter()
            .find(|r| r.turn.as_ref() == Some(turn))
            .unwrap_or_else(|| panic!("a row for {turn}: {per_turn:?}"))
    };
    assert_eq!((of(&first.1).calls, of(&first.1).usd_micros), (2, 200));
    assert_eq!((of(&second).calls, of(&second).usd_micros), (1, 7));
    assert!(per_turn.iter().all(|r| r.thread.as_ref() == Some(&first.0)));

    // Without by_turn, the two threads of the same agent merge into one row.
    let merged = store.costs(&all()).await.unwrap();
    assert_eq!(merged.len(), 1);
    assert_eq!(merged[0].thread, None);
    assert_eq!(merged[0].turn, None);
    assert_eq!(totals(&merged), (4, 23, 5, 216));
}

pub async fn filters_select_client_agent_thread_and_time<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let alice = turn_of(&*store, "alice", "coder").await;
    spend(&*store, &alice, cost("m", 1, 0, 1)).await;
    let alice_writer = turn_of(&*store, "alice", "writer").await;
    spend(&*store, &alice_writer, cost("m", 2, 0, 2)).await;
    let bob = turn_of(&*store, "bob", "coder").await;
    spend(&*store, &bob, cost("m", 4, 0, 4)).await;

    let sum = |query: CostQuery| {
        let store = &*store;
        async move { totals(&store.costs(&query).await.unwrap()).3 }
    };
    assert_eq!(sum(all()).await, 7);
    let client = |c: &str| CostQuery {
        client: Some(c.into()),
        ..all()
    };
    assert_eq!(sum(client("alice")).await, 3);
    assert_eq!(sum(client("bob")).await, 4);
    assert_eq!(sum(client("carol")).await, 0);
    // Hostile client ids are values, never SQL.
    assert_eq!(sum(client("alice' OR '1'='1")).await, 0);
    assert_eq!(sum(client("%")).await, 0);
    assert_eq!(
        sum(CostQuery {
            agent: Some("coder".into()),
            ..all()
        })
        .await,
        5
    );
    assert_eq!(
        sum(CostQuery {
            client: Some("alice".into()),
            agent: Some("coder".into()),
            ..all()
        })
        .await,
        1
    );
    // A thread filter together with another client's id: nothing.
    assert_eq!(
        sum(CostQuery {
            client: Some("bob".into()),
            thread: Some(alice.0.clone()),
            ..all()
        })
        .await,
        0
    );
    assert_eq!(
        sum(CostQuery {
            thread: Some(alice_writer.0.clone()),
            ..all()
        })
        .await,
        2
    );

    // Time: `since` inclusive, `until` exclusive, any offset.
    let events = store.thread_events(&bob.0, 0, 10).await.unwrap();
    let ts = &events.last().expect("the cost event").ts;
    let at = |since: Option<&str>, until: Option<&str>| CostQuery {
        since: since.map(str::to_owned),
        until: until.map(str::to_owned),
        thread: Some(bob.0.clone()),
        ..all()
    };
    assert_eq!(sum(at(Some(ts), None)).await, 4);
    assert_eq!(sum(at(None, Some(ts))).await, 0);
    assert_eq!(
        sum(at(
            Some("2000-01-01T00:00:00Z"),
            Some("9999-01-01T00:00:00Z")
        ))
        .await,
        4
    );
    assert_eq!(sum(at(Some("9999-01-01T00:00:00+14:00"), None)).await, 0);
    assert_eq!(sum(at(None, Some("2000-01-01T00:00:00-12:00"))).await, 0);
    // A bound that is not RFC 3339 is refused, not compared as text.
    for bad in [
        "yesterday",
        "2026-01-01",
        "' OR 1=1 --",
        "2026-01-01T00:00:00",
    ] {
        let refused = store.costs(&at(Some(bad), None)).await;
        assert!(
            matches!(refused, Err(StoreError::Backend(_))),
            "{bad}: {refused:?}"
        );
    }
}

pub async fn deleted_threads_still_count<S: Store>(store: Arc<S>, _raw: &dyn RawSql) {
    let at = turn_of(&*store, "alice", "coder").await;
    spend(&*store, &at, cost("gpt-4o", 10, 10, 125)).await;
    finish(&*store, &at).await;
    store.delete_thread(&at.0).await.expect("delete");
    assert!(store.thread(&at.0).await.unwrap().is_none());
    let rows = store
        .costs(&CostQuery {
            client: Some("alice".into()),
            ..all()
        })
        .await
        .unwrap();
    assert_eq!(totals(&rows), (1, 10, 10, 125));
}

pub async fn extreme_numbers_are_exact_and_sums_saturate<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let at = turn_of(&*store, "alice", "coder").await;
    // Above i64::MAX: SQLite would hold these as floats; they must come back exact.
    let big = u64::MAX - 1;
    spend(&*store, &at, cost("m", big, 1, big)).await;
    let rows = store.costs(&all()).await.unwrap();
    assert_eq!(totals(&rows), (1, big, 1, big));
    // Two of them saturate instead of overflowing or failing the report.
    spend(&*store, &at, cost("m", big, u64::MAX, big)).await;
    let rows = store.costs(&all()).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (
            rows[0].calls,
            rows[0].input_tokens,
            rows[0].output_tokens,
            rows[0].usd_micros
        ),
        (2, u64::MAX, u64::MAX, u64::MAX)
    );
    // Names are data: quotes, SQL and control characters come back as written.
    let hostile = "m'); DROP TABLE events; --\u{1b}[2J";
    spend(&*store, &at, cost(hostile, 1, 1, 1)).await;
    let rows = store.costs(&all()).await.unwrap();
    assert!(rows.iter().any(|r| r.model == hostile), "{rows:?}");
}

pub async fn a_damaged_cost_event_is_reported_not_hidden<S: Store>(
    store: Arc<S>,
    raw: &dyn RawSql,
) {
    let at = turn_of(&*store, "alice", "coder").await;
    spend(&*store, &at, cost("m", 1, 1, 1)).await;
    // Written behind the store's back: a negative amount where only u64 can be.
    raw.execute(&format!(
        "INSERT INTO events (thread_id, seq, turn_id, kind, ts, payload)
         VALUES ('{}', 100, '{}', 'cost', '2026-01-01T00:00:00.000Z',
                 '{{\"kind\":\"cost\",\"provider\":\"p\",\"model\":\"m\",\"input_tokens\":1,\
                   \"output_tokens\":1,\"usd_micros\":-5,\"usd\":0}}')",
        at.0, at.1
    ))
    .await
    .expect("raw insert");
    let refused = store.costs(&all()).await;
    match refused {
        Err(StoreError::Backend(message)) => {
            assert!(message.contains("usd_micros"), "{message}");
            assert!(message.contains(at.0.as_str()), "{message}");
        }
        other => panic!("expected a damaged-row error, got {other:?}"),
    }
}
