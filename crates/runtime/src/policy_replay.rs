//! Policy replay: the decisions recorded in the event log, made again by a candidate
//! policy set, and the ones that would change. `agentplane policy replay DIR` prints
//! the report; the walk, the classification and the comparison live here.
//!
//! What is a recorded decision, and what it was:
//! - a tool call (`tool_call_planned`) that reached the policy gate: denied when a
//!   `policy_denied` of type `tool_access` or `time_window` names its `call_id`, sent
//!   to a person when an `approval_requested` does (the first of them decides: an
//!   approval denied again at resume was an approval), allowed otherwise. Calls the
//!   gate never saw (`finish_task`, unknown tools, arguments that are not JSON or do
//!   not fit the schema) are not decisions and are left out;
//! - a turn's admission: denied when the event after its `turn_started` is a
//!   `policy_denied` without a call (type `tool_access` or `time_window`), admitted
//!   otherwise. Internal turns (compactions) are never admitted and are left out.
//!
//! What cannot be replayed is counted, never guessed: a call whose arguments were kept
//! only as a hash (`retention.tool_args = "hash"`: `arguments` is `null`); a refusal by
//! a `rate_limit`, `budget` or `data_scope` policy, which depends on counters and
//! grants at that moment; a refusal by a `content` policy, whose findings are redacted
//! out of the log before it is written.
//!
//! Each decision is made again with the facts the engine used: the agent, the thread's
//! client, the agent's tags from the configuration (events do not carry them), the
//! recorded version (tool calls only: admission is asked without one, as the hub does),
//! the recorded arguments, and the event's time as the instant. The caller's roles are
//! not recorded, so a `context: roles` condition sees none. The workspace is not
//! given: `path_under` compares paths as written, since the files of then are gone.
//! No SQL here: the log is read through the store port.

use std::collections::{BTreeMap, HashMap};

use agentplane_core::policy::{PolicySet, RequestContext, Timestamp};
use agentplane_core::{Event, EventPayload, FINISH_TASK, ThreadId, ToolErrorKind, TurnId};
use agentplane_engine::governance::explain::{Explained, explain};
use agentplane_engine::ports::{EventStore, StoreError, ThreadRecord, TurnRecord};
use serde::Serialize;

use crate::agents::catalogue;
use crate::config::Config;
use crate::replicas::open_for_reports;

/// Which part of the log to replay.
#[derive(Debug, Clone, Default)]
pub struct ReplayFilter {
    /// Only turns begun at or after this instant.
    pub since: Option<Timestamp>,
    /// Only this agent's threads.
    pub agent: Option<String>,
    /// Only this client's threads.
    pub client: Option<String>,
}

/// A decision as the policy gate makes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Allow,
    Deny,
    Approval,
}

impl Verdict {
    /// The name `explain` and the events use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
            Self::Approval => "approval",
        }
    }

    fn parse(decision: &str) -> Self {
        match decision {
            "deny" => Self::Deny,
            "approval" => Self::Approval,
            _ => Self::Allow,
        }
    }
}

/// What a changed decision was about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Subject {
    /// One tool call.
    Call { call_id: String, tool: String },
    /// A turn's admission.
    Admission,
}

/// One decision the candidate set makes differently.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    pub thread: ThreadId,
    pub turn: TurnId,
    pub agent: String,
    pub client: String,
    #[serde(flatten)]
    pub subject: Subject,
    /// When it was decided (the event's time).
    pub at: String,
    pub was: Verdict,
    pub now: Verdict,
    /// The candidate set's decision, explained.
    pub explanation: Explained,
}

/// The counts of a replay.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Decisions made again: `changed + unchanged`.
    pub replayed: u64,
    pub changed: u64,
    /// Per change, `was->now` (`allow->deny`), only those that happened.
    pub transitions: BTreeMap<String, u64>,
    pub unchanged: u64,
    /// `hash_only + stateful + content`.
    pub not_replayable: u64,
    /// Calls whose arguments were recorded only as a hash.
    pub hash_only: u64,
    /// Refusals by rate limits, budgets and data scopes.
    pub stateful: u64,
    /// Refusals by content policies.
    pub content: u64,
}

