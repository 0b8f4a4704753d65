//! What the chains vouch for, compared with what the tables say: the half of `audit
//! verify` that comes after every link holds. A hash chain proves its records were not
//! changed; the rows a decision or a bill rests on (a thread's owner, a turn's input, an
//! approval's decider, a key's roles) live in tables beside it, so each is checked
//! against the chained record it must agree with:
//!
//! - threads and keys against the ledger's replay (`agentplane_core::audit::ledger`):
//!   a row the ledger never recorded was inserted by hand, a recorded one that is gone
//!   was deleted outright, a column that differs was edited;
//! - the genesis against the chains' own "before the chain" claims: a thread chained
//!   from a later seq, or an unchained gateway record, that the genesis did not count;
//! - a thread's turns and approvals against its events (`turn_started`,
//!   `turn_completed`, `approval_requested`, `approval_decided`), which the store writes
//!   in the transaction that writes the row.

use std::collections::{BTreeMap, BTreeSet};

use agentplane_core::EventPayload;
use agentplane_core::audit::ChainedEvent;
use agentplane_core::audit::ledger::LedgerState;

use crate::ports::{AuditedApproval, AuditedKey, AuditedThread, AuditedTurn};

/// A row that disagrees with the chained record it must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// What disagrees: `thread thr_…`, `turn turn_…`, `approval apr_…`, `key key_…`,
    /// `ledger`, or a record chain's name.
    pub subject: String,
    /// What it should agree with: `ledger record 7`, `event 4`, `the genesis`.
    pub against: String,
    pub message: String,
}

fn mismatch(subject: String, against: String, message: String) -> Mismatch {
    Mismatch {
        subject,
        against,
        message,
    }
}

/// Compares one field; `what` names it in the message.
fn field(
    out: &mut Vec<Mismatch>,
    (subject, against): (&str, &str),
    what: &str,
    stored: Option<&str>,
    recorded: Option<&str>,
) {
    if stored != recorded {
        let show = |v: Option<&str>| v.map_or_else(|| "none".to_owned(), |v| format!("{v:?}"));
        out.push(mismatch(
            subject.to_owned(),
            against.to_owned(),
            format!(
                "its {what} is {} but {against} says {}",
                show(stored),
                show(recorded)
            ),
        ));
    }
}

/// The threads' rows against the ledger and its genesis. `whole`: every thread of the
/// store was read, so a ledger thread with no row was deleted outright.
pub fn check_threads(
    ledger: &LedgerState,
    threads: &[AuditedThread],
    whole: bool,
) -> Vec<Mismatch> {
    let mut out = Vec::new();
    for thread in threads {
        let id = thread.id.as_str();
        let subject = format!("thread {id}");
        let before = ledger.genesis.threads_chained_since.get(id).copied();
        if thread.chained_since > 1 && before != Some(thread.chained_since) {
            out.push(mismatch(
                subject.clone(),
                "the genesis (ledger record 1)".into(),
                format!(
                    "it claims its events before seq {} predate the chain, which the genesis \
                     {}",
                    thread.chained_since,
                    before.map_or_else(
                        || "does not say of it".to_owned(),
                        |seq| format!("puts at seq {seq}")
                    )
                ),
            ));
        }
        let Some(recorded) = ledger.threads.get(id) else {
            out.push(mismatch(
                subject,
                "the ledger".into(),
                "no ledger record created it: it was inserted outside agentplane".into(),
            ));
            continue;
        };
        let against = format!("ledger record {}", recorded.pos);
        let at = (subject.as_str(), against.as_str());
        let created = &recorded.created;
        field(
            &mut out,
            at,
            "owner (client_id)",
            Some(&thread.client_id),
            Some(&created.client_id),
        );
        field(
            &mut out,
            at,
            "agent",
            Some(&thread.agent),
            Some(&created.agent),
        );
        field(
            &mut out,
            at,
            "workspace (cwd)",
            Some(&thread.cwd),
            Some(&created.cwd),
        );
        field(
            &mut out,
            at,
            "created_at",
            Some(&thread.created_at),
            Some(&created.created_at),
        );
        field(
            &mut out,
            at,
            "deletion (deleted_at)",
            thread.deleted_at.as_deref(),
            recorded.deleted_at.as_deref(),
        );
    }
    if whole {
        let stored: BTreeSet<&str> = threads.iter().map(|t| t.id.as_str()).collect();
        for (id, recorded) in &ledger.threads {
            if !stored.contains(id.as_str()) {
                out.push(mismatch(
                    format!("thread {id}"),
                    format!("ledger record {}", recorded.pos),
                    "the ledger records it but the store no longer has it: it was deleted \
                     outright, with its history"
                        .into(),
                ));
            }
        }
    }
    out
}

