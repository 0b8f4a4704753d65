//! `agentplane policy check DIR` as a child process: the shipped examples pass, and
//! every kind of broken or hostile file makes it exit 2 with a located error.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn check(dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentplane"))
        .args(["policy", "check"])
        .arg(dir)
        .env("AGENTPLANE_LOG", "error")
        .output()
        .expect("run agentplane")
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/policies")
}

/// A tempdir holding one valid policy plus `name` with `contents`.
fn dir_with(name: &str, contents: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("ok.yaml"),
        "name: ok\ntype: tool_access\nrules: {deny: [shell]}\n",
    )
    .expect("write");
    std::fs::write(dir.path().join(name), contents).expect("write");
    dir
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn assert_invalid(out: &Output, expect: &str) {
    assert_eq!(out.status.code(), Some(2), "stderr: {}", stderr(out));
    assert!(
        stderr(out).contains(expect),
        "want {expect:?} in: {}",
        stderr(out)
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("policies OK"));
}

#[test]
fn the_examples_are_valid() {
    let out = check(&examples());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert!(stdout.starts_with("11 policies OK (sha256:"), "{stdout}");
    assert!(
        stdout.contains("customer-email-approval: approval_required [tags=customer-facing]"),
        "{stdout}"
    );
    assert!(
        stdout.contains("berlin-office-hours: time_window"),
        "{stdout}"
    );
}

#[test]
fn a_missing_directory_exits_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert_invalid(
        &check(&dir.path().join("nope")),
        "cannot read policies directory",
    );
}

#[test]
fn other_files_and_subdirectories_are_ignored() {
    let dir = dir_with("README.md", b"not yaml: [");
    std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
    std::fs::write(dir.path().join("sub/bad.yaml"), "nope: [").expect("write");
    let out = check(dir.path());
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("1 policies OK"));
}

#[test]
fn bad_yaml_exits_2_with_the_line() {
    let out = check(
        dir_with(
            "bad.yaml",
            b"name: x\ntype: tool_access\nrules: {deny: [x\n",
        )
        .path(),
    );
    assert_invalid(&out, "bad.yaml:");
}

#[test]
fn an_unknown_field_exits_2_naming_it() {
    let out = check(
        dir_with(
            "u.yml",
            b"name: x\ntype: tool_access\nrules: {deny: [x]}\nowner: me\n",
        )
        .path(),
    );
    assert_invalid(&out, "u.yml:4: owner: unknown field `owner`");
}

#[test]
fn a_bad_time_zone_exits_2() {
    let out = check(
        dir_with(
            "tz.yaml",
            b"name: x\ntype: time_window\nrules:\n  timezone: Europe/Atlantis\n",
        )
        .path(),
    );
    assert_invalid(
        &out,
        "tz.yaml:4: rules.timezone: `Europe/Atlantis` is not an IANA time zone",
    );
}

#[test]
fn duplicate_names_across_files_exit_2() {
    let out = check(
        dir_with(
            "z.yaml",
            b"name: ok\ntype: tool_access\nrules: {deny: [x]}\n",
        )
        .path(),
    );
    assert_invalid(&out, "z.yaml:1: name: duplicate policy name `ok`");
}

#[test]
fn a_file_over_one_mebibyte_is_refused() {
    let mut big = b"# ".to_vec();
    big.resize(2 * 1024 * 1024, b'x');
    let out = check(dir_with("big.yaml", &big).path());
    assert_invalid(&out, "big.yaml: file is larger than 1048576 bytes");
}

#[test]
fn binary_garbage_is_refused() {
    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let out = check(dir_with("bin.yaml", &garbage).path());
    assert_invalid(&out, "bin.yaml: not UTF-8 text");
    let out = check(dir_with("ctl.yaml", b"\x01\x02\x00name: x\n").path());
    assert_invalid(&out, "ctl.yaml:1: control character");
}

