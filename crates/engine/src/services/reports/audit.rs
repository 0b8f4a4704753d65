//! The audit chain (ADR 0048) as the interfaces use it: a thread's head for
//! `GET /v1/threads/{id}/audit` (the caller's own threads only), and the walks behind
//! `agentplane audit verify` and `audit export`, which read every thread of the store.
//! The hashing and the link check are `agentplane_core::audit`'s; what must not live
//! here: SQL, or any re-serialization of a stored event (the walk hashes stored text).

use agentplane_core::ThreadId;
use agentplane_core::audit::{
    BreakReason, ChainBreak, ChainSummary, ChainWalk, ChainedEvent, ChainedRecord, GENESIS,
    RecordChain, to_hex,
};

use agentplane_core::audit::ledger::LedgerState;

use super::audit_state::{self, EventFacts, Mismatch};
use crate::ports::{
    AuditStore, AuditedApproval, AuditedKey, AuditedThread, AuditedTurn, ChainHead, StoreError,
};

/// Events read per page while walking a chain.
const PAGE: usize = 500;

/// A thread's chain, as `GET /v1/threads/{id}/audit` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadAudit {
    pub thread_id: ThreadId,
    /// The last chained event; `None` until the thread has one.
    pub head: Option<ChainHead>,
    /// How many events the thread has.
    pub events: u64,
    /// The first seq covered by the chain (events before it predate the chain).
    pub chained_since_seq: u64,
}

/// What `audit verify` found: every thread's summary up to the first broken link, and
/// each record chain's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditReport {
    /// The threads whose chains hold, in the store's order.
    pub intact: Vec<ChainSummary>,
    /// The first broken link found (the walk stops there).
    pub broken: Option<ChainBreak>,
    /// The record chains that hold (`thread_id` is the chain's name); checked when the
    /// whole store is verified, not for one thread.
    pub records: Vec<ChainSummary>,
    /// The first broken link of a record chain.
    pub broken_record: Option<ChainBreak>,
    /// Rows that disagree with the chained records they must match (`audit_state.rs`):
    /// checked once every link holds.
    pub mismatches: Vec<Mismatch>,
}

impl AuditReport {
    /// Whether every chain checked holds.
    pub fn holds(&self) -> bool {
        self.broken.is_none() && self.broken_record.is_none() && self.mismatches.is_empty()
    }
}

/// Recomputes the chain of every thread (or of `only`) from the stored events and
/// stops at the first broken link. Reads the whole log: for the operator's command,
/// never a client's request.
pub async fn verify_chains(
    store: &dyn AuditStore,
    only: Option<&ThreadId>,
) -> Result<AuditReport, StoreError> {
    let threads = store.audited_threads(only).await?;
    if let Some(id) = only
        && threads.is_empty()
    {
        return Err(StoreError::NotFound(format!("thread {id}")));
    }
    let mut report = AuditReport::default();
    let mut decisions = Vec::new();
    for thread in &threads {
        let mut walk = ChainWalk::new(thread.id.as_str(), thread.chained_since);
        let mut facts = EventFacts::default();
        let mut outcome = Ok(());
        for_each_event(store, &thread.id, |event| {
            outcome = walk.push(event);
            facts.note(event);
            outcome.is_ok()
        })
        .await?;
        match outcome {
            Ok(()) => report.intact.push(walk.finish()),
            Err(broken) => {
                report.broken = Some(broken);
                break;
            }
        }
        // Whether the thread is pre-chain is the genesis's to say (`check_ledger`); a
        // row skipped here for it is vouched for by nothing, as its events are not.
        let pre_chain = thread.chained_since > 1;
        let turns = store.audited_turns(&thread.id).await?;
        report
            .mismatches
            .extend(facts.check_turns(&turns, pre_chain));
        let approvals = store.audited_approvals(&thread.id).await?;
        report
            .mismatches
            .extend(facts.check_approvals(&approvals, pre_chain));
        decisions.push((thread.id.clone(), facts));
    }
    if only.is_none() {
        for chain in RecordChain::ALL {
            match verify_record_chain(store, chain).await? {
                Ok(summary) => report.records.push(summary),
                Err(broken) => {
                    report.broken_record = Some(broken);
                    break;
                }
            }
        }
    }
    if report.broken.is_none() && report.broken_record.is_none() {
        check_ledger(store, (&threads, &decisions), only.is_none(), &mut report).await?;
    }
    Ok(report)
}

