//! Governance through the runtime, with real parts: policy files in a directory
//! (hot-reloaded), the scripted model over HTTP, a real SQLite file. Every policy type
//! is enforced where it acts: tool calls (tool_access, approval_required, rate_limit),
//! turns (time_window, rate_limit, budget) and after the turn (audit).

use std::sync::Arc;
use std::time::Duration;

use agentplane_core::{
    ApprovalOutcome, ErrorCode, Event, EventPayload, StopReason, ThreadId, ToolErrorKind,
    ToolStatus,
};
use agentplane_engine::NoObserver;
use agentplane_engine::hub::{ApprovalAnswer, CreateThread, Hub, HubError};
use agentplane_engine::ports::{ApprovalStatus, CostQuery, TurnStatus};
use agentplane_runtime::config::ConfigSource;
use agentplane_runtime::{Config, Runtime};
use agentplane_testkit::{Scenario, ScriptedServer, ScriptedToolCall, Step};
use serde_json::json;
use tokio_util::sync::CancellationToken;

struct Setup {
    server: ScriptedServer,
    dir: tempfile::TempDir,
    workspace: String,
    runtime: Runtime,
}

impl Setup {
    fn policies(&self) -> std::path::PathBuf {
        self.dir.path().join("policies")
    }
}

/// A runtime over `steps` with the given policy files and extra TOML.
async fn setup(steps: Vec<Step>, policies: &[(&str, &str)], extra: &str) -> Setup {
    setup_with(Scenario::new(steps), policies, extra).await
}

async fn setup_with(scenario: Scenario, policies: &[(&str, &str)], extra: &str) -> Setup {
    let server = ScriptedServer::start(scenario).await.expect("server");
    let dir = tempfile::tempdir().expect("tempdir");
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).expect("ws");
    std::fs::create_dir(dir.path().join("policies")).expect("policies");
    for (name, text) in policies {
        std::fs::write(dir.path().join("policies").join(name), text).expect("policy");
    }
    let runtime = start(&dir, &server.base_url(), extra).await;
    Setup {
        server,
        workspace: workspace.display().to_string(),
        dir,
        runtime,
    }
}

async fn start(dir: &tempfile::TempDir, base_url: &str, extra: &str) -> Runtime {
    let file = dir.path().join("agentplane.toml");
    std::fs::write(
        &file,
        format!(
            "[llm]\nbase_url = \"{base_url}\"\nmodel = \"scripted-model\"\nmax_retries = 0\n\
             [store]\npath = \"events.db\"\n\
             [policies]\ndir = \"policies\"\nreload_interval_ms = 100\n\
             [agents.chat]\nsystem_prompt = \"Chat.\"\ntags = [\"customer-facing\"]\n\
             max_output_tokens = 500\n\
             [agents.writer]\nsystem_prompt = \"Write.\"\nensembles = [\"fs\"]\nmax_nudges = 0\n{extra}"
        ),
    )
    .expect("config");
    let env = |_: &str| None;
    let config = Config::load_from(&ConfigSource {
        explicit: Some(&file),
        cwd: dir.path(),
        env: &env,
    })
    .expect("config");
    Runtime::start(config).await.expect("runtime")
}

async fn thread(hub: &Arc<Hub>, client: &str, agent: &str, cwd: &str) -> ThreadId {
    hub.create_thread(
        client,
        CreateThread {
            agent: agent.into(),
            cwd: cwd.into(),
            title: None,
        },
    )
    .await
    .expect("thread")
    .id
}

async fn run(
    hub: &Arc<Hub>,
    client: &str,
    thread: &ThreadId,
    input: &str,
) -> Result<agentplane_engine::TurnOutcome, HubError> {
    hub.run_turn_here(
        client,
        thread,
        input.into(),
        &NoObserver,
        CancellationToken::new(),
    )
    .await
}

async fn events(runtime: &Runtime, thread: &ThreadId) -> Vec<Event> {
    runtime
        .store()
        .thread_events(thread, 0, 10_000)
        .await
        .expect("events")
}

fn kinds(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(|e| e.payload.kind()).collect()
}

