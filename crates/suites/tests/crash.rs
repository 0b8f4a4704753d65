//! The crash suite (docs/reliability.md): the real server is killed with SIGKILL at
//! random moments while turns stream text, run tools (a slow `sleep` among them), wait
//! for a person's approval or permission, write bursts of events, and while
//! asynchronous executions run or queue. After each kill it is restarted on the same
//! SQLite file and the store is checked, through the API and by reading the file
//! directly: nothing lost or changed, seqs gapless, interrupted turns marked once,
//! approvals still pending and decidable, permissions declined with the restart's
//! reason, executions retried or interrupted per `[executions] on_restart`, and
//! `PRAGMA integrity_check` = ok; at the end, `agentplane audit verify` passes.
//!
//! The random choices come from one seed, printed at the start and replayed with
//! `AGENTPLANE_CRASH_SEED`; `AGENTPLANE_SUITE_SIZE=full` makes 120 kills instead of 20
//! (`AGENTPLANE_CRASH_KILLS` sets any count).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentplane_suites::crash::{
    self, AGENTS, OnRestart, Rng, Snapshot, check_executions, check_log, check_recovery,
};
use agentplane_suites::{
    Received, Sandbox, Served, SseReader, api, assert_kept, create_thread, events_of, history,
    sandbox, start,
};
use agentplane_testkit::{Scenario, ScriptedServer, ScriptedToolCall, Step};
use serde_json::json;

/// How long recovery (retries, resumed approvals, the queue) may take after a restart.
const SETTLE_BUDGET: Duration = Duration::from_secs(90);

/// What runs in one life of the server when the kill comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Activity {
    /// A long text answer in many small, delayed chunks.
    Streaming,
    /// `run_command sleep`, then `write_file`, then an answer.
    Tools,
    /// One model answer with dozens of tool calls: bursts of event writes.
    Burst,
    /// A `requires_permission` call waiting for a person.
    Permission,
    /// An `approval_required` call: the turn suspends in the store.
    Approval,
    /// `POST /v1/executions` into a queue of one worker.
    Executions,
}

const ACTIVITIES: [Activity; 6] = [
    Activity::Streaming,
    Activity::Tools,
    Activity::Burst,
    Activity::Permission,
    Activity::Approval,
    Activity::Executions,
];

impl Activity {
    fn agent(self) -> &'static str {
        match self {
            Activity::Streaming => "chat",
            Activity::Tools => "worker",
            Activity::Burst => "burst",
            Activity::Permission => "careful",
            Activity::Approval => "reviewed",
            Activity::Executions => "batch",
        }
    }
}

/// One scripted model server per agent for one life. `resumes`: how many turns of
/// `reviewed` resume from an approval before its new turn starts; each takes one text
/// answer first.
async fn start_models(rng: &mut Rng, resumes: usize) -> BTreeMap<&'static str, ScriptedServer> {
    let long_text = "The quick brown fox jumps over the lazy dog. ".repeat(20);
    let mut reviewed = vec![Step::text("resumed and done"); resumes];
    reviewed.extend([
        Step::tool_call(
            "write_file",
            json!({"path": "review.txt", "content": "reviewed notes"}),
        ),
        Step::text("written"),
        Step::text("written"),
    ]);
    let burst_calls = (0..10 + rng.below(30))
        .map(|i| ScriptedToolCall {
            id: Some(format!("ls_{i}")),
            name: "list_files".to_owned(),
            arguments: json!({}),
        })
        .collect();
    let scenarios = [
        (
            "chat",
            Scenario::new(vec![
                Step::text(long_text.clone())
                    .with_split(20 + rng.below(60) as usize)
                    .with_chunk_delay_ms(2 + rng.below(15))
                    .with_delay_ms(rng.below(100)),
            ])
            .repeating(true),
        ),
        (
            "worker",
            Scenario::new(vec![
                Step::tool_call(
                    "run_command",
                    json!({"program": "sleep", "args": [format!("0.{}", 1 + rng.below(4))]}),
                ),
                Step::tool_call(
                    "write_file",
                    json!({"path": "notes.txt", "content": long_text.clone()}),
                ),
                Step::text("done").with_split(5).with_chunk_delay_ms(10),
            ]),
        ),
        (
            "burst",
            Scenario::new(vec![
                Step::tool_calls(burst_calls),
                Step::text(long_text).with_split(10).with_chunk_delay_ms(5),
            ]),
        ),
        (
            "careful",
            Scenario::new(vec![Step::tool_call("list_files", json!({}))]),
        ),
        ("reviewed", Scenario::new(reviewed)),
        (
            "batch",
            Scenario::new(vec![
                Step::text("execution done")
                    .with_split(10)
                    .with_chunk_delay_ms(5 + rng.below(30)),
            ])
            .repeating(true),
        ),
    ];
    let mut models = BTreeMap::new();
    for (agent, scenario) in scenarios {
        models.insert(agent, ScriptedServer::start(scenario).await.expect("model"));
    }
    models
}

