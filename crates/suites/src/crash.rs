//! What the crash suite (`tests/crash.rs`) needs beside the shared harness: a seeded
//! random source whose seed can be replayed, the per-life configuration (one scripted
//! model server per agent, so concurrent turns of different agents never take each
//! other's steps), and a read-only look at the store file itself with the checks that
//! must hold after any crash.
//!
//! Nothing here writes to the store: the checks open it read-only, beside the running
//! server or between a kill and the restart.

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::{Connection, OpenFlags};
use serde_json::Value;

use crate::Sandbox;

/// The variable that replays a run: `AGENTPLANE_CRASH_SEED=<seed printed by a run>`.
pub const SEED_VAR: &str = "AGENTPLANE_CRASH_SEED";
/// The variable that overrides how many kills a run makes.
pub const KILLS_VAR: &str = "AGENTPLANE_CRASH_KILLS";

/// What `interrupt_running_turns` writes as the reason of a permission it declines.
pub const STOPPED_WHILE_PENDING: &str = "agentplane stopped while this permission was pending";

/// SplitMix64: small, seedable, and the same sequence on every platform, so a seed
/// printed by a failing run replays its choices (though not the scheduler's timing).
pub struct Rng(u64);

impl Rng {
    /// Seeded from `AGENTPLANE_CRASH_SEED`, else from the clock; the seed is printed.
    pub fn from_env() -> Rng {
        let seed = match std::env::var(SEED_VAR) {
            Ok(text) => text
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("{SEED_VAR}={text:?} is not a u64")),
            Err(_) => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0x5eed),
        };
        eprintln!("crash suite seed: {seed} (replay with {SEED_VAR}={seed})");
        Rng(seed)
    }

    /// A generator replaying `seed` (the other suites read and print their own).
    pub fn seeded(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// How many kills a run makes: `AGENTPLANE_CRASH_KILLS`, else 120 at full size and 20
/// in the bounded form.
pub fn kill_points() -> usize {
    if let Ok(text) = std::env::var(KILLS_VAR) {
        return text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{KILLS_VAR}={text:?} is not a count"));
    }
    if crate::full_size() { 120 } else { 20 }
}

/// The agents of the suite, each routed to its own scripted model server.
pub const AGENTS: [&str; 6] = ["chat", "worker", "burst", "careful", "reviewed", "batch"];

/// `[executions] on_restart`, chosen anew for each life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnRestart {
    Retry,
    Interrupt,
}

impl OnRestart {
    pub fn as_str(self) -> &'static str {
        match self {
            OnRestart::Retry => "retry",
            OnRestart::Interrupt => "interrupt",
        }
    }
}

/// Writes `agentplane.toml` (and the approval policy) for one life of the server: every
/// agent of [`AGENTS`] gets a provider of its own at `model_urls[agent]`.
pub fn write_config(sb: &Sandbox, model_urls: &BTreeMap<&str, String>, on_restart: OnRestart) {
    let policies = sb.root.join("policies");
    std::fs::create_dir_all(&policies).expect("policies dir");
    std::fs::write(
        policies.join("review.yaml"),
        "name: review\ntype: approval_required\ntargets: {agents: [reviewed]}\n\
         rules: {tools: [write_file]}\n",
    )
    .expect("policy");
    let mut config = format!(
        "[store]\npath = \"events.db\"\n\
         [policies]\ndir = \"policies\"\n\
         [executions]\nworkers = 1\nmax_attempts = 100\non_restart = \"{}\"\n\
         poll_interval_ms = 100\nbackoff_base_ms = 100\nbackoff_max_ms = 200\n\
         [routing]\ndefault = [\"chat\"]\n",
        on_restart.as_str()
    );
    for agent in AGENTS {
        let url = &model_urls[agent];
        config.push_str(&format!(
            "[providers.{agent}]\nkind = \"openai\"\nbase_url = \"{url}\"\n\
             model = \"scripted-model\"\nmax_retries = 0\n\
             [[routing.rules]]\nagent = \"{agent}\"\nproviders = [\"{agent}\"]\n"
        ));
    }
    config.push_str(
        "[agents.chat]\nsystem_prompt = \"You chat.\"\n\
         [agents.worker]\nsystem_prompt = \"You work.\"\nensembles = [\"fs\", \"shell\"]\n\
         shell_allow = [\"sleep\"]\n\
         [agents.burst]\nsystem_prompt = \"You look around.\"\nensembles = [\"fs\"]\n\
         [agents.careful]\nsystem_prompt = \"You list files.\"\nensembles = [\"fs\"]\n\
         requires_permission = [\"list_files\"]\n\
         [agents.reviewed]\nsystem_prompt = \"You write notes.\"\nensembles = [\"fs\"]\n\
         [agents.batch]\nsystem_prompt = \"You answer.\"\n",
    );
    std::fs::write(
        sb.root.join("agentplane.toml"),
        crate::without_nudges(&config),
    )
    .expect("config");
}

