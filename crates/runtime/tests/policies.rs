//! The policies directory as the server reads it: `load_dir` on real temp dirs, and the
//! real watcher polling every 100 ms — hot reload, a broken file that keeps the
//! previous set and reports why, recovery, removal, hostile files, and stopping.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentplane_engine::governance::ActivePolicies;
use agentplane_runtime::policy_dir::{PolicyWatcher, load_dir, watch};
use agentplane_runtime::settings::policies::PoliciesConfig;

/// How long a change may take to show: many poll intervals, for a loaded machine.
const PATIENCE: Duration = Duration::from_secs(10);
const INTERVAL: Duration = Duration::from_millis(100);

const DENY_SHELL: &str = "name: no-shell\ntype: tool_access\nrules: {deny: [shell]}\n";
const MAIL_APPROVAL: &str = "name: mail\ntype: approval_required\nrules: {tools: [send_email]}\n";
const RATE: &str = "name: rate\ntype: rate_limit\nrules:\n  window: 1m\n  max: 0\n";
const RATE_FIXED: &str = "name: rate\ntype: rate_limit\nrules:\n  window: 1m\n  max: 5\n";

fn write(dir: &Path, name: &str, text: impl AsRef<[u8]>) {
    std::fs::write(dir.join(name), text).expect("write policy file");
}

fn config(dir: &Path) -> PoliciesConfig {
    PoliciesConfig {
        dir: Some(dir.to_path_buf()),
        reload_interval: INTERVAL,
    }
}

fn names(active: &ActivePolicies) -> Vec<String> {
    active
        .current()
        .policies()
        .iter()
        .map(|p| p.name().to_owned())
        .collect()
}

/// Waits until `done` holds, or fails saying what was awaited.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < PATIENCE, "timed out waiting: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A watched directory holding `no-shell.yaml`.
async fn watched() -> (tempfile::TempDir, Arc<ActivePolicies>, PolicyWatcher) {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "no-shell.yaml", DENY_SHELL);
    let (active, watcher) = watch(&config(dir.path())).expect("valid policies load");
    (dir, active, watcher.expect("a directory is watched"))
}

#[test]
fn a_valid_directory_loads_its_yaml_files_in_name_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "b.yml", MAIL_APPROVAL);
    write(dir.path(), "a.yaml", DENY_SHELL);
    write(dir.path(), "README.md", "not: [yaml");
    write(dir.path(), "notes.yaml.bak", "not: [yaml");
    std::fs::create_dir(dir.path().join("sub.yaml")).expect("mkdir");
    write(&dir.path().join("sub.yaml"), "bad.yaml", "not: [yaml");
    let set = load_dir(dir.path()).expect("valid");
    let listed: Vec<(&str, &str)> = set
        .policies()
        .iter()
        .map(|p| (p.name(), p.source()))
        .collect();
    assert_eq!(listed, [("no-shell", "a.yaml"), ("mail", "b.yml")]);
}

#[test]
fn an_empty_directory_is_an_empty_set() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(load_dir(dir.path()).expect("valid").is_empty());
}

#[test]
fn load_dir_reports_every_error_of_every_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "a.yaml", DENY_SHELL);
    write(dir.path(), "rate.yaml", RATE);
    write(dir.path(), "bin.yaml", [0xff, 0xfe, 0x00, 0x80]);
    write(dir.path(), "dup.yaml", DENY_SHELL);
    let errors: Vec<String> = load_dir(dir.path())
        .expect_err("invalid")
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(errors.len(), 3, "{errors:#?}");
    assert!(
        errors[0].starts_with("bin.yaml: not UTF-8 text"),
        "{errors:#?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e == "rate.yaml:5: rules.max: must be at least 1"),
        "{errors:#?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("dup.yaml:1: name: duplicate policy name `no-shell`")),
        "{errors:#?}"
    );
}

#[test]
fn a_missing_directory_is_an_error_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nope");
    let errors = load_dir(&missing).expect_err("missing");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].source, missing.display().to_string());
    assert!(errors[0].message.contains("cannot read policies directory"));
}

