//! `agentplane history THREAD`: a thread's turns on a running server, optionally with
//! every event and with internal (compaction) turns.
//!
//! An HTTP client of `GET /v1/threads/{id}/history` (see `remote.rs`). The thread id is
//! checked before anything is sent; everything printed comes from the server's answer,
//! made safe for a terminal.

use agentplane_core::ThreadId;
use clap::Args;
use serde_json::Value;

use super::remote::{Remote, RemoteError, ServerArgs};
use super::threads::one_line;
use crate::exit::{self, Exit};

/// Longest text shown for one value on a line; `--json` shows everything.
const SHOWN_CHARS: usize = 120;

#[derive(Args)]
pub struct HistoryArgs {
    /// The thread (`thr_…`, from `agentplane threads`).
    thread: String,
    #[command(flatten)]
    server: ServerArgs,
    /// Show every event of each turn.
    #[arg(long)]
    events: bool,
    /// Include internal turns (compaction summaries).
    #[arg(long)]
    internal: bool,
    /// Print the server's JSON document instead of text.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: HistoryArgs) -> Exit {
    let thread = match ThreadId::parse(&args.thread) {
        Ok(thread) => thread,
        Err(e) => return RemoteError::Usage(e).report(),
    };
    let remote = match Remote::new(&args.server) {
        Ok(remote) => remote,
        Err(e) => return e.report(),
    };
    let mut query = Vec::new();
    if args.events {
        query.push(("includeEvents", "1"));
    }
    if args.internal {
        query.push(("includeInternal", "1"));
    }
    let path = format!("/v1/threads/{thread}/history");
    let body = match remote.get(&path, &query).await {
        Ok(body) => body,
        Err(e) => return e.report(),
    };
    if args.json {
        println!("{body}");
    } else {
        print!("{}", render(&body));
    }
    exit::SUCCESS
}

/// The history as text: the thread, then each turn with its input, outcome and events.
fn render(body: &Value) -> String {
    let mut out = String::new();
    let thread = body.get("thread").unwrap_or(&Value::Null);
    let text =
        |value: &Value, name: &str| shown(value.get(name).and_then(Value::as_str).unwrap_or(""));
    out.push_str(&format!(
        "{}  agent {}  cwd {}\n",
        text(thread, "id"),
        text(thread, "agent"),
        text(thread, "cwd")
    ));
    if let Some(title) = thread.get("title").and_then(Value::as_str) {
        out.push_str(&format!("title: {}\n", shown(title)));
    }
    if let Some(summary) = thread.get("summary").and_then(Value::as_str) {
        out.push_str(&format!("summary: {}\n", shown(summary)));
    }
    let turns = body
        .get("turns")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if turns.is_empty() {
        out.push_str("no turns yet\n");
    }
    for turn in turns {
        // An ended turn shows why it ended; a running one says so.
        let status = match turn.get("stop_reason").and_then(Value::as_str) {
            Some(reason) => shown(reason),
            None => text(turn, "status"),
        };
        let internal = if turn.get("internal").and_then(Value::as_bool) == Some(true) {
            "  [internal]"
        } else {
            ""
        };
        out.push_str(&format!(
            "\n{}  {status}  {}{internal}\n",
            text(turn, "id"),
            text(turn, "created_at")
        ));
        out.push_str(&format!("  > {}\n", text(turn, "input")));
        if let Some(result) = turn.get("result").filter(|r| !r.is_null()) {
            out.push_str(&format!("  < {}\n", answer(result)));
        }
        for event in turn
            .get("events")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            out.push_str(&format!("    {}\n", event_line(event)));
        }
    }
    out
}

/// A result as one line: the text of a text answer, else compact JSON.
fn answer(result: &Value) -> String {
    match result.get("text").and_then(Value::as_str) {
        Some(text) if result.as_object().is_some_and(|o| o.len() == 1) => shown(text),
        _ => shown(&result.to_string()),
    }
}