/// One stored event, as the `events` table holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    pub turn_id: String,
    pub kind: String,
    pub ts: String,
    pub payload: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TurnRow {
    pub thread_id: String,
    /// `running`, or the stop reason it ended with.
    pub status: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRow {
    pub turn_id: String,
    pub status: String,
    pub resumed: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PermissionRow {
    pub turn_id: String,
    pub status: String,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionRow {
    pub status: String,
    pub attempts: i64,
    pub turn_id: Option<String>,
}

/// The store file as it is at one moment, read in one read transaction.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// `PRAGMA integrity_check`'s answer; `None` when not asked ([`Snapshot::peek`]).
    pub integrity: Option<String>,
    /// Thread id → `next_seq`.
    pub threads: BTreeMap<String, i64>,
    /// (thread id, seq) → event.
    pub events: BTreeMap<(String, i64), StoredEvent>,
    pub turns: BTreeMap<String, TurnRow>,
    pub approvals: BTreeMap<String, ApprovalRow>,
    pub permissions: BTreeMap<String, PermissionRow>,
    pub executions: BTreeMap<String, ExecutionRow>,
}

impl Snapshot {
    /// Reads the file read-only (a crashed file too: SQLite replays its WAL for the
    /// reader without writing the database), integrity check included.
    pub fn read(db: &Path) -> Snapshot {
        Self::read_with(db, true)
    }

    /// The same without the integrity check, for polling.
    pub fn peek(db: &Path) -> Snapshot {
        Self::read_with(db, false)
    }

    fn read_with(db: &Path, integrity: bool) -> Snapshot {
        let c = Connection::open_with_flags(
            db,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .unwrap_or_else(|e| panic!("open {} read-only: {e}", db.display()));
        c.busy_timeout(std::time::Duration::from_secs(10))
            .expect("busy timeout");
        c.execute_batch("BEGIN").expect("read transaction");
        let mut snapshot = Snapshot {
            integrity: integrity.then(|| {
                c.query_row("PRAGMA integrity_check", [], |r| r.get(0))
                    .expect("integrity_check")
            }),
            ..Snapshot::default()
        };
        let rows = |sql: &str, f: &mut dyn FnMut(&rusqlite::Row<'_>)| {
            let mut select = c.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
            let mut all = select.query([]).expect("query");
            while let Some(row) = all.next().expect("row") {
                f(row);
            }
        };
        rows("SELECT id, next_seq FROM threads", &mut |r| {
            snapshot
                .threads
                .insert(r.get(0).expect("id"), r.get(1).expect("next_seq"));
        });
        rows(
            "SELECT thread_id, seq, turn_id, kind, ts, payload FROM events",
            &mut |r| {
                let payload: String = r.get(5).expect("payload");
                snapshot.events.insert(
                    (r.get(0).expect("thread"), r.get(1).expect("seq")),
                    StoredEvent {
                        turn_id: r.get(2).expect("turn"),
                        kind: r.get(3).expect("kind"),
                        ts: r.get(4).expect("ts"),
                        payload: serde_json::from_str(&payload).expect("payload is JSON"),
                    },
                );
            },
        );
        rows("SELECT id, thread_id, status FROM turns", &mut |r| {
            snapshot.turns.insert(
                r.get(0).expect("id"),
                TurnRow {
                    thread_id: r.get(1).expect("thread"),
                    status: r.get(2).expect("status"),
                },
            );
        });
        rows(
            "SELECT id, turn_id, status, resumed_at IS NOT NULL FROM approvals",
            &mut |r| {
                snapshot.approvals.insert(
                    r.get(0).expect("id"),
                    ApprovalRow {
                        turn_id: r.get(1).expect("turn"),
                        status: r.get(2).expect("status"),
                        resumed: r.get(3).expect("resumed"),
                    },
                );
            },
        );
        rows(
            "SELECT id, turn_id, status, reason FROM permissions",
            &mut |r| {
                snapshot.permissions.insert(
                    r.get(0).expect("id"),
                    PermissionRow {
                        turn_id: r.get(1).expect("turn"),
                        status: r.get(2).expect("status"),
                        reason: r.get(3).expect("reason"),
                    },
                );
            },
        );
        rows(
            "SELECT id, status, attempts, turn_id FROM executions",
            &mut |r| {
                snapshot.executions.insert(
                    r.get(0).expect("id"),
                    ExecutionRow {
                        status: r.get(1).expect("status"),
                        attempts: r.get(2).expect("attempts"),
                        turn_id: r.get(3).expect("turn"),
                    },
                );
            },
        );
        c.execute_batch("COMMIT").expect("end read");
        snapshot
    }

    /// The approvals a person may still decide.
    pub fn pending_approvals(&self) -> Vec<String> {
        self.approvals
            .iter()
            .filter(|(_, a)| a.status == "pending")
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Decided approvals whose turn has not taken the decision yet: the next start
    /// resumes them (one model call each).
    pub fn awaiting_resume(&self) -> usize {
        self.approvals
            .values()
            .filter(|a| a.status != "pending" && !a.resumed)
            .count()
    }

    /// Whether the turn waits on an approval that nobody decided yet.
    pub fn suspended(&self, turn: &str) -> bool {
        self.approvals
            .values()
            .any(|a| a.turn_id == turn && a.status == "pending")
    }

    /// Whether a decided approval of the turn waits for the turn to take it.
    pub fn awaiting_resume_of(&self, turn: &str) -> bool {
        self.approvals
            .values()
            .any(|a| a.turn_id == turn && a.status != "pending" && !a.resumed)
    }

    fn events_of_turn(&self, turn: &str) -> Vec<&StoredEvent> {
        self.events.values().filter(|e| e.turn_id == turn).collect()
    }

    /// Whether recovery work is still going on: executions not finished, decided
    /// approvals not taken, turns running that no approval suspends.
    pub fn unsettled(&self) -> Vec<String> {
        let mut busy = Vec::new();
        for (id, e) in &self.executions {
            if e.status == "queued" || e.status == "running" {
                busy.push(format!("execution {id} {}", e.status));
            }
        }
        for (id, a) in &self.approvals {
            if a.status != "pending" && !a.resumed {
                busy.push(format!("approval {id} decided, not resumed"));
            }
        }
        for (id, t) in &self.turns {
            if t.status == "running" && !self.suspended(id) {
                busy.push(format!("turn {id} running"));
            }
        }
        busy
    }
}

/// What must hold of any store at any moment after a restart, whatever happened before:
/// the file is intact, each thread's seqs are 1..n with `next_seq` = n + 1, and each
/// turn has one `turn_started` and, once ended, exactly one `turn_completed` carrying
/// the turn's stop reason (and none while it runs).
pub fn check_log(s: &Snapshot) -> Vec<String> {
    let mut failures = Vec::new();
    if let Some(integrity) = s.integrity.as_ref().filter(|i| *i != "ok") {
        failures.push(format!("integrity_check: {integrity}"));
    }
    for (thread, next_seq) in &s.threads {
        let seqs: Vec<i64> = s
            .events
            .range((thread.clone(), i64::MIN)..=(thread.clone(), i64::MAX))
            .map(|((_, seq), _)| *seq)
            .collect();
        let expected: Vec<i64> = (1..*next_seq).collect();
        if seqs != expected {
            failures.push(format!(
                "thread {thread}: seqs are not 1..{next_seq} without gap: {seqs:?}"
            ));
        }
    }
    for (turn, row) in &s.turns {
        let events = s.events_of_turn(turn);
        let started = events.iter().filter(|e| e.kind == "turn_started").count();
        // The turn's row and its `turn_started` are one write (`EventStore::start_turn`):
        // no kill leaves a turn without it.
        if started == 1 && events[0].kind != "turn_started" {
            failures.push(format!("turn {turn}: turn_started is not its first event"));
        } else if started != 1 {
            failures.push(format!("turn {turn}: {started} turn_started events"));
        }
        let completed: Vec<_> = events
            .iter()
            .filter(|e| e.kind == "turn_completed")
            .collect();
        if row.status == "running" {
            if !completed.is_empty() {
                failures.push(format!("turn {turn} runs but has a turn_completed"));
            }
        } else if completed.len() != 1 {
            failures.push(format!(
                "turn {turn} ended {} with {} turn_completed events",
                row.status,
                completed.len()
            ));
        } else if completed[0].payload["stop_reason"] != row.status.as_str() {
            failures.push(format!(
                "turn {turn} ended {} but its turn_completed says {}",
                row.status, completed[0].payload["stop_reason"]
            ));
        }
        if !s.threads.contains_key(&row.thread_id) {
            failures.push(format!("turn {turn} of a missing thread"));
        }
    }
    failures
}

/// What must hold between the store as the kill left it (`before`) and as the restart
/// recovered it (`after`), read before any new work: nothing stored was lost or
/// changed, every turn that ran was ended `interrupted` (except those an approval
/// suspends, which still wait, and those whose decided approval the start resumes),
/// every permission pending at the kill was declined with the restart's reason, and
/// every pending approval is still pending.
pub fn check_recovery(before: &Snapshot, after: &Snapshot) -> Vec<String> {
    let mut failures = Vec::new();
    for (key, event) in &before.events {
        match after.events.get(key) {
            None => failures.push(format!("event {key:?} ({}) lost", event.kind)),
            Some(kept) if kept != event => {
                failures.push(format!("event {key:?} changed: {event:?} → {kept:?}"))
            }
            Some(_) => {}
        }
    }
    for (thread, next_seq) in &before.threads {
        match after.threads.get(thread) {
            Some(after_next) if after_next >= next_seq => {}
            other => failures.push(format!(
                "thread {thread}: next_seq went from {next_seq} to {other:?}"
            )),
        }
    }
    for (turn, row) in &before.turns {
        let Some(now) = after.turns.get(turn) else {
            failures.push(format!("turn {turn} lost"));
            continue;
        };
        if row.status != "running" {
            if now.status != row.status {
                failures.push(format!(
                    "ended turn {turn} changed from {} to {}",
                    row.status, now.status
                ));
            }
        } else if before.suspended(turn) {
            if now.status != "running" || !after.suspended(turn) {
                failures.push(format!(
                    "turn {turn} waited on an approval but is now {}",
                    now.status
                ));
            }
        } else if !before.awaiting_resume_of(turn) && now.status != "interrupted" {
            failures.push(format!(
                "turn {turn} ran at the kill but is {} after the restart",
                now.status
            ));
        }
    }
    for (id, approval) in &before.approvals {
        if approval.status == "pending"
            && after.approvals.get(id).map(|a| a.status.as_str()) != Some("pending")
        {
            failures.push(format!(
                "approval {id} was pending but is {:?}",
                after.approvals.get(id)
            ));
        }
    }
    for (id, permission) in &before.permissions {
        let now = after.permissions.get(id);
        if permission.status == "pending" {
            let declined = now.is_some_and(|p| {
                p.status == "declined" && p.reason.as_deref() == Some(STOPPED_WHILE_PENDING)
            });
            if !declined {
                failures.push(format!(
                    "permission {id} pending at the kill is {now:?} after the restart"
                ));
            }
            let resolved = after.events.values().any(|e| {
                e.kind == "permission_resolved"
                    && e.payload["permission_id"] == id.as_str()
                    && e.payload["decision"] == "declined"
            });
            if !resolved {
                failures.push(format!("permission {id}: no permission_resolved event"));
            }
        } else if now != Some(permission) {
            failures.push(format!("resolved permission {id} changed: {now:?}"));
        }
    }
    for (id, permission) in &after.permissions {
        if permission.status == "pending" {
            failures.push(format!("permission {id} pending right after a restart"));
        }
    }
    failures
}

/// How the executions running at the kill must end once the restart's recovery and
/// the queue are done: with `retry`, run again to success; with `interrupt`,
/// `interrupted` (or `succeeded` when their turn had already ended well before the
/// kill). Everything else, queued ones included, succeeds.
pub fn check_executions(before: &Snapshot, settled: &Snapshot, mode: OnRestart) -> Vec<String> {
    let mut failures = Vec::new();
    for (id, row) in &before.executions {
        let Some(now) = settled.executions.get(id) else {
            failures.push(format!("execution {id} lost"));
            continue;
        };
        let ended_well = row
            .turn_id
            .as_ref()
            .and_then(|t| before.turns.get(t))
            .is_some_and(|t| t.status == "text_answer" || t.status == "finished");
        let expected = match (row.status.as_str(), mode) {
            ("running", OnRestart::Interrupt) if !ended_well => "interrupted",
            ("succeeded" | "interrupted" | "failed" | "cancelled", _) => row.status.as_str(),
            _ => "succeeded",
        };
        if now.status != expected {
            failures.push(format!(
                "execution {id} was {} at the kill ({mode:?}), is {} (expected {expected})",
                row.status, now.status
            ));
        }
        if row.status == "running" && ended_well && now.attempts != row.attempts {
            failures.push(format!(
                "execution {id}: its turn had ended at the kill, yet it ran again \
                 ({} → {} attempts)",
                row.attempts, now.attempts
            ));
        }
    }
    failures
}
