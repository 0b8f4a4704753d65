//! The network from inside the sandbox, asked of the kernel itself (ADR 0056): the
//! model builds and runs `egress_probe.c`, which tries every way to open a
//! connection — `connect`, `sendto`/`sendmsg` with `MSG_FASTOPEN`,
//! `TCP_FASTOPEN_CONNECT`, UDP, `io_uring` — to agentplane's own port, to a second
//! agentplane on the same host and to a plain loopback service, by every address that
//! names the host's loopback, with network allowed and not; then the only way out, the
//! egress proxy: a destination a data scope names exactly is reached, every other is
//! refused, and each refusal is a `network_denied` security event.

use agentplane_suites::attacks::{
    Probe, Tally, Target, make_call, probe, probe_value, sandbox_in_force, script_with_nudges,
    write_call,
};
use agentplane_suites::{Served, create_thread_in, sandbox, start_with_env};
use agentplane_testkit::{Scenario, ScriptedServer};

const PROBE_C: &str = include_str!("egress_probe.c");

const MAKEFILE: &str = "probe: probe.c params.h\n\tTMPDIR=$(CURDIR) cc -O0 -o probe probe.c\n\
                        connect proxy flood: probe\n\t./probe $@\n.PHONY: connect proxy flood\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_socket_reaches_the_host_and_the_proxy_lets_out_only_what_a_policy_names() {
    let target = Target::ok("reached").await;
    let sb = sandbox(
        "[policies]\ndir = \"policies\"\n\
         [agents.netbuilder]\nsystem_prompt = \"You build.\"\nensembles = [\"shell\", \"fs\"]\n\
         shell_allow = [\"make\"]\n[agents.netbuilder.network]\nallowed = true\n\
         allow_private = true\n",
    );
    std::fs::create_dir(sb.root.join("policies")).expect("policies");
    std::fs::write(
        sb.root.join("policies/scope.yaml"),
        format!(
            "name: build-hosts\ntype: data_scope\ntargets: {{agents: [netbuilder]}}\n\
             rules:\n  paths: [\"*\"]\n  hosts: [\"127.0.0.1:{}\"]\n",
            target.port()
        ),
    )
    .expect("policy");
    let net_ws = sb.base.join("ws-net");
    std::fs::create_dir(&net_ws).expect("second workspace");
    let net_ws = net_ws.canonicalize().expect("canonical");

    // `serve` starts with a file, a pipe and a socket open without close-on-exec, as a
    // server started from a shell or a supervisor may be; no program may see them.
    let leaked = tempfile::NamedTempFile::new().expect("leaked file");
    let leaked_path = std::ffi::CString::new(leaked.path().display().to_string()).expect("path");
    // SAFETY: open/pipe/socket write descriptors into locals, closed at the end.
    let inherited = unsafe {
        let mut pipe = [0; 2];
        assert_eq!(libc::pipe(pipe.as_mut_ptr()), 0);
        [
            libc::open(leaked_path.as_ptr(), libc::O_RDONLY),
            pipe[0],
            pipe[1],
            libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0),
        ]
    };
    assert!(inherited.iter().all(|&fd| fd > 2));
    // A second agentplane on the same host (replicas of docs/deploy.md), keyless.
    let second_sb = sandbox("");
    let second = start_with_env(&second_sb, "http://127.0.0.1:9/v1", &[], &[]).await;
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp");
    udp.set_nonblocking(true).expect("nonblocking");

    let model_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    let model_port = model_listener.local_addr().expect("addr").port();
    let served = start_with_env(&sb, &format!("http://127.0.0.1:{model_port}/v1"), &[], &[]).await;
    let params = format!(
        "#define OWN_PORT {}\n#define SECOND_PORT {}\n#define TARGET_PORT {}\n\
         #define UDP_PORT {}\n#define PROXY_PORT 3128\n",
        served.port(),
        second.port(),
        target.port(),
        udp.local_addr().expect("udp addr").port()
    );
    let setup = [
        write_call("probe.c", PROBE_C),
        write_call("params.h", &params),
        write_call("Makefile", MAKEFILE),
    ];
    // The built-in agent takes two corrective messages after a text answer.
    let mut calls = setup.to_vec();
    calls.push(make_call("connect"));
    let mut script = script_with_nudges(&calls, 2);
    let mut net_calls = setup.to_vec();
    net_calls.extend([make_call("connect"), make_call("proxy"), make_call("flood")]);
    script.extend(script_with_nudges(&net_calls, 0));
    let _model = ScriptedServer::listen(Scenario::new(script), model_listener)
        .await
        .expect("model");
    let in_force = sandbox_in_force(&served, "netbuilder").await;
    assert!(
        in_force.contains("namespaces"),
        "namespaces are not in force here, so this suite cannot show them: {in_force}"
    );

    let mut tally = Tally::default();
    for (ws, agent, network) in [
        (&sb.workspace, "engineering", false),
        (&net_ws, "netbuilder", true),
    ] {
        let thread = create_thread_in(&served, ws, agent, "egress").await;
        for step in ["write probe.c", "write params.h", "write Makefile"] {
            probe(&served, &thread, step).await.assert_ok();
        }
        let connect = probe(&served, &thread, &format!("make connect ({agent})")).await;
        let out = connect.output().to_owned();
        assert_eq!(probe_value(&out, "tried-connect"), "72", "{out}");
        assert_eq!(
            probe_value(&out, "open-fds"),
            "0",
            "descriptors reached the program: {out}"
        );
        tally.case(true);
        assert_eq!(probe_value(&out, "reached-count"), "0", "{out}");
        for key in ["unshare-user", "unshare-net", "clone-newuser"] {
            assert_eq!(probe_value(&out, key), "EPERM", "{key}: {out}");
        }
        assert_eq!(probe_value(&out, "clone3"), "ENOSYS", "{out}");
        assert_eq!(probe_value(&out, "io_uring"), "EPERM", "{out}");
        if !network {
            assert_eq!(
                probe_value(&out, "udp-sent"),
                "0",
                "no socket without network: {out}"
            );
        }
        // 72 ways to connect, 6 datagrams, io_uring, 4 ways to nest a namespace.
        for _ in 0..72 + 6 + 1 + 4 {
            tally.case(true);
        }
        if network {
            let proxy = probe(&served, &thread, "make proxy").await;
            let out = proxy.output().to_owned();
            assert_eq!(probe_value(&out, "proxy-target"), "200 reached", "{out}");
            // Every decision is in the call's recorded result, the allowed one too.
            assert!(
                out.contains(&format!(
                    "allowed 127.0.0.1:{}: connected to",
                    target.port()
                )),
                "{out}"
            );
            assert_eq!(out.matches("\nrefused ").count(), 5, "{out}");
            for key in [
                "proxy-own",
                "proxy-own-v6",
                "proxy-second",
                "proxy-target-by-name",
                "proxy-get-own",
            ] {
                assert!(probe_value(&out, key).starts_with("403 "), "{key}: {out}");
                tally.case(true);
            }
            let refused: Vec<String> = proxy
                .security
                .iter()
                .filter(|e| e["event_type"] == "network_denied")
                .map(|e| e["detail"].as_str().unwrap_or_default().to_owned())
                .collect();
            assert_eq!(
                refused.len(),
                5,
                "one security event per refusal: {refused:?}"
            );
            for destination in [
                format!("127.0.0.1:{}", served.port()),
                format!("[::1]:{}", served.port()),
                format!("127.0.0.1:{}", second.port()),
                format!("localhost:{}", target.port()),
            ] {
                assert!(
                    refused.iter().any(|d| d.contains(&destination)),
                    "{destination} not recorded: {refused:?}"
                );
            }
            // Each decision is an `egress` event of the turn too, and counted.
            let decided: Vec<(bool, String)> = proxy
                .events
                .iter()
                .filter(|e| e["kind"] == "egress")
                .map(|e| {
                    let destination = e["destination"].as_str().unwrap_or_default();
                    (e["allowed"] == true, destination.to_owned())
                })
                .collect();
            assert_eq!(
                decided.iter().filter(|(allowed, _)| !allowed).count(),
                5,
                "{decided:?}"
            );
            assert_eq!(decided.len(), 6, "one allowed, five refused: {decided:?}");
            assert!(
                decided.contains(&(true, format!("127.0.0.1:{}", target.port()))),
                "{decided:?}"
            );
            assert_eq!(egress_counted(&served).await, (1, 5));
            tally.case(true);
            // A program that opens 200 proxy connections at once: beyond 64 the
            // server closes them (recorded), and the proxy still works after.
            let flood = probe(&served, &thread, "make flood").await;
            let out = flood.output().to_owned();
            let closed: usize = probe_value(&out, "flood-closed").parse().expect("a count");
            assert!(closed >= 200 - 64, "the proxy took every connection: {out}");
            assert_eq!(probe_value(&out, "flood-after"), "200 reached", "{out}");
            assert!(
                flood.security.iter().any(|e| e["detail"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("more than 64")),
                "the closed connections are not recorded"
            );
            tally.case(true);
        }
    }
    // Only the proxy's allowed connections (one per probe) reached the target; no
    // datagram arrived.
    assert_eq!(
        target.hits(),
        2,
        "the target was reached other than through the proxy"
    );
    let mut buf = [0u8; 16];
    assert!(
        udp.recv_from(&mut buf).is_err(),
        "a datagram reached the host"
    );
    // Neither agentplane gave a key away: both still have none.
    for server in [&served, &second] {
        let keys = reqwest::Client::new()
            .get(format!("{}/v1/keys", server.base))
            .header("X-Client-ID", "operator")
            .send()
            .await
            .expect("keys");
        let body = keys.text().await.unwrap_or_default();
        assert!(!body.contains("key_"), "a key was minted: {body}");
    }
    // SAFETY: closing the descriptors opened above.
    unsafe {
        for fd in inherited {
            libc::close(fd);
        }
    }
    tally.report("egress");
}

