//! The kernel sandbox really in force: a program the allowlist permits (node, running
//! a script from the workspace) tries to leave the workspace every way the issue
//! names — read and write outside, connect to 127.0.0.1 with network off, read its
//! parent's `/proc/PID/environ`, signal its parent, ptrace — and the kernel refuses
//! each. The same script with network allowed connects, so the test can fail.
//!
//! CI runs on a kernel with Landlock ABI 4 or later and seccomp; where they are
//! missing this test fails loudly instead of passing without a sandbox.

use std::path::PathBuf;
use std::time::Duration;

use agentplane_core::SandboxSpec;
use agentplane_engine::ports::{Ensemble, ToolContext};
use agentplane_process::Sandbox;
use agentplane_process::sandbox::Kernel;
use agentplane_tools::ShellEnsemble;
use serde_json::json;

/// Each probe prints `name: ok` or `name: refused CODE`.
const PROBE: &str = r#"
const fs = require('fs');
const net = require('net');
const [outsideFile, outsideDir, port] = process.argv.slice(2);
const report = (name, f) => {
  try { f(); console.log(`${name}: ok`); }
  catch (e) { console.log(`${name}: refused ${e.code}`); }
};
report('read-inside', () => fs.readFileSync('inside.txt'));
report('write-inside', () => fs.writeFileSync('made-inside.txt', 'x'));
report('read-outside', () => fs.readFileSync(outsideFile));
report('write-outside', () => fs.writeFileSync(outsideDir + '/planted', 'x'));
report('list-outside', () => fs.readdirSync(outsideDir));
report('read-shadow', () => fs.readFileSync('/etc/shadow'));
report('parent-environ', () => fs.readFileSync(`/proc/${process.ppid}/environ`));
report('parent-mem', () => fs.openSync(`/proc/${process.ppid}/mem`, 'r'));
report('signal-parent', () => process.kill(process.ppid, 0));
const socket = net.connect({host: '127.0.0.1', port: Number(port)});
socket.on('connect', () => { console.log('connect: ok'); socket.destroy(); });
socket.on('error', (e) => console.log(`connect: refused ${e.code}`));
"#;

struct Run {
    output: String,
    connections: usize,
}

async fn run_probe(network: bool) -> Run {
    let missing = Kernel::get().missing();
    assert!(
        missing.is_none(),
        "this kernel cannot enforce the sandbox ({missing:?}); the test refuses to pass \
         without it"
    );
    let workspace_dir = tempfile::tempdir().unwrap();
    let outside_dir = tempfile::tempdir().unwrap();
    let workspace: PathBuf = workspace_dir.path().canonicalize().unwrap();
    let outside: PathBuf = outside_dir.path().canonicalize().unwrap();
    std::fs::write(workspace.join("probe.js"), PROBE).unwrap();
    std::fs::write(workspace.join("inside.txt"), "inside").unwrap();
    std::fs::write(outside.join("secret.txt"), "outside-secret").unwrap();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = tokio::spawn(async move {
        let mut count = 0;
        while let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(3), listener.accept()).await
        {
            count += 1;
        }
        count
    });

    let shell = ShellEnsemble::with_sandbox(
        vec!["node".into()],
        Sandbox {
            spec: SandboxSpec::default(),
            network,
            own_proc: false,
        },
    );
    let ctx = ToolContext {
        workspace: workspace.clone(),
        timeout: Duration::from_secs(20),
        output_cap: 64 * 1024,
        scope: None,
    };
    // The script names the outside place by a variable of its own: the argument
    // screen would refuse the paths as arguments, and this test is about the kernel.
    let script = format!(
        "process.argv.push({:?}, {:?}, {:?}); {PROBE}",
        outside.join("secret.txt"),
        outside,
        port.to_string()
    );
    std::fs::write(workspace.join("probe.js"), script).unwrap();
    let out = shell
        .call(
            "run_command",
            json!({"program": "node", "args": ["probe.js"]}),
            &ctx,
        )
        .await
        .expect("node ran");
    let connections = accepted.await.unwrap();
    assert!(
        !outside.join("planted").exists(),
        "a file was written outside the workspace"
    );
    Run {
        output: out.content,
        connections,
    }
}

