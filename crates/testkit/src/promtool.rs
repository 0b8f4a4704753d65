//! `promtool check metrics`: the Prometheus project's own check of the text format,
//! shared by the metrics crate's tests and the server's; and the list of metric
//! families `docs/metrics.md` documents, which those tests hold `/metrics` to.

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

/// `docs/metrics.md`, the page whose table lists every metric family.
pub const METRICS_DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/metrics.md");

/// Every metric family the table of `docs/metrics.md` lists, as (name, type): the rows
/// whose first cell is a backquoted name and whose second is a Prometheus type. The
/// one list both the doc check and the `/metrics` tests use.
pub fn documented_families() -> Vec<(String, String)> {
    let doc = std::fs::read_to_string(METRICS_DOC)
        .unwrap_or_else(|e| panic!("cannot read {METRICS_DOC}: {e}"));
    let families: Vec<(String, String)> = doc
        .lines()
        .filter_map(|line| {
            let mut cells = line.strip_prefix('|')?.split('|').map(str::trim);
            let name = cells.next()?.strip_prefix('`')?.strip_suffix('`')?;
            let kind = cells.next()?;
            ["counter", "gauge", "histogram"]
                .contains(&kind)
                .then(|| (name.to_owned(), kind.to_owned()))
        })
        .collect();
    assert!(
        families.len() >= 10,
        "{METRICS_DOC} lists {} families; its table was not read",
        families.len()
    );
    families
}

/// The families (name, type) a Prometheus text declares with `# TYPE` lines.
pub fn declared_families(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| {
            let (name, kind) = line.strip_prefix("# TYPE ")?.split_once(' ')?;
            Some((name.to_owned(), kind.to_owned()))
        })
        .collect()
}

/// Asserts that `text` declares exactly the documented families, each with its `# HELP`
/// and `# TYPE`: none missing, none undocumented.
pub fn assert_documented_families(text: &str) {
    let mut documented = documented_families();
    let mut declared = declared_families(text);
    for (name, _) in &documented {
        assert!(
            text.lines().any(|l| l
                .strip_prefix("# HELP ")
                .and_then(|r| r.split_once(' '))
                .is_some_and(|(n, _)| n == name)),
            "no `# HELP {name}` in the text:\n{text}"
        );
    }
    documented.sort();
    declared.sort();
    assert_eq!(
        declared, documented,
        "the families of /metrics (left) differ from the table of docs/metrics.md (right)"
    );
}
