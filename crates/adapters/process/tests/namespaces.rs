//! What a confined program sees of the machine, asked through `process::run` with the
//! default sandbox: namespaces of its own (ADR 0056). Each test leaves something
//! outside the sandbox — an open descriptor, a SysV segment, a listening socket, a
//! process — and has a shell inside look for it.

use std::time::Duration;

use agentplane_process::Sandbox;
use agentplane_process::process::{self, Finished, Invocation, Outcome};

fn sh(workspace: &std::path::Path, script: &str, sandbox: &Sandbox) -> Finished {
    let program = process::find_program("sh").expect("sh on PATH");
    let args = vec!["-c".to_owned(), script.to_owned()];
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime
        .block_on(process::run(&Invocation {
            program: &program,
            name: "sh",
            args: &args,
            workspace,
            timeout: Duration::from_secs(20),
            output_cap: 64 * 1024,
            env: &[],
            sandbox,
            egress: None,
        }))
        .expect("sh runs")
}

fn out(finished: &Finished) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&finished.stdout.kept),
        String::from_utf8_lossy(&finished.stderr.kept)
    )
}

fn namespaces_here() -> bool {
    match agentplane_process::sandbox::namespaces_available() {
        Ok(()) => true,
        Err(why) => {
            // CI runs these where namespaces exist; say loudly why not elsewhere.
            assert!(
                std::env::var("CI").is_err(),
                "namespaces are not available on this CI machine: {why}"
            );
            eprintln!("skipped: {why}");
            false
        }
    }
}

#[test]
fn a_program_gets_its_own_host_name_tmp_and_pid_one() {
    if !namespaces_here() {
        return;
    }
    let ws = tempfile::tempdir().expect("workspace");
    let ws = ws.path().canonicalize().expect("canonical");
    std::fs::write(ws.join("here.txt"), "inside").expect("file");
    let marker = tempfile::NamedTempFile::new_in("/tmp").expect("host tmp file");
    let finished = sh(
        &ws,
        "hostname; cat here.txt; echo; pwd; ls -A /tmp | wc -l; echo x > /tmp/mine && cat /tmp/mine; echo pid $$",
        &Sandbox::default(),
    );
    let text = out(&finished);
    assert!(
        matches!(finished.outcome, Outcome::Exited(s) if s.success()),
        "{text}"
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "agentplane-sandbox", "{text}");
    assert_eq!(lines[1], "inside", "{text}");
    assert_eq!(lines[2], ws.display().to_string(), "{text}");
    // The host's /tmp (with `marker` in it) is not what the program sees: only the
    // workspace's own path, mounted back, if it lies below /tmp.
    let expected_entries = usize::from(ws.starts_with("/tmp"));
    assert_eq!(lines[3].trim(), expected_entries.to_string(), "{text}");
    assert_eq!(lines[4], "x", "{text}");
    assert!(
        lines[5].starts_with("pid ") && lines[5] != "pid 1",
        "{text}"
    );
    assert!(!std::path::Path::new("/tmp/mine").exists());
    drop(marker);
}

#[test]
fn descriptors_the_server_holds_never_reach_a_program() {
    if !namespaces_here() {
        return;
    }
    let ws = tempfile::tempdir().expect("workspace");
    let ws = ws.path().canonicalize().expect("canonical");
    // A file, a pipe and a socket without close-on-exec, as a server might inherit.
    let secret = tempfile::NamedTempFile::new().expect("file");
    std::fs::write(secret.path(), "secret-through-descriptor\n").expect("write");
    let path = std::ffi::CString::new(secret.path().display().to_string()).expect("path");
    // SAFETY: open/pipe/socket write descriptors into locals; we close nothing twice.
    let (file, pipe, socket) = unsafe {
        let file = libc::open(path.as_ptr(), libc::O_RDONLY);
        let mut pipe = [0; 2];
        assert_eq!(libc::pipe(pipe.as_mut_ptr()), 0);
        let socket = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        (file, pipe, socket)
    };
    assert!(file > 2 && socket > 2);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    let mut script = String::new();
    for fd in 3..64 {
        script.push_str(&format!(
            "if ( : <&{fd} ) 2>/dev/null || ( : >&{fd} ) 2>/dev/null; then echo open {fd}; fi; "
        ));
    }
    let finished = sh(&ws, &script, &Sandbox::default());
    let text = out(&finished);
    assert!(
        !text.contains("open "),
        "descriptors reached the program: {text}"
    );
    // The same script unconfined sees them, so the test can fail.
    let plain = std::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .expect("plain sh");
    let seen = String::from_utf8_lossy(&plain.stdout);
    assert!(seen.contains(&format!("open {file}")), "{seen}");
    // SAFETY: closing the descriptors opened above.
    unsafe {
        libc::close(file);
        libc::close(pipe[0]);
        libc::close(pipe[1]);
        libc::close(socket);
    }
    drop(listener);
}

