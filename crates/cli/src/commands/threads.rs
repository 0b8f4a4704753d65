//! `agentplane threads`: a client's threads on a running server, newest first (every
//! page of the paginated listing).
//!
//! An HTTP client of `GET /v1/threads` (see `remote.rs`); it never opens the store, so
//! it shows what the API shows to this client id and nothing more.

use clap::Args;
use serde_json::Value;

use super::remote::{Remote, ServerArgs};
use crate::exit::{self, Exit};

#[derive(Args)]
pub struct ThreadsArgs {
    #[command(flatten)]
    server: ServerArgs,
    /// Print the server's JSON document instead of a table.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: ThreadsArgs) -> Exit {
    let remote = match Remote::new(&args.server) {
        Ok(remote) => remote,
        Err(e) => return e.report(),
    };
    // The API answers a page at a time; follow the cursors to the last page.
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut query = vec![("limit", "1000")];
        if let Some(cursor) = &cursor {
            query.push(("cursor", cursor.as_str()));
        }
        let page = match remote.get("/v1/threads", &query).await {
            Ok(page) => page,
            Err(e) => return e.report(),
        };
        all.extend(list(&page).iter().cloned());
        match page.get("next_cursor").and_then(Value::as_str) {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    let body = serde_json::json!({ "threads": all, "next_cursor": null });
    if args.json {
        println!("{body}");
        return exit::SUCCESS;
    }
    let threads = list(&body);
    if threads.is_empty() {
        eprintln!(
            "no threads for client `{}` on {}",
            remote.client_id(),
            remote.base()
        );
        return exit::SUCCESS;
    }
    for thread in threads {
        println!("{}", row(thread));
    }
    exit::SUCCESS
}

/// The threads of a listing: `{"threads": [...]}`, or a bare array.
fn list(body: &Value) -> &[Value] {
    body.get("threads")
        .unwrap_or(body)
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// One table line: id, agent, creation time, title (or the working directory).
fn row(thread: &Value) -> String {
    let field = |name: &str| thread.get(name).and_then(Value::as_str).unwrap_or("");
    let title = match field("title") {
        "" => format!("({})", field("cwd")),
        title => one_line(title),
    };
    format!(
        "{:<36} {:<14} {:<25} {title}",
        field("id"),
        field("agent"),
        field("created_at")
    )
}

/// Outside text (a title, a tool's arguments, a model's answer) on one line of a
/// terminal, by the one rule of what a person sees (`agentplane_core::visible`): line
/// breaks, control, bidirectional-override and invisible characters written as
/// `\u{…}`, so a hostile text can neither forge table lines, move the cursor, retitle
/// the window, nor draw itself reversed.
pub fn one_line(text: &str) -> String {
    agentplane_core::visible::visible_line(text).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn listings_are_read_in_either_shape() {
        let wrapped = json!({"threads": [{"id": "thread_1"}]});
        assert_eq!(list(&wrapped).len(), 1);
        let bare = json!([{"id": "thread_1"}, {"id": "thread_2"}]);
        assert_eq!(list(&bare).len(), 2);
        assert!(list(&json!({"other": 1})).is_empty());
    }

    #[test]
    fn rows_cannot_be_forged_by_a_title() {
        let line = row(&json!({
            "id": "thread_1", "agent": "engineering", "created_at": "2026-01-01T00:00:00Z",
            "title": "fine\nthread_2 forged\u{1b}[2J"
        }));
        assert!(!line.contains('\n') && !line.contains('\u{1b}'), "{line:?}");
        assert!(line.starts_with("thread_1"));
        let untitled = row(&json!({"id": "thread_1", "cwd": "/work"}));
        assert!(untitled.ends_with("(/work)"), "{untitled}");
    }
}