/// `#seq kind what`: one event on one line.
fn event_line(event: &Value) -> String {
    let seq = event.get("seq").and_then(Value::as_u64).unwrap_or_default();
    let kind = event.get("kind").and_then(Value::as_str).unwrap_or("?");
    let field = |name: &str| match event.get(name) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    let what = match kind {
        "turn_started" => format!("agent {} model {}", field("agent"), field("model")),
        "message_delta" => format!("{:?}", field("text")),
        "tool_call_planned" => format!("{} {}", field("tool"), field("arguments")),
        "tool_call_result" => format!(
            "{} {} {}ms {}",
            field("tool"),
            field("status"),
            field("latency_ms"),
            field("error_type")
        ),
        "permission_required" => format!(
            "{} {} {}",
            field("permission_id"),
            field("tool"),
            field("arguments")
        ),
        "permission_resolved" => format!(
            "{} {}: {}",
            field("permission_id"),
            field("decision"),
            field("reason")
        ),
        "security_event" => format!("{} {}", field("event_type"), field("detail")),
        "egress" => format!(
            "{} {} {} ({})",
            field("tool"),
            if event["allowed"] == true {
                "reached"
            } else {
                "refused"
            },
            field("destination"),
            field("detail")
        ),
        "usage" => format!(
            "{} tokens in, {} out ({})",
            field("input_tokens"),
            field("output_tokens"),
            field("model")
        ),
        "provider_failover" => format!(
            "{} → {} [{}] {}",
            field("from"),
            field("to"),
            field("code"),
            field("message")
        ),
        "error" => format!("[{}] {}", field("code"), field("message")),
        "a2a_request" => format!(
            "{} {} task {} → {}",
            field("direction"),
            field("method"),
            field("task"),
            field("outcome")
        ),
        "turn_completed" => field("stop_reason"),
        _ => String::new(),
    };
    format!("#{seq} {} {}", shown(kind), shown(what.trim()))
}

/// Text made safe and short for one line of a terminal.
fn shown(text: &str) -> String {
    let line = one_line(text);
    if line.chars().count() > SHOWN_CHARS {
        let mut cut: String = line.chars().take(SHOWN_CHARS).collect();
        cut.push('…');
        cut
    } else {
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_history_reads_as_turns_with_their_events() {
        let body = json!({
            "thread": {"id": "thread_1", "agent": "engineering", "cwd": "/w", "title": "t"},
            "turns": [{
                "id": "turn_1", "status": "ended", "stop_reason": "text_answer",
                "created_at": "2026-01-01T00:00:00Z", "input": "hello",
                "result": {"text": "Hi there"},
                "events": [
                    {"seq": 1, "kind": "turn_started", "agent": "engineering", "model": "m"},
                    {"seq": 2, "kind": "permission_resolved", "permission_id": "perm_1",
                     "decision": "declined", "reason": "agentplane stopped"},
                    {"seq": 3, "kind": "turn_completed", "stop_reason": "text_answer"}
                ]
            }]
        });
        let text = render(&body);
        assert!(
            text.contains("turn_1  text_answer  2026-01-01T00:00:00Z"),
            "{text}"
        );
        assert!(text.contains("  > hello\n  < Hi there\n"), "{text}");
        assert!(
            text.contains("#2 permission_resolved perm_1 declined: agentplane stopped"),
            "{text}"
        );
        assert!(text.contains("#3 turn_completed text_answer"), "{text}");
    }

    #[test]
    fn hostile_and_odd_answers_stay_on_their_lines() {
        let body = json!({
            "thread": {"id": "thread_1\n#99 forged"},
            "turns": [{"id": "turn_1", "status": "running", "input": "x".repeat(10_000) + "\u{1b}[2J",
                       "result": {"summary": "s"}, "events": [{"kind": 5}]}]
        });
        let text = render(&body);
        assert!(!text.contains('\u{1b}'), "{text}");
        assert!(!text.lines().any(|l| l.starts_with("#99")), "{text}");
        assert!(text.lines().all(|l| l.chars().count() < 300), "{text}");
        assert!(text.contains(r#"< {"summary":"s"}"#), "{text}");
        assert!(text.contains("#0 ? "), "{text}");
        assert!(text.contains("turn_1  running"), "{text}");
        assert!(render(&json!(null)).contains("no turns yet"));
    }
}
