//! `agentplane`: the command line. Parses arguments, loads the configuration, calls the
//! runtime and prints. No agent logic lives here: `run` does exactly what the HTTP
//! server's turns do, through the same runtime and engine functions.

mod commands;
mod exit;
mod model_hint;
mod progress;
mod redacted_log;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// A local-first agent control plane.
#[derive(Parser)]
#[command(name = "agentplane", version, about)]
struct Cli {
    /// Configuration file (default: ./agentplane.toml if present, or AGENTPLANE_CONFIG).
    #[arg(long, global = true, value_name = "PATH")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a task with an agent in a workspace and print the result.
    Run(commands::run::RunArgs),
    /// List agents and the model each would use.
    Agents(commands::agents::AgentsArgs),
    /// Print a turn's events as JSON Lines, one event a line.
    Runlog(commands::runlog::RunlogArgs),
    /// Serve the HTTP API (threads, turns as SSE, permissions) until SIGINT or SIGTERM.
    Serve(commands::serve::ServeArgs),
    /// List your threads on a running server.
    Threads(commands::threads::ThreadsArgs),
    /// Print a thread's turns (and with --events, every event) from a running server.
    History(commands::history::HistoryArgs),
    /// Tool calls held for a person on a running server: list, approve, edit, reject.
    Approvals(commands::approvals::ApprovalsArgs),
    /// MCP: list the configured servers, or serve agents as MCP tools on stdio.
    Mcp(commands::mcp::McpArgs),
    /// Serve an agent over ACP on stdio, for editors that speak the Agent Client Protocol.
    Acp(commands::acp::AcpArgs),
    /// Policies as code: `policy check DIR` validates a policies directory (for CI).
    Policy(commands::policy::PolicyArgs),
    /// What model calls cost, grouped (by agent, model, client, day, …), from the local store.
    Costs(commands::costs::CostsArgs),
    /// Agent versions on a running server: list, create, edit, promote, traffic, rollback, shadow.
    Versions(commands::versions::VersionsArgs),
    /// API keys in the configured store: create (secret printed once), list, revoke.
    Keys(commands::keys::KeysArgs),
    /// The tamper-evident audit chain: verify it from the store, or export it as JSON Lines.
    Audit(commands::audit::AuditArgs),
}

impl Command {
    /// Whether the command runs agents on this machine (and so reads credentials from
    /// the configuration): those keep their secrets to themselves. The HTTP clients
    /// (`threads`, `history`, …) read only their own token and start no tools.
    fn runs_agents(&self) -> bool {
        !matches!(
            self,
            Command::Threads(_)
                | Command::History(_)
                | Command::Approvals(_)
                | Command::Versions(_)
                | Command::Policy(_)
        )
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.command.runs_agents() {
        // SAFETY: nothing has started a thread yet (the async runtime is built below,
        // and neither argument parsing nor anything before it starts one).
        unsafe { agentplane_runtime::environment::seal(cli.config.as_deref()) };
    }
    // Traces go to an OTLP collector when one is configured (`runtime/src/traces.rs`);
    // before any thread starts, like the rest of the set-up.
    let (traces, export) = if cli.command.runs_agents() {
        agentplane_runtime::traces::start_export(cli.config.as_deref()).unzip()
    } else {
        (None, None)
    };
    {
        use tracing_subscriber::Layer as _;
        use tracing_subscriber::layer::SubscriberExt as _;
        use tracing_subscriber::util::SubscriberInitExt as _;
        // Warnings, plus one access line per HTTP request (only `serve` writes those).
        // rmcp's own logs are off: every MCP failure reaches the user as our error
        // (`AGENTPLANE_LOG=rmcp=debug` brings them back). The filter is the log's own,
        // so the exported spans are not bound by it.
        let log = tracing_subscriber::fmt::layer()
            .with_writer(redacted_log::Redacted::new(std::io::stderr))
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_filter(
                tracing_subscriber::EnvFilter::try_from_env("AGENTPLANE_LOG").unwrap_or_else(
                    |_| tracing_subscriber::EnvFilter::new("warn,agentplane::access=info,rmcp=off"),
                ),
            );
        tracing_subscriber::registry().with(traces).with(log).init();
    }
    if cli.command.runs_agents() {
        // After the log is set up, so a failure is reported.
        agentplane_runtime::environment::forbid_dumps();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return exit::INTERNAL.into();
        }
    };
    let exit = runtime.block_on(async move {
        match cli.command {
            Command::Run(args) => commands::run::run(cli.config.as_deref(), args).await,
            Command::Agents(args) => commands::agents::run(cli.config.as_deref(), args).await,
            Command::Runlog(args) => commands::runlog::run(cli.config.as_deref(), args).await,
            Command::Serve(args) => commands::serve::run(cli.config.as_deref(), args).await,
            Command::Threads(args) => commands::threads::run(args).await,
            Command::History(args) => commands::history::run(args).await,
            Command::Approvals(args) => commands::approvals::run(args).await,
            Command::Mcp(args) => commands::mcp::run(cli.config.as_deref(), args).await,
            Command::Acp(args) => commands::acp::run(cli.config.as_deref(), args).await,
            Command::Policy(args) => commands::policy::run(cli.config.as_deref(), args).await,
            Command::Costs(args) => commands::costs::run(cli.config.as_deref(), args).await,
            Command::Versions(args) => commands::versions::run(args).await,
            Command::Keys(args) => commands::keys::run(cli.config.as_deref(), args).await,
            Command::Audit(args) => commands::audit::run(cli.config.as_deref(), args).await,
        }
    });
    // Do not wait for blocked background work (a stdin reader, a slow close) at exit.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    // The spans still queued, within a bound: a collector that is gone cannot hold us.
    if let Some(export) = export {
        export.shutdown(std::time::Duration::from_secs(3));
    }
    exit.into()
}