/// The events one turn streamed before the kill.
struct Streamed {
    activity: Activity,
    thread: String,
    events: Arc<Mutex<Vec<Received>>>,
    task: tokio::task::JoinHandle<()>,
}

/// Starts a turn and reads its stream into a shared list until the stream ends (the
/// kill ends it). A start refused because the server died is no failure.
fn stream_turn(
    served: &Served,
    activity: Activity,
    thread: String,
    input: &str,
    counter: Arc<AtomicUsize>,
) -> Streamed {
    let events = Arc::new(Mutex::new(Vec::new()));
    let request = api(
        served,
        reqwest::Method::POST,
        &format!("/v1/threads/{thread}/turns"),
    )
    .json(&json!({ "input": input }));
    let sink = events.clone();
    let task = tokio::spawn(async move {
        let Ok(response) = request.send().await else {
            return;
        };
        assert_eq!(response.status(), 200, "a turn could not start");
        let mut sse = SseReader::from_response(response);
        while let Some(event) = sse.next().await {
            sink.lock().expect("events").push(event);
            counter.fetch_add(1, Ordering::SeqCst);
        }
    });
    Streamed {
        activity,
        thread,
        events,
        task,
    }
}

/// Reads the store until recovery work is done, then returns it.
async fn settled(sb: &Sandbox, served: &Served) -> Snapshot {
    let deadline = Instant::now() + SETTLE_BUDGET;
    loop {
        let busy = Snapshot::peek(&sb.db).unsettled();
        if busy.is_empty() {
            return Snapshot::read(&sb.db);
        }
        assert!(
            Instant::now() < deadline,
            "still busy {SETTLE_BUDGET:?} after the restart: {busy:#?}\n{}",
            served.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Decides a pending approval (approve or reject) over the API.
async fn decide(served: &Served, approval: &str, approve: bool) {
    let body = if approve {
        json!({"decision": "approve"})
    } else {
        json!({"decision": "reject", "feedback": "not now"})
    };
    let response = api(
        served,
        reqwest::Method::POST,
        &format!("/v1/approvals/{approval}"),
    )
    .json(&body)
    .send()
    .await
    .expect("decide");
    assert_eq!(response.status(), 200, "{}", served.stderr());
}

fn fail_on(life: usize, what: &str, failures: Vec<String>, served: &Served) {
    assert!(
        failures.is_empty(),
        "life {life}, {what}: {failures:#?}\nserver log:\n{}",
        served.stderr()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_random_moments_loses_nothing() {
    let began = Instant::now();
    let mut rng = Rng::from_env();
    let kills = crash::kill_points();
    let sb = sandbox("");
    // One long-lived thread per interactive activity, so seqs continue across restarts;
    // approvals get a thread each (a suspended turn keeps its thread busy).
    let mut threads: BTreeMap<Activity, String> = BTreeMap::new();
    let mut before: Option<Snapshot> = None;
    let mut streamed_last: Vec<(String, Vec<Received>)> = Vec::new();
    // What each kill interrupted: (activity, last event it had streamed).
    let mut kill_points: BTreeMap<String, usize> = BTreeMap::new();
    let mut decided = 0usize;
    let mut executions_submitted = 0usize;

    for life in 0..=kills {
        let resumes = before.as_ref().map_or(0, Snapshot::awaiting_resume);
        let pending = before
            .as_ref()
            .map_or_else(Vec::new, Snapshot::pending_approvals);
        let decide_one = !pending.is_empty() && rng.chance(60);
        let mode = if rng.chance(50) {
            OnRestart::Retry
        } else {
            OnRestart::Interrupt
        };
        let models = start_models(&mut rng, resumes + usize::from(decide_one)).await;
        let urls: BTreeMap<&str, String> = AGENTS
            .iter()
            .map(|agent| (*agent, models[agent].base_url()))
            .collect();
        crash::write_config(&sb, &urls, mode);
        let mut served = start(&sb, &models["chat"].base_url(), &[]).await;

        // ----- after a kill: the store as recovered, then as settled --------------
        if let Some(before) = &before {
            let after = Snapshot::read(&sb.db);
            fail_on(life, "log after restart", check_log(&after), &served);
            fail_on(life, "recovery", check_recovery(before, &after), &served);
            for (thread, events) in &streamed_last {
                let stored = events_of(&history(&served, thread).await);
                assert_kept(events, &stored);
                let seqs: Vec<u64> = events.iter().filter_map(|e| e.id).collect();
                assert!(
                    seqs.windows(2).all(|w| w[0] < w[1]),
                    "life {life}: a seq streamed twice or out of order: {seqs:?}"
                );
            }
            let settled_now = settled(&sb, &served).await;
            fail_on(life, "log once settled", check_log(&settled_now), &served);
            fail_on(
                life,
                "executions",
                check_executions(before, &settled_now, mode),
                &served,
            );
            if let Some(permission) = settled_now
                .permissions
                .iter()
                .find(|(_, p)| p.status == "pending")
            {
                panic!("life {life}: permission {permission:?} pending with no turn running");
            }
        }

        // ----- a pending approval is decidable, and its turn resumes and finishes ----
        if decide_one {
            let approval = &pending[rng.below(pending.len() as u64) as usize];
            let turn = before.as_ref().expect("a kill came before").approvals[approval]
                .turn_id
                .clone();
            decide(&served, approval, rng.chance(70)).await;
            decided += 1;
            let deadline = Instant::now() + SETTLE_BUDGET;
            let status = loop {
                let now = Snapshot::peek(&sb.db);
                let status = now.turns[&turn].status.clone();
                if status != "running" {
                    break status;
                }
                assert!(
                    Instant::now() < deadline,
                    "life {life}: turn {turn} did not resume after its approval:\n{}",
                    served.stderr()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            assert_eq!(
                status,
                "text_answer",
                "life {life}: the resumed turn {turn} ended {status}:\n{}",
                served.stderr()
            );
        }
        if life == kills {
            break;
        }

        // ----- this life's work -------------------------------------------------------
        let mut chosen: Vec<Activity> = ACTIVITIES
            .iter()
            .copied()
            .filter(|_| rng.chance(45))
            .collect();
        if chosen.is_empty() {
            chosen.push(ACTIVITIES[rng.below(ACTIVITIES.len() as u64) as usize]);
        }
        let counter = Arc::new(AtomicUsize::new(0));
        let mut turns = Vec::new();
        for activity in &chosen {
            if *activity == Activity::Executions {
                for n in 0..1 + rng.below(3) {
                    let response = api(&served, reqwest::Method::POST, "/v1/executions")
                        .json(&json!({"agent": "batch", "input": format!("job {life}.{n}")}))
                        .send()
                        .await
                        .expect("submit");
                    assert_eq!(response.status(), 202, "{}", served.stderr());
                    executions_submitted += 1;
                }
                continue;
            }
            let thread = if *activity == Activity::Approval {
                create_thread(&served, &sb, activity.agent(), "approval").await
            } else {
                match threads.get(activity) {
                    Some(thread) => thread.clone(),
                    None => {
                        let thread = create_thread(&served, &sb, activity.agent(), "crash").await;
                        threads.insert(*activity, thread.clone());
                        thread
                    }
                }
            };
            turns.push(stream_turn(
                &served,
                *activity,
                thread,
                &format!("life {life}"),
                counter.clone(),
            ));
        }

        // ----- the kill -----------------------------------------------------------------
        let pending_now = Snapshot::peek(&sb.db).pending_approvals();
        if !pending_now.is_empty() && rng.chance(15) {
            // Between a decision and the turn taking it.
            let approval = &pending_now[rng.below(pending_now.len() as u64) as usize];
            decide(&served, approval, true).await;
            tokio::time::sleep(Duration::from_millis(rng.below(30))).await;
            *kill_points
                .entry("approval just decided".to_owned())
                .or_default() += 1;
        } else {
            let target = rng.below(40) as usize;
            let max_wait = Duration::from_millis(50 + rng.below(1500));
            let waited = Instant::now();
            while counter.load(Ordering::SeqCst) < target && waited.elapsed() < max_wait {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            tokio::time::sleep(Duration::from_millis(rng.below(20))).await;
        }
        served.kill_9();
        streamed_last.clear();
        for turn in turns {
            // A task that failed an assertion fails the run.
            if let Ok(Err(e)) = tokio::time::timeout(Duration::from_secs(10), turn.task).await
                && e.is_panic()
            {
                std::panic::resume_unwind(e.into_panic());
            }
            let events = turn.events.lock().expect("events").clone();
            let last = events
                .last()
                .map_or("nothing streamed", |e| e.event.as_str());
            *kill_points
                .entry(format!("{:?} after {last}", turn.activity))
                .or_default() += 1;
            streamed_last.push((turn.thread, events));
        }
        if chosen.contains(&Activity::Executions) {
            *kill_points
                .entry("executions submitted".to_owned())
                .or_default() += 1;
        }
        let snapshot = Snapshot::read(&sb.db);
        fail_on(
            life,
            "log as the kill left it",
            check_log(&snapshot),
            &served,
        );
        before = Some(snapshot);
        drop(models);
    }

    let last = Snapshot::peek(&sb.db);
    eprintln!(
        "crash suite: {kills} kills in {:.1?}; {} events, {} turns, {} executions \
         ({executions_submitted} submitted), {decided} approvals decided after a restart, \
         {} still pending",
        began.elapsed(),
        last.events.len(),
        last.turns.len(),
        last.executions.len(),
        last.pending_approvals().len(),
    );
    for (point, count) in &kill_points {
        eprintln!("  {count:4} × {point}");
    }
    let interrupted = last
        .turns
        .values()
        .filter(|t| t.status == "interrupted")
        .count();
    assert!(
        kills == 0 || interrupted > 0,
        "no kill ever interrupted a turn: the suite tests nothing"
    );
    // Every kill landed between or inside appends: the audit chain still holds.
    let (ok, report, text) = agentplane_suites::audit::verify(&sb, None);
    assert!(ok, "audit verify after {kills} kills: {text}");
    eprintln!(
        "  audit verify: every chain holds ({} threads)",
        report["threads"].as_array().map_or(0, Vec::len)
    );
}

/// A kill between a turn's end and its execution's end (two writes) left the execution
/// `running` with its turn already answered. The restart used to treat it as cut short:
/// `retry` ran the finished work again, `interrupt` reported it interrupted and dropped
/// its result. The state is written into the file by hand, as such a kill leaves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execution_whose_turn_ended_before_the_kill_ends_with_that_turn() {
    for mode in [OnRestart::Retry, OnRestart::Interrupt] {
        let model = ScriptedServer::start(Scenario::new(vec![Step::text("the answer")]))
            .await
            .expect("model");
        let sb = sandbox(&format!(
            "[executions]\non_restart = \"{}\"\n",
            mode.as_str()
        ));
        let mut served = start(&sb, &model.base_url(), &[]).await;
        let thread = create_thread(&served, &sb, "chat", "answered").await;
        let mut sse = SseReader::open(&served, &thread, "the question").await;
        let events = sse.until("turn_completed").await;
        let turn = events[0].data["turn_id"].as_str().expect("turn").to_owned();
        served.kill_9();

        let execution = "exec_0196f3c2a1b27c3d8e9f0a1b2c3d4e5f";
        let db = rusqlite::Connection::open(&sb.db).expect("open the store");
        db.execute(
            "INSERT INTO executions (id, client_id, agent, input, thread_id, turn_id, status,
                 attempts, max_attempts, fingerprint, claimed_by, created_at, updated_at,
                 started_at)
             SELECT ?1, ?2, 'chat', 'the question', thread_id, id, 'running', 1, 3, '{}',
                 'a process that died', created_at, created_at, created_at
             FROM turns WHERE id = ?3",
            rusqlite::params![execution, agentplane_suites::CLIENT, turn],
        )
        .expect("a running execution of the answered turn");
        drop(db);

        let served = start(&sb, &model.base_url(), &[]).await;
        let deadline = Instant::now() + SETTLE_BUDGET;
        let ended = loop {
            let response = api(
                &served,
                reqwest::Method::GET,
                &format!("/v1/executions/{execution}"),
            )
            .send()
            .await
            .expect("poll");
            assert_eq!(response.status(), 200, "{}", served.stderr());
            let body: serde_json::Value = response.json().await.expect("execution");
            if !matches!(body["status"].as_str(), Some("queued" | "running")) {
                break body;
            }
            assert!(Instant::now() < deadline, "{mode:?}: not ended: {body}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(ended["status"], "succeeded", "{mode:?}: {ended}");
        assert_eq!(ended["output"], json!({"text": "the answer"}), "{mode:?}");
        assert_eq!(ended["attempts"], 1, "{mode:?}: run once");
        assert_eq!(ended["turn_id"], turn.as_str(), "{mode:?}");
        assert_eq!(
            model.chat_request_count(),
            1,
            "{mode:?}: the model was asked again"
        );
        let turns = history(&served, &thread).await["turns"]
            .as_array()
            .expect("turns")
            .len();
        assert_eq!(turns, 1, "{mode:?}: no second attempt");
    }
}
