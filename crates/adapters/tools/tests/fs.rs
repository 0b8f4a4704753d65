//! The `fs` ensemble through its `Ensemble` interface, on real temp directories.

use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use agentplane_core::ToolErrorKind;
use agentplane_engine::ports::{Ensemble, ToolContext, ToolError, ToolOutput};
use agentplane_tools::FsEnsemble;
use serde_json::{Value, json};

struct Fixture {
    _ws: tempfile::TempDir,
    _out: tempfile::TempDir,
    ws: PathBuf,
    out: PathBuf,
    ctx: ToolContext,
}

fn fixture() -> Fixture {
    fixture_with_cap(64 * 1024)
}

fn fixture_with_cap(output_cap: usize) -> Fixture {
    let ws_dir = tempfile::tempdir().unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let ws = ws_dir.path().canonicalize().unwrap();
    let out = out_dir.path().canonicalize().unwrap();
    std::fs::write(out.join("secret.txt"), "TOP SECRET outside\n").unwrap();
    let ctx = ToolContext {
        workspace: ws.clone(),
        timeout: Duration::from_secs(10),
        output_cap,
        scope: None,
    };
    Fixture {
        _ws: ws_dir,
        _out: out_dir,
        ws,
        out,
        ctx,
    }
}

async fn call(f: &Fixture, tool: &str, args: Value) -> Result<ToolOutput, ToolError> {
    FsEnsemble.call(tool, args, &f.ctx).await
}

fn assert_sandbox_violation(result: Result<ToolOutput, ToolError>, what: &str) {
    let err = result.expect_err(what);
    assert_eq!(err.kind, ToolErrorKind::SandboxViolation, "{what}: {err:?}");
    assert_eq!(
        err.security.as_ref().expect(what).event_type,
        "sandbox_violation"
    );
    assert!(!err.message.contains("TOP SECRET"), "{what}");
}

#[test]
fn offers_five_tools_and_marks_the_writers() {
    let tools = FsEnsemble.tools();
    let names: Vec<_> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "read_file",
            "write_file",
            "edit_file",
            "list_files",
            "search_text"
        ]
    );
    for tool in &tools {
        assert_eq!(
            tool.side_effects,
            tool.name == "write_file" || tool.name == "edit_file",
            "{}",
            tool.name
        );
        assert_eq!(tool.parameters["type"], "object");
    }
}

#[tokio::test]
async fn write_then_read_round_trips_and_creates_parents() {
    let f = fixture();
    let out = call(
        &f,
        "write_file",
        json!({"path": "src/deep/hello.txt", "content": "héllo\nworld\n"}),
    )
    .await
    .unwrap();
    assert_eq!(out.content, "wrote 13 bytes to src/deep/hello.txt");
    assert_eq!(
        std::fs::read_to_string(f.ws.join("src/deep/hello.txt")).unwrap(),
        "héllo\nworld\n"
    );

    let read = call(&f, "read_file", json!({"path": "src/deep/hello.txt"}))
        .await
        .unwrap();
    assert_eq!(read.content, "héllo\nworld\n");
    assert!(!read.truncated);
}

#[tokio::test]
async fn read_file_pages_by_line_and_says_where_to_continue() {
    let f = fixture();
    let lines: String = (1..=10).map(|n| format!("line {n}\n")).collect();
    std::fs::write(f.ws.join("ten.txt"), lines).unwrap();

    let page = call(
        &f,
        "read_file",
        json!({"path": "ten.txt", "offset": 3, "limit": 2}),
    )
    .await
    .unwrap();
    assert_eq!(
        page.content,
        "line 3\nline 4\n\n[read_file showed 2 line(s) of ten.txt; more lines follow: read on with offset=5]"
    );

    let past = call(&f, "read_file", json!({"path": "ten.txt", "offset": 50}))
        .await
        .unwrap();
    assert!(past.content.contains("has no line 50"), "{}", past.content);
}