#[test]
fn hostile_files_are_errors_not_panics() {
    let mut big = b"# ".to_vec();
    big.resize(1024 * 1024 + 1, b'x');
    let garbage: Vec<u8> = (0..65_536u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let deep = format!(
        "name: d\ntype: data_scope\nrules: {{paths: {}{}}}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let deep_block: String = (0..200)
        .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
        .collect();
    let cases: [(&str, Vec<u8>, &str); 5] = [
        (
            "big.yaml",
            big,
            "big.yaml: file is larger than 1048576 bytes",
        ),
        ("bin.yaml", garbage, "bin.yaml: not UTF-8 text"),
        (
            "ctl.yaml",
            b"name: x\x00\x07\n".to_vec(),
            "ctl.yaml:1: control character",
        ),
        (
            "deep.yaml",
            deep.into_bytes(),
            "deep.yaml:3: nested deeper than 32 levels",
        ),
        (
            "block.yaml",
            deep_block.into_bytes(),
            "block.yaml:130: indented more than 128",
        ),
    ];
    for (name, bytes, expect) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "ok.yaml", DENY_SHELL);
        write(dir.path(), name, &bytes);
        let started = Instant::now();
        let errors = load_dir(dir.path()).expect_err("hostile file refused");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{name} took too long"
        );
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert!(errors[0].to_string().starts_with(expect), "{errors:#?}");
    }
}

#[test]
fn exactly_one_mebibyte_is_still_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut text = DENY_SHELL.as_bytes().to_vec();
    text.push(b'#');
    text.resize(1024 * 1024, b'x');
    write(dir.path(), "edge.yaml", &text);
    assert_eq!(load_dir(dir.path()).expect("at the limit").len(), 1);
}

#[tokio::test]
async fn without_a_directory_the_set_is_empty_and_nothing_is_watched() {
    let (active, watcher) = watch(&PoliciesConfig::default()).expect("no policies");
    assert!(watcher.is_none());
    assert!(active.current().is_empty());
    let status = active.status();
    assert_eq!(status.source, None);
    assert!(status.errors.is_empty());
}

#[tokio::test]
async fn a_broken_or_missing_directory_at_start_is_an_error_listing_every_problem() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "a.yaml", DENY_SHELL);
    write(dir.path(), "rate.yaml", RATE);
    write(
        dir.path(),
        "u.yml",
        "name: x\ntype: tool_access\nrules: {deny: [x]}\nowner: me\n",
    );
    let error = watch(&config(dir.path()))
        .err()
        .expect("broken policies refused");
    assert!(error.contains(&dir.path().display().to_string()), "{error}");
    assert!(
        error.contains("rate.yaml:5: rules.max: must be at least 1"),
        "{error}"
    );
    assert!(
        error.contains("u.yml:4: owner: unknown field `owner`"),
        "{error}"
    );

    let missing = watch(&config(&dir.path().join("nope")))
        .err()
        .expect("missing directory refused");
    assert!(
        missing.contains("cannot read policies directory"),
        "{missing}"
    );
}

#[test]
fn watching_needs_a_tokio_runtime() {
    let dir = tempfile::tempdir().expect("tempdir");
    let error = watch(&config(dir.path())).err().expect("no runtime");
    assert!(error.contains("tokio runtime"), "{error}");
}

#[tokio::test]
async fn the_initial_load_records_source_and_time() {
    let (dir, active, watcher) = watched().await;
    assert_eq!(names(&active), ["no-shell"]);
    let status = active.status();
    assert_eq!(status.source, Some(dir.path().display().to_string()));
    let loaded_at = status.loaded_at.expect("loaded_at");
    assert!(
        loaded_at
            .parse::<agentplane_core::policy::Timestamp>()
            .is_ok(),
        "RFC 3339: {loaded_at}"
    );
    assert!(
        loaded_at.ends_with('Z') && loaded_at.len() == 24,
        "{loaded_at}"
    );
    assert!(status.errors.is_empty() && status.failed_at.is_none());
    watcher.stop().await;
}

#[tokio::test]
async fn a_new_valid_policy_is_picked_up() {
    let (dir, active, watcher) = watched().await;
    let before = active.status().loaded_at;
    write(dir.path(), "mail.yml", MAIL_APPROVAL);
    eventually("the new policy is active", || names(&active).len() == 2).await;
    assert_eq!(names(&active), ["mail", "no-shell"]);
    assert_ne!(active.status().loaded_at, before);
    // An edit in place is picked up too.
    write(
        dir.path(),
        "mail.yml",
        MAIL_APPROVAL.replace("send_email", "send_sms"),
    );
    eventually("the edit is active", || {
        active
            .current()
            .get("mail")
            .is_some_and(|p| p.summary().contains("send_sms"))
    })
    .await;
    watcher.stop().await;
}

