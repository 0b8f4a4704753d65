//! `scripted-llm --scenario FILE [--listen 127.0.0.1:PORT]`: the scripted server as a
//! process, for benchmarks and for CLI tests that spawn the real agentplane binary.
//!
//! Prints the base URL (`http://127.0.0.1:PORT/v1`) as the first line of stdout, then
//! serves until SIGINT or SIGTERM. Only argument parsing lives here; the server is the
//! library's.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use agentplane_testkit::{Scenario, ScriptedServer};

const USAGE: &str = "usage: scripted-llm --scenario FILE [--listen 127.0.0.1:PORT]";

struct Args {
    scenario: PathBuf,
    listen: SocketAddr,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut scenario = None;
    let mut listen = SocketAddr::from(([127, 0, 0, 1], 0));
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
            None => (arg, None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{name} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--scenario" => scenario = Some(PathBuf::from(value("--scenario")?)),
            "--listen" => {
                let text = value("--listen")?;
                listen = text
                    .parse()
                    .map_err(|e| format!("--listen {text}: {e}\n{USAGE}"))?;
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    let scenario = scenario.ok_or_else(|| format!("--scenario is required\n{USAGE}"))?;
    Ok(Args { scenario, listen })
}

async fn stopped() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let scenario = match Scenario::from_file(&args.scenario) {
        Ok(scenario) => scenario,
        Err(message) => {
            eprintln!("scripted-llm: {message}");
            return ExitCode::from(2);
        }
    };
    let server = match ScriptedServer::bind(scenario, args.listen).await {
        Ok(server) => server,
        Err(e) => {
            eprintln!("scripted-llm: cannot listen on {}: {e}", args.listen);
            return ExitCode::FAILURE;
        }
    };
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        if writeln!(out, "{}", server.base_url())
            .and_then(|()| out.flush())
            .is_err()
        {
            return ExitCode::FAILURE;
        }
    }
    stopped().await;
    drop(server);
    ExitCode::SUCCESS
}
