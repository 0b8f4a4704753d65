//! SSRF against `fetch_url` and webhooks: loopback, private, link-local and metadata
//! addresses in every spelling, names resolving to them, and redirects from an allowed
//! host to one that is not. A refused fetch never reaches the local target (its
//! connection count stays zero) and is a `security_event`.

use agentplane_suites::attacks::{Tally, Target, assert_envelope, probe, script};
use agentplane_suites::{api, create_thread, sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use reqwest::Method;
use serde_json::{Value, json};

/// What the internal service answers; never shown to the model.
const INTERNAL: &str = "INTERNAL-ONLY-5b1e";

fn fetch(url: String) -> (String, Value) {
    ("fetch_url".to_owned(), json!({"url": url}))
}

/// The machine's own host name, when it resolves only to loopback or private
/// addresses (on a machine with a public address, fetching it is allowed).
fn own_hostname() -> Option<String> {
    use std::net::{IpAddr, ToSocketAddrs};
    let name = std::fs::read_to_string("/etc/hostname").ok()?;
    let name = name.trim().to_owned();
    let addrs: Vec<IpAddr> = (name.as_str(), 80)
        .to_socket_addrs()
        .ok()?
        .map(|a| a.ip())
        .collect();
    let private = |ip: &IpAddr| match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_private() || v4.is_link_local(),
        IpAddr::V6(v6) => v6.is_loopback() || (v6.segments()[0] & 0xfe00) == 0xfc00,
    };
    (!name.is_empty() && !addrs.is_empty() && addrs.iter().all(private)).then_some(name)
}

/// URLs `fetch_url` must refuse for an agent without private networks; `port` is the
/// local target's.
fn private_urls(port: u16) -> Vec<(&'static str, String)> {
    let mut urls = vec![
        ("loopback", format!("http://127.0.0.1:{port}/")),
        ("loopback-other", format!("http://127.0.0.2:{port}/")),
        ("localhost", format!("http://localhost:{port}/")),
        ("localhost-dot", format!("http://localhost.:{port}/")),
        ("localhost-upper", format!("http://LOCALHOST:{port}/")),
        ("ipv6-loopback", format!("http://[::1]:{port}/")),
        ("ipv4-mapped", format!("http://[::ffff:127.0.0.1]:{port}/")),
        ("ipv4-compatible", format!("http://[::127.0.0.1]:{port}/")),
        (
            "nat64-loopback",
            format!("http://[64:ff9b::7f00:1]:{port}/"),
        ),
        ("6to4-loopback", format!("http://[2002:7f00:1::]:{port}/")),
        ("decimal", format!("http://2130706433:{port}/")),
        ("hex", format!("http://0x7f000001:{port}/")),
        ("octal", format!("http://0177.0.0.1:{port}/")),
        ("short-form", format!("http://127.1:{port}/")),
        ("zero", format!("http://0.0.0.0:{port}/")),
        ("zero-short", format!("http://0:{port}/")),
        ("ipv6-unspecified", format!("http://[::]:{port}/")),
        ("private-10", "http://10.0.0.1/".to_owned()),
        ("private-172", "http://172.16.0.1/".to_owned()),
        ("private-192", "http://192.168.1.1/".to_owned()),
        ("cgnat", "http://100.64.0.1/".to_owned()),
        (
            "metadata",
            "http://169.254.169.254/latest/meta-data/".to_owned(),
        ),
        (
            "metadata-decimal",
            "http://2852039166/latest/meta-data/".to_owned(),
        ),
        (
            "metadata-ipv6-mapped",
            "http://[::ffff:a9fe:a9fe]/latest/".to_owned(),
        ),
        ("link-local-v6", "http://[fe80::1]/".to_owned()),
        ("unique-local-v6", "http://[fd00::1]/".to_owned()),
        ("broadcast", "http://255.255.255.255/".to_owned()),
        // Refused whatever they embed or route to (issue 17).
        ("ipv4-mapped-public", "http://[::ffff:8.8.8.8]/".to_owned()),
        (
            "local-use-nat64",
            format!("http://[64:ff9b:1::7f00:1]:{port}/"),
        ),
        (
            "teredo",
            "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/".to_owned(),
        ),
    ];
    if let Some(host) = own_hostname() {
        urls.push(("own-hostname", format!("http://{host}:{port}/")));
    }
    urls
}