/// What a replay found: the changed decisions in log order, and the counts.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayReport {
    /// The candidate set's version.
    pub policy_set: String,
    pub changes: Vec<Change>,
    pub totals: Totals,
}

/// How a recorded decision can be replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Recorded {
    Decided(Verdict),
    HashOnly,
    Stateful,
    Content,
}

impl Recorded {
    /// A refusal recorded as a `policy_denied` of this type.
    fn refused_by(policy_type: &str) -> Self {
        match policy_type {
            "rate_limit" | "budget" | "data_scope" => Self::Stateful,
            "content" => Self::Content,
            _ => Self::Decided(Verdict::Deny),
        }
    }
}

/// One tool call as the log has it.
struct RecordedCall {
    call_id: String,
    tool: String,
    arguments: serde_json::Value,
    ts: String,
    /// The first decision event naming it.
    decided: Option<Recorded>,
    /// It ended before the policies saw it.
    ungated: bool,
}

/// One turn as the log has it.
struct RecordedTurn {
    agent: String,
    version: Option<String>,
    ts: String,
    admission: Recorded,
    calls: Vec<RecordedCall>,
}

/// Replays the log of the configured store (SQLite or PostgreSQL, opened for reading
/// beside a running server, as `costs` does), each agent with its configured tags.
pub async fn replay_log(
    config: &Config,
    set: &PolicySet,
    filter: &ReplayFilter,
) -> Result<ReplayReport, StoreError> {
    let store = open_for_reports(&config.store).await?;
    let tags = catalogue(config)
        .into_iter()
        .map(|(name, agent)| (name, agent.tags))
        .collect();
    replay(store.as_ref(), set, &tags, filter).await
}

/// Replays the log of `store` selected by `filter` against `set`. `tags`: each
/// configured agent's tags.
pub async fn replay(
    store: &dyn EventStore,
    set: &PolicySet,
    tags: &BTreeMap<String, Vec<String>>,
    filter: &ReplayFilter,
) -> Result<ReplayReport, StoreError> {
    let mut report = ReplayReport {
        policy_set: set.hash().to_owned(),
        changes: Vec::new(),
        totals: Totals::default(),
    };
    let threads = store.threads_active_since(filter.since).await?;
    for thread in threads.iter().filter(|t| selected(t, filter)) {
        for turn in store.list_turns(&thread.id).await? {
            if turn.internal || !begun_since(&turn, filter.since)? {
                continue;
            }
            let events = store.turn_events(&turn.id).await?;
            let Some(recorded) = read_turn(&turn, &events) else {
                continue;
            };
            replay_turn(set, tags, thread, &turn, &recorded, &mut report)?;
        }
    }
    Ok(report)
}

fn selected(thread: &ThreadRecord, filter: &ReplayFilter) -> bool {
    filter.agent.as_ref().is_none_or(|a| *a == thread.agent)
        && filter
            .client
            .as_ref()
            .is_none_or(|c| *c == thread.client_id)
}

fn begun_since(turn: &TurnRecord, since: Option<Timestamp>) -> Result<bool, StoreError> {
    match since {
        None => Ok(true),
        Some(since) => Ok(instant(&turn.created_at)? >= since),
    }
}

fn instant(ts: &str) -> Result<Timestamp, StoreError> {
    ts.parse()
        .map_err(|_| StoreError::Backend(format!("a stored time is not RFC 3339: {ts:?}")))
}

