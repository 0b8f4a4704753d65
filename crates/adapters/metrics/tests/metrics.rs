//! The metrics as a scraper sees them: real events fed through `on_event`, HTTP
//! observations, a real SQLite store behind `MeteredStore`, and the encoded text read
//! back sample by sample and checked by `promtool check metrics` (Debian's
//! `prometheus` package; required under CI, skipped with a note elsewhere).

use std::sync::Arc;
use std::time::Duration;

use agentplane_core::policy::PolicyKind;
use agentplane_core::{
    ApprovalOutcome, Event, EventPayload, StopReason, ThreadId, ToolStatus, TurnId,
};
use agentplane_engine::ports::TelemetrySink;
use agentplane_engine::ports::{NewThread, ThreadStore, TurnLog};
use agentplane_metrics::{
    CONTENT_TYPE, MAX_DISTINCT_VALUES, MAX_TIMED_TURNS, MeteredStore, Metrics, OTHER,
};
use agentplane_sqlite::SqliteStore;
use serde_json::json;

/// An event of `turn` as the store would have written it.
fn event(turn: &TurnId, payload: EventPayload) -> Event {
    Event {
        thread_id: ThreadId::new(),
        turn_id: turn.clone(),
        seq: 1,
        ts: "2026-11-23T10:00:00Z".into(),
        payload,
    }
}

fn started(turn: &TurnId) -> Event {
    event(
        turn,
        EventPayload::TurnStarted {
            agent: "coder".into(),
            input: "fix it".into(),
            model: "m".into(),
            workspace: "/ws".into(),
            agent_version: None,
            shadow_of: None,
        },
    )
}

fn completed(turn: &TurnId, stop_reason: StopReason) -> Event {
    event(
        turn,
        EventPayload::TurnCompleted {
            stop_reason,
            result: json!(null),
        },
    )
}

fn tool_result(turn: &TurnId, tool: &str, status: ToolStatus, latency_ms: u64) -> Event {
    event(
        turn,
        EventPayload::ToolCallResult {
            call_id: "c1".into(),
            tool: tool.into(),
            status,
            latency_ms,
            error_type: None,
            output: "done".into(),
            truncated: false,
            args_preview_hash: "ab".into(),
        },
    )
}

fn cost(turn: &TurnId, provider: &str, usd_micros: u64) -> Event {
    event(
        turn,
        EventPayload::Cost {
            provider: provider.into(),
            model: "m".into(),
            input_tokens: 10,
            output_tokens: 5,
            usd_micros,
            usd: usd_micros as f64 / 1e6,
        },
    )
}

fn approval_requested(turn: &TurnId) -> Event {
    event(
        turn,
        EventPayload::ApprovalRequested {
            approval_id: "apr-1".into(),
            call_id: "c1".into(),
            tool: "run_command".into(),
            arguments: json!({"program": "rm"}),
            args_preview_hash: "ab".into(),
            policy: "shell-needs-review".into(),
            approvers: vec![],
            expires_at: "2026-11-24T10:00:00Z".into(),
            explanation: None,
        },
    )
}

fn approval_decided(turn: &TurnId) -> Event {
    event(
        turn,
        EventPayload::ApprovalDecided {
            approval_id: "apr-1".into(),
            outcome: ApprovalOutcome::Approved,
            arguments: None,
            feedback: None,
            by: "alice".into(),
            decider: None,
        },
    )
}

/// The value of the sample written exactly as `series` (name and labels), if any.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        Some(value.parse().expect("a number"))
    })
}

/// Every sample line whose series starts with `prefix`.
fn samples<'a>(text: &'a str, prefix: &'a str) -> impl Iterator<Item = &'a str> {
    text.lines().filter(move |l| l.starts_with(prefix))
}

