//! `shell`: runs one allowlisted program with arguments, never through a shell.
//!
//! "shell" names what the model asks for, not how it runs: the program is a bare name
//! that must be on the agent's allowlist and on `PATH`, and its arguments go to it as
//! an argv, so `;`, `|`, `$(…)` and backticks are literal text. Whatever runs is
//! confined by the kernel to the workspace ([`agentplane_process::sandbox`]); the allowlist decides
//! *which* programs, the kernel *where* they reach. `sh -c` works only when the
//! allowlist names `sh`, and then runs anything, but only inside the sandbox. A
//! non-zero exit is a result the model reads, not an error.
//!
//! Before anything runs, arguments naming paths outside the workspace and the
//! sandbox's roots are refused ([`paths`]), and git's arguments pass git's own screen
//! and get a hardened environment ([`git`]).
//!
//! With a `data_scope` in force ([`ToolContext::scope`]) a program runs only when the
//! workspace itself is in scope: a program can reach every file under its working
//! directory, so a scope granting only part of the workspace refuses the shell. It
//! never gets secrets: `process` scrubs its environment.
//!
//! What must not live here: spawning (that is `process`, the one place), and any
//! interpretation of the arguments.

use agentplane_core::{ToolErrorKind, ToolSpec};
use agentplane_engine::ports::{
    EgressDecision, Ensemble, SecurityViolation, ToolContext, ToolError, ToolOutput,
};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use crate::text;
use crate::web::NETWORK_DENIED;
use agentplane_process::confine::SANDBOX_VIOLATION;
use agentplane_process::process::{self, Captured, Finished, Invocation, Outcome};
use agentplane_process::sandbox::Sandbox;

mod egress;
mod git;
mod paths;

/// The event type of a refused program.
pub const COMMAND_NOT_ALLOWED: &str = "command_not_allowed";

/// The builtin `shell` ensemble for one agent: the programs it may run, by bare name.
#[derive(Debug, Clone)]
pub struct ShellEnsemble {
    allow: Vec<String>,
    sandbox: Sandbox,
    /// The agent's `network.allow_private`, for the egress proxy's rule.
    allow_private: bool,
}

impl ShellEnsemble {
    /// An ensemble that runs only the programs named in `allow` (bare names such as
    /// `git` or `cargo`, matched exactly; an entry with a path separator never matches),
    /// in the default sandbox: required, no network.
    pub fn new(allow: Vec<String>) -> Self {
        Self::with_sandbox(allow, Sandbox::default())
    }

    /// As [`ShellEnsemble::new`], confined by `sandbox`.
    pub fn with_sandbox(allow: Vec<String>, sandbox: Sandbox) -> Self {
        Self {
            allow,
            sandbox,
            allow_private: false,
        }
    }

    /// Lets the programs' connections through the egress proxy reach private networks
    /// (`network.allow_private`; loopback stays closed, see `egress`).
    pub fn allowing_private(mut self, allow_private: bool) -> Self {
        self.allow_private = allow_private;
        self
    }

    /// The allowlist, as given.
    pub fn allowed(&self) -> &[String] {
        &self.allow
    }

    /// The confinement its programs run under.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunArgs {
    program: String,
    #[serde(default)]
    args: Vec<String>,
}

#[async_trait]
impl Ensemble for ShellEnsemble {
    fn name(&self) -> &str {
        "shell"
    }

