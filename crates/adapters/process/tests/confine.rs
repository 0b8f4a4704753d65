//! `resolve_in_workspace` against hostile paths, on real directories and symlinks.

use std::os::unix::fs::symlink;
use std::path::PathBuf;

use agentplane_core::ToolErrorKind;
use agentplane_engine::ports::ToolError;
use agentplane_process::{Access, resolve_in_workspace};

struct Dirs {
    _ws: tempfile::TempDir,
    _out: tempfile::TempDir,
    ws: PathBuf,
    out: PathBuf,
}

/// A workspace with `notes/a.txt`, and an outside directory with `secret.txt`.
fn dirs() -> Dirs {
    let ws_dir = tempfile::tempdir().unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let ws = ws_dir.path().canonicalize().unwrap();
    let out = out_dir.path().canonicalize().unwrap();
    std::fs::create_dir(ws.join("notes")).unwrap();
    std::fs::write(ws.join("notes/a.txt"), "inside").unwrap();
    std::fs::write(out.join("secret.txt"), "outside").unwrap();
    Dirs {
        _ws: ws_dir,
        _out: out_dir,
        ws,
        out,
    }
}

fn assert_violation(result: Result<PathBuf, ToolError>, what: &str) {
    let err = result.expect_err(what);
    assert_eq!(err.kind, ToolErrorKind::SandboxViolation, "{what}: {err:?}");
    let security = err.security.as_ref().expect(what);
    assert_eq!(security.event_type, "sandbox_violation", "{what}");
}

#[test]
fn paths_inside_resolve_to_canonical_paths() {
    let d = dirs();
    assert_eq!(
        resolve_in_workspace(&d.ws, "notes/a.txt", Access::Read).unwrap(),
        d.ws.join("notes/a.txt")
    );
    assert_eq!(
        resolve_in_workspace(&d.ws, "./notes/../notes/a.txt", Access::Read).unwrap(),
        d.ws.join("notes/a.txt")
    );
    assert_eq!(
        resolve_in_workspace(&d.ws, ".", Access::List).unwrap(),
        d.ws
    );
}

#[test]
fn climbing_out_absolute_paths_and_nul_bytes_are_violations() {
    let d = dirs();
    for access in [Access::Read, Access::Write, Access::List] {
        for hostile in [
            "..",
            "../..",
            "../../../../../../etc/passwd",
            "notes/../../x",
            "/etc/passwd",
            "/",
            "C:\\Windows\\win.ini",
            "\\\\server\\share\\x",
            "notes/a.txt\0.png",
        ] {
            assert_violation(
                resolve_in_workspace(&d.ws, hostile, access),
                &format!("{hostile:?} {access:?}"),
            );
        }
    }
    // An absolute path that happens to point inside is still refused: paths are relative.
    let inside = d.ws.join("notes/a.txt");
    assert_violation(
        resolve_in_workspace(&d.ws, inside.to_str().unwrap(), Access::Read),
        "absolute path inside",
    );
}

#[test]
fn a_symlinked_file_pointing_outside_is_refused() {
    let d = dirs();
    symlink(d.out.join("secret.txt"), d.ws.join("leak")).unwrap();
    symlink("/etc/passwd", d.ws.join("passwd")).unwrap();
    assert_violation(resolve_in_workspace(&d.ws, "leak", Access::Read), "leak");
    assert_violation(
        resolve_in_workspace(&d.ws, "passwd", Access::Read),
        "passwd",
    );
    assert_violation(
        resolve_in_workspace(&d.ws, "leak", Access::Write),
        "write leak",
    );
}

#[test]
fn a_symlinked_directory_pointing_outside_is_refused_for_every_access() {
    let d = dirs();
    symlink(&d.out, d.ws.join("escape")).unwrap();
    std::fs::create_dir(d.ws.join("deep")).unwrap();
    symlink(&d.out, d.ws.join("deep/escape")).unwrap();
    assert_violation(
        resolve_in_workspace(&d.ws, "escape/secret.txt", Access::Read),
        "read",
    );
    assert_violation(resolve_in_workspace(&d.ws, "escape", Access::List), "list");
    assert_violation(
        resolve_in_workspace(&d.ws, "deep/escape/new/file.txt", Access::Write),
        "write below a symlinked dir",
    );
    assert!(!d.out.join("new").exists(), "no directory created outside");
}

#[test]
fn writes_never_go_through_a_symlink_even_one_pointing_inside() {
    let d = dirs();
    symlink(d.ws.join("notes/a.txt"), d.ws.join("alias")).unwrap();
    assert_eq!(
        resolve_in_workspace(&d.ws, "alias", Access::Read).unwrap(),
        d.ws.join("notes/a.txt")
    );
    assert_violation(resolve_in_workspace(&d.ws, "alias", Access::Write), "alias");
}

#[test]
fn a_dangling_symlink_cannot_be_used_to_create_outside() {
    let d = dirs();
    symlink(d.out.join("created.txt"), d.ws.join("dangling")).unwrap();
    symlink(d.out.join("newdir"), d.ws.join("dangling_dir")).unwrap();
    assert_violation(
        resolve_in_workspace(&d.ws, "dangling", Access::Write),
        "dangling file",
    );
    assert_violation(
        resolve_in_workspace(&d.ws, "dangling_dir/x.txt", Access::Write),
        "dangling dir",
    );
    assert!(!d.out.join("created.txt").exists());
    assert!(!d.out.join("newdir").exists());
}

#[test]
fn lexical_dotdot_never_follows_a_symlink_upwards() {
    let d = dirs();
    // `escape/..` would be the outside dir's parent for the kernel; lexically it is
    // the workspace, and that is what we resolve.
    symlink(&d.out, d.ws.join("escape")).unwrap();
    assert_eq!(
        resolve_in_workspace(&d.ws, "escape/../notes/a.txt", Access::Read).unwrap(),
        d.ws.join("notes/a.txt")
    );
}

#[test]
fn writes_create_missing_parents_only_after_the_check() {
    let d = dirs();
    let resolved = resolve_in_workspace(&d.ws, "x/y/z.txt", Access::Write).unwrap();
    assert_eq!(resolved, d.ws.join("x/y/z.txt"));
    assert!(d.ws.join("x/y").is_dir());
    assert!(!resolved.exists(), "only the parents are created");

    assert_violation(
        resolve_in_workspace(&d.ws, "q/../../r/s.txt", Access::Write),
        "climb",
    );
    assert!(!d.ws.join("q").exists());
}

#[test]
fn missing_paths_are_plain_failures_for_reads() {
    let d = dirs();
    for access in [Access::Read, Access::List] {
        let err = resolve_in_workspace(&d.ws, "nope/never.txt", access).unwrap_err();
        assert_eq!(err.kind, ToolErrorKind::ExecutionFailed);
        assert!(err.security.is_none());
    }
}

#[test]
fn a_workspace_given_through_a_symlink_is_refused() {
    // Turns hand tools the canonical workspace they checked (ADR 0040); a path that
    // no longer resolves to itself is a workspace moved since, never followed.
    let d = dirs();
    let link_dir = tempfile::tempdir().unwrap();
    let ws_link = link_dir.path().join("ws");
    symlink(&d.ws, &ws_link).unwrap();
    let refused = resolve_in_workspace(&ws_link, "notes/a.txt", Access::Read).unwrap_err();
    assert_eq!(refused.kind, ToolErrorKind::SandboxViolation, "{refused:?}");
    assert!(refused.security.is_some());
    let resolved = resolve_in_workspace(&d.ws, "notes/a.txt", Access::Read).unwrap();
    assert_eq!(resolved, d.ws.join("notes/a.txt"));
}
