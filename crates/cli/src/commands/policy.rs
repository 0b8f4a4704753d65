//! `agentplane policy check|explain|test DIR`: policies as code, offline.
//! - `check` validates a policies directory exactly the way the server loads it
//!   (`agentplane_runtime::policy_dir::load_dir`), printing every error as
//!   `file:line: field: message` (the lines `serve` reports for the same directory).
//! - `explain` prints the decision of one request, each policy considered with match /
//!   no match and why (`engine::governance::explain`, the server's own evaluation).
//! - `test` runs the `*.test.yaml` cases beside the policies
//!   (`agentplane_runtime::policy_tests`) and exits 1 when one fails.
//! - `replay` makes the decisions recorded in the configured store again under DIR's
//!   policies and prints the ones that change (`agentplane_runtime::policy_replay`),
//!   reading the store beside a running server as `costs` does.
//!
//! Reading, validation and evaluation live in the runtime, engine and core; this file
//! only parses flags and prints.

use std::io::Write;
use std::path::{Path, PathBuf};

use agentplane_core::policy::{PolicySet, RequestContext, Timestamp, parse_duration};
use agentplane_engine::governance::explain::{Explained, explain};
use agentplane_runtime::Config;
use agentplane_runtime::policy_dir::{error_lines, load_dir};
use agentplane_runtime::policy_replay::{ReplayFilter, ReplayReport, Subject, replay_log};
use agentplane_runtime::policy_tests::{load_cases, run_cases};
use clap::{Args, Subcommand};

use super::threads::one_line;
use crate::exit::{self, Exit};

#[derive(Args)]
pub struct PolicyArgs {
    #[command(subcommand)]
    command: PolicyCommand,
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Validate every *.yaml / *.yml file in DIR; exit 2 if any is invalid.
    Check {
        /// The policies directory.
        dir: PathBuf,
    },
    /// Print the decision of one request under DIR's policies, each policy with
    /// match / no match and why.
    Explain(ExplainArgs),
    /// Run the *.test.yaml cases in DIR against DIR's policies; exit 1 if one fails.
    Test {
        /// The policies directory (its tests beside the policies).
        dir: PathBuf,
    },
    /// Make the tool calls and turn admissions recorded in the configured store again
    /// under DIR's policies; print the decisions that change, then totals.
    Replay(ReplayArgs),
}

#[derive(Args)]
struct ReplayArgs {
    /// The candidate policies directory.
    dir: PathBuf,
    /// Only turns begun within this long before now (`30m`, `24h`, `7d`).
    #[arg(long, value_name = "DURATION")]
    since: Option<String>,
    /// Only this agent's threads.
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
    /// Only this client's threads (default: every client's).
    #[arg(long, value_name = "ID")]
    client: Option<String>,
    /// Exit 1 when any decision changes (for CI).
    #[arg(long)]
    fail_on_change: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ExplainArgs {
    /// The agent the request goes to.
    #[arg(long)]
    agent: String,
    /// The tool called; without it, a turn-level request.
    #[arg(long)]
    tool: Option<String>,
    /// The call's arguments, as JSON.
    #[arg(long, default_value = "{}")]
    args: String,
    /// The client asking.
    #[arg(long, default_value = "cli")]
    client: String,
    /// A role of the caller (repeatable).
    #[arg(long = "role")]
    roles: Vec<String>,
    /// A tag of the agent (repeatable).
    #[arg(long = "tag")]
    tags: Vec<String>,
    /// The agent version.
    #[arg(long)]
    version: Option<String>,
    /// When (RFC 3339); default now.
    #[arg(long)]
    at: Option<String>,
    /// Print the explanation as JSON.
    #[arg(long)]
    json: bool,
    /// The policies directory.
    #[arg(default_value = "policies")]
    dir: PathBuf,
}

pub async fn run(config: Option<&Path>, args: PolicyArgs) -> Exit {
    match args.command {
        PolicyCommand::Check { dir } => check(&dir),
        PolicyCommand::Explain(args) => explain_one(&args),
        PolicyCommand::Test { dir } => test(&dir),
        PolicyCommand::Replay(args) => replay(config, &args).await,
    }
}

fn check(dir: &Path) -> Exit {
    match load(dir) {
        Ok(set) => {
            println!("{} policies OK ({})", set.len(), set.hash());
            for policy in set.policies() {
                println!(
                    "  {} ({})",
                    policy.summary(),
                    dir.join(policy.source()).display()
                );
            }
            exit::SUCCESS
        }
        Err(exit) => exit,
    }
}

/// The directory's policies, or its errors printed.
fn load(dir: &Path) -> Result<PolicySet, Exit> {
    load_dir(dir).map_err(|errors| {
        for line in error_lines(dir, &errors) {
            eprintln!("{line}");
        }
        exit::CONFIG
    })
}

fn explain_one(args: &ExplainArgs) -> Exit {
    let set = match load(&args.dir) {
        Ok(set) => set,
        Err(exit) => return exit,
    };
    let arguments: serde_json::Value = match serde_json::from_str(&args.args) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: --args is not JSON: {e}");
            return exit::CONFIG;
        }
    };
    let at = match args.at.as_deref().map(str::parse::<Timestamp>) {
        None => Timestamp::now(),
        Some(Ok(at)) => at,
        Some(Err(e)) => {
            eprintln!("error: --at is not an RFC 3339 instant: {e}");
            return exit::CONFIG;
        }
    };
    let mut ctx = RequestContext::new(&args.agent, &args.tags, &args.client)
        .roles(&args.roles)
        .version(args.version.as_deref())
        .tool(args.tool.as_deref())
        .at(at);
    if args.tool.is_some() {
        ctx = ctx.arguments(&arguments);
    }
    let explained = explain(&set, &ctx);
    if args.json {
        match serde_json::to_string_pretty(&explained) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("error: {e}");
                return exit::INTERNAL;
            }
        }
    } else {
        print!("{}", render(&explained));
    }
    exit::SUCCESS
}

