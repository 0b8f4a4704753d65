//! `GET /v1/costs`: turns run against the scripted model record a cost per call,
//! priced by the built-in table; cost events recorded on turns in the real SQLite store
//! are reported over HTTP grouped and totalled; tenancy (a client sees only its own
//! spend, another client's thread is 404); hostile query strings are 400/404 envelopes.

use agentplane_core::{EventPayload, StopReason, ThreadId, TurnId};
use reqwest::Method;
use serde_json::Value;

use agentplane_testkit::Step;

use crate::harness::{Api, Setup};

/// One model call: provider, model, input tokens, output tokens, micro-dollars.
type Call = (&'static str, &'static str, u64, u64, u64);

/// Records a turn on `thread` whose model calls cost these amounts, through the hub's
/// own store (what the turn loop does for each call).
async fn spend(api: &Api, thread: &str, calls: &[Call]) -> String {
    let store = api.runtime.turn_deps().store.clone();
    let thread = ThreadId::parse(thread).expect("thread id");
    let turn = TurnId::new();
    store
        .begin_turn(&thread, &turn, "spend", false)
        .await
        .expect("begin turn");
    for &(provider, model, input_tokens, output_tokens, usd_micros) in calls {
        store
            .append(
                &thread,
                &turn,
                EventPayload::Cost {
                    provider: provider.into(),
                    model: model.into(),
                    input_tokens,
                    output_tokens,
                    usd_micros,
                    usd: agentplane_core::usd_of_micros(usd_micros),
                },
            )
            .await
            .expect("append cost");
    }
    store
        .complete_turn(&thread, &turn, StopReason::Finished, Value::Null)
        .await
        .expect("complete turn");
    turn.as_str().to_owned()
}