#[test]
fn deep_nesting_and_alias_bombs_are_refused_quickly() {
    let deep = format!(
        "name: d\ntype: data_scope\nrules: {{paths: {}{}}}\n",
        "[".repeat(200_000),
        "]".repeat(200_000)
    );
    let mut bomb = String::from(
        "name: b\ntype: data_scope\nrules:\n  paths: &a [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\n",
    );
    for level in b'b'..=b'j' {
        let (prev, cur) = ((level - 1) as char, level as char);
        bomb.push_str(&format!("  hosts: &{cur} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"));
    }
    for (name, text, expect) in [
        (
            "deep.yaml",
            deep,
            "deep.yaml:3: nested deeper than 32 levels",
        ),
        (
            "bomb.yaml",
            bomb,
            "bomb.yaml:4: YAML anchors and aliases are not allowed",
        ),
    ] {
        let started = Instant::now();
        let out = check(dir_with(name, text.as_bytes()).path());
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_invalid(&out, expect);
    }
}

/// Every error of a file, each at its own line (not only the first, not line 1).
#[test]
fn every_error_of_a_file_is_printed_with_its_line() {
    let text = "\
- name: approve
  type: approval_required
  rules:
    tools: [send_email]
    window: 5m
- name: limit
  type: rate_limit
  rules:
    window: 10x
    max: 0
";
    let dir = dir_with("many.yaml", text.as_bytes());
    let out = check(dir.path());
    assert_eq!(out.status.code(), Some(2), "stderr: {}", stderr(&out));
    let path = dir.path().join("many.yaml").display().to_string();
    let lines: Vec<String> = stderr(&out).lines().map(str::to_owned).collect();
    assert_eq!(
        lines,
        [
            format!(
                "{path}:5: [0].rules.window: unknown field `window` for approval_required \
                 policies, expected one of `tools`, `approvers`, `separate_approver`"
            ),
            format!("{path}:9: [1].rules.window: `10x` is not a window like 30s, 5m, 1h or 1d"),
            format!("{path}:10: [1].rules.max: must be at least 1"),
        ]
    );
}

/// A truncated file must not pass as "0 policies OK".
#[test]
fn an_empty_or_blank_file_exits_2() {
    for text in ["", " \n\t\n", "# all cut off\n"] {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("cut.yaml"), text).expect("write");
        let out = check(dir.path());
        assert_invalid(&out, "cut.yaml: no policy in the file: it is empty");
    }
}

#[test]
fn an_unknown_rule_field_lists_only_the_fields_of_the_policy_type() {
    let out = check(
        dir_with(
            "t.yaml",
            b"name: t\ntype: tool_access\nrules:\n  deny: [x]\n  window: 5m\n",
        )
        .path(),
    );
    assert_invalid(
        &out,
        "t.yaml:5: rules.window: unknown field `window` for tool_access policies, expected \
         one of `allow`, `deny`\n",
    );
}

