//! The OTLP receiver the trace suites export to (`testkit/peers/otlp_receiver.py`, the
//! OpenTelemetry protobufs from PyPI): started on a free port, each span it gets written
//! to a file as one JSON line.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use agentplane_testkit::peers;
use serde_json::Value;

/// A running receiver; stopped when dropped.
pub struct Receiver {
    child: Child,
    /// Where it listens for OTLP over HTTP.
    pub port: u16,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a receiver writing each span it gets to `out`.
pub fn receiver(out: &Path) -> Receiver {
    let mut child = Command::new(peers::python())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../testkit/peers/otlp_receiver.py"))
        .arg(out)
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .expect("the OTLP receiver starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("its port");
    let port = line
        .trim()
        .strip_prefix("PORT ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port: {line:?}"));
    Receiver { child, port }
}

/// The spans received so far.
pub fn spans(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}
