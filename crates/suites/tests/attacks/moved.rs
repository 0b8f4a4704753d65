//! Workspaces checked at use (ADR 0040), through the real binary: a thread's folder
//! (or one above it) swapped for a symlink between turns by someone else, or by the
//! model's own tools from an outer thread whose workspace holds a nested thread's;
//! and the configuration, policies and secrets folders (and what lies below them)
//! refused as workspaces at creation. Each swap is refused at the next turn with a
//! `security_event` (`workspace_moved`) and `FORBIDDEN`, and nothing outside is read.

use std::path::Path;

use agentplane_suites::attacks::{Tally, assert_envelope, probe, script_with_nudges};
use agentplane_suites::{Served, history, sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use reqwest::Method;
use serde_json::{Value, json};

use crate::identity::{call, refused, send};

/// What the folders outside hold; it must never reach a turn.
const MARKER: &str = "marker-outside-3f9c1e";

/// A thread of `agent` on `cwd` (`201`).
async fn thread_on(served: &Served, agent: &str, cwd: &Path) -> String {
    let (status, text) = send(
        call(served, Method::POST, "/v1/threads", None, Some("tester"))
            .json(&json!({"agent": agent, "cwd": cwd})),
    )
    .await;
    assert_eq!(status, 201, "{text}");
    let body: Value = serde_json::from_str(&text).expect("thread JSON");
    body["id"].as_str().expect("id").to_owned()
}

/// Starts a turn that must be refused: `403 FORBIDDEN`, recorded in the thread as a
/// refused turn with a `workspace_moved` security event, and nothing of `MARKER`.
async fn assert_turn_refused(served: &Served, tally: &mut Tally, thread: &str, what: &str) {
    let before = count_moved(&history(served, thread).await);
    let (status, text) = send(
        call(
            served,
            Method::POST,
            &format!("/v1/threads/{thread}/turns"),
            None,
            Some("tester"),
        )
        .json(&json!({"input": "read marker.txt"})),
    )
    .await;
    assert_eq!(status, 403, "{what}: {text}");
    assert_envelope(&text, "FORBIDDEN");
    let stored = history(served, thread).await;
    assert_eq!(count_moved(&stored), before + 1, "{what}: {stored}");
    let stored = stored.to_string();
    assert!(stored.contains("FORBIDDEN"), "{what}: {stored}");
    assert!(!stored.contains(MARKER) && !text.contains(MARKER), "{what}");
    tally.case(true);
}

/// How many `workspace_moved` events a thread's history holds.
fn count_moved(history: &Value) -> usize {
    history.to_string().matches("workspace_moved").count()
}

/// A folder outside every workspace holding `marker.txt` (and, for a swapped parent,
/// `ws/marker.txt`).
fn outside() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("outside");
    std::fs::write(dir.path().join("marker.txt"), MARKER).expect("marker");
    std::fs::create_dir(dir.path().join("ws")).expect("outside ws");
    std::fs::write(dir.path().join("ws/marker.txt"), MARKER).expect("marker");
    dir
}

/// Replaces `folder` with a symlink to `target` (the original kept beside it).
fn swap(folder: &Path, target: &Path) {
    let kept = folder.with_extension("orig");
    std::fs::rename(folder, &kept).expect("rename");
    std::os::unix::fs::symlink(target, folder).expect("symlink");
}