#[tokio::test]
async fn a_broken_file_keeps_the_previous_set_and_fixing_it_recovers() {
    let (dir, active, watcher) = watched().await;
    let loaded_at = active.status().loaded_at;
    let before = active.current();

    write(dir.path(), "rate.yaml", RATE);
    eventually("the failure is reported", || {
        !active.status().errors.is_empty()
    })
    .await;
    let status = active.status();
    assert_eq!(status.errors.len(), 1, "{:?}", status.errors);
    let error = &status.errors[0];
    assert_eq!(error.source, "rate.yaml");
    assert_eq!(error.line, Some(5));
    assert_eq!(error.field.as_deref(), Some("rules.max"));
    assert!(status.failed_at.is_some());
    assert_eq!(
        status.loaded_at, loaded_at,
        "the previous load still counts"
    );
    assert_eq!(active.current(), before, "the previous set stays in force");

    write(dir.path(), "rate.yaml", RATE_FIXED);
    eventually("the fixed file is loaded", || names(&active).len() == 2).await;
    let status = active.status();
    assert!(status.errors.is_empty(), "{:?}", status.errors);
    assert!(status.failed_at.is_none());
    assert_ne!(status.loaded_at, loaded_at);
    assert_eq!(names(&active), ["no-shell", "rate"]);
    watcher.stop().await;
}

#[tokio::test]
async fn removing_a_file_removes_its_policies() {
    let (dir, active, watcher) = watched().await;
    write(dir.path(), "mail.yaml", MAIL_APPROVAL);
    eventually("two policies", || names(&active).len() == 2).await;
    std::fs::remove_file(dir.path().join("no-shell.yaml")).expect("remove");
    eventually("one policy left", || names(&active) == ["mail"]).await;
    std::fs::remove_file(dir.path().join("mail.yaml")).expect("remove");
    eventually("no policies left", || active.current().is_empty()).await;
    assert!(active.status().errors.is_empty());
    watcher.stop().await;
}

#[tokio::test]
async fn hostile_files_during_watching_are_rejected_and_the_watcher_keeps_going() {
    let (dir, active, watcher) = watched().await;
    let before = active.current();
    let mut big = b"# ".to_vec();
    big.resize(1024 * 1024 + 1, b'x');
    let deep = format!("x: {}{}\n", "{a: ".repeat(50_000), "}".repeat(50_000));
    for (name, bytes, expect) in [
        ("big.yaml", big, "file is larger than"),
        ("bin.yaml", vec![0xc3, 0x28, 0xa0, 0xa1, 0xff], "not UTF-8"),
        (
            "deep.yaml",
            deep.into_bytes(),
            "nested deeper than 32 levels",
        ),
    ] {
        write(dir.path(), name, &bytes);
        eventually(&format!("{name} is rejected"), || {
            active
                .status()
                .errors
                .iter()
                .any(|e| e.source == name && e.message.contains(expect))
        })
        .await;
        assert_eq!(active.current(), before);
        std::fs::remove_file(dir.path().join(name)).expect("remove");
        eventually("the watcher recovers", || active.status().errors.is_empty()).await;
    }
    assert_eq!(active.current(), before);
    watcher.stop().await;
}

#[tokio::test]
async fn a_directory_that_disappears_keeps_the_set() {
    let outer = tempfile::tempdir().expect("tempdir");
    let dir: PathBuf = outer.path().join("policies");
    std::fs::create_dir(&dir).expect("mkdir");
    write(&dir, "no-shell.yaml", DENY_SHELL);
    let (active, watcher) = watch(&config(&dir)).expect("loads");
    std::fs::remove_dir_all(&dir).expect("rm");
    eventually("the failure is reported", || {
        !active.status().errors.is_empty()
    })
    .await;
    assert!(
        active.status().errors[0]
            .message
            .contains("cannot read policies directory")
    );
    assert_eq!(names(&active), ["no-shell"]);
    std::fs::create_dir(&dir).expect("mkdir");
    eventually("an empty directory is an empty set", || {
        active.current().is_empty()
    })
    .await;
    drop(watcher);
}

#[tokio::test]
async fn a_stopped_or_dropped_watcher_reloads_nothing() {
    let (dir, active, watcher) = watched().await;
    watcher.stop().await;
    write(dir.path(), "mail.yaml", MAIL_APPROVAL);
    tokio::time::sleep(INTERVAL * 5).await;
    assert_eq!(names(&active), ["no-shell"]);

    let (dir, active, watcher) = watched().await;
    drop(watcher);
    write(dir.path(), "mail.yaml", MAIL_APPROVAL);
    tokio::time::sleep(INTERVAL * 5).await;
    assert_eq!(names(&active), ["no-shell"]);
}