/// `egress_connections_total` on `/metrics`, summed over agents: (allowed, refused).
async fn egress_counted(served: &Served) -> (u64, u64) {
    let text = reqwest::Client::new()
        .get(format!("{}/metrics", served.base))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    let sum = |decision: &str| {
        text.lines()
            .filter(|line| {
                line.starts_with("egress_connections_total{")
                    && line.contains(&format!("decision=\"{decision}\""))
            })
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    };
    (sum("allowed"), sum("refused"))
}

/// A netbuilder agent (network allowed), the probe's files and `make connect` for it
/// and for the built-in engineering agent, on a server started with `env`.
async fn fallback_run(extra: &str, env: &[(&str, &str)]) -> (String, String, Probe, u16, u16) {
    let target = Target::ok("reached").await;
    let sb = sandbox(&format!(
        "{extra}[agents.netbuilder]\nsystem_prompt = \"You build.\"\n\
         ensembles = [\"shell\", \"fs\"]\nshell_allow = [\"make\"]\n\
         [agents.netbuilder.network]\nallowed = true\n"
    ));
    let net_ws = sb.base.join("ws-net");
    std::fs::create_dir(&net_ws).expect("second workspace");
    let net_ws = net_ws.canonicalize().expect("canonical");
    let model_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    let model_port = model_listener.local_addr().expect("addr").port();
    let served = start_with_env(&sb, &format!("http://127.0.0.1:{model_port}/v1"), &[], env).await;
    let own = served.port();
    let params = format!(
        "#define OWN_PORT {own}\n#define SECOND_PORT {own}\n#define TARGET_PORT {}\n\
         #define UDP_PORT 9\n#define PROXY_PORT 3128\n",
        target.port()
    );
    let setup = [
        write_call("probe.c", PROBE_C),
        write_call("params.h", &params),
        write_call("Makefile", MAKEFILE),
    ];
    let mut calls = setup.to_vec();
    calls.push(make_call("connect"));
    let mut script = script_with_nudges(&calls, 2);
    script.extend(script_with_nudges(&calls, 0));
    let _model = ScriptedServer::listen(Scenario::new(script), model_listener)
        .await
        .expect("model");
    let mut outputs = Vec::new();
    let mut last = None;
    for (ws, agent) in [(&sb.workspace, "engineering"), (&net_ws, "netbuilder")] {
        let thread = create_thread_in(&served, ws, agent, "fallback").await;
        for step in ["write probe.c", "write params.h", "write Makefile"] {
            probe(&served, &thread, step).await.assert_ok();
        }
        let connect = probe(&served, &thread, &format!("make connect ({agent})")).await;
        outputs.push(connect.output().to_owned());
        last = Some(connect);
    }
    let summary = served.stderr();
    let probe = last.expect("netbuilder's probe");
    (summary, outputs.remove(0), probe, own, target.port())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_namespaces_an_agent_with_network_is_refused_unless_the_fallback_is_chosen() {
    let off = [("AGENTPLANE_SANDBOX_NAMESPACES", "off")];
    let mut tally = Tally::default();

    // The default: fail closed. The summary says so and names the fix.
    let (summary, engineering, netbuilder, _, _) = fallback_run("", &off).await;
    assert!(
        summary.contains("netbuilder: REFUSING to run processes with network: no namespaces")
            && summary.contains("fallback = \"landlock\""),
        "{summary}"
    );
    assert!(summary.contains("NO namespaces"), "{summary}");
    // Without network the fallback is Landlock and seccomp: still no socket at all.
    assert_eq!(
        probe_value(&engineering, "reached-count"),
        "0",
        "{engineering}"
    );
    assert_eq!(probe_value(&engineering, "udp-sent"), "0", "{engineering}");
    assert_eq!(
        netbuilder.result["status"], "error",
        "{}",
        netbuilder.result
    );
    assert!(
        netbuilder.output().contains("namespaces"),
        "the refusal says why: {}",
        netbuilder.output()
    );
    tally.case(true);
    tally.case(true);

    // Chosen: Landlock alone. agentplane's own port stays closed by every method
    // (Fast Open included); other loopback services are reachable, as documented.
    let (summary, _, netbuilder, own, target) =
        fallback_run("[sandbox]\nfallback = \"landlock\"\n", &off).await;
    let line = summary
        .lines()
        .find(|l| l.contains("netbuilder: landlock"))
        .unwrap_or_default();
    assert!(
        line.contains("NO namespaces")
            && line.contains("loopback services other than agentplane's own ports are reachable"),
        "{summary}"
    );
    let out = netbuilder.output();
    let reached: Vec<&str> = out.lines().filter(|l| l.starts_with("reached: ")).collect();
    assert!(
        !reached.iter().any(|l| l.ends_with(&format!(" {own}"))),
        "agentplane's own port was reached on the fallback: {out}"
    );
    assert!(
        // (`fastopen-connect` is a plain connect once seccomp refused the option.)
        !reached
            .iter()
            .any(|l| l.contains("sendto-fastopen") || l.contains("sendmsg-fastopen")),
        "TCP Fast Open opened a connection on the fallback: {out}"
    );
    assert!(
        reached.iter().any(|l| l.ends_with(&format!(" {target}"))),
        "the documented gap of the fallback (loopback services) did not show: {out}"
    );
    tally.case(true);
    tally.report("egress-fallback");
}