#[test]
fn a_turn_with_tool_calls_and_a_cost_is_counted_once() {
    let metrics = Metrics::new();
    let turn = TurnId::new();
    metrics.on_event("coder", &started(&turn));
    metrics.on_event(
        "coder",
        &event(&turn, EventPayload::MessageDelta { text: "hi".into() }),
    );
    metrics.on_event(
        "coder",
        &tool_result(&turn, "read_file", ToolStatus::Ok, 20),
    );
    metrics.on_event(
        "coder",
        &tool_result(&turn, "read_file", ToolStatus::Ok, 40),
    );
    metrics.on_event(
        "coder",
        &tool_result(&turn, "write_file", ToolStatus::Error, 3),
    );
    metrics.on_event("coder", &cost(&turn, "openai", 12_300));
    metrics.on_event("coder", &cost(&turn, "openai", 700));
    metrics.on_event("coder", &completed(&turn, StopReason::Finished));
    let text = metrics.encode();

    let finished = r#"agent_executions_total{agent="coder",status="finished"}"#;
    assert_eq!(sample(&text, finished), Some(1.0), "{text}");
    assert_eq!(
        samples(&text, "agent_executions_total{").count(),
        1,
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"agent_execution_duration_seconds_count{agent="coder"}"#
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, r#"tool_calls_total{tool="read_file",status="ok"}"#),
        Some(2.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"tool_calls_total{tool="write_file",status="error"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"tool_call_latency_seconds_count{tool="read_file"}"#
        ),
        Some(2.0)
    );
    let latency =
        sample(&text, r#"tool_call_latency_seconds_sum{tool="read_file"}"#).expect("latency sum");
    assert!((latency - 0.060).abs() < 1e-9, "{latency}");
    // 20 ms and 40 ms are both under the 50 ms bucket, neither under 10 ms.
    let bucket = |le: &str| {
        sample(
            &text,
            &format!(r#"tool_call_latency_seconds_bucket{{le="{le}",tool="read_file"}}"#),
        )
    };
    assert_eq!(bucket("0.05"), Some(2.0), "{text}");
    assert_eq!(bucket("0.01"), Some(0.0), "{text}");
    assert_eq!(bucket("+Inf"), Some(2.0), "{text}");
    let usd = sample(
        &text,
        r#"agent_execution_cost_usd_total{agent="coder",provider="openai"}"#,
    )
    .expect("cost");
    assert!((usd - 0.013).abs() < 1e-12, "{usd}");
    agentplane_testkit::promtool::assert_accepts(&text);
}

#[test]
fn every_stop_reason_is_its_own_status() {
    let metrics = Metrics::new();
    let reasons = [
        StopReason::Finished,
        StopReason::TextAnswer,
        StopReason::StepLimit,
        StopReason::Error,
        StopReason::Cancelled,
        StopReason::Interrupted,
    ];
    for reason in reasons {
        let turn = TurnId::new();
        metrics.on_event("coder", &started(&turn));
        metrics.on_event("coder", &completed(&turn, reason));
    }
    // Ended at start-up: this process never saw it start, so it has no duration.
    metrics.on_event("coder", &completed(&TurnId::new(), StopReason::Interrupted));
    let text = metrics.encode();
    for reason in reasons {
        let expected = if reason == StopReason::Interrupted {
            2.0
        } else {
            1.0
        };
        let series = format!(
            r#"agent_executions_total{{agent="coder",status="{}"}}"#,
            reason.as_str()
        );
        assert_eq!(sample(&text, &series), Some(expected), "{series}\n{text}");
    }
    assert_eq!(
        sample(
            &text,
            r#"agent_execution_duration_seconds_count{agent="coder"}"#
        ),
        Some(6.0),
        "{text}"
    );
}

#[test]
fn the_approval_queue_is_seeded_then_follows_events_and_never_goes_negative() {
    let metrics = Metrics::new();
    assert_eq!(sample(&metrics.encode(), "approval_queue_size"), Some(0.0));
    metrics.set_approval_queue(2);
    let turn = TurnId::new();
    metrics.on_event("coder", &approval_requested(&turn));
    assert_eq!(sample(&metrics.encode(), "approval_queue_size"), Some(3.0));
    for _ in 0..5 {
        metrics.on_event("coder", &approval_decided(&turn));
    }
    assert_eq!(sample(&metrics.encode(), "approval_queue_size"), Some(0.0));
    metrics.on_event("coder", &approval_requested(&turn));
    assert_eq!(sample(&metrics.encode(), "approval_queue_size"), Some(1.0));
}

#[test]
fn policy_violations_count_by_policy_and_agent() {
    let metrics = Metrics::new();
    let turn = TurnId::new();
    for (agent, policy) in [
        ("coder", "no-shell"),
        ("coder", "no-shell"),
        ("writer", "fs-scope"),
    ] {
        metrics.on_event(
            agent,
            &event(
                &turn,
                EventPayload::PolicyViolation {
                    policy: policy.into(),
                    tool: Some("run_command".into()),
                    call_id: Some("c1".into()),
                    detail: "ran without approval".into(),
                },
            ),
        );
    }
    let text = metrics.encode();
    assert_eq!(
        sample(
            &text,
            r#"policy_violations_total{policy="no-shell",agent="coder"}"#
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"policy_violations_total{policy="fs-scope",agent="writer"}"#
        ),
        Some(1.0)
    );
    agentplane_testkit::promtool::assert_accepts(&text);
}

#[test]
fn policy_denials_count_by_policy_agent_and_kind() {
    let metrics = Metrics::new();
    let turn = TurnId::new();
    for (agent, policy, kind) in [
        ("coder", "no-shell", "tool_access"),
        ("coder", "no-shell", "tool_access"),
        ("coder", "office-hours", "time_window"),
        ("writer", "cap", "budget"),
        ("writer", "odd", "not_a_policy_type"),
    ] {
        metrics.on_event(
            agent,
            &event(
                &turn,
                EventPayload::PolicyDenied {
                    policy: policy.into(),
                    policy_type: kind.into(),
                    tool: Some("run_command".into()),
                    call_id: Some("c1".into()),
                    detail: "refused".into(),
                    explanation: None,
                },
            ),
        );
    }
    let text = metrics.encode();
    for (series, count) in [
        (
            r#"policy_denials_total{policy="no-shell",agent="coder",kind="tool_access"}"#,
            2.0,
        ),
        (
            r#"policy_denials_total{policy="office-hours",agent="coder",kind="time_window"}"#,
            1.0,
        ),
        (
            r#"policy_denials_total{policy="cap",agent="writer",kind="budget"}"#,
            1.0,
        ),
        // A type no policy has is not a new label value.
        (
            r#"policy_denials_total{policy="odd",agent="writer",kind="other"}"#,
            1.0,
        ),
    ] {
        assert_eq!(sample(&text, series), Some(count), "{series}\n{text}");
    }
    assert!(
        !text.contains("not_a_policy_type"),
        "an unknown kind became a label:\n{text}"
    );
    agentplane_testkit::promtool::assert_accepts(&text);
}

#[test]
fn every_policy_kind_is_a_label_of_its_own() {
    let metrics = Metrics::new();
    let turn = TurnId::new();
    for kind in PolicyKind::ALL {
        metrics.on_event(
            "coder",
            &event(
                &turn,
                EventPayload::PolicyDenied {
                    policy: "p".into(),
                    policy_type: kind.as_str().into(),
                    tool: None,
                    call_id: None,
                    detail: "refused".into(),
                    explanation: None,
                },
            ),
        );
    }
    let text = metrics.encode();
    for kind in PolicyKind::ALL {
        let series = format!(
            r#"policy_denials_total{{policy="p",agent="coder",kind="{}"}}"#,
            kind.as_str()
        );
        assert_eq!(sample(&text, &series), Some(1.0), "{series}\n{text}");
    }
}

#[test]
fn hostile_tool_and_agent_names_fold_into_other() {
    let metrics = Metrics::new();
    let turn = TurnId::new();
    let hostile = [
        "x\"} 1\nfake_metric 99",
        "tool\\name",
        "tool name",
        "ünïcode",
        "",
        &"t".repeat(65),
    ];
    for tool in hostile {
        metrics.on_event("coder", &tool_result(&turn, tool, ToolStatus::Ok, 1));
    }
    metrics.on_event("evil\nagent", &completed(&turn, StopReason::Error));
    let text = metrics.encode();
    assert_eq!(
        sample(
            &text,
            &format!(r#"tool_calls_total{{tool="{OTHER}",status="ok"}}"#)
        ),
        Some(hostile.len() as f64),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            &format!(r#"agent_executions_total{{agent="{OTHER}",status="error"}}"#)
        ),
        Some(1.0),
        "{text}"
    );
    assert!(!text.contains("fake_metric"), "{text}");
    agentplane_testkit::promtool::assert_accepts(&text);
}

#[test]
fn distinct_tool_names_are_capped() {
    let metrics = Metrics::new();
    let turn = TurnId::new();
    let total = MAX_DISTINCT_VALUES + 100;
    for i in 0..total {
        metrics.on_event(
            "coder",
            &tool_result(&turn, &format!("tool_{i}"), ToolStatus::Ok, 1),
        );
    }
    let text = metrics.encode();
    let series = samples(&text, "tool_calls_total{").count();
    assert_eq!(series, MAX_DISTINCT_VALUES + 1, "500 names and `other`");
    assert_eq!(
        sample(
            &text,
            &format!(r#"tool_calls_total{{tool="{OTHER}",status="ok"}}"#)
        ),
        Some(100.0)
    );
    assert_eq!(
        sample(&text, r#"tool_calls_total{tool="tool_0",status="ok"}"#),
        Some(1.0)
    );
}

#[test]
fn http_requests_are_labelled_by_route_template_never_by_path() {
    let metrics = Metrics::new();
    let template = "/v1/threads/{id}";
    metrics.observe_http("GET", Some(template), 200, Duration::from_millis(3));
    metrics.observe_http("GET", Some(template), 404, Duration::from_millis(1));
    metrics.observe_http("GET", None, 404, Duration::from_millis(1));
    metrics.observe_http("BREW", None, 405, Duration::from_millis(1));
    let text = metrics.encode();
    assert_eq!(
        sample(
            &text,
            r#"http_requests_total{method="GET",route="/v1/threads/{id}",status="200"}"#
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"http_request_duration_seconds_count{method="GET",route="/v1/threads/{id}"}"#
        ),
        Some(2.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"http_requests_total{method="GET",route="unmatched",status="404"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"http_requests_total{method="other",route="unmatched",status="405"}"#
        ),
        Some(1.0),
        "{text}"
    );
    agentplane_testkit::promtool::assert_accepts(&text);
}

#[test]
fn the_text_is_prometheus_format_with_total_counters_and_no_openmetrics_markers() {
    assert!(CONTENT_TYPE.starts_with("text/plain; version=0.0.4"));
    let metrics = Metrics::new();
    let empty = metrics.encode();
    // Every documented family is listed before anything happened (so `absent()` and
    // alerts work on a fresh process), and only the two plain gauges and the one plain
    // counter have a sample.
    agentplane_testkit::promtool::assert_documented_families(&empty);
    let empty_samples: Vec<&str> = empty.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        empty_samples,
        [
            "approval_queue_size 0",
            "otel_spans_dropped_total 0",
            "execution_queue_size 0"
        ],
        "{empty}"
    );
    agentplane_testkit::promtool::assert_accepts(&empty);
    let turn = TurnId::new();
    metrics.on_event("coder", &started(&turn));
    metrics.on_event("coder", &tool_result(&turn, "read_file", ToolStatus::Ok, 5));
    metrics.on_event("coder", &cost(&turn, "local", 0));
    metrics.on_event(
        "coder",
        &event(
            &turn,
            EventPayload::PolicyViolation {
                policy: "p".into(),
                tool: None,
                call_id: None,
                detail: "d".into(),
            },
        ),
    );
    metrics.on_event("coder", &completed(&turn, StopReason::TextAnswer));
    metrics.observe_http("GET", Some("/healthz"), 200, Duration::from_millis(1));
    let text = metrics.encode();
    for family in [
        "agent_executions_total counter",
        "agent_execution_duration_seconds histogram",
        "agent_execution_cost_usd_total counter",
        "policy_violations_total counter",
        "approval_queue_size gauge",
        "tool_calls_total counter",
        "tool_call_latency_seconds histogram",
        "http_requests_total counter",
        "http_request_duration_seconds histogram",
    ] {
        assert!(
            text.contains(&format!("# TYPE {family}\n")),
            "{family}\n{text}"
        );
    }
    assert!(!text.contains("# EOF"), "{text}");
    assert!(!text.contains("# UNIT"), "{text}");
    agentplane_testkit::promtool::assert_accepts(&text);
}

#[tokio::test]
async fn the_metered_store_forwards_and_counts_every_outcome() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sqlite = SqliteStore::open(&dir.path().join("events.db"))
        .await
        .expect("store opens");
    let metrics = Arc::new(Metrics::new());
    let store = MeteredStore::new(Arc::new(sqlite), metrics.clone());

    let thread = ThreadId::new();
    let created = store
        .create_thread(NewThread {
            agent_version: None,
            id: thread.clone(),
            client_id: "c".into(),
            agent: "coder".into(),
            cwd: "/ws".into(),
            title: None,
        })
        .await
        .expect("created");
    assert_eq!(created.id, thread);
    assert_eq!(
        store.thread(&thread).await.expect("read").map(|t| t.agent),
        Some("coder".to_owned())
    );
    let turn = TurnId::new();
    store
        .begin_turn(&thread, &turn, "hi", false)
        .await
        .expect("begun");
    let busy = store
        .begin_turn(&thread, &TurnId::new(), "again", false)
        .await;
    assert!(
        matches!(busy, Err(agentplane_engine::ports::StoreError::Conflict(_))),
        "{busy:?}"
    );
    let appended = store
        .append(
            &thread,
            &turn,
            EventPayload::MessageDelta { text: "x".into() },
        )
        .await
        .expect("appended");
    assert_eq!(appended.seq, 1);
    let missing = store.delete_thread(&ThreadId::new()).await;
    assert!(
        matches!(
            missing,
            Err(agentplane_engine::ports::StoreError::NotFound(_))
        ),
        "{missing:?}"
    );

    let text = metrics.encode();
    for (series, value) in [
        (
            r#"store_operations_total{op="create_thread",outcome="ok"}"#,
            1.0,
        ),
        (r#"store_operations_total{op="thread",outcome="ok"}"#, 1.0),
        (
            r#"store_operations_total{op="begin_turn",outcome="ok"}"#,
            1.0,
        ),
        (
            r#"store_operations_total{op="begin_turn",outcome="conflict"}"#,
            1.0,
        ),
        (r#"store_operations_total{op="append",outcome="ok"}"#, 1.0),
        (
            r#"store_operations_total{op="delete_thread",outcome="not_found"}"#,
            1.0,
        ),
        (
            r#"store_operation_duration_seconds_count{op="begin_turn"}"#,
            2.0,
        ),
    ] {
        assert_eq!(sample(&text, series), Some(value), "{series}\n{text}");
    }
    agentplane_testkit::promtool::assert_accepts(&text);
}

#[test]
fn timed_turns_are_bounded_and_the_oldest_is_forgotten_first() {
    let metrics = Metrics::new();
    let turns: Vec<TurnId> = (0..=MAX_TIMED_TURNS).map(|_| TurnId::new()).collect();
    for turn in &turns {
        metrics.on_event("coder", &started(turn));
    }
    let duration_count = r#"agent_execution_duration_seconds_count{agent="coder"}"#;
    metrics.on_event("coder", &completed(&turns[0], StopReason::Finished));
    let text = metrics.encode();
    assert_eq!(
        sample(
            &text,
            r#"agent_executions_total{agent="coder",status="finished"}"#
        ),
        Some(1.0)
    );
    assert_eq!(sample(&text, duration_count), None, "evicted: no duration");
    metrics.on_event(
        "coder",
        &completed(&turns[MAX_TIMED_TURNS], StopReason::Finished),
    );
    metrics.on_event("coder", &completed(&turns[1], StopReason::Finished));
    assert_eq!(sample(&metrics.encode(), duration_count), Some(2.0));
}