    fn tools(&self) -> Vec<ToolSpec> {
        let allowed = if self.allow.is_empty() {
            "none".to_string()
        } else {
            self.allow.join(", ")
        };
        vec![ToolSpec {
            name: "run_command".into(),
            description: format!(
                "Run one program in the workspace and get its exit code, stdout and stderr. \
                 The program is executed directly, not by a shell: each argument is passed \
                 as is, so quotes, pipes, redirections, `;` and `$(...)` have no special \
                 meaning. Allowed programs: {allowed}."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "program": {"type": "string", "minLength": 1, "description": "Bare program name from the allowed list."},
                    "args": {"type": "array", "items": {"type": "string"}, "description": "Arguments, one per item."}
                },
                "required": ["program"],
                "additionalProperties": false
            }),
            side_effects: true,
        }]
    }

    fn preview(&self, tool: &str, args: &serde_json::Value, ctx: &ToolContext) -> Option<String> {
        (tool == "run_command").then(|| ShellEnsemble::preview(self, args, &ctx.workspace))
    }

    async fn call(
        &self,
        tool: &str,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        if tool != "run_command" {
            return Err(crate::call::unknown_tool(self.name(), tool));
        }
        let args: RunArgs = crate::call::parse_args(tool, args)?;
        let program = self.admit(&args)?;
        let env = self.screen(&args, &ctx.workspace)?;
        // Checked at every call: a workspace swapped for a symlink is never entered.
        let workspace = crate::fs::canonical_workspace(ctx)?;
        if ctx.scope.is_some() {
            crate::fs::check_path_scope(ctx, &workspace, ".")?;
        }
        let finished = process::run(&Invocation {
            program: &program,
            name: &args.program,
            args: &args.args,
            workspace: &ctx.workspace,
            timeout: ctx.timeout,
            output_cap: ctx.output_cap,
            env: &env,
            sandbox: &self.sandbox,
            egress: Some(std::sync::Arc::new(egress::ShellEgress {
                allow_private: self.allow_private,
                scope: ctx.scope.clone(),
            })),
        })
        .await
        .map_err(|e| {
            ToolError::new(
                ToolErrorKind::ExecutionFailed,
                format!("could not start {}: {e}", args.program),
            )
        })?;

        let security = refused_connections(&finished);
        let (report, truncated) = render(&finished, ctx.output_cap);
        if finished.outcome == Outcome::TimedOut {
            return Err(ToolError::new(
                ToolErrorKind::Timeout,
                format!(
                    "{} did not finish within {} ms; its process group was killed.\n{report}",
                    args.program,
                    ctx.timeout.as_millis()
                ),
            ));
        }
        Ok(ToolOutput {
            content: report,
            truncated,
            security,
            egress: finished
                .egress
                .iter()
                .map(|decided| EgressDecision {
                    destination: decided.destination.clone(),
                    allowed: decided.allowed,
                    detail: decided.detail.clone(),
                })
                .collect(),
        })
    }
}

/// A `network_denied` for every connection the egress proxy refused.
fn refused_connections(finished: &Finished) -> Vec<SecurityViolation> {
    finished
        .egress
        .iter()
        .filter(|egress| !egress.allowed)
        .map(|egress| SecurityViolation {
            event_type: NETWORK_DENIED.to_owned(),
            detail: format!(
                "egress proxy refused {}: {}",
                egress.destination, egress.detail
            ),
        })
        .collect()
}

impl ShellEnsemble {
    /// The argument screens (paths for every program, git's own for git). Returns the
    /// variables the program gets besides the scrubbed environment.
    fn screen(
        &self,
        args: &RunArgs,
        workspace: &std::path::Path,
    ) -> Result<Vec<(String, String)>, ToolError> {
        if let Some(path) = paths::outside(&args.args, workspace, &self.sandbox) {
            return Err(ToolError::violation(
                ToolErrorKind::SandboxViolation,
                SANDBOX_VIOLATION,
                format!(
                    "argument {path:?} of {} names a path outside the workspace",
                    args.program
                ),
            ));
        }
        if args.program != "git" {
            return Ok(Vec::new());
        }
        git::screen(&args.args, self.sandbox.network).map_err(|refusal| {
            let event = if refusal.network {
                NETWORK_DENIED
            } else {
                COMMAND_NOT_ALLOWED
            };
            ToolError::violation(ToolErrorKind::NotAllowed, event, refusal.message)
        })?;
        Ok(git::environment(self.sandbox.network))
    }