/// Waits until the thread's last turn has ended.
async fn until_ended(runtime: &Runtime, thread: &ThreadId) -> Vec<Event> {
    for _ in 0..200 {
        let turns = runtime.store().list_turns(thread).await.expect("turns");
        if turns
            .last()
            .is_some_and(|t| matches!(t.status, TurnStatus::Ended(_)))
        {
            return events(runtime, thread).await;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "the turn did not end: {:?}",
        kinds(&events(runtime, thread).await)
    );
}

fn tool_results(events: &[Event]) -> Vec<(String, ToolStatus, Option<ToolErrorKind>, String)> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ToolCallResult {
                tool,
                status,
                error_type,
                output,
                ..
            } => Some((tool.clone(), *status, *error_type, output.clone())),
            _ => None,
        })
        .collect()
}

/// Runs one `chat` turn for each of `n` clients at once and returns how each went.
async fn concurrent_turns(
    s: &Setup,
    n: usize,
) -> Vec<Result<agentplane_engine::TurnOutcome, HubError>> {
    let mut tasks = Vec::new();
    for i in 0..n {
        let hub = s.runtime.hub().clone();
        let workspace = s.workspace.clone();
        tasks.push(tokio::spawn(async move {
            let client = format!("c{i}");
            let t = thread(&hub, &client, "chat", &workspace).await;
            run(&hub, &client, &t, "hi").await
        }));
    }
    let mut outcomes = Vec::with_capacity(n);
    for task in tasks {
        outcomes.push(task.await.expect("task"));
    }
    outcomes
}

const REVIEW_WRITES: &str = "name: review-writes\ntype: approval_required\ntargets: {agents: [writer]}\nrules: {tools: [write_file]}\n";

#[tokio::test]
async fn tool_access_denies_a_call_and_deny_beats_approval() {
    let s = setup(
        vec![
            Step::tool_call("write_file", json!({"path": "a.txt", "content": "x"})),
            Step::text("could not write"),
        ],
        &[
            ("review.yaml", REVIEW_WRITES),
            (
                "deny.yaml",
                "name: no-writes\ntype: tool_access\ntargets: {agents: [writer]}\nrules: {deny: [write_file]}\n",
            ),
        ],
        "",
    )
    .await;
    let hub = s.runtime.hub();
    let t = thread(hub, "c1", "writer", &s.workspace).await;
    let outcome = run(hub, "c1", &t, "write a").await.expect("turn");
    assert_eq!(outcome.stop_reason, StopReason::TextAnswer);
    let events = events(&s.runtime, &t).await;
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].2, Some(ToolErrorKind::PolicyDenied));
    assert!(results[0].3.contains("no-writes"), "{}", results[0].3);
    assert!(!kinds(&events).contains(&"approval_requested"));
    // The refusal is a `policy_denied` and, like every refused call, a `security_event`.
    let k = kinds(&events);
    let denied = k
        .iter()
        .position(|k| *k == "policy_denied")
        .expect("policy_denied");
    assert_eq!(k[denied + 1], "security_event", "{k:?}");
    assert!(!std::path::Path::new(&s.workspace).join("a.txt").exists());
}

#[tokio::test]
async fn a_time_window_outside_now_refuses_the_turn_and_tags_select_the_agent() {
    let days_since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        / 86_400;
    // 1970-01-01 was a Thursday (Monday-zero offset 3). A test running across UTC
    // midnight could see the day change between here and the check; that is 1 in
    // 86,400 seconds, and the failure would name the policy.
    let today = ((days_since_epoch + 3) % 7) as usize;
    let names = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
    let other_days: Vec<&str> = names
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != today)
        .map(|(_, d)| *d)
        .collect();
    let policy = format!(
        "name: not-today\ntype: time_window\ntargets: {{tags: [customer-facing]}}\nrules: {{timezone: UTC, days: [{}]}}\n",
        other_days.join(", ")
    );
    let s = setup(
        vec![Step::text("hi"), Step::text("hi")],
        &[("tw.yaml", &policy)],
        "",
    )
    .await;
    let hub = s.runtime.hub();
    let tagged = thread(hub, "c1", "chat", &s.workspace).await;
    let refused = run(hub, "c1", &tagged, "hello").await.expect_err("outside");
    assert!(matches!(refused, HubError::Forbidden(_)), "{refused:?}");
    assert_eq!(refused.code(), ErrorCode::Forbidden);
    assert!(refused.to_string().contains("not-today"));
    // The writer agent has no such tag: not selected, allowed.
    let untagged = thread(hub, "c1", "writer", &s.workspace).await;
    let outcome = run(hub, "c1", &untagged, "hello").await.expect("allowed");
    assert_eq!(outcome.stop_reason, StopReason::TextAnswer);
}