/// The API keys' rows against the ledger.
pub fn check_keys(ledger: &LedgerState, keys: &[AuditedKey]) -> Vec<Mismatch> {
    let mut out = Vec::new();
    for key in keys {
        let subject = format!("key {}", key.id);
        let Some(recorded) = ledger.keys.get(&key.id) else {
            out.push(mismatch(
                subject,
                "the ledger".into(),
                "no ledger record created it: it was inserted outside agentplane".into(),
            ));
            continue;
        };
        let against = format!("ledger record {}", recorded.pos);
        let at = (subject.as_str(), against.as_str());
        let created = &recorded.created;
        field(
            &mut out,
            at,
            "client_id",
            Some(&key.client_id),
            Some(&created.client_id),
        );
        field(
            &mut out,
            at,
            "roles",
            Some(&key.roles),
            Some(&created.roles),
        );
        field(
            &mut out,
            at,
            "digest",
            Some(&key.digest),
            Some(&created.digest),
        );
        field(
            &mut out,
            at,
            "created_at",
            Some(&key.created_at),
            Some(&created.created_at),
        );
        field(
            &mut out,
            at,
            "expiry (expires_at)",
            key.expires_at.as_deref(),
            created.expires_at.as_deref(),
        );
        field(
            &mut out,
            at,
            "revocation (revoked_at)",
            key.revoked_at.as_deref(),
            recorded.revoked_at.as_deref(),
        );
    }
    let stored: BTreeSet<&str> = keys.iter().map(|k| k.id.as_str()).collect();
    for (id, recorded) in &ledger.keys {
        if !stored.contains(id.as_str()) {
            out.push(mismatch(
                format!("key {id}"),
                format!("ledger record {}", recorded.pos),
                "the ledger records it but the store no longer has it".into(),
            ));
        }
    }
    out
}

/// What a thread's events say of its turns and approvals, gathered while its chain is
/// walked (only the four kinds are parsed).
#[derive(Debug, Default)]
pub struct EventFacts {
    /// Each decision's policy set: (seq, ts, the set's hash).
    decided_under: Vec<(u64, String, String)>,
    started: BTreeMap<String, (u64, String)>,
    completed: BTreeMap<String, (u64, String, serde_json::Value)>,
    requested: BTreeMap<String, (u64, String, String)>,
    decided: BTreeMap<String, (u64, Decided)>,
}

#[derive(Debug)]
struct Decided {
    outcome: String,
    by: String,
    feedback: Option<String>,
    ts: String,
}

impl EventFacts {
    /// Notes `event` if it is one the rows must agree with.
    pub fn note(&mut self, event: &ChainedEvent) {
        if !matches!(
            event.kind.as_str(),
            "turn_started"
                | "turn_completed"
                | "approval_requested"
                | "approval_decided"
                | "policy_denied"
                | "policy_audited"
        ) {
            return;
        }
        // A payload that does not parse is left to the chain: its hash is what vouches.
        let Ok(payload) = serde_json::from_str::<EventPayload>(&event.payload) else {
            return;
        };
        let seq = event.seq;
        let turn = event.turn_id.clone();
        let policy_set = match &payload {
            EventPayload::ApprovalRequested { explanation, .. }
            | EventPayload::PolicyDenied { explanation, .. } => {
                explanation.as_ref().map(|e| e.policy_set.clone())
            }
            EventPayload::PolicyAudited { policy_set, .. } => Some(policy_set.clone()),
            _ => None,
        };
        if let Some(set) = policy_set {
            self.decided_under.push((seq, event.ts.clone(), set));
        }
        match payload {
            EventPayload::TurnStarted { input, .. } => {
                self.started.entry(turn).or_insert((seq, input));
            }
            EventPayload::TurnCompleted {
                stop_reason,
                result,
            } => {
                let status = stop_reason.as_str().to_owned();
                self.completed.insert(turn, (seq, status, result));
            }
            EventPayload::ApprovalRequested {
                approval_id,
                tool,
                policy,
                ..
            } => {
                self.requested.insert(approval_id, (seq, tool, policy));
            }
            EventPayload::ApprovalDecided {
                approval_id,
                outcome,
                by,
                feedback,
                ..
            } => {
                let outcome = outcome.as_str().to_owned();
                let decided = Decided {
                    outcome,
                    by,
                    feedback,
                    ts: event.ts.clone(),
                };
                self.decided.insert(approval_id, (seq, decided));
            }
            _ => {}
        }
    }