#[tokio::test]
async fn read_file_cuts_at_the_output_cap() {
    let f = fixture_with_cap(100);
    std::fs::write(f.ws.join("big.txt"), "x".repeat(10_000)).unwrap();
    let out = call(&f, "read_file", json!({"path": "big.txt"}))
        .await
        .unwrap();
    assert!(out.truncated);
    assert!(out.content.starts_with(&"x".repeat(100)));
    assert!(!out.content.starts_with(&"x".repeat(101)));
    assert!(
        out.content.contains("truncated at 100 bytes"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn binary_files_are_reported_not_dumped() {
    let f = fixture();
    std::fs::write(
        f.ws.join("blob.bin"),
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
    )
    .unwrap();
    let out = call(&f, "read_file", json!({"path": "blob.bin"}))
        .await
        .unwrap();
    assert_eq!(
        out.content,
        "blob.bin is a binary file (16 bytes); not shown as text"
    );
}

#[tokio::test]
async fn hostile_paths_are_violations_for_every_tool() {
    let f = fixture();
    for path in [
        "..",
        "../..",
        "../secret.txt",
        "/etc/passwd",
        "a/../../etc/passwd",
        "C:\\Windows\\System32",
        "\\\\host\\share",
        "ok\0/../../etc/passwd",
    ] {
        assert_sandbox_violation(call(&f, "read_file", json!({"path": path})).await, path);
        assert_sandbox_violation(
            call(&f, "write_file", json!({"path": path, "content": "x"})).await,
            path,
        );
        assert_sandbox_violation(
            call(
                &f,
                "edit_file",
                json!({"path": path, "old_text": "root", "new_text": "x"}),
            )
            .await,
            path,
        );
        assert_sandbox_violation(call(&f, "list_files", json!({"path": path})).await, path);
        assert_sandbox_violation(
            call(&f, "search_text", json!({"pattern": "root", "path": path})).await,
            path,
        );
    }
}

#[tokio::test]
async fn symlinks_out_of_the_workspace_are_refused() {
    let f = fixture();
    symlink(f.out.join("secret.txt"), f.ws.join("secret_link")).unwrap();
    symlink(&f.out, f.ws.join("outside_dir")).unwrap();
    symlink("/etc/passwd", f.ws.join("passwd")).unwrap();

    for path in ["secret_link", "outside_dir/secret.txt", "passwd"] {
        assert_sandbox_violation(call(&f, "read_file", json!({"path": path})).await, path);
    }
    assert_sandbox_violation(
        call(&f, "list_files", json!({"path": "outside_dir"})).await,
        "list",
    );
    assert_sandbox_violation(
        call(
            &f,
            "search_text",
            json!({"pattern": "SECRET", "path": "outside_dir"}),
        )
        .await,
        "search",
    );
}

#[tokio::test]
async fn hard_links_are_refused_and_the_linked_file_is_untouched() {
    let f = fixture();
    // Both temp dirs lie on one filesystem here; elsewhere there is nothing to test.
    if std::fs::hard_link(f.out.join("secret.txt"), f.ws.join("hard")).is_err() {
        eprintln!("no hard link across the temp dirs; skipped");
        return;
    }
    assert_sandbox_violation(call(&f, "read_file", json!({"path": "hard"})).await, "read");
    assert_sandbox_violation(
        call(
            &f,
            "write_file",
            json!({"path": "hard", "content": "pwned"}),
        )
        .await,
        "write",
    );
    let found = call(&f, "search_text", json!({"pattern": "SECRET"}))
        .await
        .expect("search");
    assert!(!found.content.contains("TOP SECRET"), "{}", found.content);
    assert_eq!(
        std::fs::read_to_string(f.out.join("secret.txt")).unwrap(),
        "TOP SECRET outside\n",
        "nothing was truncated through the link"
    );
}

#[tokio::test]
async fn writing_through_a_symlink_leaves_the_target_untouched() {
    let f = fixture();
    symlink(f.out.join("secret.txt"), f.ws.join("secret_link")).unwrap();
    symlink(&f.out, f.ws.join("outside_dir")).unwrap();
    symlink(f.out.join("planted.txt"), f.ws.join("dangling")).unwrap();

    for path in [
        "secret_link",
        "outside_dir/secret.txt",
        "outside_dir/new.txt",
        "dangling",
    ] {
        assert_sandbox_violation(
            call(&f, "write_file", json!({"path": path, "content": "pwned"})).await,
            path,
        );
    }
    assert_eq!(
        std::fs::read_to_string(f.out.join("secret.txt")).unwrap(),
        "TOP SECRET outside\n"
    );
    assert!(!f.out.join("new.txt").exists());
    assert!(!f.out.join("planted.txt").exists());
}

#[tokio::test]
async fn list_files_is_sorted_marks_kinds_and_never_follows_symlinks() {
    let f = fixture();
    std::fs::create_dir_all(f.ws.join("src/nested")).unwrap();
    std::fs::write(f.ws.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(f.ws.join("src/nested/deep.rs"), "").unwrap();
    std::fs::write(f.ws.join("README.md"), "# hi\n").unwrap();
    std::fs::create_dir(f.ws.join(".git")).unwrap();
    std::fs::write(f.ws.join(".git/HEAD"), "ref\n").unwrap();
    symlink(&f.out, f.ws.join("outside_dir")).unwrap();

    let flat = call(&f, "list_files", json!({})).await.unwrap();
    assert_eq!(flat.content, ".git/\nREADME.md\noutside_dir@\nsrc/");

    let deep = call(&f, "list_files", json!({"path": ".", "recursive": true}))
        .await
        .unwrap();
    assert_eq!(
        deep.content,
        ".git/\nREADME.md\noutside_dir@\nsrc/\nsrc/main.rs\nsrc/nested/\nsrc/nested/deep.rs"
    );
    assert!(!deep.content.contains("secret"));

    let sub = call(&f, "list_files", json!({"path": "src"}))
        .await
        .unwrap();
    assert_eq!(sub.content, "src/main.rs\nsrc/nested/");
}

#[tokio::test]
async fn list_files_stops_at_its_entry_bound() {
    let f = fixture();
    for n in 0..1100 {
        std::fs::write(f.ws.join(format!("f{n:04}")), "").unwrap();
    }
    let out = call(&f, "list_files", json!({})).await.unwrap();
    assert!(out.truncated);
    let shown = out.content.lines().filter(|l| l.starts_with('f')).count();
    assert_eq!(shown, agentplane_tools::fs::MAX_LIST_ENTRIES);
    assert!(out.content.contains("listing stopped after 1000 entries"));
}

#[tokio::test]
async fn search_text_reports_path_line_text_and_skips_binary_big_and_symlinked() {
    let f = fixture();
    std::fs::create_dir(f.ws.join("src")).unwrap();
    std::fs::write(f.ws.join("src/a.rs"), "fn alpha() {}\n// SECRET here\n").unwrap();
    std::fs::write(f.ws.join("b.txt"), "nothing\nSECRET again\nSECRET thrice\n").unwrap();
    std::fs::write(f.ws.join("blob.bin"), b"SECRET\x00\x01").unwrap();
    let big = format!("SECRET\n{}", "y".repeat(2 * 1024 * 1024));
    std::fs::write(f.ws.join("big.txt"), big).unwrap();
    symlink(&f.out, f.ws.join("outside_dir")).unwrap();
    symlink(f.out.join("secret.txt"), f.ws.join("secret_link")).unwrap();

    let out = call(&f, "search_text", json!({"pattern": "SECRET"}))
        .await
        .unwrap();
    let matches: Vec<&str> = out
        .content
        .lines()
        .filter(|l| !l.starts_with('['))
        .collect();
    assert_eq!(
        matches,
        [
            "b.txt:2:SECRET again",
            "b.txt:3:SECRET thrice",
            "src/a.rs:2:// SECRET here"
        ]
    );
    assert!(!out.content.contains("outside"), "{}", out.content);
    assert!(
        out.content
            .contains("skipped 1 binary files and 1 files over"),
        "{}",
        out.content
    );

    let one_file = call(
        &f,
        "search_text",
        json!({"pattern": "alpha", "path": "src/a.rs"}),
    )
    .await
    .unwrap();
    assert_eq!(one_file.content, "src/a.rs:1:fn alpha() {}");

    let none = call(&f, "search_text", json!({"pattern": "zzz"}))
        .await
        .unwrap();
    assert!(
        none.content.starts_with("no matches for \"zzz\"\n[skipped"),
        "{}",
        none.content
    );
}

#[tokio::test]
async fn search_text_bounds_its_matches() {
    let f = fixture();
    let many: String = (0..500).map(|n| format!("hit {n}\n")).collect();
    std::fs::write(f.ws.join("many.txt"), many).unwrap();
    let out = call(&f, "search_text", json!({"pattern": "hit"}))
        .await
        .unwrap();
    assert!(out.truncated);
    let shown = out
        .content
        .lines()
        .filter(|l| l.starts_with("many.txt:"))
        .count();
    assert_eq!(shown, agentplane_tools::fs::MAX_SEARCH_MATCHES);
}

#[tokio::test]
async fn a_fifo_does_not_hang_read_file() {
    let f = fixture();
    let status = std::process::Command::new("mkfifo")
        .arg(f.ws.join("pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    let started = Instant::now();
    let err = call(&f, "read_file", json!({"path": "pipe"}))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::ExecutionFailed);
    assert!(
        err.message.contains("not a regular file"),
        "{}",
        err.message
    );
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn missing_files_are_plain_failures() {
    let f = fixture();
    let err = call(&f, "read_file", json!({"path": "nope.txt"}))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::ExecutionFailed);
    assert!(err.security.is_none());
    let dir = call(&f, "read_file", json!({"path": "."}))
        .await
        .unwrap_err();
    assert_eq!(dir.kind, ToolErrorKind::ExecutionFailed);
}

#[tokio::test]
async fn malformed_arguments_and_unknown_tools_are_rejected() {
    let f = fixture();
    for (tool, args) in [
        ("read_file", json!({"path": 5})),
        ("read_file", json!({})),
        ("read_file", json!({"path": "a", "extra": true})),
        ("write_file", json!({"path": "a"})),
        ("list_files", json!({"recursive": "yes"})),
        ("search_text", json!({"pattern": ""})),
        ("read_file", json!("not an object")),
    ] {
        let err = call(&f, tool, args.clone()).await.unwrap_err();
        assert_eq!(err.kind, ToolErrorKind::InvalidArguments, "{tool} {args}");
    }
    let err = call(&f, "delete_everything", json!({})).await.unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::UnknownTool);
}

#[tokio::test]
async fn edit_file_changes_one_occurrence_and_keeps_the_rest() {
    let f = fixture();
    std::fs::write(f.ws.join("config.txt"), "name=demo\nport=8080\nmode=dev\n").unwrap();
    let out = call(
        &f,
        "edit_file",
        json!({"path": "config.txt", "old_text": "port=8080", "new_text": "port=9090"}),
    )
    .await
    .expect("edited");
    assert_eq!(
        out.content,
        "replaced 1 occurrence in config.txt; it is now 29 bytes"
    );
    assert_eq!(
        std::fs::read_to_string(f.ws.join("config.txt")).unwrap(),
        "name=demo\nport=9090\nmode=dev\n"
    );
}

#[tokio::test]
async fn a_refused_edit_leaves_the_file_as_it_was() {
    let f = fixture();
    let original = "a=1\na=1\nb=2\n";
    std::fs::write(f.ws.join("c.txt"), original).unwrap();
    std::fs::write(f.ws.join("bin"), b"\0\x01a=1").unwrap();
    std::fs::write(f.ws.join("latin1"), b"a=1 \xe9").unwrap();
    for (args, expected) in [
        (
            json!({"path": "c.txt", "old_text": "zzz", "new_text": "y"}),
            "is not in c.txt",
        ),
        (
            json!({"path": "c.txt", "old_text": "a=1", "new_text": "y"}),
            "occurs 2 times",
        ),
        (
            json!({"path": "c.txt", "old_text": "", "new_text": "y"}),
            "old_text is empty",
        ),
        (
            json!({"path": "bin", "old_text": "a=1", "new_text": "y"}),
            "binary file",
        ),
        (
            json!({"path": "latin1", "old_text": "a=1", "new_text": "y"}),
            "not UTF-8",
        ),
        (
            json!({"path": "missing.txt", "old_text": "a", "new_text": "b"}),
            "no such file",
        ),
        (
            json!({"path": "c.txt", "old_text": "a", "new_text": "b", "mode": "x"}),
            "unknown field",
        ),
        (
            json!({"path": "c.txt", "old_text": 7, "new_text": "b"}),
            "invalid type",
        ),
    ] {
        let err = call(&f, "edit_file", args.clone())
            .await
            .expect_err("refused");
        assert!(err.message.contains(expected), "{args}: {}", err.message);
    }
    assert_eq!(
        std::fs::read_to_string(f.ws.join("c.txt")).unwrap(),
        original
    );
    assert!(!f.ws.join("missing.txt").exists());

    let all = call(
        &f,
        "edit_file",
        json!({"path": "c.txt", "old_text": "a=1", "new_text": "a=3", "replace_all": true}),
    )
    .await
    .expect("replace_all");
    assert!(
        all.content.starts_with("replaced 2 occurrences"),
        "{}",
        all.content
    );
    assert_eq!(
        std::fs::read_to_string(f.ws.join("c.txt")).unwrap(),
        "a=3\na=3\nb=2\n"
    );
}

#[tokio::test]
async fn edit_file_never_reaches_outside_the_workspace_or_into_git() {
    let f = fixture();
    symlink(f.out.join("secret.txt"), f.ws.join("secret_link")).unwrap();
    symlink(&f.out, f.ws.join("outside_dir")).unwrap();
    std::fs::create_dir(f.ws.join(".git")).unwrap();
    std::fs::write(f.ws.join(".git/config"), "[core]\n").unwrap();
    for path in [
        "secret_link",
        "outside_dir/secret.txt",
        ".git/config",
        ".GIT/config",
    ] {
        assert_sandbox_violation(
            call(
                &f,
                "edit_file",
                json!({"path": path, "old_text": "TOP SECRET", "new_text": "pwned"}),
            )
            .await,
            path,
        );
    }
    if std::fs::hard_link(f.out.join("secret.txt"), f.ws.join("hard")).is_ok() {
        assert_sandbox_violation(
            call(
                &f,
                "edit_file",
                json!({"path": "hard", "old_text": "TOP SECRET", "new_text": "pwned"}),
            )
            .await,
            "hard link",
        );
    }
    assert_eq!(
        std::fs::read_to_string(f.out.join("secret.txt")).unwrap(),
        "TOP SECRET outside\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.ws.join(".git/config")).unwrap(),
        "[core]\n"
    );
}

#[tokio::test]
async fn edit_file_refuses_a_file_over_its_size_bound() {
    let f = fixture();
    let big = "x".repeat(agentplane_tools::MAX_EDIT_FILE_BYTES as usize + 1);
    std::fs::write(f.ws.join("big.txt"), &big).unwrap();
    let err = call(
        &f,
        "edit_file",
        json!({"path": "big.txt", "old_text": "x", "new_text": "y", "replace_all": true}),
    )
    .await
    .expect_err("too big");
    assert!(err.message.contains("use write_file"), "{}", err.message);
    assert_eq!(
        std::fs::metadata(f.ws.join("big.txt")).unwrap().len(),
        big.len() as u64
    );
}