/// Refused without a request: wrong scheme or credentials.
fn malformed_urls(port: u16) -> Vec<(&'static str, String)> {
    vec![
        ("file-scheme", "file:///etc/passwd".to_owned()),
        ("gopher-scheme", format!("gopher://127.0.0.1:{port}/_x")),
        ("credentials", format!("http://user:pw@127.0.0.1:{port}/")),
    ]
}

const AGENTS: &str = "[agents.web]\nsystem_prompt = \"You fetch.\"\nensembles = [\"web\"]\n\
    [agents.web.network]\nallowed = true\n\
    [agents.scoped]\nsystem_prompt = \"You fetch.\"\nensembles = [\"web\"]\n\
    [agents.scoped.network]\nallowed = true\nallow_private = true\n\
    [policies]\ndir = \"policies\"\nreload_interval_ms = 60000\n";

const SCOPE: &str = "name: scoped-hosts\ntype: data_scope\ntargets: {agents: [scoped]}\n\
    rules:\n  hosts: [\"127.0.0.1\"]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_url_refuses_private_addresses_in_every_spelling_and_redirects_to_them() {
    let internal = Target::ok(INTERNAL).await;
    let port = internal.port();
    let to_localhost = Target::redirect(&format!("http://localhost:{port}/")).await;
    let to_metadata = Target::redirect("http://169.254.169.254/latest/meta-data/").await;
    let to_ipv6 = Target::redirect(&format!("http://[::1]:{port}/")).await;
    // 127.0.0.2 in hex: not the allowed host once normalized.
    let to_hex = Target::redirect(&format!("http://0x7f000002:{port}/")).await;

    let private = private_urls(port);
    let malformed = malformed_urls(port);
    let redirects = [
        ("redirect-to-localhost", to_localhost.url()),
        ("redirect-to-metadata", to_metadata.url()),
        ("redirect-to-ipv6-loopback", to_ipv6.url()),
        ("redirect-to-hex-ip", to_hex.url()),
    ];
    let mut calls: Vec<(String, Value)> = private
        .iter()
        .chain(malformed.iter())
        .map(|(_, url)| fetch(url.clone()))
        .collect();
    calls.push(fetch(to_localhost.url()));
    let scoped_calls: Vec<(String, Value)> = redirects
        .iter()
        .map(|(_, url)| fetch(url.clone()))
        .collect();
    let mut steps = script(&calls);
    steps.extend(script(&scoped_calls));
    steps.push(Step::tool_call("fetch_url", json!({"url": internal.url()})));
    steps.push(Step::text("done"));
    let model = ScriptedServer::start(Scenario::new(steps))
        .await
        .expect("model");
    let sb = sandbox(AGENTS);
    std::fs::create_dir(sb.root.join("policies")).expect("policies");
    std::fs::write(sb.root.join("policies/scope.yaml"), SCOPE).expect("policy");
    let served = start(&sb, &model.base_url(), &[]).await;

    let mut tally = Tally::default();
    let thread = create_thread(&served, &sb, "web", "ssrf").await;
    for (name, _) in &private {
        let probe = probe(&served, &thread, name).await;
        probe.assert_stream_lacks(INTERNAL);
        if probe.output().contains("could not resolve") {
            // `localhost.` has no address on some resolvers: refused all the same.
            probe.assert_failed("execution_failed");
        } else {
            probe.assert_refused_as("not_allowed", "network_denied");
        }
        tally.case(true);
    }
    for (name, _) in &malformed {
        let probe = probe(&served, &thread, name).await;
        probe
            .assert_failed("not_allowed")
            .assert_stream_lacks(INTERNAL);
        tally.case(true);
    }
    // A redirector on loopback is itself refused for this agent.
    probe(&served, &thread, "redirector-itself")
        .await
        .assert_refused_as("not_allowed", "network_denied");
    tally.case(true);
    assert_eq!(internal.hits(), 0, "a refused fetch reached the target");
    assert_eq!(
        to_localhost.hits(),
        0,
        "a refused fetch reached the redirector"
    );

    // `scoped` may reach private networks, but only the host 127.0.0.1: the first hop
    // is allowed, the redirect's target is not.
    let thread = create_thread(&served, &sb, "scoped", "redirects").await;
    for (name, _) in &redirects {
        let probe = probe(&served, &thread, name).await;
        probe
            .assert_refused_as("policy_denied", "data_scope_denied")
            .assert_stream_lacks(INTERNAL);
        tally.case(true);
    }
    for redirector in [&to_localhost, &to_metadata, &to_ipv6, &to_hex] {
        assert_eq!(redirector.hits(), 1, "the allowed first hop was made");
    }
    assert_eq!(internal.hits(), 0, "a redirect reached the internal target");
    // The control: the allowed host itself is fetched, so the refusals above are not
    // a broken network.
    let control = probe(&served, &thread, "allowed-host").await;
    control.assert_ok();
    assert!(control.output().contains(INTERNAL), "{}", control.output());
    assert_eq!(internal.hits(), 1);
    tally.report("ssrf-fetch");
}

