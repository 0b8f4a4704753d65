//! `agentplane approvals`: tool calls a policy holds for a person, listed and decided
//! from a terminal.
//!
//! An HTTP client of `/v1/approvals` on a running `agentplane serve` (see
//! `remote.rs`), never of the store: a decision must reach the process that resumes the
//! suspended turn, and the server's rules (who may see and decide, schema checks of
//! edits, decided once) must hold for a terminal exactly as for any other client.
//! Arguments are checked before anything is sent; everything printed comes from the
//! server's answer, made safe for a terminal.

use agentplane_core::ApprovalId;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::remote::{Remote, RemoteError, ServerArgs};
use super::threads::one_line;
use crate::exit::{self, Exit};

/// Longest text shown for the arguments on a table line; `--json` shows everything.
const SHOWN_CHARS: usize = 80;

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ApprovalsArgs {
    #[command(subcommand)]
    action: Option<Action>,
    /// With no subcommand: `list`.
    #[command(flatten)]
    list: ListArgs,
}

#[derive(Subcommand)]
enum Action {
    /// The approvals you may see: pending ones, or with --all every one.
    List(ListArgs),
    /// Run the held call exactly as planned.
    Approve(DecideArgs),
    /// Run the held call with other arguments (checked against the tool's schema).
    Edit(EditArgs),
    /// Do not run the held call; the feedback goes back to the model.
    Reject(RejectArgs),
}

#[derive(Args)]
struct ListArgs {
    #[command(flatten)]
    server: ServerArgs,
    /// Also decided and expired approvals.
    #[arg(long)]
    all: bool,
    /// Print the server's JSON document instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct DecideArgs {
    /// The approval (`apr_…`, from `agentplane approvals`).
    id: String,
    #[command(flatten)]
    server: ServerArgs,
    /// Print the decided approval as JSON instead of one line.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct EditArgs {
    #[command(flatten)]
    decide: DecideArgs,
    /// The arguments to run the tool with, as a JSON object.
    #[arg(long, value_name = "JSON")]
    arguments: String,
}

#[derive(Args)]
struct RejectArgs {
    #[command(flatten)]
    decide: DecideArgs,
    /// Why, for the model (at most 4,000 characters).
    #[arg(long, value_name = "TEXT")]
    feedback: Option<String>,
}

pub async fn run(args: ApprovalsArgs) -> Exit {
    match args.action {
        None => list(args.list).await,
        Some(Action::List(list_args)) => list(list_args).await,
        Some(Action::Approve(decide_args)) => {
            decide(decide_args, json!({"decision": "approve"})).await
        }
        Some(Action::Edit(edit)) => match edited(&edit.arguments) {
            Ok(arguments) => {
                decide(
                    edit.decide,
                    json!({"decision": "edit", "arguments": arguments}),
                )
                .await
            }
            Err(e) => e.report(),
        },
        Some(Action::Reject(reject)) => {
            let mut body = json!({"decision": "reject"});
            if let Some(feedback) = reject.feedback {
                body["feedback"] = Value::String(feedback);
            }
            decide(reject.decide, body).await
        }
    }
}

async fn list(args: ListArgs) -> Exit {
    let remote = match Remote::new(&args.server) {
        Ok(remote) => remote,
        Err(e) => return e.report(),
    };
    let status = if args.all { "all" } else { "pending" };
    let body = match remote.get("/v1/approvals", &[("status", status)]).await {
        Ok(body) => body,
        Err(e) => return e.report(),
    };
    if args.json {
        println!("{body}");
        return exit::SUCCESS;
    }
    let approvals = body
        .get("approvals")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if approvals.is_empty() {
        eprintln!(
            "no {} for client `{}` on {}",
            if args.all {
                "approvals"
            } else {
                "pending approvals"
            },
            remote.client_id(),
            remote.base()
        );
        return exit::SUCCESS;
    }
    for approval in approvals {
        println!("{}", row(approval));
    }
    exit::SUCCESS
}

