//! `agentplane audit`: the tamper-evident chain of the event log (ADR 0048,
//! `docs/audit.md`). `verify` recomputes every thread's chain from the stored events and
//! names the first broken link; `export` writes the events with their links as JSON
//! Lines that a third party checks with the documented algorithm alone
//! (`scripts/audit_verify.py`).
//!
//! It opens the store for reading only (`open_for_audit`: a SQLite file is never
//! created, migrated or written, and a missing one is an error), so it runs beside a
//! running server, on SQLite or PostgreSQL, and never recovers turns. Exit codes
//! as everywhere: 0 every chain holds, 1 a link is broken, 2 usage (an unknown thread, a
//! bad time), 3 the store failed.

use std::io::Write;
use std::path::{Path, PathBuf};

use agentplane_core::audit::{BreakReason, ChainBreak, ChainSummary};
use agentplane_core::policy::Timestamp;
use agentplane_core::{ErrorCode, ThreadId};
use agentplane_engine::ports::records::{stored_now, stored_time};
use agentplane_engine::services::reports::{
    AuditReport, ExportedEvent, ExportedRecord, ExportedRow, export_chains, export_records,
    export_rows, verify_chains,
};
use agentplane_runtime::Config;
use agentplane_runtime::audit_anchor::{self, AnchorError};
use agentplane_runtime::replicas::open_for_audit;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::exit::{self, Exit};

