//! Live progress of a turn on stderr: a spinner while the model works, one line per
//! tool call as it starts and ends. Silent with `--json`; plain lines when stderr is
//! not a terminal. Shows what the stored events say, nothing else, and each line by the
//! one rule of what a person sees (`agentplane_core::visible`): a tool's arguments or
//! output holding an escape sequence or a bidirectional override is shown, not run.

use std::time::Duration;

use agentplane_core::visible::visible_line;
use agentplane_core::{Event, EventPayload, ToolStatus};
use agentplane_engine::TurnObserver;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A turn observer that draws progress.
pub struct Progress {
    bar: Option<ProgressBar>,
    lines: bool,
}

impl Progress {
    /// `spinner`: draw an animated spinner (a terminal); `lines`: print tool lines at all.
    pub fn new(spinner: bool, lines: bool) -> Self {
        let bar = spinner.then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(100));
            bar.set_message("starting");
            bar
        });
        Self { bar, lines }
    }

    /// Clears the spinner.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    fn line(&self, text: String) {
        if !self.lines {
            return;
        }
        let text = visible_line(&text);
        match &self.bar {
            Some(bar) => bar.println(text),
            None => eprintln!("{text}"),
        }
    }

    fn status(&self, text: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(visible_line(text).into_owned());
        }
    }
}

impl TurnObserver for Progress {
    fn on_event(&self, event: &Event) {
        match &event.payload {
            EventPayload::TurnStarted { agent, model, .. } => {
                self.line(format!("agent {agent} on {model}"));
                self.status("model is working");
            }
            EventPayload::ToolCallPlanned {
                tool, arguments, ..
            } => {
                self.line(format!("→ {tool} {}", preview(arguments)));
                self.status(&format!("running {tool}"));
            }
            EventPayload::ToolCallResult {
                tool,
                status,
                latency_ms,
                error_type,
                output,
                ..
            } => {
                match status {
                    ToolStatus::Ok => self.line(format!("✓ {tool} ({latency_ms} ms)")),
                    ToolStatus::Error => self.line(format!(
                        "✗ {tool} ({latency_ms} ms) {}: {}",
                        error_type.map(|e| e.as_str()).unwrap_or("error"),
                        first_line(output)
                    )),
                }
                self.status("model is working");
            }
            EventPayload::SecurityEvent {
                event_type, detail, ..
            } => {
                self.line(format!("! security: {event_type}: {}", first_line(detail)));
            }
            EventPayload::PolicyDenied {
                policy,
                policy_type,
                detail,
                ..
            } => {
                self.line(format!(
                    "! refused by {policy_type} policy `{policy}`: {}",
                    first_line(detail)
                ));
            }
            EventPayload::ProviderFailover {
                from, to, message, ..
            } => {
                self.line(format!(
                    "! provider {from} failed, trying {to}: {}",
                    first_line(message)
                ));
            }
            _ => {}
        }
    }
}

/// A one-line preview of tool arguments, at most 100 characters.
fn preview(arguments: &serde_json::Value) -> String {
    let text = arguments.to_string();
    if text.chars().count() > 100 {
        let cut: String = text.chars().take(100).collect();
        format!("{cut}…")
    } else {
        text
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preview_keeps_what_the_line_then_escapes() {
        let planned = serde_json::json!({"path": "src/\u{202e}sr.niam", "x": "\u{1b}]0;t\u{7}"});
        let line = visible_line(&format!("→ write_file {}", preview(&planned))).into_owned();
        assert!(
            !line.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{line:?}"
        );
        assert!(line.contains("src/\\u{202e}sr.niam"), "{line}");
    }
}
