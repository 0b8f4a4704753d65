//! Cost reports: what model calls cost, summed by agent, model, client, day, provider,
//! thread or turn, from the `cost` events in the store.
//!
//! The store sums per (agent, client, provider, model, day[, thread, turn]); the
//! requested grouping is folded here, with saturating sums. Tenancy: through the service a
//! client only ever sees its own costs (the client filter is forced, never taken from
//! the request), and a thread filter naming another client's thread is `NotFound`.
//! Costs of deleted threads still count in totals (the money was spent) but such a
//! thread cannot be named as a filter through the service. [`report_costs`] without a
//! client is the operator's view of every client, for callers that hold the store
//! itself (the CLI on the local database). Nothing here does I/O but the store port.

use std::collections::BTreeMap;

use agentplane_core::policy::Timestamp;
use agentplane_core::{ThreadId, usd_of_micros};

use crate::error::HubError;
use crate::ports::{CallStore, CostQuery, CostRow, ThreadStore};

/// How a cost report groups its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CostGroup {
    Agent,
    Model,
    Client,
    /// The UTC day of the call, `YYYY-MM-DD`.
    Day,
    Provider,
    Thread,
    /// Needs a thread filter: per-turn rows of every thread would be unbounded.
    Turn,
}

impl CostGroup {
    /// Every grouping, in the order the API documents them.
    pub const ALL: [CostGroup; 7] = [
        Self::Agent,
        Self::Model,
        Self::Client,
        Self::Day,
        Self::Provider,
        Self::Thread,
        Self::Turn,
    ];

    /// The wire name (`group_by=…`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::Model => "model",
            Self::Client => "client",
            Self::Day => "day",
            Self::Provider => "provider",
            Self::Thread => "thread",
            Self::Turn => "turn",
        }
    }

    /// A grouping by wire name; anything else is `InvalidArgument` listing the names.
    pub fn parse(name: &str) -> Result<Self, HubError> {
        Self::ALL
            .into_iter()
            .find(|g| g.as_str() == name)
            .ok_or_else(|| {
                HubError::InvalidArgument(format!(
                    "group_by must be one of {}",
                    Self::ALL.map(Self::as_str).join(", ")
                ))
            })
    }

    /// The key of a store row under this grouping.
    fn key(self, row: &CostRow) -> String {
        match self {
            Self::Agent => row.agent.clone(),
            Self::Model => row.model.clone(),
            Self::Client => row.client.clone(),
            Self::Day => row.day.clone(),
            Self::Provider => row.provider.clone(),
            Self::Thread => row
                .thread
                .as_ref()
                .map(|t| t.as_str().to_owned())
                .unwrap_or_default(),
            Self::Turn => row
                .turn
                .as_ref()
                .map(|t| t.as_str().to_owned())
                .unwrap_or_default(),
        }
    }
}

/// What to report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CostRequest {
    pub group_by: CostGroup,
    /// RFC 3339 with an offset, inclusive.
    pub since: Option<String>,
    /// RFC 3339 with an offset, exclusive.
    pub until: Option<String>,
    /// Only this agent's threads.
    pub agent: Option<String>,
    /// Only this thread (of the caller, through [`super::Reports`]).
    pub thread: Option<ThreadId>,
}

impl CostRequest {
    /// Everything, grouped so.
    pub fn grouped_by(group_by: CostGroup) -> Self {
        Self {
            group_by,
            since: None,
            until: None,
            agent: None,
            thread: None,
        }
    }
}

/// Model calls summed. Sums saturate at `u64::MAX` rather than wrap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CostSum {
    pub calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Exact: micro-dollars.
    pub usd_micros: u64,
}

impl CostSum {
    /// The amount in dollars, for people (the micro-dollars are the exact figure).
    pub fn usd(&self) -> f64 {
        usd_of_micros(self.usd_micros)
    }

    fn add(&mut self, row: &CostRow) {
        self.calls = self.calls.saturating_add(row.calls);
        self.input_tokens = self.input_tokens.saturating_add(row.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(row.output_tokens);
        self.usd_micros = self.usd_micros.saturating_add(row.usd_micros);
    }
}

/// One row of a report: the group's key (an agent name, a model, a day, an id…) and
/// its sums.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CostLine {
    pub key: String,
    pub sum: CostSum,
}

/// A cost report: rows ordered by key (days and ids sort by time), and the total of
/// every row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CostReport {
    pub group_by: CostGroup,
    pub rows: Vec<CostLine>,
    pub total: CostSum,
}

/// A cost report straight from a store: one client's costs, or with `client: None`
/// every client's (only for callers that own the store; [`super::Reports`] always
/// passes one).
pub async fn report_costs(
    (threads, calls): (&dyn ThreadStore, &dyn CallStore),
    client: Option<&str>,
    request: CostRequest,
) -> Result<CostReport, HubError> {
    let since = request
        .since
        .as_deref()
        .map(|s| bound("since", s))
        .transpose()?;
    let until = request
        .until
        .as_deref()
        .map(|s| bound("until", s))
        .transpose()?;
    if let (Some(since), Some(until)) = (since, until)
        && since > until
    {
        return Err(HubError::InvalidArgument(
            "since must not be later than until".into(),
        ));
    }
    if request.group_by == CostGroup::Turn && request.thread.is_none() {
        return Err(HubError::InvalidArgument(
            "group_by=turn needs a thread: per-turn costs are reported for one thread".into(),
        ));
    }
    if let (Some(client), Some(thread)) = (client, &request.thread) {
        match threads.thread(thread).await? {
            Some(record) if record.client_id == client => {}
            _ => return Err(HubError::NotFound(format!("thread {thread}"))),
        }
    }
    let rows = calls
        .costs(&CostQuery {
            client: client.map(str::to_owned),
            agent: request.agent,
            thread: request.thread,
            since: since.map(|t| t.to_string()),
            until: until.map(|t| t.to_string()),
            by_turn: matches!(request.group_by, CostGroup::Thread | CostGroup::Turn),
        })
        .await?;
    Ok(group(request.group_by, &rows))
}