/// agentplane's own API is never a fetch target, even for an agent that may reach
/// private networks and whose scope names 127.0.0.1: directly, as `localhost`, over
/// IPv6, or at the end of a redirect from an allowed host. The same agent reaches
/// another port on 127.0.0.1, so the refusals are not a broken network.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_url_never_reaches_agentplanes_own_port() {
    let other = Target::ok(INTERNAL).await;
    let model_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    let model_port = model_listener.local_addr().expect("addr").port();
    let sb = sandbox(AGENTS);
    std::fs::create_dir(sb.root.join("policies")).expect("policies");
    std::fs::write(
        sb.root.join("policies/scope.yaml"),
        "name: scoped-hosts\ntype: data_scope\ntargets: {agents: [scoped]}\n\
         rules:\n  hosts: [\"127.0.0.1\", \"localhost\", \"::1\"]\n",
    )
    .expect("policy");
    let served = agentplane_suites::start_with_env(
        &sb,
        &format!("http://127.0.0.1:{model_port}/v1"),
        &[],
        &[],
    )
    .await;
    let own = served
        .base
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .to_owned();
    let redirect = Target::redirect(&format!("http://127.0.0.1:{own}/v1/keys")).await;
    let cases = [
        ("own-port", format!("http://127.0.0.1:{own}/v1/agents")),
        (
            "own-port-localhost",
            format!("http://localhost:{own}/v1/agents"),
        ),
        ("own-port-ipv6", format!("http://[::1]:{own}/v1/agents")),
        ("own-port-redirect", redirect.url()),
    ];
    let mut calls: Vec<(String, Value)> = cases.iter().map(|(_, url)| fetch(url.clone())).collect();
    calls.push(fetch(other.url()));
    let _model = ScriptedServer::listen(Scenario::new(script(&calls)), model_listener)
        .await
        .expect("model");

    let mut tally = Tally::default();
    let thread = create_thread(&served, &sb, "scoped", "own-port").await;
    for (name, _) in &cases {
        let probe = probe(&served, &thread, name).await;
        if probe.output().contains("could not resolve") {
            probe.assert_failed("execution_failed");
        } else {
            probe.assert_refused_as("not_allowed", "network_denied");
        }
        assert!(
            !probe.output().contains("\"agents\""),
            "{name}: the fetch reached agentplane's API: {}",
            probe.output()
        );
        tally.case(true);
    }
    let control = probe(&served, &thread, "another-local-port").await;
    control.assert_ok();
    assert!(control.output().contains(INTERNAL), "{}", control.output());
    tally.report("ssrf-own-port");
}

