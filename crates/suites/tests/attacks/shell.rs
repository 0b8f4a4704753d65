//! Shell injection and allowlist bypasses against `run_command`: only bare allowlisted
//! names run, arguments are an argv (never a shell line), `PATH` tricks do not swap the
//! program, and the child's environment holds no secret.

use agentplane_suites::attacks::{Tally, probe, script};
use agentplane_suites::start_with_env;
use agentplane_suites::{create_thread, sandbox};
use agentplane_testkit::{Scenario, ScriptedServer};
use serde_json::{Value, json};

const SECRET: &str = "shell-secret-Qm4v8Zr2";
const LEAKY: &str = "leaky-host-value-Hn3k7";
/// What a planted program prints; never seen if the real one ran.
const PLANTED: &str = "PWNED-BY-PATH";

enum Expect {
    /// Refused before anything ran: `not_allowed`, security event `command_not_allowed`.
    Refused,
    /// Ran, and its output holds `shows` and none of `lacks`.
    Ran {
        shows: &'static str,
        lacks: &'static [&'static str],
    },
}

fn run(program: &str, args: &[&str]) -> Value {
    json!({"program": program, "args": args})
}

fn cases() -> Vec<(&'static str, Value, Expect)> {
    use Expect::*;
    const NO_ID: &[&str] = &["uid="];
    vec![
        ("sh-c", run("sh", &["-c", "id"]), Refused),
        ("bash", run("bash", &["-c", "id"]), Refused),
        ("env-wrapper", run("env", &["sh", "-c", "id"]), Refused),
        (
            "absolute-path-to-allowed",
            run("/bin/echo", &["x"]),
            Refused,
        ),
        ("relative-path-to-allowed", run("./echo", &["x"]), Refused),
        ("climbing-path", run("../../../bin/echo", &["x"]), Refused),
        ("backslash-path", run("bin\\echo", &["x"]), Refused),
        ("semicolon-in-name", run("echo;id", &[]), Refused),
        ("and-in-name", run("echo && id", &[]), Refused),
        ("newline-in-name", run("echo\nid", &[]), Refused),
        ("subshell-name", run("$(id)", &[]), Refused),
        ("backtick-name", run("`id`", &[]), Refused),
        ("case-variant", run("ECHO", &["x"]), Refused),
        ("trailing-space", run("echo ", &["x"]), Refused),
        ("glob-name", run("ec*", &["x"]), Refused),
        ("dash-name", run("-c", &["id"]), Refused),
        ("empty-name", run("", &[]), Refused),
        (
            "semicolon-arg",
            run("echo", &["a; id"]),
            Ran {
                shows: "a; id",
                lacks: NO_ID,
            },
        ),
        (
            "and-arg",
            run("echo", &["a && id"]),
            Ran {
                shows: "a && id",
                lacks: NO_ID,
            },
        ),
        (
            "subshell-arg",
            run("echo", &["$(id)"]),
            Ran {
                shows: "$(id)",
                lacks: NO_ID,
            },
        ),
        (
            "backtick-arg",
            run("echo", &["`id`"]),
            Ran {
                shows: "`id`",
                lacks: NO_ID,
            },
        ),
        (
            "newline-arg",
            run("echo", &["a\nid"]),
            Ran {
                shows: "a\nid",
                lacks: NO_ID,
            },
        ),
        (
            "pipe-redirect-arg",
            run("echo", &["x | id > pwned"]),
            Ran {
                shows: "x | id > pwned",
                lacks: NO_ID,
            },
        ),
        (
            "glob-arg",
            run("ls", &["*"]),
            Ran {
                shows: "exit code",
                lacks: &["inside.txt"],
            },
        ),
        (
            "dash-args-stay-argv",
            run("echo", &["-n", "--", "$HOME"]),
            Ran {
                shows: "-- $HOME",
                lacks: &["/"],
            },
        ),
        (
            "planted-on-relative-path",
            run("echo", &["real"]),
            Ran {
                shows: "real",
                lacks: &[PLANTED],
            },
        ),
        (
            "env-of-child",
            run("printenv", &[]),
            Ran {
                shows: "PATH=",
                lacks: &[SECRET, LEAKY, "AGENTPLANE", "LEAKY_TOKEN"],
            },
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_command_runs_only_what_is_allowed_and_never_through_a_shell() {
    let cases = cases();
    let calls: Vec<(String, Value)> = cases
        .iter()
        .map(|(_, args, _)| ("run_command".to_owned(), args.clone()))
        .collect();
    let model = ScriptedServer::start(Scenario::new(script(&calls)))
        .await
        .expect("model");
    let sb = sandbox(
        "[agents.runner]\nsystem_prompt = \"You run things.\"\nensembles = [\"shell\"]\n\
         shell_allow = [\"echo\", \"ls\", \"printenv\"]\n\
         [secrets.K]\nenv = \"AGENTPLANE_SECRET_K\"\n",
    );
    std::fs::write(sb.workspace.join("inside.txt"), "x").expect("file");
    // Programs named like allowed ones, where a relative PATH entry would find them.
    let planted = format!("#!/bin/sh\necho {PLANTED}\n");
    std::fs::create_dir(sb.workspace.join("bin")).expect("bin");
    std::fs::create_dir(sb.root.join("bin")).expect("bin");
    for path in [
        sb.workspace.join("bin/echo"),
        sb.workspace.join("echo"),
        sb.root.join("bin/echo"),
        sb.root.join("echo"),
    ] {
        std::fs::write(&path, &planted).expect("planted");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let path = format!(
        "bin:.::{}",
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
    );
    let served = start_with_env(
        &sb,
        &model.base_url(),
        &[],
        &[
            ("AGENTPLANE_SECRET_K", SECRET),
            ("LEAKY_TOKEN", LEAKY),
            ("PATH", &path),
        ],
    )
    .await;
    // The server runs in the sandbox root; the relative entries matter from the
    // workspace, where programs run.
    let thread = create_thread(&served, &sb, "runner", "shell attacks").await;

    let mut tally = Tally::default();
    for (name, _, expect) in &cases {
        let probe = probe(&served, &thread, name).await;
        probe
            .assert_output_lacks(SECRET)
            .assert_output_lacks(PLANTED)
            .assert_stream_lacks(LEAKY);
        match expect {
            Expect::Refused => {
                if probe.result["error_type"] == "invalid_arguments" {
                    probe.assert_failed("invalid_arguments");
                } else {
                    probe.assert_refused_as("not_allowed", "command_not_allowed");
                }
                tally.case(true);
            }
            Expect::Ran { shows, lacks } => {
                probe.assert_ok();
                assert!(
                    probe.output().contains(shows),
                    "{name}: {shows:?} not in {}",
                    probe.output()
                );
                for needle in *lacks {
                    probe.assert_output_lacks(needle);
                }
                tally.case(false);
            }
        }
    }
    assert!(
        !sb.workspace.join("pwned").exists(),
        "a redirection was interpreted"
    );
    tally.report("shell");
}