/// Folds store rows into the report's groups.
fn group(group_by: CostGroup, rows: &[CostRow]) -> CostReport {
    let mut groups: BTreeMap<String, CostSum> = BTreeMap::new();
    let mut total = CostSum::default();
    for row in rows {
        groups.entry(group_by.key(row)).or_default().add(row);
        total.add(row);
    }
    CostReport {
        group_by,
        rows: groups
            .into_iter()
            .map(|(key, sum)| CostLine { key, sum })
            .collect(),
        total,
    }
}

/// The earliest instant a bound may name: the store keeps four-digit years.
const EARLIEST_SECOND: i64 = -62_167_219_200; // 0000-01-01T00:00:00Z

/// An RFC 3339 time with an offset (`2026-01-01T00:00:00Z`, `…+02:00`).
fn bound(name: &str, value: &str) -> Result<Timestamp, HubError> {
    let invalid = || {
        HubError::InvalidArgument(format!(
            "{name} must be an RFC 3339 time with an offset, such as 2026-01-01T00:00:00Z"
        ))
    };
    // RFC 3339 is short; anything long is not one (and is not worth parsing).
    if value.len() > 64 || !value.contains('T') {
        return Err(invalid());
    }
    let t: Timestamp = value.parse().map_err(|_| invalid())?;
    if t.as_second() < EARLIEST_SECOND {
        return Err(invalid());
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentplane_core::TurnId;

    fn row(agent: &str, model: &str, day: &str, usd_micros: u64) -> CostRow {
        CostRow {
            agent: agent.into(),
            client: "c".into(),
            provider: "p".into(),
            model: model.into(),
            day: day.into(),
            thread: None,
            turn: None,
            calls: 1,
            input_tokens: 10,
            output_tokens: 1,
            usd_micros,
        }
    }

    #[test]
    fn rows_fold_into_the_requested_groups_with_a_total() {
        let rows = [
            row("b", "m1", "2026-01-02", 5),
            row("a", "m2", "2026-01-01", 7),
            row("b", "m2", "2026-01-01", 11),
        ];
        let by_agent = group(CostGroup::Agent, &rows);
        let keys: Vec<_> = by_agent.rows.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["a", "b"]);
        assert_eq!(by_agent.rows[1].sum.usd_micros, 16);
        assert_eq!(by_agent.rows[1].sum.calls, 2);
        assert_eq!(by_agent.total.usd_micros, 23);
        assert_eq!(by_agent.total.input_tokens, 30);
        let by_day = group(CostGroup::Day, &rows);
        let days: Vec<_> = by_day
            .rows
            .iter()
            .map(|r| (r.key.as_str(), r.sum.usd_micros))
            .collect();
        assert_eq!(days, [("2026-01-01", 18), ("2026-01-02", 5)]);
        let by_model = group(CostGroup::Model, &rows);
        assert_eq!(by_model.rows.len(), 2);
        assert_eq!(group(CostGroup::Client, &rows).rows.len(), 1);
        assert_eq!(group(CostGroup::Agent, &[]).rows, Vec::new());
    }

    #[test]
    fn turn_rows_are_keyed_by_turn_id_and_sums_saturate() {
        let turn = TurnId::new();
        let mut a = row("a", "m", "2026-01-01", u64::MAX);
        a.turn = Some(turn.clone());
        let b = a.clone();
        let report = group(CostGroup::Turn, &[a, b]);
        assert_eq!(report.rows.len(), 1);
        assert_eq!(report.rows[0].key, turn.as_str());
        assert_eq!(report.total.usd_micros, u64::MAX);
        assert_eq!(report.total.calls, 2);
    }

    #[test]
    fn group_names_round_trip_and_unknown_ones_are_refused() {
        for g in CostGroup::ALL {
            assert_eq!(CostGroup::parse(g.as_str()).unwrap(), g);
        }
        for bad in ["", "Agent", "agents", "agent ", "tenant", "day;drop"] {
            let e = CostGroup::parse(bad).expect_err(bad);
            assert!(matches!(e, HubError::InvalidArgument(_)), "{bad}");
            assert!(e.to_string().contains("agent, model, client, day"), "{e}");
        }
    }

    #[test]
    fn bounds_are_rfc3339_with_an_offset() {
        assert!(bound("since", "2026-01-01T00:00:00Z").is_ok());
        assert!(bound("since", "2026-01-01T00:00:00.123456+05:30").is_ok());
        for bad in [
            "",
            "2026-01-01",
            "2026-01-01T00:00:00",
            "yesterday",
            "2026-02-30T00:00:00Z",
            "-002026-01-01T00:00:00Z",
            "2026-01-01T00:00:00Z                                                    x",
        ] {
            let e = bound("since", bad).expect_err(bad);
            assert!(e.to_string().starts_with("since must be"), "{e}");
        }
    }

    #[test]
    fn dollars_are_micro_dollars_divided() {
        let sum = CostSum {
            usd_micros: 1_234_567,
            ..CostSum::default()
        };
        assert!((sum.usd() - 1.234567).abs() < 1e-12);
    }
}
