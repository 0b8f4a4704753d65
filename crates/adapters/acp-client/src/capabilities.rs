//! The client capabilities we serve to an agent: reading and writing text files. Each
//! use is first put to the turn (the policy gate, under our tool names `read_file` and
//! `write_file`), then confined to the workspace by `agentplane_process::confine`, the
//! same rules as our own `fs` tools. A refused breach is reported as a security event.
//! What is written is what the gate gave back (the `content` policies may have
//! redacted it); what is read goes back to the turn to be screened as a tool's result
//! before the agent gets it ([`screen_output`]).
//!
//! Every error we answer carries a spec code and its reason in the message
//! ([`Refused`]): a missing file is `-32002` (resource not found; gemini decides from it
//! that a file is new), a path or argument we refuse `-32602`, a refusal by policy or
//! by a person `-32603` with the reason, a turn that is over `-32800`.

use std::path::Path;

use agentplane_engine::ports::ToolError;
use agentplane_engine::ports::external::{CapabilityUse, ToTurn};
use agentplane_process::confine::is_not_found;
use agentplane_process::confine::{create_regular_file, open_regular_file};
use agentplane_process::{Access, resolve_in_workspace};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

/// The largest file an agent may read or write through us.
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Why a request of the agent's was not done, as the error we answer it with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The file (or terminal) does not exist: `-32002`.
    NotFound { what: String, message: String },
    /// Arguments we do not accept (a path outside the workspace, `env` for a
    /// terminal, a file too large or not text): `-32602`.
    InvalidParams(String),
    /// This client does not offer that (no terminals for this agent): `-32601`.
    NotOffered(String),
    /// A policy or a person said no, or the work failed: `-32603`, with the reason
    /// as the message (never only in `data`).
    Failed(String),
    /// The turn is over (cancelled, ended): `-32800`.
    Cancelled(String),
}

impl Refused {
    /// Why, in words.
    pub(crate) fn message(self) -> String {
        match self {
            Self::NotFound { message, .. }
            | Self::InvalidParams(message)
            | Self::NotOffered(message)
            | Self::Failed(message)
            | Self::Cancelled(message) => message,
        }
    }

    /// The JSON-RPC error answering the agent.
    pub(crate) fn into_error(self) -> agent_client_protocol::Error {
        use agent_client_protocol::Error;
        match self {
            Self::NotFound { what, message } => {
                Error::new(-32002, format!("Resource not found: {message}"))
                    .data(json!({ "uri": what }))
            }
            Self::InvalidParams(message) => Error::new(-32602, message),
            Self::NotOffered(message) => Error::new(-32601, message),
            Self::Failed(message) => Error::new(-32603, message),
            Self::Cancelled(message) => Error::new(-32800, message),
        }
    }
}

/// Asks the turn whether `tool` may be used with `arguments`: the arguments to use.
pub(crate) async fn gate(
    to_turn: &mpsc::Sender<ToTurn>,
    tool: &str,
    arguments: serde_json::Value,
) -> Result<serde_json::Value, Refused> {
    let (answer, verdict) = oneshot::channel();
    let request = CapabilityUse {
        tool: tool.to_owned(),
        arguments,
    };
    if to_turn
        .send(ToTurn::Capability { request, answer })
        .await
        .is_err()
    {
        return Err(Refused::Cancelled("the turn is over".to_owned()));
    }
    match verdict.await {
        Ok(Ok(arguments)) => Ok(arguments),
        Ok(Err(why)) => Err(Refused::Failed(why)),
        Err(_) => Err(Refused::Cancelled("the turn did not answer".to_owned())),
    }
}

/// What the capability `tool` gives the agent, screened by the turn as that tool's
/// result: the text to send, or the refusal. A turn that does not answer gets nothing
/// through (fail-closed).
pub(crate) async fn screen_output(
    to_turn: &mpsc::Sender<ToTurn>,
    tool: &str,
    output: String,
) -> Result<String, Refused> {
    let (answer, screened) = oneshot::channel();
    let message = ToTurn::CapabilityOutput {
        tool: tool.to_owned(),
        output,
        answer,
    };
    if to_turn.send(message).await.is_err() {
        return Err(Refused::Cancelled("the turn is over".to_owned()));
    }
    match screened.await {
        Ok(Ok(text)) => Ok(text),
        Ok(Err(why)) => Err(Refused::Failed(why)),
        Err(_) => Err(Refused::Cancelled("the turn did not answer".to_owned())),
    }
}