/// Replays the ledger and compares the threads (and, for the whole store, the keys
/// and the unchained gateway records) with what it says.
async fn check_ledger(
    store: &dyn AuditStore,
    (threads, decisions): (&[AuditedThread], &[(ThreadId, EventFacts)]),
    whole: bool,
    report: &mut AuditReport,
) -> Result<(), StoreError> {
    let mut records = Vec::new();
    for_each_record(store, RecordChain::Ledger, |record| {
        records.push(record.clone());
        true
    })
    .await?;
    let ledger = match LedgerState::replay(&records) {
        Ok(ledger) => ledger,
        Err(broken) => {
            report.mismatches.push(Mismatch {
                subject: "ledger".into(),
                against: format!("ledger record {}", broken.pos),
                message: broken.reason,
            });
            return Ok(());
        }
    };
    report
        .mismatches
        .extend(audit_state::check_threads(&ledger, threads, whole));
    for (thread, facts) in decisions {
        report
            .mismatches
            .extend(facts.check_policy_sets(thread.as_str(), &ledger));
    }
    if !whole {
        return Ok(());
    }
    report.mismatches.extend(audit_state::check_keys(
        &ledger,
        &store.audited_keys().await?,
    ));
    for chain in [RecordChain::ModelCalls, RecordChain::McpCalls] {
        let tip = store.record_chain_tip(chain).await?;
        let counted = ledger
            .genesis
            .unchained_records
            .get(chain.name())
            .copied()
            .unwrap_or(0);
        if tip.unchained > counted {
            report.mismatches.push(Mismatch {
                subject: chain.name().to_owned(),
                against: "the genesis (ledger record 1)".into(),
                message: format!(
                    "{} of its records claim to predate the chain (no position), but the \
                     genesis counted {counted}: a record was inserted outside agentplane",
                    tip.unchained
                ),
            });
        }
    }
    Ok(())
}

/// Walks one record chain by position and checks that it ends where its tip says: a
/// record removed from the end (the tip ahead of the last record) or a tip that names
/// another hash is a break too.
async fn verify_record_chain(
    store: &dyn AuditStore,
    chain: RecordChain,
) -> Result<Result<ChainSummary, ChainBreak>, StoreError> {
    let tip = store.record_chain_tip(chain).await?;
    let mut walk = ChainWalk::new(chain.name(), 1);
    let mut outcome = Ok(());
    for_each_record(store, chain, |record| {
        outcome = walk.push_record(record);
        outcome.is_ok()
    })
    .await?;
    if let Err(broken) = outcome {
        return Ok(Err(broken));
    }
    let broken = |seq, reason| {
        Ok(Err(ChainBreak {
            thread_id: chain.name().to_owned(),
            seq,
            reason,
        }))
    };
    let walked_last = walk.next_seq().saturating_sub(1);
    if walked_last < tip.last_pos {
        return broken(
            tip.last_pos,
            BreakReason::SeqGap {
                expected: walk.next_seq(),
            },
        );
    }
    let mut summary = walk.finish();
    summary.unchained = tip.unchained;
    let walked = summary.head.as_ref().map(|(_, hash)| hash.clone());
    if walked_last != tip.last_pos || walked != tip.last_hash {
        // A record past the tip, or a tip naming another hash: the chain's end moved.
        let none = || "(none)".to_owned();
        return broken(
            walked_last,
            BreakReason::HashMismatch {
                stored: tip.last_hash.unwrap_or_else(none),
                computed: walked.unwrap_or_else(none),
            },
        );
    }
    Ok(Ok(summary))
}

/// One line of `audit export`: an event with its link, enough to check it alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportedEvent {
    pub event: ChainedEvent,
    /// The hash this event links to (the previous event's, or genesis); `None` for an
    /// event before the chain.
    pub prev: Option<String>,
}