/// The decisions of one turn's events; `None` for a turn without `turn_started`.
fn read_turn(turn: &TurnRecord, events: &[Event]) -> Option<RecordedTurn> {
    let (start, first) = events
        .iter()
        .enumerate()
        .find_map(|(i, e)| match &e.payload {
            EventPayload::TurnStarted {
                agent,
                agent_version,
                ..
            } => Some((i, (agent, agent_version, &e.ts))),
            _ => None,
        })?;
    let (agent, version, ts) = first;
    let admission = match events.get(start + 1).map(|e| &e.payload) {
        Some(EventPayload::PolicyDenied {
            call_id: None,
            policy_type,
            ..
        }) => Recorded::refused_by(policy_type),
        _ => Recorded::Decided(Verdict::Allow),
    };
    let mut calls: Vec<RecordedCall> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for event in events {
        match &event.payload {
            EventPayload::ToolCallPlanned {
                call_id,
                tool,
                arguments,
                ..
            } if tool != FINISH_TASK => {
                index.insert(call_id.clone(), calls.len());
                calls.push(RecordedCall {
                    call_id: call_id.clone(),
                    tool: tool.clone(),
                    arguments: arguments.clone(),
                    ts: event.ts.clone(),
                    decided: None,
                    ungated: false,
                });
            }
            EventPayload::ToolCallArguments {
                call_id, arguments, ..
            } => {
                if let Some(call) = index.get(call_id).map(|&i| &mut calls[i]) {
                    call.arguments = arguments.clone();
                }
            }
            EventPayload::PolicyDenied {
                call_id: Some(call_id),
                policy_type,
                ..
            } => {
                if let Some(call) = index.get(call_id).map(|&i| &mut calls[i]) {
                    call.decided
                        .get_or_insert(Recorded::refused_by(policy_type));
                }
            }
            EventPayload::ApprovalRequested { call_id, .. } => {
                if let Some(call) = index.get(call_id).map(|&i| &mut calls[i]) {
                    call.decided
                        .get_or_insert(Recorded::Decided(Verdict::Approval));
                }
            }
            EventPayload::ToolCallResult {
                call_id,
                error_type: Some(kind),
                ..
            } if never_gated(*kind) => {
                if let Some(call) = index.get(call_id).map(|&i| &mut calls[i]) {
                    call.ungated = call.decided.is_none();
                }
            }
            _ => {}
        }
    }
    Some(RecordedTurn {
        agent: agent.clone(),
        version: version.clone().or_else(|| turn.agent_version.clone()),
        ts: ts.clone(),
        admission,
        calls,
    })
}

/// Errors a call ends with before the policy gate is asked.
fn never_gated(kind: ToolErrorKind) -> bool {
    matches!(
        kind,
        ToolErrorKind::UnknownTool
            | ToolErrorKind::InvalidArguments
            | ToolErrorKind::ToolPayloadTooLarge
            | ToolErrorKind::ToolPayloadParseError
    )
}

fn replay_turn(
    set: &PolicySet,
    tags: &BTreeMap<String, Vec<String>>,
    thread: &ThreadRecord,
    turn: &TurnRecord,
    recorded: &RecordedTurn,
    report: &mut ReplayReport,
) -> Result<(), StoreError> {
    let agent_tags = tags.get(&recorded.agent).map_or(&[][..], Vec::as_slice);
    let base = RequestContext::new(&recorded.agent, agent_tags, &thread.client_id);
    let change = |subject: Subject, at: &str, was: Verdict, explanation: Explained| Change {
        thread: thread.id.clone(),
        turn: turn.id.clone(),
        agent: recorded.agent.clone(),
        client: thread.client_id.clone(),
        subject,
        at: at.to_owned(),
        was,
        now: Verdict::parse(&explanation.decision),
        explanation,
    };
    if let Some(was) = report.totals.count(recorded.admission) {
        // Admission is asked without the version, as the hub asks it.
        let explained = explain(set, &base.at(instant(&recorded.ts)?));
        report.compare(change(Subject::Admission, &recorded.ts, was, explained));
    }
    for call in recorded.calls.iter().filter(|c| !c.ungated) {
        let mut decided = call.decided.unwrap_or(Recorded::Decided(Verdict::Allow));
        if matches!(decided, Recorded::Decided(_)) && call.arguments.is_null() {
            decided = Recorded::HashOnly;
        }
        let Some(was) = report.totals.count(decided) else {
            continue;
        };
        let ctx = base
            .tool(call.tool.as_str())
            .version(recorded.version.as_deref())
            .arguments(&call.arguments)
            .at(instant(&call.ts)?);
        let subject = Subject::Call {
            call_id: call.call_id.clone(),
            tool: call.tool.clone(),
        };
        report.compare(change(subject, &call.ts, was, explain(set, &ctx)));
    }
    Ok(())
}