#[tokio::test]
async fn rate_limits_count_turns_per_client_and_calls_per_tool() {
    let s = setup(
        vec![
            Step::text("one"),
            Step::text("two"),
            Step::text("three for bob"),
            Step::tool_calls(vec![
                ScriptedToolCall {
                    id: None,
                    name: "write_file".into(),
                    arguments: json!({"path": "1.txt", "content": "1"}),
                },
                ScriptedToolCall {
                    id: None,
                    name: "write_file".into(),
                    arguments: json!({"path": "2.txt", "content": "2"}),
                },
            ]),
            Step::text("done"),
        ],
        &[(
            "rate.yaml",
            "- name: two-turns\n  type: rate_limit\n  targets: {agents: [chat]}\n  rules: {window: 1h, max: 2, per: [client]}\n\
             - name: one-write\n  type: rate_limit\n  targets: {tools: [write_file]}\n  rules: {window: 1h, max: 1}\n",
        )],
        "",
    )
    .await;
    let hub = s.runtime.hub();
    let alice = thread(hub, "alice", "chat", &s.workspace).await;
    run(hub, "alice", &alice, "1").await.expect("first");
    run(hub, "alice", &alice, "2").await.expect("second");
    let limited = run(hub, "alice", &alice, "3").await.expect_err("third");
    assert_eq!(limited.code(), ErrorCode::RateLimited);
    let wait = limited.retry_after_secs().expect("retry after");
    assert!((3000..=3600).contains(&wait), "{wait}");
    // Per client: bob has his own window.
    let bob = thread(hub, "bob", "chat", &s.workspace).await;
    run(hub, "bob", &bob, "1").await.expect("bob");

    let writer = thread(hub, "alice", "writer", &s.workspace).await;
    run(hub, "alice", &writer, "write twice")
        .await
        .expect("turn");
    let results = tool_results(&events(&s.runtime, &writer).await);
    assert_eq!(results[0].1, ToolStatus::Ok);
    assert_eq!(results[1].2, Some(ToolErrorKind::RateLimited));
    assert!(results[1].3.contains("one-write"));
    assert!(!std::path::Path::new(&s.workspace).join("2.txt").exists());
}