    /// What a call would actually run, for a person asked to permit it: the resolved
    /// program, its arguments, the variables it gets and its confinement; or why it
    /// would be refused.
    pub fn preview(&self, args: &serde_json::Value, workspace: &std::path::Path) -> String {
        let args: RunArgs = match serde_json::from_value(args.clone()) {
            Ok(args) => args,
            Err(e) => return format!("refused: invalid arguments: {e}"),
        };
        let outcome = self
            .admit(&args)
            .and_then(|program| Ok((program, self.screen(&args, workspace)?)));
        match outcome {
            Err(e) => format!("refused: {}", e.message),
            Ok((program, env)) => {
                let mut line = program.display().to_string();
                for arg in &args.args {
                    line.push(' ');
                    line.push_str(&format!("{arg:?}"));
                }
                if !env.is_empty() {
                    let vars: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
                    line.push_str(&format!("\nwith {}", vars.join(" ")));
                }
                line.push_str(&format!(
                    "\nin {} under: {}",
                    workspace.display(),
                    self.sandbox.in_force()
                ));
                line
            }
        }
    }

    /// Checks the program name against the rules and the allowlist and finds it.
    fn admit(&self, args: &RunArgs) -> Result<std::path::PathBuf, ToolError> {
        let name = args.program.as_str();
        if name.contains('\0') || args.args.iter().any(|a| a.contains('\0')) {
            return Err(ToolError::new(
                ToolErrorKind::InvalidArguments,
                "the program and arguments must not contain NUL bytes",
            ));
        }
        if name.contains(['/', '\\']) {
            return Err(ToolError::violation(
                ToolErrorKind::NotAllowed,
                COMMAND_NOT_ALLOWED,
                format!("program {name:?} refused: give a bare program name, not a path"),
            ));
        }
        if !self.allow.iter().any(|allowed| allowed == name) {
            return Err(ToolError::violation(
                ToolErrorKind::NotAllowed,
                COMMAND_NOT_ALLOWED,
                format!(
                    "program {name:?} is not allowed for this agent; allowed: {}",
                    self.allow.join(", ")
                ),
            ));
        }
        process::find_program(name).ok_or_else(|| {
            ToolError::new(
                ToolErrorKind::ExecutionFailed,
                format!("program {name:?} is allowed but was not found on PATH"),
            )
        })
    }
}

/// The model's view of a run: how it ended, then stdout and stderr, then notes on
/// anything cut. Returns the text and whether output was truncated.
fn render(finished: &Finished, cap: usize) -> (String, bool) {
    let mut out = match finished.outcome {
        Outcome::Exited(status) => exit_line(status),
        Outcome::TimedOut => "timed out".to_string(),
        Outcome::OutputOverflow => format!(
            "killed after producing more than {} bytes of output",
            process::DRAIN_CEILING
        ),
    };
    let mut notes = Vec::new();
    for (label, stream) in [("stdout", &finished.stdout), ("stderr", &finished.stderr)] {
        let (shown, _) = text::prefix(&stream.kept, cap);
        out.push_str(&format!("\n--- {label} ---\n"));
        out.push_str(&shown);
        if stream.truncated() {
            notes.push(truncation_note(label, stream));
        }
    }
    if !finished.egress.is_empty() {
        // Every connection the egress proxy decided, in the call's recorded result.
        out.push_str("\n--- network (egress proxy) ---\n");
        for egress in &finished.egress {
            let verdict = if egress.allowed { "allowed" } else { "refused" };
            out.push_str(&format!(
                "{verdict} {}: {}\n",
                egress.destination, egress.detail
            ));
        }
    }
    if finished.pipes_left_open {
        notes.push(
            "[a detached process kept the output open; output may be incomplete]".to_string(),
        );
    }
    let truncated = finished.stdout.truncated() || finished.stderr.truncated();
    for note in notes {
        out.push('\n');
        out.push_str(&note);
    }
    (out, truncated)
}

fn truncation_note(label: &str, stream: &Captured) -> String {
    format!(
        "[{label} truncated: {} bytes produced, first {} kept]",
        stream.total,
        stream.kept.len()
    )
}

#[cfg(unix)]
fn exit_line(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code: {code}"),
        (None, Some(signal)) => format!("terminated by signal {signal}"),
        (None, None) => "exit status unknown".to_string(),
    }
}

#[cfg(not(unix))]
fn exit_line(status: std::process::ExitStatus) -> String {
    match status.code() {
        Some(code) => format!("exit code: {code}"),
        None => "exit status unknown".to_string(),
    }
}