impl Totals {
    /// Counts a recorded decision that cannot be replayed; the verdict of one that can.
    fn count(&mut self, recorded: Recorded) -> Option<Verdict> {
        let counter = match recorded {
            Recorded::Decided(verdict) => return Some(verdict),
            Recorded::HashOnly => &mut self.hash_only,
            Recorded::Stateful => &mut self.stateful,
            Recorded::Content => &mut self.content,
        };
        *counter += 1;
        self.not_replayable += 1;
        None
    }
}

impl ReplayReport {
    /// Counts one replayed decision and keeps it if it changed.
    fn compare(&mut self, change: Change) {
        let totals = &mut self.totals;
        totals.replayed += 1;
        if change.was == change.now {
            totals.unchanged += 1;
            return;
        }
        totals.changed += 1;
        let key = format!("{}->{}", change.was.as_str(), change.now.as_str());
        *totals.transitions.entry(key).or_default() += 1;
        self.changes.push(change);
    }
}

#[cfg(test)]
mod tests {
    use agentplane_core::ToolStatus;
    use agentplane_core::policy::PolicySource;
    use serde_json::{Value, json};

    use super::*;

    fn planned(call_id: &str, tool: &str, arguments: Value) -> EventPayload {
        EventPayload::ToolCallPlanned {
            call_id: call_id.into(),
            tool: tool.into(),
            arguments,
            args_preview_hash: String::new(),
            title: None,
            recovered: false,
        }
    }

    fn denied(call_id: Option<&str>, policy_type: &str) -> EventPayload {
        EventPayload::PolicyDenied {
            policy: "p".into(),
            policy_type: policy_type.into(),
            tool: None,
            call_id: call_id.map(str::to_owned),
            detail: String::new(),
            explanation: None,
        }
    }

    fn failed(call_id: &str, kind: ToolErrorKind) -> EventPayload {
        EventPayload::ToolCallResult {
            call_id: call_id.into(),
            tool: "write_file".into(),
            status: ToolStatus::Error,
            latency_ms: 0,
            error_type: Some(kind),
            output: String::new(),
            truncated: false,
            args_preview_hash: String::new(),
        }
    }

    fn started() -> EventPayload {
        EventPayload::TurnStarted {
            agent: "coder".into(),
            input: "go".into(),
            model: "m".into(),
            workspace: "/w".into(),
            agent_version: Some("1.0.0".into()),
            shadow_of: None,
        }
    }

    fn approval(call_id: &str) -> EventPayload {
        EventPayload::ApprovalRequested {
            approval_id: "apr_1".into(),
            call_id: call_id.into(),
            tool: "write_file".into(),
            arguments: json!({}),
            args_preview_hash: String::new(),
            policy: "p".into(),
            approvers: Vec::new(),
            expires_at: "2026-01-01T00:00:00.000Z".into(),
            explanation: None,
        }
    }

    /// Replays `payloads` as one turn of client `alice` under `policies`.
    fn totals(policies: &str, payloads: Vec<EventPayload>) -> ReplayReport {
        let set = PolicySet::parse(&[PolicySource {
            name: "p.yaml",
            text: policies,
        }])
        .expect("valid");
        let thread = ThreadRecord {
            id: ThreadId::new(),
            client_id: "alice".into(),
            agent: "coder".into(),
            cwd: "/w".into(),
            title: None,
            created_at: "2026-01-01T00:00:00.000Z".into(),
            summary: None,
            agent_version: None,
            shadow_of: None,
        };
        let turn = TurnRecord {
            id: TurnId::new(),
            thread_id: thread.id.clone(),
            input: "go".into(),
            status: agentplane_engine::ports::TurnStatus::Running,
            created_at: "2026-01-01T00:00:00.000Z".into(),
            ended_at: None,
            internal: false,
            result: None,
            agent_version: None,
        };
        let events: Vec<Event> = payloads
            .into_iter()
            .enumerate()
            .map(|(i, payload)| Event {
                thread_id: thread.id.clone(),
                turn_id: turn.id.clone(),
                seq: i as u64 + 1,
                ts: "2026-01-01T00:00:00.000Z".into(),
                payload,
            })
            .collect();
        let recorded = read_turn(&turn, &events).expect("a turn");
        let mut report = ReplayReport {
            policy_set: set.hash().to_owned(),
            changes: Vec::new(),
            totals: Totals::default(),
        };
        let tags = BTreeMap::from([("coder".to_owned(), vec!["team-a".to_owned()])]);
        replay_turn(&set, &tags, &thread, &turn, &recorded, &mut report).expect("replayed");
        report
    }

