//! The `terminal/*` client capability: a command the agent runs through us. Each one is
//! put to the turn as our `run_command` tool (policies), then run by our own `shell`
//! ensemble, handed to us by the runtime: the agent's `shell_allow` list, a bare program
//! name, no shell, the workspace as cwd, a scrubbed environment, the kernel sandbox, the
//! tool timeout and output cap. Offered only when the agent has a `shell_allow` list.
//!
//! A terminal runs to its end in the background; `terminal/output` shows its report
//! once it ended (nothing is streamed while it runs), `terminal/wait_for_exit` waits for
//! it, `terminal/kill` and `terminal/release` stop it (dropping the run kills its
//! process group).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentplane_engine::ports::external::ToTurn;

use crate::capabilities::Refused;
use agentplane_engine::ports::{Ensemble, ToolContext};
use serde_json::json;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// How a terminal's command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    /// The shell tool's report: exit line, stdout, stderr.
    pub output: String,
    pub truncated: bool,
    pub exit_code: Option<u32>,
    pub signal: Option<String>,
}

struct Terminal {
    ended: watch::Receiver<Option<Ended>>,
    task: JoinHandle<()>,
}

/// The terminals of one prompt.
pub struct Terminals {
    shell: Option<Arc<dyn Ensemble>>,
    workspace: PathBuf,
    timeout: Duration,
    output_cap: usize,
    open: Mutex<HashMap<String, Terminal>>,
    next: Mutex<u64>,
}

impl Terminals {
    /// Terminals running commands through `shell` (none: every create is refused) in
    /// `workspace`.
    pub fn new(
        shell: Option<Arc<dyn Ensemble>>,
        workspace: PathBuf,
        timeout: Duration,
        output_cap: usize,
    ) -> Self {
        Self {
            shell,
            workspace,
            timeout,
            output_cap,
            open: Mutex::new(HashMap::new()),
            next: Mutex::new(0),
        }
    }

    /// `terminal/create`: asks the turn, then starts the command; the terminal's id.
    pub async fn create(
        &self,
        to_turn: &mpsc::Sender<ToTurn>,
        command: String,
        args: Vec<String>,
    ) -> Result<String, Refused> {
        let Some(shell) = self.shell.clone() else {
            return Err(Refused::NotOffered(
                "this client offers no terminals to this agent".to_owned(),
            ));
        };
        let arguments = json!({ "program": command, "args": args });
        // What runs is what the gate gave back (the content policies' redaction).
        let arguments = crate::capabilities::gate(to_turn, "run_command", arguments).await?;
        let id = {
            let mut next = self.next.lock().map_err(|_| poisoned())?;
            *next += 1;
            format!("term-{next}")
        };
        let (done, ended) = watch::channel(None);
        let ctx = ToolContext {
            workspace: self.workspace.clone(),
            timeout: self.timeout,
            output_cap: self.output_cap,
            scope: None,
        };
        let to_turn = to_turn.clone();
        let task = tokio::spawn(async move {
            let result = shell.call("run_command", arguments, &ctx).await;
            let ended = match result {
                Ok(output) => {
                    // The agent sees the report as the turn screens it (a tool's
                    // result); a refusal or a turn that is over shows no output.
                    let (exit_code, signal) = (exit_code(&output.content), signal(&output.content));
                    let shown =
                        crate::capabilities::screen_output(&to_turn, "run_command", output.content)
                            .await
                            .unwrap_or_else(|refused| refused.message());
                    Ended {
                        exit_code,
                        signal,
                        output: shown,
                        truncated: output.truncated,
                    }
                }
                Err(error) => {
                    if let Some(violation) = &error.security {
                        let _ = to_turn.try_send(ToTurn::Security {
                            event_type: violation.event_type.clone(),
                            detail: format!("ACP agent terminal: {}", violation.detail),
                        });
                    }
                    Ended {
                        output: error.message,
                        truncated: false,
                        exit_code: None,
                        signal: None,
                    }
                }
            };
            let _ = done.send(Some(ended));
        });
        if let Ok(mut open) = self.open.lock() {
            open.insert(id.clone(), Terminal { ended, task });
        }
        Ok(id)
    }

    fn watch_of(&self, id: &str) -> Result<watch::Receiver<Option<Ended>>, Refused> {
        self.open
            .lock()
            .ok()
            .and_then(|open| open.get(id).map(|t| t.ended.clone()))
            .ok_or_else(|| no_terminal(id))
    }

    /// `terminal/output`: the report once it ended, else nothing yet.
    pub fn output(&self, id: &str) -> Result<Option<Ended>, Refused> {
        Ok(self.watch_of(id)?.borrow().clone())
    }

    /// `terminal/wait_for_exit`.
    pub async fn wait(&self, id: &str) -> Result<Ended, Refused> {
        let mut ended = self.watch_of(id)?;
        loop {
            if let Some(end) = ended.borrow().clone() {
                return Ok(end);
            }
            if ended.changed().await.is_err() {
                return Err(Refused::Cancelled(format!("terminal `{id}` was killed")));
            }
        }
    }

    /// `terminal/kill` (`release: false`) and `terminal/release` (`release: true`).
    pub fn stop(&self, id: &str, release: bool) -> Result<(), Refused> {
        let mut open = self.open.lock().map_err(|_| poisoned())?;
        let Some(terminal) = open.get(id) else {
            return Err(no_terminal(id));
        };
        // Aborting drops the run, and with it the process group (killed on drop).
        terminal.task.abort();
        if release {
            open.remove(id);
        }
        Ok(())
    }
}

impl Drop for Terminals {
    fn drop(&mut self) {
        if let Ok(open) = self.open.lock() {
            for terminal in open.values() {
                terminal.task.abort();
            }
        }
    }
}

fn no_terminal(id: &str) -> Refused {
    Refused::NotFound {
        what: id.to_owned(),
        message: format!("there is no terminal `{id}`"),
    }
}

fn poisoned() -> Refused {
    Refused::Failed("the terminal table is unusable after a panic".to_owned())
}

/// `exit code: N` on the report's first line.
fn exit_code(report: &str) -> Option<u32> {
    report
        .lines()
        .next()?
        .strip_prefix("exit code: ")?
        .trim()
        .parse::<i64>()
        .ok()
        .map(|code| code as u32)
}

/// `terminated by signal N` on the report's first line.
fn signal(report: &str) -> Option<String> {
    report
        .lines()
        .next()?
        .strip_prefix("terminated by signal ")
        .map(|s| s.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_lines_are_read_from_the_shell_report() {
        assert_eq!(exit_code("exit code: 3\n--- stdout ---\n"), Some(3));
        assert_eq!(exit_code("timed out"), None);
        assert_eq!(signal("terminated by signal 9\n"), Some("9".to_owned()));
    }
}