#[derive(Args)]
pub struct AuditArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// Recompute every chain from the store; exit 1 naming the first broken link.
    Verify {
        /// Only this thread (`thr_…`).
        #[arg(long, value_name = "THREAD_ID")]
        thread: Option<String>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Also check these anchors (`audit anchor`'s JSON Lines): nothing before an
        /// anchored head changed, and no chain was cut back behind one.
        #[arg(long, value_name = "FILE")]
        anchors: Option<PathBuf>,
        /// The public key (hex) the anchors must be signed with; default: that of
        /// `[audit] anchor_key`.
        #[arg(long, value_name = "HEX")]
        public_key: Option<String>,
    },
    /// Sign every chain's head and append it to `[audit] anchor_file` (or print it):
    /// refused when a chain is broken, which an anchor would vouch for.
    Anchor {
        /// The signing key; default `[audit] anchor_key`.
        #[arg(long, value_name = "FILE")]
        key: Option<PathBuf>,
        /// Append here instead of `[audit] anchor_file`; `-` prints it.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Write a new anchor signing key (owner-only) and print its public key.
    Keygen {
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
    /// Write the events with their links as JSON Lines on stdout.
    Export {
        /// Only events at or after this RFC 3339 time (e.g. 2026-01-01T00:00:00Z).
        #[arg(long, value_name = "RFC3339")]
        since: Option<String>,
        /// Only this thread (`thr_…`).
        #[arg(long, value_name = "THREAD_ID")]
        thread: Option<String>,
    },
}

pub async fn run(config: Option<&Path>, args: AuditArgs) -> Exit {
    let outcome = match args.action {
        Action::Verify {
            thread,
            json,
            anchors,
            public_key,
        } => {
            let anchors = anchors.map(|file| (file, public_key));
            verify(config, thread.as_deref(), json, anchors).await
        }
        Action::Anchor { key, out } => anchor(config, key, out).await,
        Action::Keygen { out } => match audit_anchor::keygen(&out) {
            Ok(public) => {
                write_out(format!("{public}\n").as_bytes());
                Ok(exit::SUCCESS)
            }
            Err(e) => Err((ErrorCode::InvalidArgument, e.to_string())),
        },
        Action::Export { since, thread } => {
            export(config, since.as_deref(), thread.as_deref()).await
        }
    };
    outcome.unwrap_or_else(|(code, message)| {
        eprintln!("error [{}]: {message}", code.as_str());
        exit::of_code(code)
    })
}

type Failure = (ErrorCode, String);

fn load(config: Option<&Path>) -> Result<Config, Failure> {
    Config::load(config).map_err(|e| (ErrorCode::InvalidArgument, e.to_string()))
}

async fn open(
    config: Option<&Path>,
) -> Result<std::sync::Arc<dyn agentplane_runtime::replicas::Store>, Failure> {
    open_store(&load(config)?).await
}

async fn open_store(
    config: &Config,
) -> Result<std::sync::Arc<dyn agentplane_runtime::replicas::Store>, Failure> {
    open_for_audit(&config.store)
        .await
        .map_err(|e| (e.code(), e.to_string()))
}

fn usage(e: AnchorError) -> Failure {
    match e {
        AnchorError::Store(e) => (e.code(), e.to_string()),
        other => (ErrorCode::InvalidArgument, other.to_string()),
    }
}

async fn anchor(
    config: Option<&Path>,
    key: Option<PathBuf>,
    out: Option<PathBuf>,
) -> Result<Exit, Failure> {
    let loaded = load(config)?;
    let key = key
        .or_else(|| loaded.audit.anchor_key.clone())
        .ok_or_else(|| {
            (
                ErrorCode::InvalidArgument,
                "no signing key: --key FILE or [audit] anchor_key (`agentplane audit keygen`)"
                    .to_owned(),
            )
        })?;
    let out = out.or_else(|| loaded.audit.anchor_file.clone());
    let store = open_store(&loaded).await?;
    let report = verify_chains(store.as_ref(), None)
        .await
        .map_err(|e| (e.code(), e.to_string()))?;
    if !report.holds() {
        write_out(report_text(&report).as_bytes());
        eprintln!("error [failed_precondition]: a chain is broken; an anchor would vouch for it");
        return Ok(exit::AGENT_FAILED);
    }
    let anchor = audit_anchor::anchor(&report, &key, stored_now()).map_err(usage)?;
    match out.filter(|p| p.as_os_str() != "-") {
        Some(path) => {
            audit_anchor::append(&path, &anchor).map_err(usage)?;
            eprintln!(
                "anchored {} threads and {} record chains in {}",
                anchor.threads.len(),
                anchor.chains.len(),
                path.display()
            );
        }
        None => {
            let line = serde_json::to_string(&anchor).unwrap_or_default();
            write_out(format!("{line}\n").as_bytes());
        }
    }
    Ok(exit::SUCCESS)
}

fn thread_id(thread: Option<&str>) -> Result<Option<ThreadId>, Failure> {
    thread
        .map(ThreadId::parse)
        .transpose()
        .map_err(|e| (ErrorCode::InvalidArgument, e))
}

async fn verify(
    config: Option<&Path>,
    thread: Option<&str>,
    as_json: bool,
    anchors: Option<(PathBuf, Option<String>)>,
) -> Result<Exit, Failure> {
    let thread = thread_id(thread)?;
    let loaded = load(config)?;
    // The anchors and their key are read before the store: a typo fails fast.
    let anchors = anchors
        .map(|(file, public_key)| {
            let text = std::fs::read_to_string(&file).map_err(|e| {
                (
                    ErrorCode::InvalidArgument,
                    format!("reading {}: {e}", file.display()),
                )
            })?;
            let key = match (public_key, &loaded.audit.anchor_key) {
                (Some(key), _) => key,
                (None, Some(path)) => audit_anchor::public_key_of(path).map_err(usage)?,
                (None, None) => {
                    return Err((
                        ErrorCode::InvalidArgument,
                        "--anchors needs the key they must be signed with: --public-key HEX, \
                         or [audit] anchor_key (an anchor's own key proves nothing)"
                            .to_owned(),
                    ));
                }
            };
            Ok((text, key))
        })
        .transpose()?;
    let store = open_store(&loaded).await?;
    let mut report = verify_chains(store.as_ref(), thread.as_ref())
        .await
        .map_err(|e| (e.code(), e.to_string()))?;
    let mut anchors_checked = None;
    if let Some((text, key)) = anchors {
        let (checked, mismatches) = audit_anchor::check(store.as_ref(), &text, &key)
            .await
            .map_err(usage)?;
        report.mismatches.extend(mismatches);
        anchors_checked = Some(checked);
    }
    let text = if as_json {
        let mut json = report_json(&report);
        json["anchors_checked"] = json!(anchors_checked);
        format!("{json}\n")
    } else {
        let mut text = report_text(&report);
        if let Some(n) = anchors_checked {
            text.push_str(&format!("{n} anchors checked\n"));
        }
        text
    };
    write_out(text.as_bytes());
    Ok(if !report.holds() {
        exit::AGENT_FAILED
    } else {
        exit::SUCCESS
    })
}

fn report_json(report: &AuditReport) -> Value {
    json!({
        "ok": report.holds(),
        "threads": report.intact.iter().map(summary_json).collect::<Vec<_>>(),
        "broken": report.broken.as_ref().map(|b| break_json(b, "thread_id", "seq")),
        "records": report.records.iter().map(record_summary_json).collect::<Vec<_>>(),
        "broken_record": report.broken_record.as_ref().map(|b| break_json(b, "chain", "pos")),
        "mismatches": report.mismatches.iter().map(|m| json!({
            "subject": m.subject,
            "against": m.against,
            "message": m.message,
        })).collect::<Vec<_>>(),
    })
}

/// A broken link; `place` and `index` name what `thread_id` and `seq` mean for its
/// chain (a thread's events, or a record chain's positions).
fn break_json(b: &ChainBreak, place: &str, index: &str) -> Value {
    {
        let (what, stored, computed) = match &b.reason {
            BreakReason::HashMismatch { stored, computed } => (
                "hash_mismatch",
                Some(stored.clone()),
                Some(computed.clone()),
            ),
            BreakReason::MissingHash => ("missing_hash", None, None),
            BreakReason::MalformedHash(h) => ("malformed_hash", Some(h.clone()), None),
            BreakReason::SeqGap { .. } => ("seq_gap", None, None),
        };
        json!({
            place: b.thread_id,
            index: b.seq,
            "reason": what,
            "stored": stored,
            "computed": computed,
            "message": b.reason.to_string(),
        })
    }
}

fn record_summary_json(s: &ChainSummary) -> Value {
    json!({
        "chain": s.thread_id,
        "chained": s.chained,
        "not_chained": s.unchained,
        "head": s.head.as_ref().map(|(pos, hash)| json!({"pos": pos, "hash": hash})),
    })
}

fn summary_json(s: &ChainSummary) -> Value {
    json!({
        "thread_id": s.thread_id,
        "chained": s.chained,
        "not_chained": s.unchained,
        "chained_since_seq": s.first_chained,
        "head": s.head.as_ref().map(|(seq, hash)| json!({"seq": seq, "hash": hash})),
    })
}

fn report_text(report: &AuditReport) -> String {
    let mut out = String::new();
    let chained: u64 = report.intact.iter().map(|s| s.chained).sum();
    let unchained: u64 = report.intact.iter().map(|s| s.unchained).sum();
    for s in &report.intact {
        let head = s.head.as_ref().map_or_else(
            || "no chained event".to_owned(),
            |(seq, h)| format!("head {seq} {h}"),
        );
        let before = if s.unchained > 0 {
            format!(", {} not chained (before the migration)", s.unchained)
        } else {
            String::new()
        };
        out.push_str(&format!(
            "ok      {}  {} chained{before}; {head}\n",
            s.thread_id, s.chained
        ));
    }
    for s in &report.records {
        let head = s.head.as_ref().map_or_else(
            || "no chained record".to_owned(),
            |(pos, h)| format!("head {pos} {h}"),
        );
        out.push_str(&format!(
            "ok      {}  {} chained, {} not chained (before the migration); {head}\n",
            s.thread_id, s.chained, s.unchained
        ));
    }
    if let Some(ChainBreak {
        thread_id,
        seq,
        reason,
    }) = &report.broken
    {
        out.push_str(&format!(
            "BROKEN  thread {thread_id} event {seq}: {reason}\n"
        ));
    }
    if let Some(ChainBreak {
        thread_id,
        seq,
        reason,
    }) = &report.broken_record
    {
        out.push_str(&format!(
            "BROKEN  chain {thread_id} record {seq}: {reason}\n"
        ));
    }
    for m in &report.mismatches {
        out.push_str(&format!("BROKEN  {}: {}\n", m.subject, m.message));
    }
    if report.holds() {
        let records: u64 = report.records.iter().map(|s| s.chained).sum();
        out.push_str(&format!(
            "every chain holds: {} threads, {chained} events chained, {unchained} not chained \
             (before the migration); {records} gateway and ledger records chained; every row \
             agrees with the ledger and its events\n",
            report.intact.len()
        ));
    }
    out
}

async fn export(
    config: Option<&Path>,
    since: Option<&str>,
    thread: Option<&str>,
) -> Result<Exit, Failure> {
    let thread = thread_id(thread)?;
    // Compared as stored text: the store's one RFC 3339 form sorts as time.
    let since = since
        .map(|s| {
            s.parse::<Timestamp>()
                .map(stored_time)
                .map_err(|e| (ErrorCode::InvalidArgument, format!("--since {s:?}: {e}")))
        })
        .transpose()?;
    let store = open(config).await?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut write_failed = false;
    export_chains(store.as_ref(), thread.as_ref(), since.as_deref(), |line| {
        // A reader that went away (`| head`) ends the export; that is not a failure.
        write_failed = writeln!(out, "{}", line_json(&line)).is_err();
        !write_failed
    })
    .await
    .map_err(|e| (e.code(), e.to_string()))?;
    if thread.is_none() && !write_failed {
        export_records(store.as_ref(), since.as_deref(), |line| {
            write_failed = writeln!(out, "{}", record_json(&line)).is_err();
            !write_failed
        })
        .await
        .map_err(|e| (e.code(), e.to_string()))?;
    }
    // The rows the chains vouch for: a whole export only (a range proves nothing
    // about the tables as they are).
    if thread.is_none() && since.is_none() && !write_failed {
        export_rows(store.as_ref(), |row| {
            write_failed = writeln!(out, "{}", row_json(&row)).is_err();
            !write_failed
        })
        .await
        .map_err(|e| (e.code(), e.to_string()))?;
    }
    drop(out.flush());
    Ok(exit::SUCCESS)
}

/// One exported gateway record: its chain, position, the hashed columns' names and
/// their values as stored (NULL as null), its `prev` link and its `hash`.
fn record_json(line: &ExportedRecord) -> Value {
    let r = &line.record;
    json!({
        "chain": r.chain.name(),
        "pos": r.pos,
        "columns": r.chain.columns(),
        "values": r.values,
        "prev": line.prev,
        "hash": r.hash,
    })
}

/// One exported row: `{"row": "thread" | "turn" | "approval" | "key", …its columns}`.
fn row_json(row: &ExportedRow) -> Value {
    match row {
        ExportedRow::Thread(t) => json!({
            "row": "thread", "id": t.id.as_str(), "client_id": t.client_id, "agent": t.agent,
            "cwd": t.cwd, "created_at": t.created_at, "deleted_at": t.deleted_at,
            "chained_since": t.chained_since,
        }),
        ExportedRow::Turn(thread, t) => json!({
            "row": "turn", "thread_id": thread.as_str(), "id": t.id, "input": t.input,
            "status": t.status, "result": t.result,
        }),
        ExportedRow::Approval(thread, a) => json!({
            "row": "approval", "thread_id": thread.as_str(), "id": a.id, "turn_id": a.turn_id,
            "tool": a.tool, "policy": a.policy, "status": a.status,
            "decided_by": a.decided_by, "feedback": a.feedback, "decided_at": a.decided_at,
        }),
        ExportedRow::Key(k) => json!({
            "row": "key", "id": k.id, "client_id": k.client_id, "digest": k.digest,
            "roles": k.roles, "created_at": k.created_at, "expires_at": k.expires_at,
            "revoked_at": k.revoked_at,
        }),
    }
}

/// One exported event: every hashed column as stored (the payload as a string, byte
/// for byte), its `prev` link and its `hash`.
fn line_json(line: &ExportedEvent) -> Value {
    let e = &line.event;
    json!({
        "thread_id": e.thread_id,
        "seq": e.seq,
        "turn_id": e.turn_id,
        "kind": e.kind,
        "ts": e.ts,
        "payload": e.payload,
        "prev": line.prev,
        "hash": e.hash,
    })
}

fn write_out(bytes: &[u8]) {
    // A reader that went away (`| head`) is not our failure.
    let mut stdout = std::io::stdout().lock();
    drop(stdout.write_all(bytes).and_then(|()| stdout.flush()));
}
