//! Path traversal and symlink tricks against the `fs` tools: every path that leads out
//! of the workspace is refused as a `sandbox_violation`, and nothing from outside
//! reaches the model, the stream or the disk outside.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agentplane_suites::attacks::{Tally, probe, script};
use agentplane_suites::{create_thread, full_size, sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer, ScriptedToolCall, Step};
use serde_json::{Value, json};

/// Racing reads per model answer.
const BATCH: usize = 50;

/// What lies outside the workspace; never shown to the model.
const MARKER: &str = "OUTSIDE-MARKER-7f3a9c";

enum Expect {
    /// Refused as a `sandbox_violation`, with a security event.
    Violation,
    /// Failed with this error type (a literal name that does not exist, say): no breach.
    Fails(&'static str),
    /// Succeeded without showing anything from outside.
    OkWithout(&'static str),
}

struct Case {
    name: &'static str,
    tool: &'static str,
    args: Value,
    expect: Expect,
}

fn case(name: &'static str, tool: &'static str, args: Value, expect: Expect) -> Case {
    Case {
        name,
        tool,
        args,
        expect,
    }
}

fn cases() -> Vec<Case> {
    use Expect::*;
    vec![
        case(
            "dotdot",
            "read_file",
            json!({"path": "../outside.txt"}),
            Violation,
        ),
        case(
            "dotdot-deep",
            "read_file",
            json!({"path": "a/../../outside.txt"}),
            Violation,
        ),
        case(
            "dotdot-after-file",
            "read_file",
            json!({"path": "inside.txt/../../outside.txt"}),
            Violation,
        ),
        case(
            "absolute",
            "read_file",
            json!({"path": "/etc/passwd"}),
            Violation,
        ),
        case(
            "proc-self-root",
            "read_file",
            json!({"path": "/proc/self/root/etc/passwd"}),
            Violation,
        ),
        case(
            "proc-via-symlink",
            "read_file",
            json!({"path": "proc_link/self/root/etc/passwd"}),
            Violation,
        ),
        case(
            "windows-drive",
            "read_file",
            json!({"path": "C:\\Windows\\win.ini"}),
            Violation,
        ),
        case(
            "unc-path",
            "read_file",
            json!({"path": "\\\\server\\share\\x"}),
            Violation,
        ),
        case(
            "nul-byte",
            "read_file",
            json!({"path": "inside.txt\u{0}../../outside.txt"}),
            Violation,
        ),
        case(
            "percent-encoded-dotdot",
            "read_file",
            json!({"path": "..%2Foutside.txt"}),
            Fails("execution_failed"),
        ),
        case(
            "double-encoded-dotdot",
            "read_file",
            json!({"path": "%252e%252e/outside.txt"}),
            Fails("execution_failed"),
        ),
        case(
            "unicode-two-dot-leader",
            "read_file",
            json!({"path": "\u{2025}/outside.txt"}),
            Fails("execution_failed"),
        ),
        case(
            "tilde-home",
            "read_file",
            json!({"path": "~/.ssh/id_rsa"}),
            Fails("execution_failed"),
        ),
        case(
            "empty-path",
            "read_file",
            json!({"path": ""}),
            Fails("invalid_arguments"),
        ),
        case(
            "file-symlink-out",
            "read_file",
            json!({"path": "out_link"}),
            Violation,
        ),
        case(
            "dir-symlink-out",
            "read_file",
            json!({"path": "out_dir/outside.txt"}),
            Violation,
        ),
        // `..` is lexical: `out_dir/..` is the workspace, never the parent of its target.
        case(
            "symlink-dotdot",
            "read_file",
            json!({"path": "out_dir/../ws/inside.txt"}),
            Fails("execution_failed"),
        ),
        case(
            "list-dir-symlink-out",
            "list_files",
            json!({"path": "out_dir"}),
            Violation,
        ),
        case(
            "list-etc-symlink",
            "list_files",
            json!({"path": "etc"}),
            Violation,
        ),
        case(
            "list-recursive-no-follow",
            "list_files",
            json!({"path": ".", "recursive": true}),
            OkWithout("agentplane.toml"),
        ),
        case(
            "search-skips-links",
            "search_text",
            json!({"pattern": "OUTSIDE-MARKER"}),
            OkWithout(MARKER),
        ),
        case(
            "search-dir-symlink-out",
            "search_text",
            json!({"pattern": "x", "path": "out_dir"}),
            Violation,
        ),
        case(
            "hard-link-read",
            "read_file",
            json!({"path": "hard"}),
            Violation,
        ),
        case(
            "hard-link-write",
            "write_file",
            json!({"path": "hard", "content": "clobbered"}),
            Violation,
        ),
        case(
            "write-dotdot",
            "write_file",
            json!({"path": "../escape.txt", "content": "x"}),
            Violation,
        ),
        case(
            "write-absolute",
            "write_file",
            json!({"path": "/tmp/agentplane-escape.txt", "content": "x"}),
            Violation,
        ),
        case(
            "write-dangling-symlink",
            "write_file",
            json!({"path": "dangling", "content": "x"}),
            Violation,
        ),
        case(
            "write-under-dangling-dir",
            "write_file",
            json!({"path": "dangling_dir/new.txt", "content": "x"}),
            Violation,
        ),
        case(
            "write-through-dir-symlink",
            "write_file",
            json!({"path": "out_dir/new.txt", "content": "x"}),
            Violation,
        ),
        case(
            "write-through-inside-symlink",
            "write_file",
            json!({"path": "in_link", "content": "x"}),
            Violation,
        ),
        case(
            "edit-dotdot",
            "edit_file",
            json!({"path": "../outside.txt", "old_text": "x", "new_text": "clobbered", "replace_all": true}),
            Violation,
        ),
        case(
            "edit-absolute",
            "edit_file",
            json!({"path": "/etc/passwd", "old_text": "x", "new_text": "clobbered", "replace_all": true}),
            Violation,
        ),
        case(
            "edit-symlink-out",
            "edit_file",
            json!({"path": "out_link", "old_text": "x", "new_text": "clobbered", "replace_all": true}),
            Violation,
        ),
        case(
            "edit-through-dir-symlink",
            "edit_file",
            json!({"path": "out_dir/outside.txt", "old_text": "x", "new_text": "clobbered", "replace_all": true}),
            Violation,
        ),
        case(
            "edit-hard-link",
            "edit_file",
            json!({"path": "hard", "old_text": "x", "new_text": "clobbered", "replace_all": true}),
            Violation,
        ),
        case(
            "edit-through-inside-symlink",
            "edit_file",
            json!({"path": "in_link", "old_text": "x", "new_text": "clobbered", "replace_all": true}),
            Violation,
        ),
        case(
            "read-fifo",
            "read_file",
            json!({"path": "fifo"}),
            Fails("execution_failed"),
        ),
    ]
}

/// The workspace and its surroundings: `outside.txt` beside the workspace, and inside
/// it symlinks and a hard link pointing out.
fn furnish(root: &Path, ws: &Path) {
    use std::os::unix::fs::symlink;
    std::fs::write(root.join("outside.txt"), MARKER).expect("outside file");
    std::fs::create_dir(root.join("elsewhere")).expect("outside dir");
    std::fs::write(root.join("elsewhere/f.txt"), MARKER).expect("outside file");
    std::fs::write(ws.join("inside.txt"), "INSIDE").expect("inside file");
    symlink(root.join("outside.txt"), ws.join("out_link")).expect("symlink");
    symlink(root, ws.join("out_dir")).expect("symlink");
    symlink("/etc", ws.join("etc")).expect("symlink");
    symlink("/proc", ws.join("proc_link")).expect("symlink");
    symlink(root.join("new.txt"), ws.join("dangling")).expect("symlink");
    symlink(root.join("newdir"), ws.join("dangling_dir")).expect("symlink");
    symlink("inside.txt", ws.join("in_link")).expect("symlink");
    std::fs::hard_link(root.join("outside.txt"), ws.join("hard")).expect("hard link");
    let fifo = std::process::Command::new("mkfifo")
        .arg(ws.join("fifo"))
        .status()
        .expect("mkfifo");
    assert!(fifo.success());
    std::fs::create_dir(ws.join("flip")).expect("dir");
    std::fs::write(ws.join("flip/f.txt"), "INSIDE").expect("file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fs_tools_never_leave_the_workspace() {
    let cases = cases();
    // Turns of `BATCH` parallel reads each.
    let batches = if full_size() { 20 } else { 4 };
    let races = batches * BATCH;
    let calls: Vec<(String, Value)> = cases
        .iter()
        .map(|c| (c.tool.to_owned(), c.args.clone()))
        .collect();
    let mut steps = script(&calls);
    // The race: many reads and edits of `flip/f.txt` per answer while `flip` keeps
    // turning from a directory into a symlink to `elsewhere/` and back. An edit that
    // raced out would turn `elsewhere/f.txt`'s marker into `CLOBBERED`.
    for _ in 0..batches {
        steps.push(Step::tool_calls(
            (0..BATCH)
                .flat_map(|_| {
                    [
                        ScriptedToolCall {
                            id: None,
                            name: "read_file".into(),
                            arguments: json!({"path": "flip/f.txt"}),
                        },
                        ScriptedToolCall {
                            id: None,
                            name: "edit_file".into(),
                            arguments: json!({"path": "flip/f.txt", "old_text": "OUTSIDE",
                                "new_text": "CLOBBERED", "replace_all": true}),
                        },
                    ]
                })
                .collect(),
        ));
        steps.push(Step::text("done"));
    }
    let model = ScriptedServer::start(Scenario::new(steps))
        .await
        .expect("model");
    let sb = sandbox("[agents.files]\nsystem_prompt = \"You read files.\"\nensembles = [\"fs\"]\n");
    furnish(&sb.root, &sb.workspace);
    let served = start(&sb, &model.base_url(), &[]).await;
    let thread = create_thread(&served, &sb, "files", "fs attacks").await;

    let mut tally = Tally::default();
    for case in &cases {
        let probe = probe(&served, &thread, case.name).await;
        probe
            .assert_output_lacks(MARKER)
            .assert_stream_lacks(MARKER);
        match case.expect {
            Expect::Violation => {
                probe.assert_refused_as("sandbox_violation", "sandbox_violation");
            }
            Expect::Fails(kind) => {
                probe.assert_failed(kind);
            }
            Expect::OkWithout(needle) => {
                probe.assert_ok().assert_output_lacks(needle);
            }
        }
        tally.case(!matches!(case.expect, Expect::OkWithout(_)));
    }
    // Nothing was created or changed outside.
    for name in ["escape.txt", "new.txt", "newdir"] {
        assert!(!sb.root.join(name).exists(), "{name} was created outside");
    }
    assert!(!Path::new("/tmp/agentplane-escape.txt").exists());
    assert_eq!(
        std::fs::read_to_string(sb.root.join("outside.txt")).expect("outside file"),
        MARKER,
        "the file outside was changed through its hard link"
    );
    assert_eq!(
        std::fs::read_to_string(sb.workspace.join("inside.txt")).expect("inside file"),
        "INSIDE",
        "a write went through the symlink"
    );

    // The race.
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        let ws = sb.workspace.clone();
        let elsewhere = sb.root.join("elsewhere");
        std::thread::spawn(move || swap_until(&ws, &elsewhere, &stop))
    };
    let mut streamed = Vec::new();
    for batch in 0..batches {
        let mut sse =
            agentplane_suites::SseReader::open(&served, &thread, &format!("race {batch}")).await;
        streamed.extend(sse.until("turn_completed").await);
    }
    stop.store(true, Ordering::SeqCst);
    let swaps = swapper.join().expect("swapper");
    let results: Vec<&Value> = streamed
        .iter()
        .filter(|e| e.event == "tool_call_result")
        .map(|e| &e.data)
        .collect();
    assert_eq!(
        results.len(),
        2 * races,
        "every racing read and edit has a result"
    );
    assert_eq!(
        std::fs::read_to_string(sb.root.join("elsewhere/f.txt")).expect("outside file"),
        MARKER,
        "an edit raced out of the workspace ({swaps} swaps)"
    );
    for event in &streamed {
        assert!(
            !event.data.to_string().contains(MARKER),
            "a read raced out of the workspace ({swaps} swaps): {:?}",
            event.data
        );
    }
    let refused = results.iter().filter(|r| r["status"] == "error").count();
    println!(
        "fs race: {races} reads and {races} edits, {refused} refused or failed, {swaps} swaps, no leak"
    );
    tally.case(true);
    tally.report("fs");
}

/// Turns `ws/flip` into a symlink to `elsewhere` and back into a directory, again and
/// again, until told to stop. Returns how many swaps it made.
fn swap_until(ws: &Path, elsewhere: &Path, stop: &AtomicBool) -> usize {
    let flip = ws.join("flip");
    let parked = ws.join("flip.parked");
    let mut swaps = 0;
    while !stop.load(Ordering::SeqCst) {
        if std::fs::rename(&flip, &parked).is_ok()
            && std::os::unix::fs::symlink(elsewhere, &flip).is_ok()
        {
            std::thread::yield_now();
            let _ = std::fs::remove_file(&flip);
            let _ = std::fs::rename(&parked, &flip);
            swaps += 1;
        }
        std::thread::yield_now();
    }
    swaps
}