/// The path as the confinement rules want it: relative to the workspace. ACP sends
/// absolute paths; one inside the workspace is made relative, any other stays absolute
/// and is refused by the confinement.
fn relative_to(workspace: &Path, path: &Path) -> String {
    match path.strip_prefix(workspace) {
        Ok(rest) if rest.as_os_str().is_empty() => ".".to_owned(),
        Ok(rest) => rest.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

async fn confine(
    to_turn: &mpsc::Sender<ToTurn>,
    workspace: &Path,
    path: &Path,
    access: Access,
) -> Result<std::path::PathBuf, Refused> {
    let requested = relative_to(workspace, path);
    resolve_in_workspace(workspace, &requested, access).map_err(|e| report(to_turn, path, e))
}

/// The refusal of a confinement error, after reporting a breach as a security event.
fn report(to_turn: &mpsc::Sender<ToTurn>, path: &Path, e: ToolError) -> Refused {
    if let Some(violation) = &e.security {
        let _ = to_turn.try_send(ToTurn::Security {
            event_type: violation.event_type.clone(),
            detail: format!("ACP agent: {}", violation.detail),
        });
        return Refused::InvalidParams(e.message);
    }
    if is_not_found(&e) {
        return Refused::NotFound {
            what: path.display().to_string(),
            message: e.message,
        };
    }
    Refused::Failed(e.message)
}

/// `fs/read_text_file`: the file's text, from 1-based `line`, at most `limit` lines.
pub async fn read_text_file(
    to_turn: &mpsc::Sender<ToTurn>,
    workspace: &Path,
    path: &Path,
    line: Option<u32>,
    limit: Option<u32>,
) -> Result<String, Refused> {
    let shown = relative_to(workspace, path);
    gate(to_turn, "read_file", json!({ "path": shown })).await?;
    let resolved = confine(to_turn, workspace, path, Access::Read).await?;
    // Opened like our own `read_file`: no symlink swapped in since the check, no
    // hard link to a file elsewhere, no FIFO to hang on.
    let root = workspace.to_path_buf();
    let name = shown.clone();
    let read = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, FileFailure> {
        use std::io::Read;
        let file = open_regular_file(&root, &resolved, &name).map_err(FileFailure::Confined)?;
        let mut bytes = Vec::new();
        file.take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| FileFailure::Io(format!("cannot read {name}: {e}")))?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(FileFailure::TooLarge(format!(
                "{name} is larger than {MAX_FILE_BYTES} bytes"
            )));
        }
        Ok(bytes)
    })
    .await
    .map_err(|e| Refused::Failed(format!("cannot read {shown}: {e}")))?;
    let bytes = match read {
        Ok(bytes) => bytes,
        Err(FileFailure::Confined(e)) => return Err(report(to_turn, path, e)),
        Err(FileFailure::Io(message)) => return Err(Refused::Failed(message)),
        Err(FileFailure::TooLarge(message)) => return Err(Refused::InvalidParams(message)),
    };
    let text = String::from_utf8(bytes)
        .map_err(|_| Refused::InvalidParams(format!("{shown} is not UTF-8 text")))?;
    let text = if line.is_none() && limit.is_none() {
        text
    } else {
        let skip = line.unwrap_or(1).saturating_sub(1) as usize;
        let take = limit.map_or(usize::MAX, |l| l as usize);
        text.split_inclusive('\n')
            .skip(skip)
            .take(take)
            .collect::<String>()
    };
    screen_output(to_turn, "read_file", text).await
}

/// `fs/write_text_file`: creates or replaces the file.
pub async fn write_text_file(
    to_turn: &mpsc::Sender<ToTurn>,
    workspace: &Path,
    path: &Path,
    content: &str,
) -> Result<(), Refused> {
    let shown = relative_to(workspace, path);
    if content.len() as u64 > MAX_FILE_BYTES {
        return Err(Refused::InvalidParams(format!(
            "refusing to write more than {MAX_FILE_BYTES} bytes"
        )));
    }
    let allowed = gate(
        to_turn,
        "write_file",
        json!({ "path": shown, "content": content }),
    )
    .await?;
    // What the content policies left of it; the path is the one confined below.
    let content = allowed
        .get("content")
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| Refused::Failed("the gate gave back no content to write".to_owned()))?
        .to_owned();
    let resolved = confine(to_turn, workspace, path, Access::Write).await?;
    if let Some(parent) = resolved.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| Refused::Failed(format!("cannot create the folder of {shown}: {e}")))?;
    }
    let root = workspace.to_path_buf();
    let name = shown.clone();
    let written = tokio::task::spawn_blocking(move || -> Result<(), FileFailure> {
        use std::io::Write;
        let mut file =
            create_regular_file(&root, &resolved, &name).map_err(FileFailure::Confined)?;
        file.write_all(content.as_bytes())
            .and_then(|()| file.flush())
            .map_err(|e| FileFailure::Io(format!("cannot write {name}: {e}")))
    })
    .await
    .map_err(|e| Refused::Failed(format!("cannot write {shown}: {e}")))?;
    match written {
        Ok(()) => Ok(()),
        Err(FileFailure::Confined(e)) => Err(report(to_turn, path, e)),
        Err(FileFailure::Io(message)) => Err(Refused::Failed(message)),
        Err(FileFailure::TooLarge(message)) => Err(Refused::InvalidParams(message)),
    }
}

/// Why opening, reading or writing a file failed: refused by confinement (reported as
/// a security event when a breach), or an I/O error.
enum FileFailure {
    Confined(ToolError),
    Io(String),
    TooLarge(String),
}