async fn decide(args: DecideArgs, body: Value) -> Exit {
    let id = match ApprovalId::parse(&args.id) {
        Ok(id) => id,
        Err(e) => return RemoteError::Usage(e).report(),
    };
    let remote = match Remote::new(&args.server) {
        Ok(remote) => remote,
        Err(e) => return e.report(),
    };
    let decided = match remote.post(&format!("/v1/approvals/{id}"), &body).await {
        Ok(decided) => decided,
        Err(e) => return e.report(),
    };
    if args.json {
        println!("{decided}");
    } else {
        let field = |name: &str| one_line(decided.get(name).and_then(Value::as_str).unwrap_or(""));
        println!(
            "{} {}: {} for thread {}; the turn resumes on the server",
            field("status"),
            field("id"),
            field("tool"),
            field("thread_id")
        );
    }
    exit::SUCCESS
}

/// `--arguments` as a JSON object; anything else is a usage error, found before
/// anything is sent.
fn edited(text: &str) -> Result<Value, RemoteError> {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(RemoteError::Usage(
            "--arguments must be a JSON object, e.g. '{\"path\":\"a.txt\"}'".to_owned(),
        )),
        Err(e) => Err(RemoteError::Usage(format!(
            "--arguments is not valid JSON: {e}"
        ))),
    }
}

/// One table line: id, status, tool, agent, thread, creation time, the arguments (the
/// edited ones once edited), shortened to one line.
fn row(approval: &Value) -> String {
    let field = |name: &str| one_line(approval.get(name).and_then(Value::as_str).unwrap_or(""));
    let arguments = match approval.get("edited_arguments") {
        Some(edited) if !edited.is_null() => edited,
        _ => approval.get("arguments").unwrap_or(&Value::Null),
    };
    let mut shown: String = one_line(&arguments.to_string())
        .chars()
        .take(SHOWN_CHARS + 1)
        .collect();
    if shown.chars().count() > SHOWN_CHARS {
        shown = shown.chars().take(SHOWN_CHARS - 1).collect();
        shown.push('…');
    }
    format!(
        "{:<40} {:<8} {:<16} {:<14} {:<36} {:<25} {shown}",
        field("id"),
        field("status"),
        field("tool"),
        field("agent"),
        field("thread_id"),
        field("created_at"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edited_arguments_must_be_a_json_object() {
        assert_eq!(
            edited(r#"{"path":"a.txt"}"#).expect("an object"),
            json!({"path": "a.txt"})
        );
        for bad in ["", "{", "[1]", "\"a\"", "null", "{\"a\":1} trailing"] {
            match edited(bad) {
                Err(e @ RemoteError::Usage(_)) => assert_eq!(e.exit(), exit::CONFIG),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn rows_are_one_short_line_that_a_tool_call_cannot_forge() {
        let line = row(&json!({
            "id": "apr_1", "status": "pending", "tool": "write\nfile\u{1b}[2J",
            "agent": "a", "thread_id": "thr_1", "created_at": "2026-01-01T00:00:00Z",
            "arguments": {"content": "x".repeat(500), "evil": "\n\u{1b}[2J"},
        }));
        assert!(!line.contains('\n') && !line.contains('\u{1b}'), "{line:?}");
        assert!(line.starts_with("apr_1"), "{line}");
        assert!(line.ends_with('…'), "{line}");
        let reversed = row(&json!({
            "id": "apr_1", "tool": "write_file\u{202e}",
            "arguments": {"path": "src/\u{202e}sr.niam\u{2066}\u{feff}"},
        }));
        assert!(!reversed.contains('\u{202e}') && !reversed.contains('\u{feff}'));
        assert!(reversed.contains("write_file\\u{202e}"), "{reversed}");
        assert!(
            reversed.ends_with(r#"{"path":"src/\u{202e}sr.niam\u{2066}\u{feff}"}"#),
            "{reversed}"
        );
        let edited = row(&json!({
            "id": "apr_1", "arguments": {"path": "a"}, "edited_arguments": {"path": "b"}
        }));
        assert!(edited.ends_with(r#"{"path":"b"}"#), "{edited}");
    }
}