#[tokio::test]
async fn a_rate_limit_under_concurrency_never_admits_more_than_its_window() {
    let steps: Vec<Step> = (0..40).map(|i| Step::text(format!("answer {i}"))).collect();
    let s = setup(
        steps,
        &[(
            "rate.yaml",
            "name: seven\ntype: rate_limit\nrules: {window: 1h, max: 7}\n",
        )],
        "",
    )
    .await;
    let mut admitted = 0;
    let mut limited = 0;
    for outcome in concurrent_turns(&s, 40).await {
        match outcome {
            Ok(_) => admitted += 1,
            Err(e) if e.code() == ErrorCode::RateLimited => limited += 1,
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    assert_eq!((admitted, limited), (7, 33));
    assert_eq!(s.server.chat_request_count(), 7);
}

/// 50 turns at once on 50 threads under one budget, every model call reporting usage
/// of a known cost: what settles never passes the cap. `output_per_mtok` makes a call's
/// 500 output tokens cost `call_micros`; `input_per_mtok` prices the input, which the
/// worst case counts as one token per byte sent (so it is over-reserved). Returns the
/// settled spend, the calls made and how many turns ended on the budget.
async fn budget_race(input_per_mtok: f64, output_per_mtok: f64) -> (u64, u64, usize) {
    // Every turn makes model calls until one answers in text: two calls that ask for a
    // tool the agent does not have (an error the model is told about), then an answer.
    // 100 input tokens: fewer than the bytes each call sends, as with any real tokenizer.
    let call = |step: Step| step.with_usage(100, 500).with_delay_ms(20);
    let scenario = Scenario::new(vec![
        call(Step::tool_call("no_such_tool", json!({}))),
        call(Step::tool_call("no_such_tool", json!({}))),
        call(Step::text("answer")),
    ])
    .repeating(true);
    let s = setup_with(
        scenario,
        &[(
            "budget.yaml",
            "name: team\ntype: budget\nrules: {usd: 0.02, period: month}\n",
        )],
        &format!(
            "[prices.\"scripted-model\"]\ninput_per_mtok = {input_per_mtok}\n\
             output_per_mtok = {output_per_mtok}\n"
        ),
    )
    .await;
    let hub = s.runtime.hub().clone();
    let mut refused = 0;
    for outcome in concurrent_turns(&s, 50).await {
        match outcome {
            Ok(outcome) if outcome.stop_reason == StopReason::TextAnswer => {}
            Ok(outcome) => {
                let error = outcome.error.expect("error");
                assert_eq!(error.code, ErrorCode::BudgetExceeded, "{error:?}");
                // The refusal is in the turn's log, naming the policy.
                let events = events(&s.runtime, &outcome.thread).await;
                assert!(
                    events.iter().any(|e| matches!(&e.payload,
                        EventPayload::PolicyDenied { policy, policy_type, .. }
                            if policy == "team" && policy_type == "budget")),
                    "no policy_denied event: {events:?}"
                );
                refused += 1;
            }
            Err(e) => {
                assert_eq!(e.code(), ErrorCode::BudgetExceeded, "{e:?}");
                refused += 1;
            }
        }
    }
    let spent: u64 = s
        .runtime
        .store()
        .costs(&CostQuery::default())
        .await
        .expect("costs")
        .iter()
        .map(|row| row.usd_micros)
        .sum();
    let calls = s.server.chat_request_count() as u64;
    // Nothing stays held: once everything settled, one more exact-size call fits
    // exactly when the cap has room for it.
    let late = thread(&hub, "late", "chat", &s.workspace).await;
    let late = run(&hub, "late", &late, "hi").await;
    if spent == BUDGET_MICROS {
        assert_eq!(late.expect_err("spent").code(), ErrorCode::BudgetExceeded);
    }
    (spent, calls, refused)
}

const BUDGET_MICROS: u64 = 20_000;

#[tokio::test]
async fn fifty_concurrent_turns_under_one_budget_never_overspend() {
    // Output only: a call's worst case (its 500-token cap) is exactly what it costs.
    let (spent, calls, refused) = budget_race(0.0, 4.0).await;
    println!(
        "budget {BUDGET_MICROS} µ$, one call 2000 µ$: {calls} calls, spent {spent} µ$, {refused} stopped"
    );
    assert_eq!(spent, calls * 2_000, "every call is priced once");
    assert_eq!(
        spent, BUDGET_MICROS,
        "the cap is used to the last call and never passed"
    );
    assert!(refused > 0, "some runs must be stopped");
}

#[tokio::test]
async fn priced_input_is_reserved_as_its_worst_case_and_never_overspends() {
    // 100 tokens in at $10/M and 500 out at $2/M = $0.002 a call; the reservation counts
    // every byte sent as an input token, so it holds more than that.
    let (spent, calls, refused) = budget_race(10.0, 2.0).await;
    println!(
        "budget {BUDGET_MICROS} µ$, one call 2000 µ$: {calls} calls, spent {spent} µ$, {refused} stopped"
    );
    assert_eq!(spent, calls * 2_000, "every call is priced once");
    assert!(spent <= BUDGET_MICROS, "overspent: {spent} micro-dollars");
    assert!(spent >= BUDGET_MICROS / 2, "the budget was used: {spent}");
    assert!(refused > 0, "some runs must be stopped");
}

#[tokio::test]
async fn a_cost_event_follows_every_model_call() {
    let s = setup(
        vec![Step::text("hello").with_usage(100, 200)],
        &[],
        "[prices.\"scripted-model\"]\ninput_per_mtok = 0.5\noutput_per_mtok = 1.5\n",
    )
    .await;
    let hub = s.runtime.hub();
    let t = thread(hub, "c1", "chat", &s.workspace).await;
    run(hub, "c1", &t, "hi").await.expect("turn");
    let events = events(&s.runtime, &t).await;
    let cost = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::Cost {
                usd_micros,
                usd,
                input_tokens,
                model,
                ..
            } => Some((*usd_micros, *usd, *input_tokens, model.clone())),
            _ => None,
        })
        .expect("a cost event");
    // 100 × $0.5 + 200 × $1.5 per million tokens.
    assert_eq!(cost.0, 350);
    assert!((cost.1 - 0.000_35).abs() < 1e-12);
    assert_eq!(cost.2, 100);
}

