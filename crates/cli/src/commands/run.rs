//! `agentplane run`: one task, one new thread, one turn, with live progress.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use agentplane_core::StopReason;
use agentplane_engine::TurnOutcome;
use agentplane_runtime::Task;
use clap::Args;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::exit::{self, Exit};
use crate::progress::Progress;

#[derive(Args)]
pub struct RunArgs {
    /// The agent to run (default: `[run] default_agent`, else `engineering`).
    #[arg(long)]
    agent: Option<String>,
    /// The directory the agent works in; its tools cannot leave it.
    #[arg(long, default_value = ".")]
    workspace: PathBuf,
    /// Print only the outcome, as one JSON document on stdout.
    #[arg(long)]
    json: bool,
    /// What to do.
    task: String,
}

pub async fn run(config: Option<&Path>, args: RunArgs) -> Exit {
    let runtime = match super::start(config).await {
        Ok(runtime) => runtime,
        Err(e) => {
            return fail(
                args.json,
                &e.to_string(),
                e.code().as_str(),
                exit::of_error(&e),
            );
        }
    };
    if args.task.trim().is_empty() {
        return fail(
            args.json,
            "the task is empty",
            "INVALID_ARGUMENT",
            exit::CONFIG,
        );
    }
    // `[llm] ensure_available` (ADR 0033): started now if it does not answer; a failure
    // shows as the turn's own error.
    if let Err(e) = runtime.ensure_model_server().await {
        tracing::warn!(error = %e, "the model server could not be started");
    }
    let task = Task {
        agent: args
            .agent
            .unwrap_or_else(|| runtime.config().default_agent.clone()),
        workspace: args.workspace,
        input: args.task,
    };

    let cancel = CancellationToken::new();
    let on_signal = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_signal.cancel();
        }
    });

    // An agent with an output schema owes a result: its text answer is a failure.
    let owes_result = runtime
        .agent(&task.agent)
        .is_ok_and(|agent| agent.output_schema.is_some());
    let interactive = !args.json && std::io::stderr().is_terminal();
    let progress = Progress::new(interactive, !args.json);
    let outcome = runtime.run_task(task, &progress, cancel).await;
    runtime.shutdown().await;
    progress.finish();
    match outcome {
        Ok(outcome) => report(
            &outcome,
            args.json,
            owes_result,
            &runtime.config().llm.base_url,
        ),
        Err(e) => {
            let message = e.to_string();
            let exit_code = fail(args.json, &message, e.code().as_str(), exit::of_error(&e));
            if !args.json {
                hint(&runtime.config().llm.base_url, &message);
            }
            exit_code
        }
    }
}

/// After an error that says no model server answers: the quick start's command that
/// starts one where agentplane looks.
fn hint(base_url: &str, message: &str) {
    if let Some(command) = crate::model_hint::local_model_command(base_url, message) {
        eprintln!("hint: {}", crate::model_hint::describe(&command));
    }
}

/// Prints the outcome and picks the exit code. A text answer is a success for a plain
/// chat agent, a failure (1, with a one-line reason on stderr) for an agent that owes a
/// result in its output schema.
fn report(outcome: &TurnOutcome, as_json: bool, owes_result: bool, base_url: &str) -> Exit {
    let unfinished = owes_result && outcome.stop_reason == StopReason::TextAnswer;
    if unfinished {
        eprintln!(
            "error: the agent answered with text instead of a result matching its output \
             schema (stop_reason text_answer)"
        );
    }
    let code = match (outcome.stop_reason, &outcome.error) {
        _ if unfinished => exit::AGENT_FAILED,
        (reason, _) if reason.is_success() => exit::SUCCESS,
        (StopReason::Cancelled, _) => exit::CANCELLED,
        (_, Some(error)) => exit::of_code(error.code),
        _ => exit::AGENT_FAILED,
    };
    if as_json {
        let document = json!({
            "thread_id": outcome.thread,
            "turn_id": outcome.turn,
            "stop_reason": outcome.stop_reason,
            "result": outcome.result,
            "usage": outcome.usage,
            "error": outcome.error.as_ref().map(|e| json!({"code": e.code, "message": e.message})),
        });
        println!("{document}");
        return code;
    }
    match outcome.stop_reason {
        StopReason::TextAnswer => {
            println!(
                "{}",
                shown(outcome.result["text"].as_str().unwrap_or_default())
            );
        }
        StopReason::Finished => match serde_json::to_string_pretty(&outcome.result) {
            Ok(text) => println!("{}", shown(&text)),
            Err(_) => println!("{}", shown(&outcome.result.to_string())),
        },
        StopReason::Cancelled => eprintln!("cancelled"),
        StopReason::StepLimit => eprintln!("error: the agent used all its steps without finishing"),
        StopReason::Error | StopReason::Interrupted => {
            if let Some(error) = &outcome.error {
                eprintln!(
                    "error [{}]: {}",
                    error.code,
                    agentplane_core::visible::visible_line(&error.message)
                );
                hint(base_url, &error.message);
            }
        }
    }
    eprintln!(
        "turn {} ({}), {} tokens in, {} out — `agentplane runlog {}` shows every step",
        outcome.turn,
        outcome.stop_reason.as_str(),
        outcome.usage.input_tokens,
        outcome.usage.output_tokens,
        outcome.turn
    );
    code
}

/// Reports an error that kept the task from running.
fn fail(as_json: bool, message: &str, code: &str, exit_code: Exit) -> Exit {
    if as_json {
        println!("{}", json!({"error": {"code": code, "message": message}}));
    } else {
        eprintln!("error [{code}]: {message}");
    }
    exit_code
}

/// The answer as printed: on a terminal, by the one rule of what a person sees (line
/// breaks and tabs kept; escape sequences, bidirectional overrides and invisible
/// characters shown as `\u{…}`); into a pipe or a file, exactly as the model wrote it
/// (`--json` is the machine's form either way).
fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        agentplane_core::visible::visible(text, agentplane_core::visible::Lines::Keep)
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}
