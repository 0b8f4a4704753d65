//! What a confined process can reach, asked of the kernel itself: the model writes a
//! C program into its workspace (`kernel_probe.c`) and builds and runs it with `make`,
//! which the shipped `engineering` agent may run when its sandbox is in force. The
//! program does not try a list of known escapes; it walks the interface: every
//! socket family, type and protocol number, agentplane's own port by every protocol
//! that opened, a UNIX socket outside the workspace, device nodes, the capability
//! sets, and processes that leave their group or their parent.
//!
//! The same program under an agent with network shows that network opens TCP and UDP
//! sockets only, and that none of them reaches the host: not agentplane's own port, not
//! the test's target on 127.0.0.1 (the namespace's loopback is its own).
//! Kernel refusals are not `security_event`s: the kernel does not tell the server.

use std::time::Duration;

use agentplane_suites::attacks::{
    Tally, Target, make_call, probe, probe_value, sandbox_in_force, script_with_nudges, write_call,
};
use agentplane_suites::{create_thread_in, sandbox, start_with_env};
use agentplane_testkit::{Scenario, ScriptedServer};
use serde_json::Value;

const PROBE_C: &str = include_str!("kernel_probe.c");

const MAKEFILE: &str = "probe: probe.c params.h\n\tTMPDIR=$(CURDIR) cc -O0 -o probe probe.c\n\
                        sockets devices survive: probe\n\t./probe $@\n\
                        .PHONY: sockets devices survive\n";

/// The probe's `key: value` lines for `key`.
fn values<'a>(output: &'a str, key: &str) -> Vec<&'a str> {
    let prefix = format!("{key}: ");
    output
        .lines()
        .filter_map(|line| line.strip_prefix(prefix.as_str()))
        .collect()
}

fn stdout(result: &Value) -> String {
    result["output"].as_str().unwrap_or_default().to_owned()
}