fn line<'a>(output: &'a str, name: &str) -> &'a str {
    output
        .lines()
        .find(|l| l.starts_with(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} line in:\n{output}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kernel_refuses_everything_outside_the_workspace() {
    let run = run_probe(false).await;
    let out = &run.output;
    assert_eq!(line(out, "read-inside"), "read-inside: ok", "{out}");
    assert_eq!(line(out, "write-inside"), "write-inside: ok", "{out}");
    // Outside folders below /tmp are not even there (the private /tmp of the mount
    // namespace); elsewhere Landlock refuses them.
    for name in ["read-outside", "write-outside", "list-outside"] {
        let got = line(out, name);
        assert!(
            got == format!("{name}: refused EACCES") || got == format!("{name}: refused ENOENT"),
            "the kernel let {name} through:\n{out}"
        );
    }
    for (name, code) in [
        ("read-shadow", "EACCES"),
        ("parent-environ", "EACCES"),
        ("parent-mem", "EACCES"),
        ("signal-parent", "EPERM"),
        // Without network no IP socket can even be made (seccomp).
        ("connect", "EPERM"),
    ] {
        assert_eq!(
            line(out, name),
            format!("{name}: refused {code}"),
            "the kernel let {name} through:\n{out}"
        );
    }
    assert!(!out.contains("outside-secret"), "{out}");
    assert_eq!(run.connections, 0, "a connection reached the listener");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_network_allowed_the_host_s_loopback_is_still_out_of_reach() {
    let run = run_probe(true).await;
    // The socket opens (network is allowed), but 127.0.0.1 is the namespace's own
    // loopback: the host's listener is never reached (ADR 0056; the way out is the
    // egress proxy, attacked in `suites/tests/attacks/egress.rs`).
    assert!(
        line(&run.output, "connect").starts_with("connect: refused"),
        "{}",
        run.output
    );
    assert_ne!(
        line(&run.output, "connect"),
        "connect: refused EPERM",
        "{}",
        run.output
    );
    assert_eq!(run.connections, 0);
    // Files stay confined with network on.
    let read = line(&run.output, "read-outside");
    assert!(
        read == "read-outside: refused EACCES" || read == "read-outside: refused ENOENT",
        "{}",
        run.output
    );
}

#[tokio::test]
async fn a_required_sandbox_is_described_as_in_force() {
    let described = Sandbox::default().in_force();
    assert!(described.starts_with("landlock ABI"), "{described}");
    assert!(described.contains("TCP denied"), "{described}");
    assert!(described.contains("seccomp"), "{described}");
    assert!(described.contains("no_new_privs"), "{described}");
}

#[tokio::test]
async fn an_opt_out_is_said_where_the_sandbox_is_described() {
    let opted_out = Sandbox {
        spec: SandboxSpec {
            required: false,
            ..SandboxSpec::default()
        },
        network: false,
        own_proc: false,
    };
    let described = opted_out.in_force();
    assert!(
        described.contains("sandbox.required = false"),
        "{described}"
    );
    // The kernel still confines what it can.
    assert!(described.contains("landlock ABI"), "{described}");
}

/// `ip`'s address and link changes (NETLINK, `CAP_NET_ADMIN`) from a confined process,
/// inside a network namespace this test makes (so nothing can reach the machine's own
/// network): refused, while the same commands unconfined, in the same namespace, work —
/// so the test can fail. Needs the privilege to make a namespace (CI runs as root);
/// without it, it says so and checks nothing else.
#[test]
fn netlink_changes_are_refused_even_to_a_root_server() {
    let missing = Kernel::get().missing();
    assert!(missing.is_none(), "no sandbox here: {missing:?}");
    let worker = std::thread::spawn(|| {
        // SAFETY: unshare with a flag only; it moves this thread (and what it starts)
        // into a new, empty network namespace.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return None;
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        Some(runtime.block_on(async {
            let workspace_dir = tempfile::tempdir().unwrap();
            let ctx = ToolContext {
                workspace: workspace_dir.path().canonicalize().unwrap(),
                timeout: Duration::from_secs(20),
                output_cap: 64 * 1024,
                scope: None,
            };
            let shell = ShellEnsemble::with_sandbox(vec!["ip".into()], Sandbox::default());
            let mut confined = Vec::new();
            for args in [
                vec!["addr", "add", "10.251.0.1/32", "dev", "lo"],
                vec!["link", "set", "lo", "up"],
                vec!["link", "add", "apdummy0", "type", "dummy"],
            ] {
                let out = shell
                    .call("run_command", json!({"program": "ip", "args": args}), &ctx)
                    .await;
                confined.push(match out {
                    Ok(out) => out.content,
                    Err(e) => e.message,
                });
            }
            let show = |args: &[&str]| {
                let out = std::process::Command::new("ip")
                    .args(args)
                    .output()
                    .unwrap();
                String::from_utf8_lossy(&out.stdout).into_owned()
            };
            let after_confined = show(&["addr", "show", "dev", "lo"]);
            let unconfined = std::process::Command::new("ip")
                .args(["addr", "add", "10.251.0.2/32", "dev", "lo"])
                .status()
                .unwrap();
            (
                confined,
                after_confined,
                unconfined.success(),
                show(&["addr", "show", "dev", "lo"]),
            )
        }))
    });
    let Some((confined, after_confined, unconfined_ok, after_unconfined)) = worker.join().unwrap()
    else {
        eprintln!("no network namespace could be made here (not root): nothing checked");
        return;
    };
    eprintln!("confined ip: {confined:?}");
    for out in &confined {
        assert!(
            out.contains("exit code: ") && !out.starts_with("exit code: 0"),
            "a confined `ip` changed the network: {out}"
        );
    }
    assert!(!after_confined.contains("10.251.0.1"), "{after_confined}");
    assert!(
        !after_confined.contains("UP"),
        "lo was brought up: {after_confined}"
    );
    assert!(
        unconfined_ok,
        "the same change unconfined must work, else this shows nothing"
    );
    assert!(
        after_unconfined.contains("10.251.0.2"),
        "{after_unconfined}"
    );
}
