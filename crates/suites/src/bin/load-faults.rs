//! Load under faults (docs/reliability.md): many concurrent turns against the real
//! binary, once with a model server that always answers and once with one that fails
//! one request in ten (a 500, or a stream cut mid-way), side by side. Prints p50/p99 of
//! each run and the ratio; exits non-zero if a turn hangs or ends outside the documented
//! states. `bench/load-faults.sh` builds the release binaries and runs this.
//!
//! Environment: `AGENTPLANE_BIN` (the binary to serve), `LOAD_TURNS` (default 1000),
//! `LOAD_FAIL_EVERY` (default 10), `LOAD_ROUNDS` (default 1: pairs of runs, alternated).

use std::time::{Duration, Instant};

use agentplane_suites::faults::{self, LoadEnd, LoadTurn, sandbox_with_llm};
use agentplane_testkit::ScriptedServer;

/// What a turn may take before it counts as hung.
const DEADLINE: Duration = Duration::from_secs(300);

fn number(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Run {
    label: &'static str,
    p50: Duration,
    p99: Duration,
    max: Duration,
    answered: usize,
    failed: usize,
    wrong: Vec<String>,
    wall: Duration,
}

async fn run(label: &'static str, turns: usize, fail_every: usize) -> Run {
    let model = ScriptedServer::start(faults::load_scenario(fail_every))
        .await
        .expect("model server");
    let sb = sandbox_with_llm("max_retries = 0\nrequest_timeout_secs = 60", "");
    let served = agentplane_suites::start(&sb, &model.base_url(), &[]).await;
    let started = Instant::now();
    let ended: Vec<LoadTurn> = faults::load(&served, &sb, "chat", turns, DEADLINE).await;
    let wall = started.elapsed();
    let mut answered = 0;
    let mut failed = 0;
    let mut wrong = Vec::new();
    for turn in &ended {
        match &turn.end {
            LoadEnd::Completed {
                stop_reason,
                error_code: None,
            } if stop_reason == "text_answer" => answered += 1,
            LoadEnd::Completed {
                stop_reason,
                error_code: Some(code),
            } if stop_reason == "error" && code == "UPSTREAM_UNAVAILABLE" => failed += 1,
            other => wrong.push(format!("{other:?}")),
        }
    }
    let latencies: Vec<Duration> = ended.iter().map(|t| t.latency).collect();
    Run {
        label,
        p50: faults::quantile(&latencies, 0.5),
        p99: faults::quantile(&latencies, 0.99),
        max: faults::quantile(&latencies, 1.0),
        answered,
        failed,
        wrong,
        wall,
    }
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let turns = number("LOAD_TURNS", 1000);
    let fail_every = number("LOAD_FAIL_EVERY", 10);
    let rounds = number("LOAD_ROUNDS", 1).max(1);
    println!(
        "load under faults: {turns} concurrent turns, 1 model request in {fail_every} fails; \
         binary {}",
        agentplane_suites::binary().display()
    );
    println!("| round | run | answered | failed (UPSTREAM_UNAVAILABLE) | p50 | p99 | max | wall |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut ok = true;
    let mut ratios = Vec::new();
    for round in 1..=rounds {
        let clean = run("fault-free", turns, 0).await;
        let faulty = run("10 % failing", turns, fail_every).await;
        for r in [&clean, &faulty] {
            println!(
                "| {round} | {} | {} | {} | {} | {} | {} | {:.1} s |",
                r.label,
                r.answered,
                r.failed,
                ms(r.p50),
                ms(r.p99),
                ms(r.max),
                r.wall.as_secs_f64()
            );
            if !r.wrong.is_empty() {
                ok = false;
                eprintln!("{}: {} turns ended wrongly:", r.label, r.wrong.len());
                for w in r.wrong.iter().take(10) {
                    eprintln!("  {w}");
                }
            }
        }
        ratios.push((
            faulty.p50.as_secs_f64() / clean.p50.as_secs_f64().max(1e-9),
            faulty.p99.as_secs_f64() / clean.p99.as_secs_f64().max(1e-9),
        ));
    }
    for (round, (p50, p99)) in ratios.iter().enumerate() {
        println!(
            "round {}: p50 ratio {p50:.2}×, p99 ratio {p99:.2}× (target: p99 within 2×)",
            round + 1
        );
    }
    if !ok {
        std::process::exit(1);
    }
}