/// Whether the process that locked `file` (the probe's survivors hold an exclusive
/// lock for as long as they live) is gone: the lock can be taken.
pub(crate) fn is_gone(file: &std::path::Path) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(f) = std::fs::File::open(file) else {
        return false;
    };
    // SAFETY: flock on a descriptor we own; released when `f` is dropped.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_program_reaches_nothing_the_sandbox_does_not_allow() {
    let sb = sandbox(
        "[agents.netbuilder]\nsystem_prompt = \"You build.\"\nensembles = [\"shell\", \"fs\"]\n\
         shell_allow = [\"make\"]\n[agents.netbuilder.network]\nallowed = true\n",
    );
    let net_ws = sb.base.join("ws-net");
    std::fs::create_dir(&net_ws).expect("second workspace");
    let net_ws = net_ws.canonicalize().expect("canonical");

    // A local service outside the workspace, on a pathname UNIX socket.
    let socket_path = sb.root.join("service.sock");
    let unix = tokio::net::UnixListener::bind(&socket_path).expect("unix listener");
    let unix_accepts = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = unix_accepts.clone();
    tokio::spawn(async move {
        while unix.accept().await.is_ok() {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let target = Target::ok("reached").await;

    let model_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    let model_port = model_listener.local_addr().expect("addr").port();
    let served = start_with_env(&sb, &format!("http://127.0.0.1:{model_port}/v1"), &[], &[]).await;
    let own_port = served.port();
    let params = format!(
        "#define OWN_PORT {own_port}\n#define TARGET_PORT {}\n#define UNIX_PATH {:?}\n",
        target.port(),
        socket_path.display().to_string()
    );
    let setup = [
        write_call("probe.c", PROBE_C),
        write_call("params.h", &params),
        write_call("Makefile", MAKEFILE),
    ];
    let mut calls: Vec<(String, Value)> = setup.to_vec();
    calls.extend([
        make_call("sockets"),
        make_call("devices"),
        make_call("survive"),
    ]);
    // The built-in agent takes up to two corrective messages after a text answer; the
    // configured one none (the suites' configurations say `max_nudges = 0`).
    let mut script = script_with_nudges(&calls, 2);
    let mut net_calls = setup.to_vec();
    net_calls.push(make_call("sockets"));
    script.extend(script_with_nudges(&net_calls, 0));
    let _model = ScriptedServer::listen(Scenario::new(script), model_listener)
        .await
        .expect("model");

    let in_force = sandbox_in_force(&served, "engineering").await;
    assert!(
        in_force.starts_with("landlock ABI") && in_force.contains("seccomp"),
        "the kernel sandbox is not in force here, so this suite cannot show it: {in_force}"
    );

    let mut tally = Tally::default();
    let thread = create_thread_in(&served, &sb.workspace, "engineering", "kernel").await;
    for step in ["write probe.c", "write params.h", "write Makefile"] {
        probe(&served, &thread, step).await.assert_ok();
    }

    // Without network: not one socket of any family, type or protocol.
    let sockets = probe(&served, &thread, "make sockets").await;
    let out = stdout(&sockets.result);
    assert_eq!(probe_value(&out, "tried"), "134848", "{out}");
    assert_eq!(values(&out, "opened"), Vec::<&str>::new(), "{out}");
    assert_eq!(probe_value(&out, "opened-count"), "0", "{out}");
    assert_eq!(probe_value(&out, "own-port-count"), "0", "{out}");
    assert_eq!(probe_value(&out, "target-count"), "0", "{out}");
    assert!(
        probe_value(&out, "unix-socket").starts_with("refused"),
        "{out}"
    );
    assert_eq!(
        probe_value(&out, "unix-pair"),
        "ok",
        "a socket pair is a pipe: {out}"
    );
    // Each family, MPTCP on agentplane's port and the UNIX socket: cases of their own.
    for _ in 0..64 + 2 {
        tally.case(true);
    }

    // Device nodes and capabilities.
    let devices = probe(&served, &thread, "make devices").await;
    let out = stdout(&devices.result);
    assert!(
        probe_value(&out, "char-device").starts_with("refused"),
        "{out}"
    );
    assert!(
        probe_value(&out, "block-device").starts_with("refused"),
        "{out}"
    );
    assert!(!sb.workspace.join("char-device").exists());
    assert!(!sb.workspace.join("block-device").exists());
    assert_eq!(
        probe_value(&out, "capabilities"),
        "effective 000000000 permitted 000000000 inheritable 000000000",
        "{out}"
    );
    assert_eq!(probe_value(&out, "bounding"), "0", "{out}");
    for _ in 0..3 {
        tally.case(true);
    }

    // Processes that leave their group and their parent do not outlive the call.
    let survive = probe(&served, &thread, "make survive").await;
    assert_eq!(
        probe_value(&stdout(&survive.result), "survivors"),
        "started"
    );
    for file in ["setsid.pid", "orphan.pid", "daemon.pid"] {
        let path = sb.workspace.join(file);
        assert!(path.exists(), "{file} was not written");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !is_gone(&path) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(is_gone(&path), "{file}: its process outlived its call");
        tally.case(true);
    }

    // With network: TCP and UDP over IPv4 and IPv6, the target reached, never
    // agentplane's own port.
    let net_thread = create_thread_in(&served, &net_ws, "netbuilder", "kernel").await;
    for step in ["write probe.c", "write params.h", "write Makefile"] {
        probe(&served, &net_thread, step).await.assert_ok();
    }
    let sockets = probe(&served, &net_thread, "make sockets (network)").await;
    let out = stdout(&sockets.result);
    let allowed = [
        "2 1 0", "2 1 6", "2 2 0", "2 2 17", "10 1 0", "10 1 6", "10 2 0", "10 2 17",
    ];
    let opened = values(&out, "opened");
    assert_eq!(opened, allowed, "{out}");
    assert_eq!(probe_value(&out, "own-port-count"), "0", "{out}");
    // The network namespace holds only its own loopback: 127.0.0.1 and ::1 are not
    // the host's, so the target there is not reached by any socket (the way out is
    // the egress proxy, attacked in `egress.rs`).
    assert_eq!(probe_value(&out, "target-count"), "0", "{out}");
    assert!(
        probe_value(&out, "unix-socket").starts_with("refused"),
        "{out}"
    );
    tally.case(true);

    assert_eq!(
        unix_accepts.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "a confined process connected to a UNIX socket outside its workspace"
    );
    assert_eq!(
        target.hits(),
        0,
        "a confined process reached the host's loopback"
    );
    tally.report("kernel");
}