    #[test]
    fn each_recorded_call_is_classified_once_and_the_ungated_left_out() {
        let report = totals(
            "[]",
            vec![
                started(),
                planned("allowed", "write_file", json!({"path": "a"})),
                planned("denied", "write_file", json!({"path": "b"})),
                denied(Some("denied"), "tool_access"),
                planned("held", "write_file", json!({"path": "c"})),
                approval("held"),
                // Denied again at resume: still an approval when planned.
                denied(Some("held"), "tool_access"),
                planned("counted", "write_file", json!({"path": "d"})),
                denied(Some("counted"), "rate_limit"),
                planned("scoped", "read_file", json!({"path": "/etc"})),
                denied(Some("scoped"), "data_scope"),
                planned("found", "write_file", json!({"path": "[redacted]"})),
                denied(Some("found"), "content"),
                planned("hashed", "write_file", Value::Null),
                planned("finish", FINISH_TASK, json!({})),
                planned("unknown", "rm_rf", json!({})),
                failed("unknown", ToolErrorKind::UnknownTool),
                planned("broken", "write_file", Value::Null),
                failed("broken", ToolErrorKind::InvalidArguments),
                // A content denial of model output is not the admission's.
                denied(None, "content"),
            ],
        );
        let t = &report.totals;
        // The admission and three calls, all allowed by an empty set.
        assert_eq!((t.replayed, t.changed, t.unchanged), (4, 2, 2), "{t:?}");
        assert_eq!(
            t.transitions,
            BTreeMap::from([
                ("deny->allow".to_owned(), 1),
                ("approval->allow".to_owned(), 1)
            ])
        );
        assert_eq!(
            (t.not_replayable, t.hash_only, t.stateful, t.content),
            (4, 1, 2, 1)
        );
        let ids: Vec<_> = report
            .changes
            .iter()
            .map(|c| match &c.subject {
                Subject::Call { call_id, .. } => call_id.as_str(),
                Subject::Admission => "admission",
            })
            .collect();
        assert_eq!(ids, ["denied", "held"]);
    }

    #[test]
    fn an_admission_is_what_follows_turn_started_and_tags_come_from_the_configuration() {
        let team_a_only = "- name: team-a-hours\n  type: time_window\n  targets: {tags: [team-a]}\n  \
                           rules: {timezone: UTC, days: [mon]}\n";
        // 2026-01-01 is a Thursday: outside the window, so the candidate denies.
        let report = totals(team_a_only, vec![started()]);
        assert_eq!(report.totals.transitions["allow->deny"], 1);
        assert_eq!(report.changes[0].subject, Subject::Admission);
        assert_eq!(
            report.changes[0].explanation.decided_by.as_deref(),
            Some("team-a-hours")
        );
        let report = totals(team_a_only, vec![started(), denied(None, "time_window")]);
        assert_eq!((report.totals.unchanged, report.totals.changed), (1, 0));
        let report = totals("[]", vec![started(), denied(None, "budget")]);
        assert_eq!((report.totals.replayed, report.totals.stateful), (0, 1));
    }

    #[test]
    fn arguments_sent_later_are_the_calls() {
        let no_secrets = "- name: no-secrets\n  type: tool_access\n  \
                          when: {arg: /path, glob: 'secret*'}\n  rules: {deny: [write_file]}\n";
        let report = totals(
            no_secrets,
            vec![
                started(),
                planned("late", "write_file", json!({})),
                EventPayload::ToolCallArguments {
                    call_id: "late".into(),
                    tool: "write_file".into(),
                    arguments: json!({"path": "secret.txt"}),
                    args_preview_hash: String::new(),
                },
            ],
        );
        assert_eq!(report.totals.transitions["allow->deny"], 1, "{report:?}");
    }
}
