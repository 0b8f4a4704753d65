//! The `shell` ensemble running real programs: the allowlist, literal arguments,
//! output caps, and process-group cleanup on timeout and cancellation.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use agentplane_core::ToolErrorKind;
use agentplane_engine::ports::{Ensemble, ToolContext, ToolError, ToolOutput};
use agentplane_tools::ShellEnsemble;
use serde_json::{Value, json};

struct Fixture {
    _ws: tempfile::TempDir,
    ws: PathBuf,
    ctx: ToolContext,
}

fn fixture(timeout: Duration, output_cap: usize) -> Fixture {
    let ws_dir = tempfile::tempdir().unwrap();
    let ws = ws_dir.path().canonicalize().unwrap();
    let ctx = ToolContext {
        workspace: ws.clone(),
        timeout,
        output_cap,
        scope: None,
    };
    Fixture {
        _ws: ws_dir,
        ws,
        ctx,
    }
}

fn default_fixture() -> Fixture {
    fixture(Duration::from_secs(10), 64 * 1024)
}

fn shell(allow: &[&str]) -> ShellEnsemble {
    ShellEnsemble::new(allow.iter().map(|s| s.to_string()).collect())
}

async fn run(
    allow: &[&str],
    f: &Fixture,
    program: &str,
    args: &[&str],
) -> Result<ToolOutput, ToolError> {
    shell(allow)
        .call(
            "run_command",
            json!({"program": program, "args": args}),
            &f.ctx,
        )
        .await
}

fn assert_not_allowed(result: Result<ToolOutput, ToolError>, what: &str) {
    let err = result.expect_err(what);
    assert_eq!(err.kind, ToolErrorKind::NotAllowed, "{what}: {err:?}");
    assert_eq!(
        err.security.as_ref().expect(what).event_type,
        "command_not_allowed",
        "{what}"
    );
}

/// Whether every process that held the lock on `name` (in the workspace) is gone: the
/// lock can be taken. Programs run in a PID namespace of their own, so their pids mean
/// nothing out here; a lock held by a descriptor does.
fn is_released(f: &Fixture, name: &str) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(file) = std::fs::File::open(f.ws.join(name)) else {
        panic!("{name} was never made: the process it stands for did not start");
    };
    // SAFETY: flock on a descriptor we own, released when it is dropped.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

async fn wait_released(f: &Fixture, name: &str) -> bool {
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        if is_released(f, name) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    is_released(f, name)
}

/// A shell fragment that starts `sleep SECS` in the background holding a lock on
/// `NAME.lock` for as long as it lives, and waits until it holds it.
fn locked_sleep(name: &str, secs: u32) -> String {
    format!(
        "(flock 8; : > {name}.ready; exec sleep {secs}) 8>{name}.lock & \
         while [ ! -e {name}.ready ]; do sleep 0.01; done"
    )
}

#[test]
fn the_tool_is_side_effecting_and_names_the_allowlist() {
    let tools = shell(&["git", "cargo"]).tools();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "run_command");
    assert!(tools[0].side_effects);
    assert!(tools[0].description.contains("git, cargo"));
}

#[tokio::test]
async fn metacharacters_are_literal_arguments() {
    let f = default_fixture();
    let out = run(&["echo"], &f, "echo", &["$(id); rm -rf /"])
        .await
        .unwrap();
    assert_eq!(
        out.content,
        "exit code: 0\n--- stdout ---\n$(id); rm -rf /\n\n--- stderr ---\n"
    );

    let args = [
        "`id`", "|", "cat", ">", "out.txt", "&&", "touch", "pwned", "*",
    ];
    let out = run(&["echo"], &f, "echo", &args).await.unwrap();
    assert!(
        out.content
            .contains("`id` | cat > out.txt && touch pwned *\n"),
        "{}",
        out.content
    );
    assert!(!f.ws.join("out.txt").exists());
    assert!(!f.ws.join("pwned").exists());
}

#[tokio::test]
async fn programs_not_on_the_allowlist_are_violations() {
    let f = default_fixture();
    assert_not_allowed(run(&["echo"], &f, "rm", &["-rf", "."]).await, "rm");
    assert_not_allowed(run(&["echo"], &f, "sh", &["-c", "id"]).await, "sh");
    assert_not_allowed(run(&[], &f, "echo", &["hi"]).await, "empty allowlist");
    // Near misses of an allowed name do not match.
    assert_not_allowed(run(&["echo"], &f, "echo ", &[]).await, "trailing space");
    assert_not_allowed(run(&["echo"], &f, "ECHO", &[]).await, "case");
}