/// Webhooks signed with a secret read from a file, private receivers refused.
const WEBHOOKS: &str = "[executions]\nworkers = 1\npoll_interval_ms = 20\n\
    webhook_secret = \"HOOK\"\nallow_private_webhooks = false\nwebhook_max_attempts = 2\n\
    webhook_backoff_base_ms = 20\nwebhook_backoff_max_ms = 40\n\
    [secrets.HOOK]\nfile = \"hook.secret\"\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_refuse_private_receivers() {
    let receiver = Target::ok("ok").await;
    let port = receiver.port();
    let model = ScriptedServer::start(Scenario::new(vec![Step::text("done")]).repeating(true))
        .await
        .expect("model");
    let sb = sandbox(WEBHOOKS);
    std::fs::write(sb.root.join("hook.secret"), "whsec-attack-0123456789").expect("secret");
    let served = start(&sb, &model.base_url(), &[]).await;
    let mut tally = Tally::default();

    // Address literals are refused at submission.
    for url in [
        format!("http://127.0.0.1:{port}/hook"),
        format!("http://[::1]:{port}/hook"),
        format!("http://[::ffff:127.0.0.1]:{port}/hook"),
        format!("http://2130706433:{port}/hook"),
        format!("http://0x7f.1:{port}/hook"),
        format!("http://0.0.0.0:{port}/hook"),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "http://10.1.2.3/hook".to_owned(),
        "http://[fd12::1]/hook".to_owned(),
        "file:///etc/passwd".to_owned(),
        format!("http://u:p@127.0.0.1:{port}/hook"),
    ] {
        let response = api(&served, Method::POST, "/v1/executions")
            .json(&json!({"agent": "chat", "input": "x", "webhook_url": url}))
            .send()
            .await
            .expect("submit");
        assert_eq!(response.status(), 400, "{url}");
        assert_envelope(&response.text().await.expect("body"), "INVALID_ARGUMENT");
        tally.case(true);
    }
    // Names are resolved when the POST would be made: refused then, never retried.
    let names = [
        format!("http://localhost:{port}/hook"),
        format!("http://LocalHost:{port}/hook"),
    ];
    for url in names.iter().chain(
        own_hostname()
            .map(|h| format!("http://{h}:{port}/hook"))
            .iter(),
    ) {
        let response = api(&served, Method::POST, "/v1/executions")
            .json(&json!({"agent": "chat", "input": "x", "webhook_url": url}))
            .send()
            .await
            .expect("submit");
        assert_eq!(response.status(), 202, "{url}");
        let body: Value = response.json().await.expect("json");
        let id = body["id"].as_str().expect("id").to_owned();
        let line = refused_delivery(&served, &id).await;
        assert!(
            line.contains("retry=false"),
            "{url}: refused, not retried: {line}"
        );
        assert!(line.contains("not allowed"), "{url}: {line}");
        tally.case(true);
    }
    assert_eq!(receiver.hits(), 0, "a private webhook was posted");
    tally.report("ssrf-webhooks");
}

/// The log line of the execution's refused webhook, once it is written (the delivery
/// records are not part of the API; the line is what an operator sees).
async fn refused_delivery(served: &agentplane_suites::Served, id: &str) -> String {
    let deadline = std::time::Instant::now() + agentplane_suites::EVENT_BUDGET;
    loop {
        let log = served.stderr();
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("webhook not delivered") && l.contains(id))
            .collect();
        if let Some(line) = lines.first() {
            return (*line).to_owned();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no refused delivery for {id}:\n{log}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
