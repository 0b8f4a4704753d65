//! The stdio side of a connection: the server process (started by
//! [`agentplane_process::process::start_server`]) and the tail of what it writes to stderr.
//!
//! stderr is drained all the time, so a chatty server never blocks on a full pipe, and
//! only its last [`STDERR_TAIL`] bytes are kept, for error messages. What must not live
//! here: the MCP protocol (rmcp speaks it over the pipes handed out by [`start`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::{ChildStdin, ChildStdout};
use tokio::task::JoinHandle;

use agentplane_process::process::{ServerCommand, ServerProcess, start_server};

/// Bytes of a server's stderr kept for error messages.
pub(crate) const STDERR_TAIL: usize = 2048;

/// The last bytes a server wrote to stderr, filled by a background task.
#[derive(Clone, Default)]
pub(crate) struct StderrTail {
    bytes: Arc<Mutex<Vec<u8>>>,
}

impl StderrTail {
    fn push(&self, chunk: &[u8]) {
        let mut bytes = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        bytes.extend_from_slice(chunk);
        if bytes.len() > STDERR_TAIL {
            let excess = bytes.len() - STDERR_TAIL;
            bytes.drain(..excess);
        }
    }

    /// The tail as text (lossy), trimmed.
    pub(crate) fn text(&self) -> String {
        let bytes = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&bytes).trim().to_owned()
    }
}

/// A started server: pipes for rmcp, the process, and its stderr.
pub(crate) struct Started {
    pub(crate) stdin: ChildStdin,
    pub(crate) stdout: ChildStdout,
    pub(crate) process: ServerProcess,
    pub(crate) stderr: StderrDrain,
}

/// The task draining stderr into a [`StderrTail`].
pub(crate) struct StderrDrain {
    tail: StderrTail,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl StderrDrain {
    /// Waits up to `grace` for stderr to end (the process exited and nothing else holds
    /// the pipe), so the tail holds the last words; then returns the tail.
    pub(crate) async fn settle(&self, grace: Duration) -> String {
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut task) = task
            && tokio::time::timeout(grace, &mut task).await.is_err()
        {
            *self.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
        }
        self.tail.text()
    }
}

impl Drop for StderrDrain {
    fn drop(&mut self) {
        if let Some(task) = self.task.lock().unwrap_or_else(|e| e.into_inner()).take() {
            task.abort();
        }
    }
}

/// Starts the server and its stderr drain.
pub(crate) fn start(command: &ServerCommand<'_>) -> std::io::Result<Started> {
    let started = start_server(command)?;
    let tail = StderrTail::default();
    let mut stderr = started.stderr;
    let sink = tail.clone();
    let task = tokio::spawn(async move {
        let mut buf = vec![0u8; 8192];
        while let Ok(n) = stderr.read(&mut buf).await {
            if n == 0 {
                break;
            }
            sink.push(&buf[..n]);
        }
    });
    Ok(Started {
        stdin: started.stdin,
        stdout: started.stdout,
        process: started.process,
        stderr: StderrDrain {
            tail,
            task: Mutex::new(Some(task)),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_only_the_last_bytes() {
        let tail = StderrTail::default();
        tail.push(&vec![b'a'; STDERR_TAIL]);
        tail.push(b"the end");
        let text = tail.text();
        assert_eq!(text.len(), STDERR_TAIL);
        assert!(text.ends_with("the end"));
    }
}
