//! `serve` killed with SIGKILL while a confined program runs, then started again on the
//! same files: nothing the program started outlives the server (a background job, and
//! a `setsid` orphan that left its session), however the server ended, and the
//! restarted server records the call's turn as interrupted and runs the next one. The
//! survivors are watched by the exclusive locks they hold (their pids are their
//! namespace's, not ours).

use std::time::{Duration, Instant};

use agentplane_suites::attacks::{Tally, make_call, write_call};
use agentplane_suites::{SseReader, create_thread, events_of, history, sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer, Step};

use crate::kernel::is_gone;

const MAKEFILE: &str = "hold:\n\
    \tflock survivor.lock sh -c 'touch held; sleep 120' &\n\
    \tsetsid flock orphan.lock sleep 120 &\n\
    \tsleep 1; touch started; sleep 120\n";

/// Waits until `check` holds, up to `budget`.
async fn eventually(budget: Duration, check: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + budget;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    check()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_call_leaves_no_program_behind_and_starts_again() {
    let (write_tool, write_args) = write_call("Makefile", MAKEFILE);
    let (make_tool, make_args) = make_call("hold");
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::tool_call(write_tool, write_args),
        Step::tool_call(make_tool, make_args),
        // The killed turn never asks again; this answers the turn after the restart.
        Step::text("after the restart"),
    ]))
    .await
    .expect("model");
    let sb = sandbox(
        "[agents.holder]\nsystem_prompt = \"You hold.\"\nensembles = [\"fs\", \"shell\"]\n\
         shell_allow = [\"make\"]\ntool_timeout_ms = 300000\n",
    );
    let mut served = start(&sb, &model.base_url(), &[]).await;
    let thread = create_thread(&served, &sb, "holder", "restart").await;
    let reader = SseReader::open(&served, &thread, "hold").await;
    let ws = sb.workspace.clone();
    assert!(
        eventually(Duration::from_secs(20), || ws.join("started").exists()
            && ws.join("held").exists())
        .await,
        "the program did not start: {}",
        served.stderr()
    );
    assert!(
        !is_gone(&ws.join("survivor.lock")),
        "the survivor is not running"
    );
    assert!(
        !is_gone(&ws.join("orphan.lock")),
        "the orphan is not running"
    );
    served.kill_9();
    drop(reader);
    let mut tally = Tally::default();
    for lock in ["survivor.lock", "orphan.lock"] {
        assert!(
            eventually(Duration::from_secs(5), || is_gone(&ws.join(lock))).await,
            "{lock}: its holder outlived the server"
        );
        tally.case(true);
    }
    // Started again on the same files: the killed turn is interrupted, the next runs.
    let served = start(&sb, &model.base_url(), &[]).await;
    let events = events_of(&history(&served, &thread).await);
    let ended: Vec<&str> = events
        .iter()
        .filter(|e| e["kind"] == "turn_completed")
        .filter_map(|e| e["stop_reason"].as_str())
        .collect();
    assert_eq!(ended, ["interrupted"], "{events:?}");
    let after = SseReader::open(&served, &thread, "again")
        .await
        .until("turn_completed")
        .await;
    assert!(
        after
            .iter()
            .any(|e| e.data.to_string().contains("after the restart")),
        "{after:?}"
    );
    tally.case(true);
    tally.report("restart");
}