    /// Each decision's policy set against the sets the ledger recorded as loaded
    /// (decisions from before the ledger began are not checked).
    pub fn check_policy_sets(&self, thread: &str, ledger: &LedgerState) -> Vec<Mismatch> {
        self.decided_under
            .iter()
            .filter(|(_, ts, set)| {
                ts.as_str() >= ledger.since.as_str() && !ledger.policy_sets.contains_key(set)
            })
            .map(|(seq, _, set)| {
                mismatch(
                    format!("thread {thread}"),
                    "the ledger".into(),
                    format!(
                        "event {seq} was decided under policy set {set}, which the ledger \
                         never recorded as loaded"
                    ),
                )
            })
            .collect()
    }

    /// The turns' rows against their `turn_started` and `turn_completed` events.
    /// `pre_chain`: the thread has events from before the chain (the genesis says so),
    /// whose turns may predate `turn_started` too; those turns are not vouched for.
    pub fn check_turns(&self, turns: &[AuditedTurn], pre_chain: bool) -> Vec<Mismatch> {
        let mut out = Vec::new();
        for turn in turns {
            let subject = format!("turn {}", turn.id);
            let Some((seq, input)) = self.started.get(&turn.id) else {
                if pre_chain {
                    continue;
                }
                out.push(mismatch(
                    subject,
                    "its thread's events".into(),
                    "no turn_started event begins it: it was inserted outside agentplane".into(),
                ));
                continue;
            };
            let against = format!("event {seq} (turn_started)");
            field(
                &mut out,
                (&subject, &against),
                "input",
                Some(&turn.input),
                Some(input),
            );
            match (self.completed.get(&turn.id), turn.status.as_str()) {
                (None, "running") => {}
                (None, status) => out.push(mismatch(
                    subject,
                    "its thread's events".into(),
                    format!("it is {status:?} but no turn_completed event ends it"),
                )),
                (Some((seq, status, result)), stored) => {
                    let against = format!("event {seq} (turn_completed)");
                    let at = (subject.as_str(), against.as_str());
                    field(&mut out, at, "status", Some(stored), Some(status));
                    let stored_result = turn
                        .result
                        .as_deref()
                        .map(|text| serde_json::from_str(text).unwrap_or(serde_json::Value::Null));
                    if stored_result.as_ref() != Some(result) {
                        out.push(mismatch(
                            subject.clone(),
                            against.clone(),
                            format!(
                                "its result {} is not the {result} that {against} records",
                                turn.result.as_deref().unwrap_or("none")
                            ),
                        ));
                    }
                }
            }
        }
        out
    }

    /// The approvals' rows against their `approval_requested` and `approval_decided`
    /// events.
    pub fn check_approvals(&self, approvals: &[AuditedApproval], pre_chain: bool) -> Vec<Mismatch> {
        let mut out = Vec::new();
        for approval in approvals {
            let subject = format!("approval {}", approval.id);
            let Some((seq, tool, policy)) = self.requested.get(&approval.id) else {
                if pre_chain {
                    continue;
                }
                out.push(mismatch(
                    subject,
                    "its thread's events".into(),
                    "no approval_requested event asked for it: it was inserted outside \
                     agentplane"
                        .into(),
                ));
                continue;
            };
            let against = format!("event {seq} (approval_requested)");
            let at = (subject.as_str(), against.as_str());
            field(&mut out, at, "tool", Some(&approval.tool), Some(tool));
            field(&mut out, at, "policy", Some(&approval.policy), Some(policy));
            match (self.decided.get(&approval.id), approval.status.as_str()) {
                (None, "pending") => {}
                (None, status) => out.push(mismatch(
                    subject,
                    "its thread's events".into(),
                    format!("it is {status:?} but no approval_decided event decided it"),
                )),
                (Some((seq, decided)), stored) => {
                    let against = format!("event {seq} (approval_decided)");
                    let at = (subject.as_str(), against.as_str());
                    field(
                        &mut out,
                        at,
                        "decision",
                        Some(stored),
                        Some(&decided.outcome),
                    );
                    field(
                        &mut out,
                        at,
                        "decider (decided_by)",
                        approval.decided_by.as_deref(),
                        Some(&decided.by),
                    );
                    field(
                        &mut out,
                        at,
                        "feedback",
                        approval.feedback.as_deref(),
                        decided.feedback.as_deref(),
                    );
                    field(
                        &mut out,
                        at,
                        "decided_at",
                        approval.decided_at.as_deref(),
                        Some(&decided.ts),
                    );
                }
            }
        }
        out
    }
}
