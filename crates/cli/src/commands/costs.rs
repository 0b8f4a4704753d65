//! `agentplane costs`: what model calls cost, grouped, from the local store.
//!
//! It reads the configured SQLite file with the same report function the hub serves
//! `GET /v1/costs` with (`agentplane_engine::hub::report_costs`), so both give the same
//! numbers. It opens the store alone rather than starting the runtime: starting the
//! runtime ends turns left running, which would be wrong while `agentplane serve`
//! runs on the same file. Whose costs: `--client` (default `local`, the CLI's own runs) or
//! every client with `--all-clients`, since whoever can read the file sees all of it.

use std::io::Write;
use std::path::Path;

use agentplane_core::{ErrorCode, ThreadId};
use agentplane_engine::hub::HubError;
use agentplane_engine::services::reports::{
    CostGroup, CostLine, CostReport, CostRequest, CostSum, report_costs,
};
use agentplane_runtime::replicas::open_for_reports;
use agentplane_runtime::{Config, LOCAL_CLIENT};
use clap::Args;
use serde_json::{Value, json};

use super::threads::one_line;
use crate::exit::{self, Exit};

#[derive(Args)]
pub struct CostsArgs {
    /// Group rows by agent, model, client, day, provider, thread or turn (turn needs --thread).
    #[arg(long, default_value = "agent", value_name = "GROUP")]
    group_by: String,
    /// Only calls at or after this RFC 3339 time (e.g. 2026-01-01T00:00:00Z).
    #[arg(long, value_name = "RFC3339")]
    since: Option<String>,
    /// Only calls before this RFC 3339 time.
    #[arg(long, value_name = "RFC3339")]
    until: Option<String>,
    /// Only this agent's threads.
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
    /// Only this thread (`thr_…`).
    #[arg(long, value_name = "THREAD_ID")]
    thread: Option<String>,
    /// Whose costs: the threads of this client id.
    #[arg(long, value_name = "ID", default_value = LOCAL_CLIENT, conflicts_with = "all_clients")]
    client: String,
    /// Every client's costs.
    #[arg(long)]
    all_clients: bool,
    /// Print the report as JSON (the shape `GET /v1/costs` returns).
    #[arg(long)]
    json: bool,
}

pub async fn run(config: Option<&Path>, args: CostsArgs) -> Exit {
    match report(config, &args).await {
        Ok(report) => print(&report, args.json),
        Err((code, message)) => {
            eprintln!("error [{}]: {message}", code.as_str());
            exit::of_code(code)
        }
    }
}

/// The report, or why not: the code users see and the message.
async fn report(
    config: Option<&Path>,
    args: &CostsArgs,
) -> Result<CostReport, (ErrorCode, String)> {
    let hub_error = |e: HubError| (e.code(), e.to_string());
    let group_by = CostGroup::parse(&args.group_by).map_err(hub_error)?;
    let thread = args
        .thread
        .as_deref()
        .map(ThreadId::parse)
        .transpose()
        .map_err(|e| (ErrorCode::InvalidArgument, e))?;
    let request = CostRequest {
        group_by,
        since: args.since.clone(),
        until: args.until.clone(),
        agent: args.agent.clone(),
        thread,
    };
    let client = (!args.all_clients).then_some(args.client.as_str());
    let config = Config::load(config).map_err(|e| (ErrorCode::InvalidArgument, e.to_string()))?;
    // Read beside a running server, on either backend.
    let store = open_for_reports(&config.store)
        .await
        .map_err(|e| (e.code(), e.to_string()))?;
    report_costs((store.as_ref(), store.as_ref()), client, request)
        .await
        .map_err(hub_error)
}

fn print(report: &CostReport, as_json: bool) -> Exit {
    let text = if as_json {
        format!("{}\n", to_json(report))
    } else {
        table(report)
    };
    // A reader that went away (`| head`) is not our failure.
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    exit::SUCCESS
}

fn sum_json(sum: &CostSum) -> Value {
    json!({
        "calls": sum.calls,
        "input_tokens": sum.input_tokens,
        "output_tokens": sum.output_tokens,
        "usd_micros": sum.usd_micros,
        "usd": sum.usd(),
    })
}

/// The report as `GET /v1/costs` returns it.
fn to_json(report: &CostReport) -> Value {
    let rows: Vec<Value> = report
        .rows
        .iter()
        .map(|CostLine { key, sum }| {
            let mut row = sum_json(sum);
            row["key"] = json!(key);
            row
        })
        .collect();
    json!({
        "group_by": report.group_by.as_str(),
        "rows": rows,
        "total": sum_json(&report.total),
    })
}

/// Dollars to six decimals, exactly (from the micro-dollars, not a float).
fn usd(micros: u64) -> String {
    format!("{}.{:06}", micros / 1_000_000, micros % 1_000_000)
}

/// A table: one line per group, then the total.
fn table(report: &CostReport) -> String {
    let keys: Vec<String> = report.rows.iter().map(|r| one_line(&r.key)).collect();
    let width = keys
        .iter()
        .map(|k| k.chars().count())
        .chain([report.group_by.as_str().len(), "TOTAL".len()])
        .max()
        .unwrap_or(0);
    let line = |key: &str, sum: &CostSum| {
        format!(
            "{key:<width$}  {:>8}  {:>14}  {:>14}  {:>18}\n",
            sum.calls,
            sum.input_tokens,
            sum.output_tokens,
            usd(sum.usd_micros)
        )
    };
    let mut out = format!(
        "{:<width$}  {:>8}  {:>14}  {:>14}  {:>18}\n",
        report.group_by.as_str().to_uppercase(),
        "CALLS",
        "INPUT TOKENS",
        "OUTPUT TOKENS",
        "USD"
    );
    for (key, row) in keys.iter().zip(&report.rows) {
        out.push_str(&line(key, &row.sum));
    }
    out.push_str(&line("TOTAL", &report.total));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollars_are_exact_to_six_decimals() {
        assert_eq!(usd(0), "0.000000");
        assert_eq!(usd(1), "0.000001");
        assert_eq!(usd(1_234_567), "1.234567");
        assert_eq!(usd(u64::MAX), "18446744073709.551615");
    }

    #[test]
    fn the_table_has_a_row_per_group_and_a_total_that_keys_cannot_forge() {
        let sum = |usd_micros| CostSum {
            calls: 1,
            input_tokens: 10,
            output_tokens: 2,
            usd_micros,
        };
        let report = CostReport {
            group_by: CostGroup::Agent,
            rows: vec![
                CostLine {
                    key: "chat".into(),
                    sum: sum(350),
                },
                CostLine {
                    key: "evil\nTOTAL 0\u{1b}[2J".into(),
                    sum: sum(1),
                },
            ],
            total: CostSum {
                calls: 2,
                input_tokens: 20,
                output_tokens: 4,
                usd_micros: 351,
            },
        };
        let text = table(&report);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].starts_with("AGENT"), "{text}");
        assert!(lines[1].starts_with("chat") && lines[1].ends_with("0.000350"));
        assert!(!text.contains('\u{1b}'));
        assert!(lines[3].starts_with("TOTAL") && lines[3].ends_with("0.000351"));
    }
}