/// Every event of every thread (or of `only`) with `ts >= since` (stored RFC 3339
/// text), in thread then `seq` order, each with the link it should carry. `line`
/// returns false to stop. The previous hash is the stored one, so an exported range
/// that starts mid-chain still checks against the events before it.
pub async fn export_chains(
    store: &dyn AuditStore,
    only: Option<&ThreadId>,
    since: Option<&str>,
    mut line: impl FnMut(ExportedEvent) -> bool,
) -> Result<(), StoreError> {
    let threads = store.audited_threads(only).await?;
    if let Some(id) = only
        && threads.is_empty()
    {
        return Err(StoreError::NotFound(format!("thread {id}")));
    }
    let genesis = to_hex(&GENESIS);
    for thread in threads {
        let mut prev: Option<String> = None;
        let mut go_on = true;
        for_each_event(store, &thread.id, |event| {
            let link = event
                .hash
                .as_ref()
                .map(|_| prev.clone().unwrap_or_else(|| genesis.clone()));
            if event.hash.is_some() {
                prev.clone_from(&event.hash);
            }
            if since.is_none_or(|since| event.ts.as_str() >= since) {
                go_on = line(ExportedEvent {
                    event: event.clone(),
                    prev: link,
                });
            }
            go_on
        })
        .await?;
        if !go_on {
            break;
        }
    }
    Ok(())
}

/// Every record of every record chain with `ts >= since`, chain by chain, by position,
/// each with the link it should carry. `line` returns false to stop.
pub async fn export_records(
    store: &dyn AuditStore,
    since: Option<&str>,
    mut line: impl FnMut(ExportedRecord) -> bool,
) -> Result<(), StoreError> {
    let genesis = to_hex(&GENESIS);
    for chain in RecordChain::ALL {
        let mut prev: Option<String> = None;
        let mut go_on = true;
        for_each_record(store, chain, |record| {
            let link = prev.clone().unwrap_or_else(|| genesis.clone());
            prev.clone_from(&record.hash);
            // The ts column is the second of every record chain.
            let ts = record
                .values
                .get(1)
                .and_then(Option::as_deref)
                .unwrap_or("");
            if since.is_none_or(|since| ts >= since) {
                go_on = line(ExportedRecord {
                    record: record.clone(),
                    prev: link,
                });
            }
            go_on
        })
        .await?;
        if !go_on {
            break;
        }
    }
    Ok(())
}

/// A row the chains vouch for, as `audit export` ends with it, so an independent
/// checker can compare the tables with the ledger and the events as `verify` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExportedRow {
    Thread(AuditedThread),
    Turn(ThreadId, AuditedTurn),
    Approval(ThreadId, AuditedApproval),
    Key(AuditedKey),
}

/// Every thread's row with its turns and approvals, then every key. `line` returns
/// false to stop.
pub async fn export_rows(
    store: &dyn AuditStore,
    mut line: impl FnMut(ExportedRow) -> bool,
) -> Result<(), StoreError> {
    for thread in store.audited_threads(None).await? {
        let id = thread.id.clone();
        if !line(ExportedRow::Thread(thread)) {
            return Ok(());
        }
        for turn in store.audited_turns(&id).await? {
            if !line(ExportedRow::Turn(id.clone(), turn)) {
                return Ok(());
            }
        }
        for approval in store.audited_approvals(&id).await? {
            if !line(ExportedRow::Approval(id.clone(), approval)) {
                return Ok(());
            }
        }
    }
    for key in store.audited_keys().await? {
        if !line(ExportedRow::Key(key)) {
            return Ok(());
        }
    }
    Ok(())
}

/// One record line of `audit export`: a record with its link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportedRecord {
    pub record: ChainedRecord,
    /// The hash this record links to (the previous record's, or genesis).
    pub prev: String,
}

/// Calls `visit` on each chained record of `chain` by position, a page at a time,
/// until it returns false.
async fn for_each_record(
    store: &dyn AuditStore,
    chain: RecordChain,
    mut visit: impl FnMut(&ChainedRecord) -> bool,
) -> Result<(), StoreError> {
    let mut after = 0;
    loop {
        let page = store.chained_records(chain, after, PAGE).await?;
        for record in &page {
            if !visit(record) {
                return Ok(());
            }
        }
        match page.last() {
            Some(last) if page.len() == PAGE && last.pos > after => after = last.pos,
            _ => return Ok(()),
        }
    }
}

/// Calls `visit` on each event of `thread` by `seq`, a page at a time, until it
/// returns false.
async fn for_each_event(
    store: &dyn AuditStore,
    thread: &ThreadId,
    mut visit: impl FnMut(&ChainedEvent) -> bool,
) -> Result<(), StoreError> {
    let mut after = 0;
    loop {
        let page = store.chained_events(thread, after, PAGE).await?;
        for event in &page {
            if !visit(event) {
                return Ok(());
            }
        }
        match page.last() {
            Some(last) if page.len() == PAGE && last.seq > after => after = last.seq,
            _ => return Ok(()),
        }
    }
}
