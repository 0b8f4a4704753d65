//! `data_scope` in the builtin tools: with scopes in force (`ToolContext::scope`), `fs`
//! touches only granted paths (besides the workspace), `shell` runs only in a granted
//! workspace and `fetch_url` reaches only granted hosts. Real temp directories, a real
//! program, and a real HTTP server on 127.0.0.1.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentplane_core::policy::{DataScope, Glob};
use agentplane_core::{NetworkAccess, ToolErrorKind};
use agentplane_engine::ports::{Ensemble, ToolContext, ToolError, ToolOutput};
use agentplane_tools::web::host_in_scopes;
use agentplane_tools::{FsEnsemble, ShellEnsemble, WebEnsemble, WebLimits};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

fn globs(patterns: &[String]) -> Vec<Glob> {
    patterns
        .iter()
        .map(|p| Glob::new(p).expect("valid pattern"))
        .collect()
}

fn paths_scope(patterns: &[String]) -> DataScope {
    DataScope {
        paths: globs(patterns),
        ..DataScope::default()
    }
}

fn hosts_scope(patterns: &[&str]) -> DataScope {
    DataScope {
        hosts: globs(&patterns.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>()),
        ..DataScope::default()
    }
}

fn ctx(workspace: &Path, scope: Option<Vec<DataScope>>) -> ToolContext {
    ToolContext {
        workspace: workspace.to_path_buf(),
        timeout: Duration::from_secs(10),
        output_cap: 64 * 1024,
        scope: scope.map(Arc::new),
    }
}

/// A workspace holding `data/a.txt`, `data/link` (a symlink to `top.txt`), `top.txt`,
/// `notes.md`; and a file outside it.
struct Fixture {
    _dir: tempfile::TempDir,
    ws: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    let ws = root.join("ws");
    std::fs::create_dir_all(ws.join("data")).expect("mkdir");
    std::fs::write(ws.join("data/a.txt"), "alpha in scope\n").expect("write");
    std::fs::write(ws.join("top.txt"), "OUT OF SCOPE top\n").expect("write");
    std::fs::write(ws.join("notes.md"), "alpha notes\n").expect("write");
    std::os::unix::fs::symlink(ws.join("top.txt"), ws.join("data/link")).expect("symlink");
    std::fs::write(root.join("outside.txt"), "OUT OF SCOPE outside\n").expect("write");
    Fixture { _dir: dir, ws }
}

async fn fs(ctx: &ToolContext, tool: &str, args: Value) -> Result<ToolOutput, ToolError> {
    FsEnsemble.call(tool, args, ctx).await
}

fn assert_scope_denied(result: Result<ToolOutput, ToolError>, what: &str) {
    let err = result.expect_err(what);
    assert_eq!(err.kind, ToolErrorKind::PolicyDenied, "{what}: {err:?}");
    assert_eq!(
        err.security.as_ref().expect(what).event_type,
        "data_scope_denied",
        "{what}"
    );
    assert!(!err.message.contains("OUT OF SCOPE"), "{what}");
}

#[tokio::test]
async fn fs_reaches_only_granted_paths() {
    let f = fixture();
    let ctx = ctx(
        &f.ws,
        Some(vec![paths_scope(&[format!("{}/data/*", f.ws.display())])]),
    );

    let read = fs(&ctx, "read_file", json!({"path": "data/a.txt"})).await;
    assert!(read.expect("granted").content.contains("alpha in scope"));
    assert_scope_denied(
        fs(&ctx, "read_file", json!({"path": "top.txt"})).await,
        "read outside the scope",
    );
    // The symlink is in the workspace and under data/, but resolves outside the scope.
    assert_scope_denied(
        fs(&ctx, "read_file", json!({"path": "data/link"})).await,
        "read through a symlink",
    );
    assert!(
        fs(&ctx, "list_files", json!({"path": "data"}))
            .await
            .is_ok()
    );
    assert_scope_denied(
        fs(&ctx, "list_files", json!({"path": "."})).await,
        "list the workspace root",
    );
    assert_scope_denied(
        fs(&ctx, "search_text", json!({"pattern": "OUT", "path": "."})).await,
        "search the workspace root",
    );

    fs(
        &ctx,
        "write_file",
        json!({"path": "data/new/b.txt", "content": "x"}),
    )
    .await
    .expect("granted write");
    assert!(f.ws.join("data/new/b.txt").is_file());
    assert_scope_denied(
        fs(
            &ctx,
            "write_file",
            json!({"path": "other/b.txt", "content": "x"}),
        )
        .await,
        "write outside the scope",
    );
    assert!(
        !f.ws.join("other").exists(),
        "a refused write creates no directory"
    );
    assert_scope_denied(
        fs(
            &ctx,
            "write_file",
            json!({"path": "data/../c.txt", "content": "x"}),
        )
        .await,
        "write climbing out of the scope",
    );
    assert!(!f.ws.join("c.txt").exists());
}

#[tokio::test]
async fn walks_show_and_search_only_granted_entries() {
    let f = fixture();
    let ws = f.ws.display().to_string();
    let ctx = ctx(
        &f.ws,
        Some(vec![paths_scope(&[ws.clone(), format!("{ws}/*.md")])]),
    );

    let listed = fs(&ctx, "list_files", json!({"path": ".", "recursive": true}))
        .await
        .expect("the root is granted")
        .content;
    assert_eq!(listed, "notes.md");
    let found = fs(&ctx, "search_text", json!({"pattern": "alpha"}))
        .await
        .expect("search")
        .content;
    assert!(found.contains("notes.md:1:alpha notes"), "{found}");
    assert!(!found.contains("a.txt"), "{found}");
}