/// An explanation as `policy explain` and `policy test` print it.
fn render(e: &Explained) -> String {
    let mut out = String::new();
    let by = e
        .decided_by
        .as_deref()
        .map(|p| format!(" by `{p}`"))
        .unwrap_or_default();
    out.push_str(&format!(
        "decision: {}{by} (policy set {})\n",
        e.decision, e.policy_set
    ));
    out.push_str(&format!("reason: {}\n", e.reason));
    if e.policies.is_empty() {
        out.push_str("no policies\n");
    }
    for p in &e.policies {
        let state = if p.matched { "match" } else { "no match" };
        let effect = p
            .effect
            .as_deref()
            .map(|e| format!(" -> {e}"))
            .unwrap_or_default();
        out.push_str(&format!(
            "  {} ({}, {}): {state}: {}{effect}\n",
            p.name, p.kind, p.source, p.why
        ));
    }
    out
}

fn test(dir: &Path) -> Exit {
    let set = match load(dir) {
        Ok(set) => set,
        Err(exit) => return exit,
    };
    let cases = match load_cases(dir) {
        Ok(cases) => cases,
        Err(errors) => {
            for e in errors {
                eprintln!("{e}");
            }
            return exit::CONFIG;
        }
    };
    if cases.is_empty() {
        eprintln!(
            "error: no test cases in {} (write them in *.test.yaml beside the policies)",
            dir.display()
        );
        return exit::CONFIG;
    }
    let outcomes = run_cases(&set, &cases);
    let failed: Vec<_> = outcomes.iter().filter(|o| o.failure.is_some()).collect();
    for outcome in &failed {
        println!(
            "FAIL {}: {}: {}",
            outcome.file.display(),
            outcome.name,
            outcome.failure.as_deref().unwrap_or_default()
        );
        for line in render(&outcome.explained).lines() {
            println!("    {line}");
        }
    }
    println!(
        "{} cases, {} passed, {} failed (policy set {})",
        outcomes.len(),
        outcomes.len() - failed.len(),
        failed.len(),
        set.hash()
    );
    if failed.is_empty() {
        exit::SUCCESS
    } else {
        exit::AGENT_FAILED
    }
}

async fn replay(config: Option<&Path>, args: &ReplayArgs) -> Exit {
    let since = match args.since.as_deref().map(|s| parse_duration(s, "duration")) {
        None => None,
        Some(Ok(age)) => Some(Timestamp::now().checked_sub(age).unwrap_or(Timestamp::MIN)),
        Some(Err(e)) => {
            eprintln!("error: --since: {e}");
            return exit::CONFIG;
        }
    };
    let set = match load(&args.dir) {
        Ok(set) => set,
        Err(exit) => return exit,
    };
    let config = match Config::load(config) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::CONFIG;
        }
    };
    let filter = ReplayFilter {
        since,
        agent: args.agent.clone(),
        client: args.client.clone(),
    };
    let report = match replay_log(&config, &set, &filter).await {
        Ok(report) => report,
        Err(e) => {
            eprintln!("error [{}]: {e}", e.code().as_str());
            return exit::of_code(e.code());
        }
    };
    let text = if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => format!("{text}\n"),
            Err(e) => {
                eprintln!("error: {e}");
                return exit::INTERNAL;
            }
        }
    } else {
        replay_text(&report)
    };
    // A reader that went away (`| head`) is not our failure.
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    if args.fail_on_change && report.totals.changed > 0 {
        exit::AGENT_FAILED
    } else {
        exit::SUCCESS
    }
}

/// The changes in log order, each with the candidate's explanation, then the totals.
/// What came from a model (call ids, tool names) is kept to one line.
fn replay_text(report: &ReplayReport) -> String {
    let mut out = String::new();
    for change in &report.changes {
        let what = match &change.subject {
            Subject::Call { call_id, tool } => {
                format!("{} {}", one_line(call_id), one_line(tool))
            }
            Subject::Admission => format!("admission of {}", one_line(&change.agent)),
        };
        out.push_str(&format!(
            "CHANGED {} {} {what}: {} -> {}\n",
            change.thread,
            change.turn,
            change.was.as_str(),
            change.now.as_str()
        ));
        for line in render(&change.explanation).lines() {
            out.push_str(&format!("    {line}\n"));
        }
    }
    let t = &report.totals;
    const ORDER: [&str; 6] = [
        "allow->deny",
        "allow->approval",
        "deny->allow",
        "deny->approval",
        "approval->allow",
        "approval->deny",
    ];
    let transitions: Vec<String> = ORDER
        .iter()
        .filter_map(|k| t.transitions.get(*k).map(|n| format!("{k} {n}")))
        .collect();
    let changed = if transitions.is_empty() {
        format!("{} changed", t.changed)
    } else {
        format!("{} changed ({})", t.changed, transitions.join(", "))
    };
    out.push_str(&format!(
        "{} decisions replayed, {changed}, {} unchanged, {} not replayable \
         (hash-only arguments {}, stateful refusals {}, content refusals {})\n",
        t.replayed, t.unchanged, t.not_replayable, t.hash_only, t.stateful, t.content
    ));
    out
}