#[tokio::test]
async fn a_program_with_a_path_is_refused_even_if_allowlisted() {
    let f = default_fixture();
    let allow = ["echo", "/bin/echo", "./echo"];
    for program in [
        "/bin/echo",
        "./echo",
        "../../bin/echo",
        "bin\\echo",
        "/usr/bin/env",
    ] {
        assert_not_allowed(run(&allow, &f, program, &["hi"]).await, program);
    }
}

#[tokio::test]
async fn sh_dash_c_works_only_when_sh_is_allowlisted() {
    let f = default_fixture();
    assert_not_allowed(
        run(&["echo"], &f, "sh", &["-c", "echo a; echo b"]).await,
        "sh not allowed",
    );
    let out = run(&["sh"], &f, "sh", &["-c", "echo a; echo b >&2; exit 3"])
        .await
        .unwrap();
    assert_eq!(
        out.content,
        "exit code: 3\n--- stdout ---\na\n\n--- stderr ---\nb\n"
    );
}

#[tokio::test]
async fn a_non_zero_exit_is_a_result_and_cwd_is_the_workspace() {
    let f = default_fixture();
    let out = run(&["false"], &f, "false", &[]).await.unwrap();
    assert!(out.content.starts_with("exit code: 1\n"), "{}", out.content);

    let out = run(&["pwd"], &f, "pwd", &[]).await.unwrap();
    assert!(
        out.content.contains(&format!("\n{}\n", f.ws.display())),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn stdin_is_closed_so_a_reader_does_not_wait() {
    let f = default_fixture();
    let started = Instant::now();
    let out = run(&["cat"], &f, "cat", &[]).await.unwrap();
    assert!(out.content.starts_with("exit code: 0\n"));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn an_allowlisted_program_missing_from_path_is_a_plain_failure() {
    let f = default_fixture();
    let name = "agentplane-no-such-program";
    let err = run(&[name], &f, name, &[]).await.unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::ExecutionFailed);
    assert!(err.security.is_none());
}

#[tokio::test]
async fn finite_huge_output_is_capped_and_the_exit_code_kept() {
    let f = fixture(Duration::from_secs(20), 1000);
    let out = run(&["head"], &f, "head", &["-c", "10000000", "/dev/zero"])
        .await
        .unwrap();
    assert!(out.truncated);
    assert!(
        out.content.starts_with("exit code: 0\n"),
        "{}",
        &out.content[..40]
    );
    assert!(
        out.content
            .contains("[stdout truncated: 10000000 bytes produced, first 1000 kept]"),
        "{}",
        out.content
    );
    assert!(out.content.len() < 1200, "{}", out.content.len());
}

#[tokio::test]
async fn endless_output_kills_the_group_instead_of_running_to_the_timeout() {
    let f = fixture(Duration::from_secs(20), 1000);
    let started = Instant::now();
    let out = run(&["yes"], &f, "yes", &["spam"]).await.unwrap();
    assert!(out.truncated);
    assert!(
        out.content.starts_with("killed after producing more than"),
        "{}",
        &out.content[..60]
    );
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group() {
    let f = fixture(Duration::from_millis(700), 4096);
    let script = format!(
        "exec 9>sh.lock; flock 9; {}; echo started; wait",
        locked_sleep("child", 30)
    );
    let script = script.as_str();
    let started = Instant::now();
    let err = run(&["sh"], &f, "sh", &["-c", script]).await.unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Timeout);
    assert!(err.security.is_none());
    assert!(err.message.contains("started"), "{}", err.message);
    assert!(started.elapsed() < Duration::from_secs(5));

    assert!(
        wait_released(&f, "child.lock").await,
        "background sleep survived"
    );
    assert!(wait_released(&f, "sh.lock").await, "sh survived");
}

#[tokio::test]
async fn background_children_do_not_outlive_a_normal_exit() {
    let f = default_fixture();
    let started = Instant::now();
    // The background sleep inherits stdout; without the group kill this would hold
    // the pipe open for 30 seconds.
    let out = run(
        &["sh"],
        &f,
        "sh",
        &["-c", &format!("{}; echo done", locked_sleep("bg", 30))],
    )
    .await
    .unwrap();
    assert!(
        out.content
            .starts_with("exit code: 0\n--- stdout ---\ndone\n")
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        wait_released(&f, "bg.lock").await,
        "background sleep survived"
    );
}

/// Processes that leave the group (`setsid`), are orphaned by a double fork, or both,
/// with their output pipes closed so nothing waits for them: none outlives the call,
/// however it ends.
#[tokio::test]
async fn no_descendant_survives_the_call_setsid_and_double_forks_included() {
    let script = "setsid sh -c '(flock 8; : > setsid.ready; exec sleep 31) 8>setsid.lock' \
                  </dev/null >/dev/null 2>&1 & \
                  (sh -c '(flock 8; : > orphan.ready; exec sleep 32) 8>orphan.lock &' \
                  </dev/null >/dev/null 2>&1) ; \
                  (setsid sh -c '(flock 8; : > deep.ready; exec sleep 33) 8>deep.lock & wait' \
                  </dev/null >/dev/null 2>&1 &) ; \
                  while [ ! -e setsid.ready ] || [ ! -e orphan.ready ] || [ ! -e deep.ready ]; \
                  do sleep 0.05; done; echo spawned";
    // A normal exit, a timeout and a dropped call.
    for ending in ["exit", "timeout", "drop"] {
        let timeout = if ending == "timeout" { 3 } else { 60 };
        let f = fixture(Duration::from_secs(timeout), 4096);
        let script = match ending {
            "exit" => script.to_owned(),
            _ => format!("{script}; sleep 30"),
        };
        let args = ["-c", script.as_str()];
        match ending {
            "exit" => {
                let out = run(&["sh"], &f, "sh", &args).await.unwrap();
                assert!(out.content.contains("spawned"), "{}", out.content);
            }
            "timeout" => {
                let err = run(&["sh"], &f, "sh", &args).await.unwrap_err();
                assert_eq!(err.kind, ToolErrorKind::Timeout);
                assert!(err.message.contains("spawned"), "{}", err.message);
            }
            _ => {
                let ensemble = shell(&["sh"]);
                let call = ensemble.call(
                    "run_command",
                    json!({"program": "sh", "args": args}),
                    &f.ctx,
                );
                assert!(
                    tokio::time::timeout(Duration::from_secs(3), call)
                        .await
                        .is_err()
                );
            }
        }
        check_gone(&f, ending).await;
    }
}

async fn check_gone(f: &Fixture, ending: &str) {
    for file in ["setsid.lock", "orphan.lock", "deep.lock"] {
        assert!(
            wait_released(f, file).await,
            "{ending}: the process holding {file} survived the call"
        );
    }
}

#[tokio::test]
async fn dropping_the_call_kills_the_group() {
    // The engine enforces the timeout from outside too, by dropping the future.
    let f = fixture(Duration::from_secs(60), 4096);
    let script = format!(
        "exec 9>sh.lock; flock 9; {}; wait",
        locked_sleep("child", 30)
    );
    let script = script.as_str();
    let ensemble = shell(&["sh"]);
    let call = ensemble.call(
        "run_command",
        json!({"program": "sh", "args": ["-c", script]}),
        &f.ctx,
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(700), call)
            .await
            .is_err()
    );

    assert!(
        wait_released(&f, "child.lock").await,
        "background sleep survived"
    );
    assert!(wait_released(&f, "sh.lock").await, "sh survived");
}

#[tokio::test]
async fn malformed_arguments_and_unknown_tools_are_rejected() {
    let f = default_fixture();
    let ensemble = shell(&["echo"]);
    for args in [
        json!({"program": 1}),
        json!({"program": "echo", "args": "hi"}),
        json!({"program": "echo", "args": [1, 2]}),
        json!({"args": ["hi"]}),
        json!({"program": "echo", "shell": true}),
        json!({"program": "echo", "args": ["a\u{0}b"]}),
    ] {
        let err: ToolError = ensemble
            .call("run_command", args.clone() as Value, &f.ctx)
            .await
            .unwrap_err();
        assert_eq!(err.kind, ToolErrorKind::InvalidArguments, "{args}");
    }
    let err = ensemble.call("exec", json!({}), &f.ctx).await.unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::UnknownTool);
}
