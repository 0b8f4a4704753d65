//! Durable event appends per second: many turns appending at once into the store, each
//! append answered only after its transaction committed (the SQLite writer's group
//! commit; a PostgreSQL transaction per append).
//!
//! Two shapes: one event per write (`append`, as a streamed answer's deltas are written),
//! and steps of four events per write (`append_all`, as a turn writes the events that
//! end a model call: its last text, usage and cost, with what follows).
//!
//! `cargo bench -p agentplane-runtime --bench event_appends`. Environment:
//! `BENCH_APPEND_TURNS` (turns appending at once, default 64), `BENCH_APPEND_EVENTS`
//! (events each, default 500), `BENCH_POSTGRES_URL` (also measure PostgreSQL on that
//! database, which gets the threads it writes; skipped without it). Reports events/s and
//! the process's CPU per event (`/proc/self/stat`), three rounds of each shape.

use std::sync::Arc;
use std::time::Instant;

use agentplane_core::{EventPayload, ReplicaId, ThreadId, TurnId};
use agentplane_engine::ports::{EventStore, NewThread};

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// User + system CPU of this process, in clock ticks (100 per second on Linux).
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command's closing parenthesis: utime is the 12th, stime the 13th.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    field(11) + field(12)
}

/// Events per store write: 1 (`append`) or more (`append_all`).
const STEP: usize = 4;

fn delta(n: usize) -> EventPayload {
    EventPayload::MessageDelta {
        text: format!("a piece of an answer, number {n}, streamed"),
    }
}

/// One round: `turns` running turns, each appending `events` deltas, `step` per write,
/// all at once. Returns (events per second, CPU µs per event).
async fn round(store: Arc<dyn EventStore>, turns: usize, events: usize, step: usize) -> (f64, f64) {
    let mut running = Vec::new();
    for i in 0..turns {
        let thread = store
            .create_thread(NewThread {
                agent_version: None,
                id: ThreadId::new(),
                client_id: "bench".into(),
                agent: "chat".into(),
                cwd: "/".into(),
                title: Some(format!("appends {i}")),
            })
            .await
            .expect("thread");
        let turn = TurnId::new();
        store
            .start_turn(
                &thread.id,
                &turn,
                "bench",
                false,
                EventPayload::TurnStarted {
                    agent: "chat".into(),
                    input: "bench".into(),
                    model: "m".into(),
                    workspace: "/".into(),
                    agent_version: None,
                    shadow_of: None,
                },
            )
            .await
            .expect("turn");
        running.push((thread.id, turn));
    }
    let ticks = cpu_ticks();
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (thread, turn) in running {
        let store = store.clone();
        tasks.spawn(async move {
            let mut n = 0;
            while n < events {
                let upto = (n + step).min(events);
                if step == 1 {
                    store
                        .append(&thread, &turn, delta(n))
                        .await
                        .expect("append");
                } else {
                    let payloads = (n..upto).map(delta).collect();
                    store
                        .append_all(&thread, &turn, payloads)
                        .await
                        .expect("append_all");
                }
                n = upto;
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("task");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let total = (turns * events) as f64;
    let cpu_us = (cpu_ticks() - ticks) as f64 * 10_000.0 / total;
    (total / elapsed, cpu_us)
}

async fn measure(name: &str, store: Arc<dyn EventStore>, turns: usize, events: usize) {
    for step in [1, STEP] {
        for n in 1..=3 {
            let (per_second, cpu) = round(store.clone(), turns, events, step).await;
            println!(
                "{name:<10} {step} per write, round {n}: {turns} turns × {events} events: \
                 {per_second:>9.0} events/s, {cpu:>6.1} µs CPU per event"
            );
        }
    }
}

#[tokio::main]
async fn main() {
    let turns = env_count("BENCH_APPEND_TURNS", 64);
    let events = env_count("BENCH_APPEND_EVENTS", 500);
    let dir = tempfile::tempdir().expect("tempdir");
    let sqlite = agentplane_sqlite::SqliteStore::open(&dir.path().join("events.db"))
        .await
        .expect("sqlite");
    measure("sqlite", Arc::new(sqlite), turns, events).await;
    match std::env::var("BENCH_POSTGRES_URL") {
        Ok(url) => {
            let postgres = agentplane_postgres::PostgresStore::connect(&url, ReplicaId::new())
                .await
                .expect("postgres");
            measure("postgres", Arc::new(postgres), turns, events).await;
        }
        Err(_) => println!("postgres: skipped (set BENCH_POSTGRES_URL to a database of yours)"),
    }
}