/// Starts a writer turn in the background that the model drives into a write_file
/// call under review, and waits for its approval.
async fn suspended_write(s: &Setup, client: &str) -> (ThreadId, agentplane_core::ApprovalId) {
    let hub = s.runtime.hub();
    let t = thread(hub, client, "writer", &s.workspace).await;
    let started = hub
        .start_turn(client, &t, "write the note".into())
        .await
        .expect("start");
    // Suspension ends the turn's task: nothing is left holding it.
    drop(started);
    for _ in 0..200 {
        let pending = hub.list_approvals(client, true).await.expect("list");
        if let Some(approval) = pending.into_iter().find(|a| a.thread_id == t) {
            return (t, approval.id);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no approval: {:?}", kinds(&events(&s.runtime, &t).await));
}

fn write_steps() -> Vec<Step> {
    vec![
        Step::tool_call(
            "write_file",
            json!({"path": "note.txt", "content": "as planned"}),
        ),
        Step::text("done"),
    ]
}

#[tokio::test]
async fn an_approved_call_runs_and_the_turn_completes() {
    let s = setup(write_steps(), &[("review.yaml", REVIEW_WRITES)], "").await;
    let (t, id) = suspended_write(&s, "c1").await;
    let hub = s.runtime.hub();
    assert_eq!(hub.running_turns(), 0, "a suspended turn holds no task");
    assert!(!std::path::Path::new(&s.workspace).join("note.txt").exists());
    let decided = hub
        .decide_approval("c1", &id, ApprovalAnswer::Approve)
        .await
        .expect("approve");
    assert_eq!(
        decided.status,
        ApprovalStatus::Decided(ApprovalOutcome::Approved)
    );
    let events = until_ended(&s.runtime, &t).await;
    assert_eq!(
        std::fs::read_to_string(std::path::Path::new(&s.workspace).join("note.txt")).expect("file"),
        "as planned"
    );
    let k = kinds(&events);
    let requested = k
        .iter()
        .position(|k| *k == "approval_requested")
        .expect("requested");
    let decided = k
        .iter()
        .position(|k| *k == "approval_decided")
        .expect("decided");
    let result = k
        .iter()
        .position(|k| *k == "tool_call_result")
        .expect("result");
    assert!(requested < decided && decided < result, "{k:?}");
    assert_eq!(k.last(), Some(&"turn_completed"));
    // A second decision is refused.
    let again = hub
        .decide_approval("c1", &id, ApprovalAnswer::Approve)
        .await
        .expect_err("decided");
    assert_eq!(again.code(), ErrorCode::Conflict);
}

#[tokio::test]
async fn an_edit_runs_the_edited_arguments_once_they_match_the_schema() {
    let s = setup(write_steps(), &[("review.yaml", REVIEW_WRITES)], "").await;
    let (t, id) = suspended_write(&s, "c1").await;
    let hub = s.runtime.hub();
    let bad = hub
        .decide_approval(
            "c1",
            &id,
            ApprovalAnswer::Edit {
                arguments: json!({"path": 7}),
            },
        )
        .await
        .expect_err("schema");
    assert_eq!(bad.code(), ErrorCode::InvalidArgument);
    hub.decide_approval(
        "c1",
        &id,
        ApprovalAnswer::Edit {
            arguments: json!({"path": "note.txt", "content": "as edited"}),
        },
    )
    .await
    .expect("edit");
    until_ended(&s.runtime, &t).await;
    assert_eq!(
        std::fs::read_to_string(std::path::Path::new(&s.workspace).join("note.txt")).expect("file"),
        "as edited"
    );
}

#[tokio::test]
async fn a_rejection_returns_the_feedback_to_the_model_and_runs_nothing() {
    let s = setup(write_steps(), &[("review.yaml", REVIEW_WRITES)], "").await;
    let (t, id) = suspended_write(&s, "c1").await;
    let hub = s.runtime.hub();
    hub.decide_approval(
        "c1",
        &id,
        ApprovalAnswer::Reject {
            feedback: Some("use a friendlier tone".into()),
        },
    )
    .await
    .expect("reject");
    let events = until_ended(&s.runtime, &t).await;
    assert!(!std::path::Path::new(&s.workspace).join("note.txt").exists());
    let results = tool_results(&events);
    assert_eq!(results[0].2, Some(ToolErrorKind::Rejected));
    let second = s.server.requests()[1]["messages"].to_string();
    assert!(second.contains("use a friendlier tone"), "{second}");
}

#[tokio::test]
async fn an_expired_approval_is_a_rejection() {
    let s = setup(
        write_steps(),
        &[("review.yaml", REVIEW_WRITES)],
        "[approvals]\nexpire_after_secs = 1\n",
    )
    .await;
    s.runtime.hub().start_governance();
    let (t, id) = suspended_write(&s, "c1").await;
    let events = until_ended(&s.runtime, &t).await;
    assert!(events.iter().any(|e| matches!(
        &e.payload,
        EventPayload::ApprovalDecided { outcome: ApprovalOutcome::Expired, by, .. } if by == "expiry"
    )));
    assert_eq!(tool_results(&events)[0].2, Some(ToolErrorKind::Rejected));
    let record = s.runtime.hub().approval("c1", &id).await.expect("approval");
    assert_eq!(
        record.status,
        ApprovalStatus::Decided(ApprovalOutcome::Expired)
    );
}

#[tokio::test]
async fn a_pending_approval_survives_a_restart_and_the_turn_completes_after() {
    let s = setup(write_steps(), &[("review.yaml", REVIEW_WRITES)], "").await;
    let (t, id) = suspended_write(&s, "c1").await;
    s.runtime.hub().shutdown(Duration::from_secs(5)).await;
    s.runtime.shutdown().await;
    let base = s.server.base_url();
    // A new process on the same database (the old one gone first: the file is locked
    // to one store at a time): the suspended turn is not interrupted.
    let Setup {
        server,
        dir,
        workspace,
        runtime,
    } = s;
    drop(runtime);
    let s = Setup {
        runtime: start(&dir, &base, "").await,
        server,
        dir,
        workspace,
    };
    s.runtime.hub().start_governance();
    let turn = s.runtime.store().list_turns(&t).await.expect("turns");
    assert_eq!(turn[0].status, TurnStatus::Running);
    s.runtime
        .hub()
        .decide_approval("c1", &id, ApprovalAnswer::Approve)
        .await
        .expect("approve after restart");
    let events = until_ended(&s.runtime, &t).await;
    assert_eq!(kinds(&events).last(), Some(&"turn_completed"));
    assert!(std::path::Path::new(&s.workspace).join("note.txt").exists());
}

#[tokio::test]
async fn the_audit_flags_a_call_that_a_policy_changed_during_the_turn_forbids() {
    let s = setup(
        vec![
            Step::tool_call("list_files", json!({"path": "."})),
            Step::tool_call("write_file", json!({"path": "n.txt", "content": "x"})),
            Step::text("done"),
        ],
        &[("review.yaml", REVIEW_WRITES)],
        "",
    )
    .await;
    let hub = s.runtime.hub();
    let t = thread(hub, "c1", "writer", &s.workspace).await;
    drop(hub.start_turn("c1", &t, "go".into()).await.expect("start"));
    let mut id = None;
    for _ in 0..200 {
        if let Some(a) = hub.list_approvals("c1", true).await.expect("list").pop() {
            id = Some(a.id);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let id = id.expect("approval");
    // While the turn waits, listing directories becomes forbidden.
    std::fs::write(
        s.policies().join("deny.yaml"),
        "name: no-listing\ntype: tool_access\nrules: {deny: [list_files]}\n",
    )
    .expect("write policy");
    for _ in 0..100 {
        if s.runtime
            .turn_deps()
            .governance
            .policies
            .current()
            .get("no-listing")
            .is_some()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    hub.decide_approval("c1", &id, ApprovalAnswer::Approve)
        .await
        .expect("approve");
    let events = until_ended(&s.runtime, &t).await;
    let violations: Vec<(String, Option<String>)> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::PolicyViolation { policy, tool, .. } => {
                Some((policy.clone(), tool.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        violations,
        vec![("no-listing".to_owned(), Some("list_files".to_owned()))]
    );
}

#[tokio::test]
async fn hash_retention_keeps_arguments_out_of_events() {
    let s = setup(
        write_steps(),
        &[("review.yaml", REVIEW_WRITES)],
        "[retention]\ntool_args = \"hash\"\n",
    )
    .await;
    let (t, id) = suspended_write(&s, "c1").await;
    s.runtime
        .hub()
        .decide_approval("c1", &id, ApprovalAnswer::Approve)
        .await
        .expect("approve");
    let events = until_ended(&s.runtime, &t).await;
    for event in &events {
        match &event.payload {
            EventPayload::ToolCallPlanned {
                arguments,
                args_preview_hash,
                ..
            }
            | EventPayload::ApprovalRequested {
                arguments,
                args_preview_hash,
                ..
            } => {
                assert!(arguments.is_null(), "{event:?}");
                assert_eq!(args_preview_hash.len(), 64);
            }
            _ => {}
        }
    }
    // The call ran with the planned content…
    assert!(std::path::Path::new(&s.workspace).join("note.txt").exists());
    // …and no event shows it.
    assert!(
        !events.iter().any(|e| serde_json::to_string(&e.payload)
            .unwrap_or_default()
            .contains("as planned")),
        "events hold the arguments"
    );
}

/// A policy name no other run shares (the Redis of `scripts/redis.sh` outlives runs).
fn unique_name(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// Two runtimes as two replicas would be (each its own SQLite file and model server)
/// with `[rate_limits] redis` on the Redis of `scripts/redis.sh`: one limit between them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_sharing_a_redis_admit_a_limit_once_between_them() {
    let Some(url) = std::env::var("AGENTPLANE_TEST_REDIS_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        assert!(
            std::env::var("CI").is_err(),
            "CI must provide AGENTPLANE_TEST_REDIS_URL (scripts/test.sh runs scripts/redis.sh)"
        );
        eprintln!(
            "AGENTPLANE_TEST_REDIS_URL is not set; run ./scripts/test.sh to include this check"
        );
        return;
    };
    let policy = format!(
        "name: {}\ntype: rate_limit\nrules: {{window: 1h, max: 7}}\n",
        unique_name("shared")
    );
    let extra = format!("[rate_limits]\nredis = \"{url}\"\n");
    let steps = || (0..20).map(|i| Step::text(format!("answer {i}"))).collect();
    let a = setup(steps(), &[("rate.yaml", &policy)], &extra).await;
    let b = setup(steps(), &[("rate.yaml", &policy)], &extra).await;
    let (on_a, on_b) = tokio::join!(concurrent_turns(&a, 20), concurrent_turns(&b, 20));
    let mut admitted = 0;
    for outcome in on_a.into_iter().chain(on_b) {
        match outcome {
            Ok(_) => admitted += 1,
            Err(e) if e.code() == ErrorCode::RateLimited => {
                let wait = e.retry_after_secs().expect("retry after");
                assert!((3000..=3600).contains(&wait), "{wait}");
            }
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    assert_eq!(admitted, 7);
    assert_eq!(
        a.server.chat_request_count() + b.server.chat_request_count(),
        7
    );
}

/// Fail-closed: with the Redis unreachable, a turn a limit selects is refused with its
/// own code and a message that says why; a turn no limit selects runs.
#[tokio::test]
async fn with_redis_unreachable_a_limited_turn_is_refused_and_others_run() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let s = setup(
        vec![Step::text("unlimited")],
        &[(
            "rate.yaml",
            "name: chat-turns\ntype: rate_limit\ntargets: {agents: [chat]}\nrules: {window: 1m, max: 5}\n",
        )],
        &format!("[rate_limits]\nredis = \"redis://:pw-not-shown@127.0.0.1:{port}/\"\n"),
    )
    .await;
    let hub = s.runtime.hub();
    let chat = thread(hub, "alice", "chat", &s.workspace).await;
    let refused = run(hub, "alice", &chat, "hi").await.expect_err("refused");
    assert_eq!(refused.code(), ErrorCode::UpstreamUnavailable);
    let message = refused.to_string();
    assert!(message.contains("Redis"), "{message}");
    assert!(!message.contains("pw-not-shown"), "{message}");
    assert_eq!(s.server.chat_request_count(), 0);

    let writer = thread(hub, "alice", "writer", &s.workspace).await;
    run(hub, "alice", &writer, "hi")
        .await
        .expect("no limit selects it");
}
