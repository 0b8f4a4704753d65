//! The audit chain from outside (ADR 0048, `docs/audit.md`): `agentplane audit verify`
//! and `audit export` run as a user runs them, and the export checked by
//! `scripts/audit_verify.py`, which knows only the documented algorithm.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::Sandbox;

/// `agentplane audit ARGS` against the sandbox's configuration (its SQLite file, or
/// the database `db` names: `AGENTPLANE_DB`); no model is needed.
pub fn run(sb: &Sandbox, db: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new(crate::binary());
    cmd.current_dir(&sb.base)
        .env("AGENTPLANE_CONFIG", sb.root.join("agentplane.toml"))
        .env_remove("AGENTPLANE_DB");
    if let Some(db) = db {
        cmd.env("AGENTPLANE_DB", db);
    }
    cmd.arg("audit")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run agentplane audit")
}

/// `audit verify --json` on the sandbox: the exit status, the report, and everything
/// it printed (for a failure's message).
pub fn verify(sb: &Sandbox, db: Option<&str>) -> (bool, serde_json::Value, String) {
    let out = run(sb, db, &["verify", "--json"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let report = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.success(), report, format!("{text}{stderr}"))
}

/// The repository's `scripts/audit_verify.py`.
pub fn python_verifier() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/audit_verify.py")
}

/// Runs the independent verifier on an export: its exit status and what it printed.
pub fn python_verify(export: &[u8], extra: &[&str]) -> (bool, String) {
    let mut child = Command::new("python3")
        .arg(python_verifier())
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(export)
        .expect("write the export");
    let out = child.wait_with_output().expect("python3 ran");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}