/// `serve` refuses to start on the directory `policy check` refuses, with the same lines.
#[test]
fn serve_reports_the_lines_policy_check_prints() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    let policies = root.join("policies");
    std::fs::create_dir(&policies).expect("mkdir");
    std::fs::write(
        policies.join("bad.yaml"),
        "name: b\ntype: budget\nrules:\n  usd: -1\n  period: fortnight\n",
    )
    .expect("write");
    std::fs::write(policies.join("empty.yaml"), "").expect("write");
    std::fs::write(
        root.join("agentplane.toml"),
        "[store]\npath = \"events.db\"\n[policies]\ndir = \"policies\"\n",
    )
    .expect("config");
    let checked = check(&policies);
    assert_eq!(checked.status.code(), Some(2));
    let check_lines: Vec<String> = stderr(&checked).lines().map(str::to_owned).collect();
    assert_eq!(check_lines.len(), 3, "{check_lines:?}");
    let served = Command::new(env!("CARGO_BIN_EXE_agentplane"))
        .arg("--config")
        .arg(root.join("agentplane.toml"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("AGENTPLANE_CONFIG")
        .env_remove("AGENTPLANE_DB")
        .env("AGENTPLANE_LOG", "error")
        .output()
        .expect("serve runs");
    assert_ne!(served.status.code(), Some(0));
    let serve_err = stderr(&served);
    for line in &check_lines {
        assert!(
            serve_err.lines().any(|l| l == line),
            "serve did not print {line:?}:\n{serve_err}"
        );
    }
}

fn policy(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentplane"))
        .arg("policy")
        .args(args)
        .arg(dir)
        .env("AGENTPLANE_LOG", "error")
        .output()
        .expect("run agentplane")
}

#[test]
fn the_shipped_policy_tests_pass() {
    let out = policy(&["test"], &examples());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", stderr(&out));
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
}

#[test]
fn a_failing_case_prints_its_explanation_and_exits_1() {
    let dir = dir_with(
        "push.yaml",
        b"name: push\ntype: approval_required\ntargets: {tools: [run_command]}\n\
          when: {arg: /args, equals: push}\n",
    );
    std::fs::write(
        dir.path().join("push.test.yaml"),
        "- name: push waits\n  agent: a\n  tool: run_command\n  args: {args: [push]}\n  expect: approval\n\
         - name: wrongly expected\n  agent: a\n  tool: run_command\n  args: {args: [pull]}\n  expect: approval\n",
    )
    .expect("write");
    let out = policy(&["test"], dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", stderr(&out));
    assert!(stdout.contains("FAIL "), "{stdout}");
    assert!(
        stdout.contains("wrongly expected: expected approval, got allow"),
        "{stdout}"
    );
    assert!(
        stdout.contains("push (approval_required, push.yaml): no match: not selected: arg /args equals \"push\" does not hold"),
        "{stdout}"
    );
    assert!(stdout.contains("2 cases, 1 passed, 1 failed"), "{stdout}");
    assert!(
        !stdout.contains("FAIL push.test.yaml: push waits"),
        "{stdout}"
    );
    // The test file is not read as policies by `check`.
    let checked = check(dir.path());
    assert_eq!(checked.status.code(), Some(0), "{}", stderr(&checked));
}

#[test]
fn malformed_test_files_and_no_cases_are_usage_errors() {
    let dir = dir_with("x.test.yaml", b"- name: no expect\n  agent: a\n");
    let out = policy(&["test"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("x.test.yaml"), "{}", stderr(&out));
    let empty = dir_with("other.yaml", b"[]\n");
    let out = policy(&["test"], empty.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no test cases"), "{}", stderr(&out));
}

#[test]
fn explain_prints_the_decision_and_every_policy() {
    let out = Command::new(env!("CARGO_BIN_EXE_agentplane"))
        .args([
            "policy",
            "explain",
            "--agent",
            "engineer",
            "--tool",
            "write_file",
        ])
        .args([
            "--args",
            r#"{"path": "a/../.github/workflows/x.yml", "content": "TOPSECRET"}"#,
        ])
        .arg(examples())
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout.starts_with("decision: deny by `no-ci-edits` (policy set sha256:"),
        "{stdout}"
    );
    assert!(stdout.contains("no-ci-edits (tool_access, arguments.yaml): match: selected: arg /path path_under [.github] holds"), "{stdout}");
    assert!(
        stdout.contains("git-push-approval (approval_required, arguments.yaml): no match"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("TOPSECRET"),
        "argument values never appear: {stdout}"
    );
    let json = Command::new(env!("CARGO_BIN_EXE_agentplane"))
        .args([
            "policy",
            "explain",
            "--json",
            "--agent",
            "engineer",
            "--tool",
            "run_command",
        ])
        .args(["--args", r#"{"program": "git", "args": ["push"]}"#])
        .arg(examples())
        .output()
        .expect("run");
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(v["decision"], "approval");
    assert_eq!(v["decided_by"], "git-push-approval");
    let bad = Command::new(env!("CARGO_BIN_EXE_agentplane"))
        .args([
            "policy", "explain", "--agent", "a", "--tool", "t", "--args", "{nope",
        ])
        .arg(examples())
        .output()
        .expect("run");
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("--args is not JSON"));
}