#[tokio::test]
async fn the_workspace_still_confines_under_a_wide_scope() {
    let f = fixture();
    let ctx = ctx(&f.ws, Some(vec![paths_scope(&["*".to_owned()])]));
    assert!(
        fs(&ctx, "read_file", json!({"path": "top.txt"}))
            .await
            .is_ok()
    );
    let err = fs(&ctx, "read_file", json!({"path": "../outside.txt"}))
        .await
        .expect_err("outside the workspace");
    assert_eq!(err.kind, ToolErrorKind::SandboxViolation);
}

#[tokio::test]
async fn empty_scopes_grant_nothing_and_no_scope_changes_nothing() {
    let f = fixture();
    for scopes in [vec![], vec![DataScope::default()]] {
        let ctx = ctx(&f.ws, Some(scopes));
        assert_scope_denied(
            fs(&ctx, "read_file", json!({"path": "data/a.txt"})).await,
            "empty scope",
        );
    }
    let open = ctx(&f.ws, None);
    assert!(
        fs(&open, "read_file", json!({"path": "top.txt"}))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn several_scopes_grant_their_union() {
    let f = fixture();
    let ws = f.ws.display().to_string();
    let ctx = ctx(
        &f.ws,
        Some(vec![
            paths_scope(&[format!("{ws}/data/*")]),
            paths_scope(&[format!("{ws}/top.txt")]),
        ]),
    );
    assert!(
        fs(&ctx, "read_file", json!({"path": "data/a.txt"}))
            .await
            .is_ok()
    );
    assert!(
        fs(&ctx, "read_file", json!({"path": "top.txt"}))
            .await
            .is_ok()
    );
    assert_scope_denied(
        fs(&ctx, "read_file", json!({"path": "notes.md"})).await,
        "not in either scope",
    );
}

#[tokio::test]
async fn shell_runs_only_in_a_granted_workspace() {
    let f = fixture();
    let shell = ShellEnsemble::new(vec!["echo".to_owned()]);
    let args = json!({"program": "echo", "args": ["ran"]});

    let partial = ctx(
        &f.ws,
        Some(vec![paths_scope(&[format!("{}/data/*", f.ws.display())])]),
    );
    assert_scope_denied(
        shell.call("run_command", args.clone(), &partial).await,
        "workspace not granted",
    );
    let whole = ctx(
        &f.ws,
        Some(vec![paths_scope(&[f.ws.display().to_string()])]),
    );
    let output = shell
        .call("run_command", args, &whole)
        .await
        .expect("granted workspace");
    assert!(output.content.contains("ran"), "{}", output.content);
}

/// A server on 127.0.0.1 answering `/` with a page and `/away` with a redirect to
/// `localhost` on the same port; counts connections.
async fn site() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&request).into_owned();
                let reply = if head.starts_with("GET /away ") {
                    format!(
                        "HTTP/1.1 302 Found\r\nLocation: http://localhost:{port}/\r\n\
                         Content-Length: 0\r\nConnection: close\r\n\r\n"
                    )
                } else {
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\
                     Connection: close\r\n\r\nhello"
                        .to_owned()
                };
                let _ = socket.write_all(reply.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (port, hits)
}

fn web() -> WebEnsemble {
    WebEnsemble::new(
        NetworkAccess {
            allowed: true,
            allow_private: true,
        },
        WebLimits::default(),
    )
}

#[tokio::test]
async fn fetch_reaches_only_granted_hosts() {
    let (port, hits) = site().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("http://127.0.0.1:{port}/");

    let granted = ctx(dir.path(), Some(vec![hosts_scope(&["127.0.0.1"])]));
    let page = web()
        .call("fetch_url", json!({"url": url}), &granted)
        .await
        .expect("granted host");
    assert!(page.content.contains("hello"));
    assert_eq!(hits.load(Ordering::SeqCst), 1);

    let other = ctx(dir.path(), Some(vec![hosts_scope(&["*.example.org"])]));
    assert_scope_denied(
        web().call("fetch_url", json!({"url": url}), &other).await,
        "host not granted",
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1, "nothing was sent");

    // Every hop is checked: the redirect to `localhost` leaves the scope.
    assert_scope_denied(
        web()
            .call(
                "fetch_url",
                json!({"url": format!("http://127.0.0.1:{port}/away")}),
                &granted,
            )
            .await,
        "redirect to another host",
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        2,
        "only the first hop was sent"
    );

    let paths_only = ctx(dir.path(), Some(vec![paths_scope(&["*".to_owned()])]));
    assert_scope_denied(
        web()
            .call("fetch_url", json!({"url": url}), &paths_only)
            .await,
        "a scope without hosts grants none",
    );
}

#[test]
fn host_patterns_match_hosts_as_urls_spell_them() {
    let scopes = [hosts_scope(&["*.github.com", "::1", "api.example.org"])];
    assert!(host_in_scopes(&scopes, "api.github.com"));
    assert!(!host_in_scopes(&scopes, "github.com"));
    assert!(!host_in_scopes(&scopes, "github.com.evil.net"));
    assert!(host_in_scopes(&scopes, "[::1]"));
    assert!(host_in_scopes(&scopes, "api.example.org"));
    assert!(!host_in_scopes(&scopes, "api.example.org.evil"));
    assert!(!host_in_scopes(&scopes, ""));
}
