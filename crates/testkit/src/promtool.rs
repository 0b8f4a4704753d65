//! `promtool check metrics`: the Prometheus project's own check of the text format,
//! shared by the metrics crate's tests and the server's.

use std::io::Write;
use std::process::{Command, Stdio};

/// Runs `promtool check metrics` on `text` and asserts it passes. Without promtool
/// the check fails under CI (which installs it) and is skipped with a note elsewhere.
pub fn assert_accepts(text: &str) {
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "promtool is not on PATH under CI; .ci/run installs Debian's prometheus package"
            );
            eprintln!("note: promtool not found; `promtool check metrics` skipped");
            return;
        }
        Err(e) => panic!("promtool could not start: {e}"),
    };
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write to promtool");
    let output = child.wait_with_output().expect("promtool ran");
    assert!(
        output.status.success(),
        "promtool check metrics failed ({}):\n{}{}\n--- input ---\n{text}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
}