#[test]
fn sysv_ipc_outside_is_invisible_and_inside_is_gone_after_the_call() {
    if !namespaces_here() {
        return;
    }
    let Some(ipcmk) = process::find_program("ipcmk") else {
        panic!("ipcmk (util-linux) is needed for this test");
    };
    let ws = tempfile::tempdir().expect("workspace");
    let ws = ws.path().canonicalize().expect("canonical");
    // SAFETY: shmget/msgget/semget with integer arguments.
    let (shm, msg, sem) = unsafe {
        (
            libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o600),
            libc::msgget(libc::IPC_PRIVATE, libc::IPC_CREAT | 0o600),
            libc::semget(libc::IPC_PRIVATE, 1, libc::IPC_CREAT | 0o600),
        )
    };
    assert!(shm >= 0 && msg >= 0 && sem >= 0);
    // Rows of /proc/sysvipc/*: (id, perms, size) as text.
    let rows = |file: &str| -> Vec<Vec<String>> {
        std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().map(str::to_owned).collect())
            .collect()
    };
    let files = [
        "/proc/sysvipc/shm",
        "/proc/sysvipc/msg",
        "/proc/sysvipc/sem",
    ];
    assert!(
        rows(files[0])
            .iter()
            .any(|row| row.get(1) == Some(&shm.to_string())),
        "the test's own segment is listed outside"
    );
    // Inside: list what is visible, then leave a segment of a size and a queue of a
    // mode nothing else uses, to look for afterwards.
    let finished = sh(
        &ws,
        &format!(
            "cat {} | grep -c -v key; {ipcmk} -M 12345 -p 0601 >/dev/null && \
             {ipcmk} -Q -p 0601 >/dev/null && {ipcmk} -S 3 -p 0601 >/dev/null && echo made",
            files.join(" "),
            ipcmk = ipcmk.display(),
        ),
        &Sandbox::default(),
    );
    let text = out(&finished);
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("0"),
        "the host's IPC objects are visible: {text}"
    );
    assert_eq!(lines.next(), Some("made"), "{text}");
    // SAFETY: removing the objects made above.
    unsafe {
        libc::shmctl(shm, libc::IPC_RMID, std::ptr::null_mut());
        libc::msgctl(msg, libc::IPC_RMID, std::ptr::null_mut());
        libc::semctl(sem, 0, libc::IPC_RMID);
    }
    // What the program made lived in its namespace and went with it.
    for file in files {
        let left: Vec<_> = rows(file)
            .into_iter()
            .filter(|row| row.get(2).map(String::as_str) == Some("601"))
            .collect();
        assert!(
            left.is_empty(),
            "{file}: an object made inside outlived the call: {left:?}"
        );
    }
}