/// `(key, calls, usd_micros)` of each row.
fn rows(body: &Value) -> Vec<(String, u64, u64)> {
    body["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("rows: {body}"))
        .iter()
        .map(|r| {
            (
                r["key"].as_str().expect("key").to_owned(),
                r["calls"].as_u64().expect("calls"),
                r["usd_micros"].as_u64().expect("usd_micros"),
            )
        })
        .collect()
}

fn row(key: &str, calls: u64, usd_micros: u64) -> (String, u64, u64) {
    (key.to_owned(), calls, usd_micros)
}

async fn costs(api: &Api, client: &str, query: &str) -> Value {
    let answer = api.get(&format!("/v1/costs{query}"), client).await;
    assert_eq!(answer.status.as_u16(), 200, "{query}: {:?}", answer.body);
    answer.body
}

#[tokio::test]
async fn real_turns_are_priced_by_the_built_in_table_and_local_models_are_free() {
    // The model server says which model answered: a hosted one, then a local one.
    let mut hosted = Step::text("first answer").with_usage(100, 50);
    hosted.model = Some("gpt-4o-mini".into());
    let local = Step::text("second answer").with_usage(50, 5);
    let api = Setup::new(vec![hosted, local]).start().await;
    let thread = api.create_thread("alice", "chat").await;
    for input in ["one", "two"] {
        let frames = api
            .start_turn("alice", &thread, input)
            .await
            .until_completed()
            .await;
        assert!(frames.iter().any(|f| f.is("cost")), "{frames:#?}");
    }

    let by_model = costs(&api, "alice", "?group_by=model").await;
    // gpt-4o-mini at $0.15 / $0.60 per Mtok: 100 × 0.15 + 50 × 0.60 = 45 µ$.
    assert_eq!(
        rows(&by_model),
        [row("gpt-4o-mini", 1, 45), row("scripted-model", 1, 0)]
    );
    assert_eq!(by_model["total"]["input_tokens"], 150);
    assert_eq!(by_model["total"]["output_tokens"], 55);
    assert_eq!(by_model["total"]["usd"].as_f64(), Some(0.000045));
    let per_turn = costs(&api, "alice", &format!("?group_by=turn&thread_id={thread}")).await;
    let usd: Vec<u64> = rows(&per_turn).into_iter().map(|r| r.2).collect();
    assert_eq!(usd.len(), 2, "{per_turn}");
    assert_eq!(usd.iter().sum::<u64>(), 45);
    assert_eq!(rows(&costs(&api, "bob", "?group_by=model").await), []);
}

#[tokio::test]
async fn costs_are_grouped_and_totalled_for_the_calling_client_only() {
    let api = Setup::new(vec![]).start().await;
    let chat = api.create_thread("alice", "chat").await;
    let writer = api.create_thread("alice", "writer").await;
    let bobs = api.create_thread("bob", "chat").await;
    spend(
        &api,
        &chat,
        &[
            ("openai", "gpt-4o", 100, 10, 350),
            ("openai", "gpt-4o-mini", 1_000, 100, 210),
        ],
    )
    .await;
    spend(&api, &chat, &[("openai", "gpt-4o", 200, 20, 700)]).await;
    spend(
        &api,
        &writer,
        &[("anthropic", "claude-sonnet-4", 10, 10, 180)],
    )
    .await;
    spend(
        &api,
        &bobs,
        &[("openai", "gpt-4o", 1_000_000, 0, 2_500_000)],
    )
    .await;

    // The default grouping is by agent.
    let by_agent = costs(&api, "alice", "").await;
    assert_eq!(by_agent["group_by"], "agent");
    assert_eq!(
        rows(&by_agent),
        [row("chat", 3, 1_260), row("writer", 1, 180)]
    );
    let total = &by_agent["total"];
    assert_eq!(total["calls"], 4);
    assert_eq!(total["input_tokens"], 1_310);
    assert_eq!(total["output_tokens"], 140);
    assert_eq!(total["usd_micros"], 1_440);
    assert_eq!(total["usd"].as_f64(), Some(0.00144));
    assert_eq!(by_agent["rows"][0]["usd"].as_f64(), Some(0.00126));
    assert_eq!(by_agent["rows"][0]["input_tokens"], 1_300);

    let by_model = costs(&api, "alice", "?group_by=model").await;
    assert_eq!(
        rows(&by_model),
        [
            row("claude-sonnet-4", 1, 180),
            row("gpt-4o", 2, 1_050),
            row("gpt-4o-mini", 1, 210)
        ]
    );
    let by_provider = costs(&api, "alice", "?group_by=provider").await;
    assert_eq!(
        rows(&by_provider),
        [row("anthropic", 1, 180), row("openai", 3, 1_260)]
    );
    let by_thread = costs(&api, "alice", "?group_by=thread").await;
    let mut threads = vec![row(&chat, 3, 1_260), row(&writer, 1, 180)];
    threads.sort();
    assert_eq!(rows(&by_thread), threads);
    let by_day = costs(&api, "alice", "?group_by=day").await;
    let days = rows(&by_day);
    assert_eq!(days.len(), 1, "{days:?}");
    assert_eq!(days[0].0.len(), "2026-01-01".len());
    assert_eq!((days[0].1, days[0].2), (4, 1_440));

    // Tenancy: grouping by client shows the caller alone; bob and carol see only theirs.
    let by_client = costs(&api, "alice", "?group_by=client").await;
    assert_eq!(rows(&by_client), [row("alice", 4, 1_440)]);
    let bob = costs(&api, "bob", "?group_by=client").await;
    assert_eq!(rows(&bob), [row("bob", 1, 2_500_000)]);
    assert_eq!(bob["total"]["usd"].as_f64(), Some(2.5));
    let carol = costs(&api, "carol", "?group_by=model").await;
    assert_eq!(rows(&carol), []);
    assert_eq!(carol["total"]["calls"], 0);
    assert_eq!(carol["total"]["usd_micros"], 0);

    // Filters.
    let chat_only = costs(&api, "alice", "?group_by=model&agent=chat").await;
    assert_eq!(
        rows(&chat_only),
        [row("gpt-4o", 2, 1_050), row("gpt-4o-mini", 1, 210)]
    );
    let future = costs(&api, "alice", "?since=2999-01-01T00:00:00Z").await;
    assert_eq!(rows(&future), []);
    let past = costs(&api, "alice", "?until=2000-01-01T00:00:00%2B02:00").await;
    assert_eq!(rows(&past), []);
    let window = costs(
        &api,
        "alice",
        "?since=2000-01-01T00:00:00-05:00&until=2999-01-01T00:00:00Z",
    )
    .await;
    assert_eq!(window["total"]["usd_micros"], 1_440);
}

#[tokio::test]
async fn per_turn_and_per_thread_totals_need_the_callers_thread() {
    let api = Setup::new(vec![]).start().await;
    let thread = api.create_thread("alice", "chat").await;
    let first = spend(&api, &thread, &[("openai", "gpt-4o", 1, 1, 13)]).await;
    let second = spend(
        &api,
        &thread,
        &[
            ("openai", "gpt-4o", 1, 1, 13),
            ("openai", "gpt-4o", 1, 1, 14),
        ],
    )
    .await;
    let other = api.create_thread("alice", "chat").await;
    spend(&api, &other, &[("openai", "gpt-4o", 1, 1, 99)]).await;

    let per_turn = costs(&api, "alice", &format!("?group_by=turn&thread_id={thread}")).await;
    let mut turns = vec![row(&first, 1, 13), row(&second, 2, 27)];
    turns.sort();
    assert_eq!(rows(&per_turn), turns);
    assert_eq!(per_turn["total"]["usd_micros"], 40);
    let thread_total = costs(
        &api,
        "alice",
        &format!("?group_by=thread&thread_id={thread}"),
    )
    .await;
    assert_eq!(rows(&thread_total), [row(&thread, 3, 40)]);

    api.get("/v1/costs?group_by=turn", "alice")
        .await
        .assert_error(400, "INVALID_ARGUMENT");
    // Another client's thread is exactly like no thread at all, or a malformed one.
    let cases = [
        ("bob", format!("?group_by=turn&thread_id={thread}")),
        ("bob", format!("?thread_id={thread}")),
        ("alice", format!("?thread_id=thr_{}", "0".repeat(32))),
        ("alice", "?thread_id=thr_..%2F..%2Fetc".to_owned()),
        ("alice", format!("?thread_id={first}")),
        ("alice", "?thread_id=".to_owned()),
    ];
    for (client, query) in cases {
        api.get(&format!("/v1/costs{query}"), client)
            .await
            .assert_error(404, "NOT_FOUND");
    }

    // A deleted thread's spend stays in the totals, but the thread is gone as a filter.
    let answer = api.delete(&format!("/v1/threads/{other}"), "alice").await;
    assert_eq!(answer.status.as_u16(), 204, "{:?}", answer.body);
    let all = costs(&api, "alice", "").await;
    assert_eq!(all["total"]["usd_micros"], 139);
    api.get(&format!("/v1/costs?thread_id={other}"), "alice")
        .await
        .assert_error(404, "NOT_FOUND");
}

#[tokio::test]
async fn hostile_query_strings_are_refused_in_the_envelope() {
    let api = Setup::new(vec![]).start().await;
    let thread = api.create_thread("alice", "chat").await;
    spend(&api, &thread, &[("openai", "gpt-4o", 1, 1, 13)]).await;
    let long = "9".repeat(10_000);
    let bad = [
        "?group_by=Agent".to_owned(),
        "?group_by=agents".to_owned(),
        "?group_by=".to_owned(),
        "?group_by=agent%00".to_owned(),
        "?group_by=agent%3B%20DROP%20TABLE%20events".to_owned(),
        "?group_by=agent&group_by=model".to_owned(),
        "?group_by[]=agent".to_owned(),
        "?client=bob".to_owned(),
        "?since=yesterday".to_owned(),
        "?since=2026-01-01".to_owned(),
        "?since=2026-01-01T00:00:00".to_owned(),
        "?since=2026-02-30T00:00:00Z".to_owned(),
        "?until=%27%20OR%201%3D1%20--".to_owned(),
        "?since=-009999-01-01T00:00:00Z".to_owned(),
        format!("?since=2026-01-01T00:00:00.{long}Z"),
        "?since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z".to_owned(),
        "?since=%FF%FE".to_owned(),
    ];
    for query in &bad {
        let answer = api.get(&format!("/v1/costs{query}"), "alice").await;
        answer.assert_error(400, "INVALID_ARGUMENT");
        let message = answer.body["error"]["message"].as_str().unwrap_or_default();
        assert!(!message.contains(&long), "the input is not echoed back");
    }
    // A hostile agent name is a value like any other: no match, no error.
    let injected = costs(&api, "alice", "?agent=chat%27%20OR%20%271%27%3D%271").await;
    assert_eq!(rows(&injected), []);
    // Without a client id nothing is reported.
    let anonymous = api.send(api.request(Method::GET, "/v1/costs", None)).await;
    anonymous.assert_error(400, "INVALID_ARGUMENT");
}

#[tokio::test]
async fn huge_amounts_are_exact_and_saturate() {
    let api = Setup::new(vec![]).start().await;
    let thread = api.create_thread("alice", "chat").await;
    let big = u64::MAX - 1;
    spend(&api, &thread, &[("openai", "m", big, 0, big)]).await;
    let one = costs(&api, "alice", "?group_by=model").await;
    assert_eq!(one["total"]["usd_micros"].as_u64(), Some(big));
    assert_eq!(one["rows"][0]["input_tokens"].as_u64(), Some(big));
    spend(&api, &thread, &[("openai", "m", big, 0, big)]).await;
    let two = costs(&api, "alice", "?group_by=model").await;
    assert_eq!(two["total"]["usd_micros"].as_u64(), Some(u64::MAX));
    assert_eq!(two["total"]["calls"], 2);
}

#[tokio::test]
async fn the_endpoint_is_in_the_openapi_document() {
    let api = Setup::new(vec![]).start().await;
    let doc = api
        .send(api.request(Method::GET, "/openapi.json", None))
        .await
        .body;
    let operation = &doc["paths"]["/v1/costs"]["get"];
    assert_eq!(operation["operationId"], "listCosts", "{operation}");
    assert_eq!(operation["tags"][0], "costs");
    let params: Vec<&str> = operation["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    for name in [
        "group_by",
        "since",
        "until",
        "agent",
        "thread_id",
        "X-Client-ID",
    ] {
        assert!(params.contains(&name), "{name}: {params:?}");
    }
    let groups = &doc["components"]["schemas"]["CostGroupName"]["enum"];
    assert_eq!(
        groups,
        &serde_json::json!([
            "agent", "model", "client", "day", "provider", "thread", "turn"
        ])
    );
}