/// What a folder outside holds, to show nothing was written there.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("outside dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_swapped_for_a_symlink_is_refused_at_the_next_turn() {
    let out = outside();
    let target = out.path().canonicalize().expect("canonical outside");
    // The outer turn writes a script that swaps the nested workspace for a symlink to
    // `target`: no absolute path in any argument (the screen refuses those).
    let script = format!(
        "const fs = require('fs');\nfs.renameSync('inner', 'inner.orig');\n\
         fs.symlinkSync({:?}, 'inner');\nconsole.log('swapped');\n",
        target.display().to_string()
    );
    let calls = vec![
        (
            "write_file".to_owned(),
            json!({"path": "swap.js", "content": script}),
        ),
        (
            "run_command".to_owned(),
            json!({"program": "node", "args": ["swap.js"]}),
        ),
    ];
    // One legitimate turn of `reader` first, then the engineering agent's two calls.
    let mut steps = vec![
        Step::tool_call("read_file", json!({"path": "marker.txt"})),
        Step::text("done"),
    ];
    steps.extend(script_with_nudges(&calls, 2));
    let model = ScriptedServer::start(Scenario::new(steps))
        .await
        .expect("model");

    let sb = sandbox(
        "[agents.reader]\nsystem_prompt = \"You read.\"\nensembles = [\"fs\"]\n\
         [policies]\ndir = \"../policies\"\n\
         [secrets.K]\nfile = \"../secrets/k.secret\"\n",
    );
    let policies = sb.base.join("policies");
    std::fs::create_dir_all(policies.join("sub")).expect("policies");
    let secrets = sb.base.join("secrets");
    std::fs::create_dir_all(secrets.join("sub")).expect("secrets");
    std::fs::write(secrets.join("k.secret"), "file-secret-value-0123456789\n").expect("secret");
    std::fs::create_dir(sb.root.join("below")).expect("below config");
    let served = start(&sb, &model.base_url(), &[]).await;
    let mut tally = Tally::default();

    // 1. Between turns, by someone else: the workspace itself.
    let a = sb.base.join("a");
    std::fs::create_dir(&a).expect("a");
    let thread = thread_on(&served, "reader", &a).await;
    let first = probe(&served, &thread, "before the swap").await;
    assert!(!first.output().contains(MARKER));
    swap(&a, &target);
    assert_turn_refused(&served, &mut tally, &thread, "the workspace swapped").await;

    // 2. Between turns: a folder above the workspace.
    let up = sb.base.join("up");
    std::fs::create_dir_all(up.join("ws")).expect("up/ws");
    let thread = thread_on(&served, "reader", &up.join("ws")).await;
    swap(&up, &target);
    assert_turn_refused(&served, &mut tally, &thread, "a parent swapped").await;

    // 3. By the model's own tools in the middle of a turn: an outer thread whose
    // workspace holds a nested thread's, created over the API by the test standing in
    // for the model (confined processes cannot reach the API).
    let outer = sb.base.join("outer");
    std::fs::create_dir_all(outer.join("inner")).expect("outer/inner");
    let outer_thread = thread_on(&served, "engineering", &outer).await;
    let nested = thread_on(&served, "engineering", &outer.join("inner")).await;
    probe(&served, &outer_thread, "write the swap")
        .await
        .assert_ok();
    let ran = probe(&served, &outer_thread, "run the swap").await;
    ran.assert_ok();
    assert!(
        std::fs::symlink_metadata(outer.join("inner")).is_ok_and(|m| m.file_type().is_symlink()),
        "the outer turn did not swap the folder: {}",
        ran.output()
    );
    assert_turn_refused(&served, &mut tally, &nested, "swapped by the outer turn").await;

    // 4. Never a workspace, at creation: threads and executions.
    let link = sb.workspace.join("to-policies");
    std::os::unix::fs::symlink(&policies, &link).expect("symlink");
    for (name, cwd) in [
        ("the policies directory", policies.clone()),
        ("below the policies directory", policies.join("sub")),
        ("a secrets folder", secrets.clone()),
        ("below a secrets folder", secrets.join("sub")),
        ("the configuration directory", sb.root.clone()),
        ("below the configuration directory", sb.root.join("below")),
        ("a symlink to the policies directory", link.clone()),
    ] {
        let (status, text) = send(
            call(&served, Method::POST, "/v1/threads", None, Some("tester"))
                .json(&json!({"agent": "reader", "cwd": cwd})),
        )
        .await;
        refused(&mut tally, status, &text, 400, "INVALID_ARGUMENT", name);
        let (status, text) = send(
            call(
                &served,
                Method::POST,
                "/v1/executions",
                None,
                Some("tester"),
            )
            .json(&json!({"agent": "reader", "input": "hi", "cwd": cwd})),
        )
        .await;
        refused(
            &mut tally,
            status,
            &text,
            400,
            "INVALID_ARGUMENT",
            &format!("execution: {name}"),
        );
    }

    // Nothing outside was touched; the secret and the policies are where they were.
    assert_eq!(listing(&target), ["marker.txt", "ws"]);
    assert_eq!(listing(&target.join("ws")), ["marker.txt"]);
    assert_eq!(listing(&policies), ["sub"]);
    assert!(!served.stderr().contains(MARKER));
    tally.report("workspaces-at-use");
}
