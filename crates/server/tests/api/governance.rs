//! Turn-level governance over HTTP: a full rate-limit window is `429 RATE_LIMITED` with
//! `Retry-After`, a time window that excludes now is `403 FORBIDDEN`, a spent budget
//! is `402 BUDGET_EXCEEDED`, each in the standard envelope, and nothing is started.

use agentplane_testkit::Step;
use serde_json::json;

use crate::harness::{Answer, Api, Setup};

/// Asks for a turn that governance should refuse (a refusal is JSON, not a stream).
async fn refused_turn(api: &Api, client: &str, thread: &str) -> Answer {
    api.post(
        &format!("/v1/threads/{thread}/turns"),
        client,
        json!({"input": "again"}),
    )
    .await
}

#[tokio::test]
async fn a_full_rate_limit_window_is_429_with_retry_after() {
    let api = Setup::new(vec![Step::text("one"), Step::text("two")])
        .policy(
            "rate.yaml",
            "name: one-turn\ntype: rate_limit\nrules: {window: 10m, max: 1, per: [client]}\n",
        )
        .start()
        .await;
    let thread = api.create_thread("alice", "chat").await;
    api.start_turn("alice", &thread, "first")
        .await
        .until_completed()
        .await;
    let refused = refused_turn(&api, "alice", &thread).await;
    refused.assert_error(429, "RATE_LIMITED");
    let retry_after: u64 = refused
        .headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("Retry-After");
    assert!((1..=600).contains(&retry_after), "{retry_after}");
    assert_eq!(
        refused.body["error"]["details"]["retry_after_secs"],
        retry_after
    );
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("one-turn"))
    );
    // Another client has a window of its own.
    let other = api.create_thread("bob", "chat").await;
    api.start_turn("bob", &other, "hello")
        .await
        .until_completed()
        .await;
    assert_eq!(api.scripted.chat_request_count(), 2);
}

#[tokio::test]
async fn a_time_window_that_excludes_every_day_but_a_past_one_is_403() {
    // A window open only at 00:00-00:01 UTC on no day but one: closed now unless the
    // test runs in that minute of that day, so pick the day before today.
    let days_since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        / 86_400;
    let yesterday = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
        [((days_since_epoch + 3 + 6) % 7) as usize];
    let api = Setup::new(vec![Step::text("never")])
        .policy(
            "hours.yaml",
            &format!(
                "name: closed\ntype: time_window\nrules: {{timezone: UTC, days: [{yesterday}], hours: \"00:00-00:01\"}}\n"
            ),
        )
        .start()
        .await;
    let thread = api.create_thread("alice", "chat").await;
    let refused = refused_turn(&api, "alice", &thread).await;
    refused.assert_error(403, "FORBIDDEN");
    assert_eq!(api.scripted.chat_request_count(), 0);
}

#[tokio::test]
async fn a_spent_budget_is_402_before_the_turn_starts() {
    // The whole output cap (4,096 tokens at $100/M, $0.4096) is spent: exactly the
    // budget, so the call fits and nothing is left for another.
    let api = Setup::new(vec![Step::text("pricey").with_usage(0, 4_096)])
        .policy(
            "budget.yaml",
            "name: tiny\ntype: budget\nrules: {usd: 0.4096, period: day, per: [client]}\n",
        )
        .extra_config(
            "[prices.\"scripted-model\"]\ninput_per_mtok = 0.0\noutput_per_mtok = 100.0\n",
        )
        .start()
        .await;
    let thread = api.create_thread("alice", "chat").await;
    api.start_turn("alice", &thread, "spend")
        .await
        .until_completed()
        .await;
    let refused = refused_turn(&api, "alice", &thread).await;
    refused.assert_error(402, "BUDGET_EXCEEDED");
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("tiny"))
    );
    let costs = api.get("/v1/costs?group_by=model", "alice").await;
    assert_eq!(costs.status.as_u16(), 200, "{:?}", costs.body);
    assert_eq!(costs.body["total"]["usd_micros"], 409_600);
}
