//! The child's environment, in a test binary of its own: it changes this process's
//! environment, which is only sound while no other thread runs.

use std::time::Duration;

use agentplane_engine::ports::{Ensemble, ToolContext};
use agentplane_tools::ShellEnsemble;
use serde_json::json;

#[test]
fn the_child_sees_only_a_scrubbed_environment_and_an_absolute_path() {
    let ws_dir = tempfile::tempdir().unwrap();
    let ws = ws_dir.path().canonicalize().unwrap();
    // A program planted in the workspace, reachable only through a relative PATH entry.
    let planted = ws.join("planted");
    std::fs::write(&planted, "#!/bin/sh\necho PLANTED\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let host_path = std::env::var("PATH").unwrap_or_default();
    // SAFETY: no other thread exists yet: this is the binary's only test and the
    // runtime is built below.
    unsafe {
        std::env::set_var("AGENTPLANE_TEST_SECRET", "hunter2");
        std::env::set_var("PATH", format!(".:{host_path}:"));
    }

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let ctx = ToolContext {
            workspace: ws.clone(),
            timeout: Duration::from_secs(10),
            output_cap: 64 * 1024,
            scope: None,
        };
        let shell = ShellEnsemble::new(vec!["env".into(), "planted".into()]);

        let out = shell
            .call("run_command", json!({"program": "env"}), &ctx)
            .await
            .unwrap();
        let stdout = out
            .content
            .split("--- stdout ---\n")
            .nth(1)
            .and_then(|rest| rest.split("\n--- stderr ---").next())
            .unwrap();
        let mut names: Vec<&str> = stdout
            .lines()
            .filter_map(|line| line.split('=').next())
            .collect();
        names.sort();
        assert_eq!(names, ["HOME", "LANG", "PATH", "TERM"], "{stdout}");
        assert!(!out.content.contains("hunter2"));
        assert!(stdout.contains(&format!("HOME={}\n", ws.display())));
        assert!(stdout.contains("LANG=C.UTF-8\n"));
        assert!(stdout.contains("TERM=dumb"));
        let path = stdout
            .lines()
            .find_map(|line| line.strip_prefix("PATH="))
            .unwrap();
        assert!(
            path.split(':').all(|dir| dir.starts_with('/')),
            "relative PATH entry reached the child: {path}"
        );

        let err = shell
            .call("run_command", json!({"program": "planted"}), &ctx)
            .await
            .unwrap_err();
        assert_eq!(
            err.kind,
            agentplane_core::ToolErrorKind::ExecutionFailed,
            "{err:?}"
        );
    });
}
