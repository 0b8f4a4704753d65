//! Workspace roots (ADR 0031, docs/identity.md): where an outside caller may point a
//! thread's or an execution's `cwd`, through the real binary.

use agentplane_suites::attacks::Tally;
use agentplane_suites::{sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use reqwest::Method;
use serde_json::json;

use crate::identity::{call, refused, send};

/// Workspace roots (ADR 0031): `serve` on loopback confines outside callers'
/// workspaces to the directory it started in (here, with no keys: as before, plus the
/// roots); the data and configuration directories, and any directory holding them,
/// are never a workspace; symlinks are judged by where they lead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspaces_stay_inside_the_roots() {
    let model = ScriptedServer::start(Scenario::new(vec![Step::text("hi")]).repeating(true))
        .await
        .expect("model");
    let sb = sandbox("");
    let outside = tempfile::tempdir().expect("outside");
    let inside_link = sb.workspace.join("escape");
    std::os::unix::fs::symlink(outside.path(), &inside_link).expect("symlink");
    let data_link = sb.workspace.join("data");
    std::os::unix::fs::symlink(&sb.root, &data_link).expect("symlink");
    let served = start(&sb, &model.base_url(), &[]).await;
    let mut tally = Tally::default();
    let create = |cwd: String| {
        call(&served, Method::POST, "/v1/threads", None, Some("tester"))
            .json(&json!({"agent": "chat", "cwd": cwd}))
    };
    let (status, text) = send(create(sb.workspace.display().to_string())).await;
    assert_eq!(status, 201, "a workspace inside the root: {text}");
    let hidden = outside.path().display().to_string();
    for (name, cwd) in [
        ("root of the filesystem", "/".to_owned()),
        ("/etc", "/etc".to_owned()),
        ("/tmp", "/tmp".to_owned()),
        ("another temp dir", hidden.clone()),
        (
            "a symlink inside pointing outside",
            inside_link.display().to_string(),
        ),
        (
            "the data and config directory",
            sb.root.display().to_string(),
        ),
        (
            "a symlink to the data directory",
            data_link.display().to_string(),
        ),
        (
            "dot-dot out of the root",
            format!("{}/../..", sb.workspace.display()),
        ),
        (
            "the root's parent",
            sb.root.parent().expect("parent").display().to_string(),
        ),
    ] {
        let (status, text) = send(create(cwd.clone())).await;
        refused(&mut tally, status, &text, 400, "INVALID_ARGUMENT", name);
        assert!(
            !text.contains(&hidden) && !text.contains("/tmp/"),
            "{name}: {text}"
        );
        let (status, text) = send(
            call(
                &served,
                Method::POST,
                "/v1/executions",
                None,
                Some("tester"),
            )
            .json(&json!({"agent": "chat", "input": "hi", "cwd": cwd})),
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
    let (status, text) = send(create(sb.workspace.display().to_string())).await;
    assert_eq!(status, 201, "{text}");
    tally.report("workspace-roots");
}