/// Thread B's workspace lies inside thread A's; A's program swaps B's folder with a
/// symlink to the configuration directory in a tight loop (an atomic
/// rename-exchange) while B's programs run. Whatever the timing, a program of B runs
/// in B's workspace or does not start: it never reads the configuration, never writes
/// into its folder, never deletes a policy.
#[test]
fn a_workspace_swapped_for_a_symlink_in_a_tight_loop_is_never_left() {
    let base = tempfile::tempdir().expect("base");
    let base = base.path().canonicalize().expect("canonical");
    let config = base.join("config");
    std::fs::create_dir_all(config.join("policies")).expect("config");
    std::fs::write(config.join("agentplane.toml"), "SECRET-CONFIG\n").expect("toml");
    std::fs::write(config.join("policies/deny.yaml"), "deny\n").expect("policy");
    let ws_a = base.join("a");
    let ws_b = ws_a.join("b");
    std::fs::create_dir_all(&ws_b).expect("workspaces");
    std::fs::write(ws_b.join("agentplane.toml"), "inside-b\n").expect("marker");
    std::fs::create_dir(ws_b.join("policies")).expect("b's own policies");
    std::fs::write(ws_b.join("policies/deny.yaml"), "b's\n").expect("b's file");
    let link = ws_a.join("link");
    std::os::unix::fs::symlink(&config, &link).expect("symlink");

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapping = stop.clone();
    let (from, to) = (
        std::ffi::CString::new(ws_b.display().to_string()).expect("path"),
        std::ffi::CString::new(link.display().to_string()).expect("path"),
    );
    let swapper = std::thread::spawn(move || {
        let mut swaps = 0u64;
        while !swapping.load(std::sync::atomic::Ordering::Relaxed) {
            // SAFETY: renameat2 on two NUL-terminated paths we own.
            let done = unsafe {
                libc::renameat2(
                    libc::AT_FDCWD,
                    from.as_ptr(),
                    libc::AT_FDCWD,
                    to.as_ptr(),
                    libc::RENAME_EXCHANGE,
                )
            };
            if done == 0 {
                swaps += 1;
                // Every other swap puts B's folder back: linger there a moment, so
                // calls pass the first check and meet the swap later, at setup.
                if swaps.is_multiple_of(2) {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        }
        swaps
    });

    let program = process::find_program("sh").expect("sh");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let calls = if std::env::var("AGENTPLANE_FULL_SIZE").is_ok() {
        10_000
    } else {
        2_000
    };
    let (mut ran, mut refused) = (0, 0);
    // A loaded machine can leave the swapper parked with the link in place, and a run
    // of calls refused (rightly); go on past `calls` until a tenth of them ran, up to
    // five times as many, so what is shown does not depend on the scheduler.
    let mut call = 0;
    while (call < calls || ran < calls / 10) && call < calls * 5 {
        call += 1;
        let script = format!(
            "cat agentplane.toml; echo {call} > written-{call}; rm -f policies/deny.yaml; \
             echo b > policies/deny.yaml"
        );
        let args = vec!["-c".to_owned(), script];
        let started = runtime.block_on(process::run(&Invocation {
            program: &program,
            name: "sh",
            args: &args,
            workspace: &ws_b,
            timeout: Duration::from_secs(10),
            output_cap: 4096,
            env: &[],
            sandbox: &Sandbox::default(),
            egress: None,
        }));
        match started {
            Ok(finished) => {
                ran += 1;
                let text = out(&finished);
                assert!(
                    !text.contains("SECRET-CONFIG"),
                    "call {call} read the configuration: {text}"
                );
            }
            Err(_) => refused += 1,
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let swaps = swapper.join().expect("swapper");
    // Put B's folder back where it belongs, whichever way the last swap left it.
    if std::fs::symlink_metadata(&ws_b).is_ok_and(|m| m.file_type().is_symlink()) {
        std::fs::rename(&ws_b, base.join("tmp-link")).expect("unswap");
        std::fs::rename(&link, &ws_b).expect("unswap");
    }
    assert!(swaps > 100, "the swapper hardly ran ({swaps} swaps)");
    assert!(
        ran >= calls / 10,
        "too few calls ran ({ran} ran, {refused} refused) to show anything"
    );
    let written: Vec<_> = std::fs::read_dir(&config)
        .expect("config dir")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("written-"))
        .collect();
    assert!(
        written.is_empty(),
        "calls wrote into the configuration: {written:?}"
    );
    assert_eq!(
        std::fs::read_to_string(config.join("policies/deny.yaml"))
            .expect("the policy is still there"),
        "deny\n"
    );
    assert_eq!(
        std::fs::read_to_string(config.join("agentplane.toml")).expect("config"),
        "SECRET-CONFIG\n"
    );
    eprintln!("{call} calls under {swaps} swaps: {ran} ran in the workspace, {refused} refused");
}

/// The data directory (the database, the setup token) is masked like the
/// configuration directory; an execution's folder inside it is still the program's
/// workspace, and nothing beside it shows. Landlock is told to let the program read the
/// whole tree, so what hides it here is the mount namespace alone.
#[test]
fn a_masked_directory_hides_everything_but_a_workspace_below_it() {
    if !namespaces_here() {
        return;
    }
    let root = tempfile::tempdir().expect("root");
    let root = root.path().canonicalize().expect("canonical");
    let config = root.join("config");
    let data = config.join("data");
    let ws = data.join("executions").join("run-1");
    std::fs::create_dir_all(&ws).expect("dirs");
    std::fs::write(config.join("agentplane.toml"), "secret config").expect("config");
    std::fs::write(data.join("setup-token"), "setup-secret").expect("token");
    std::fs::write(data.join("agentplane.db"), "database").expect("db");
    std::fs::create_dir(data.join("executions").join("run-2")).expect("other run");
    std::fs::write(ws.join("here.txt"), "inside").expect("file");
    agentplane_process::sandbox::mask_paths([config.clone(), data.clone()]);
    let mut sandbox = Sandbox::default();
    sandbox.spec.read_only = vec![root.display().to_string()];
    let script = format!(
        "cat here.txt; echo; echo ok > made.txt && cat made.txt; \
         echo parent: $(ls -A ..); echo data: $(ls -A ../..); echo config: $(ls -A {config}); \
         cat {data}/setup-token {data}/agentplane.db {config}/agentplane.toml 2>&1 | \
           grep -c secret; touch ../../planted 2>/dev/null || echo refused",
        config = config.display(),
        data = data.display(),
    );
    let finished = sh(&ws, &script, &sandbox);
    let text = out(&finished);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.first(), Some(&"inside"), "{text}");
    assert_eq!(lines.get(1), Some(&"ok"), "{text}");
    assert_eq!(lines.get(2), Some(&"parent: run-1"), "{text}");
    assert_eq!(lines.get(3), Some(&"data: executions"), "{text}");
    assert_eq!(lines.get(4), Some(&"config: data"), "{text}");
    assert_eq!(lines.get(5), Some(&"0"), "a secret was read: {text}");
    assert_eq!(lines.get(6), Some(&"refused"), "{text}");
    assert_eq!(
        std::fs::read_to_string(ws.join("made.txt")).expect("made"),
        "ok\n"
    );
    assert!(!data.join("planted").exists());
}
