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
