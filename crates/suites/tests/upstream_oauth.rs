//! OAuth client credentials toward an upstream MCP server, through the real binary.
//! The upstream (`peers/mcp_upstream.py`, PyPI's `mcp` 2.3.0) has its own token
//! endpoint on 127.0.0.1 issuing opaque tokens that live 2 s, and accepts only a
//! token it issued that has not expired. One agent turn calls its tool eight times
//! over about four seconds: every call succeeds, several tokens are issued, each
//! replaced before it expired (the upstream refused none), and no token is in the
//! server's log, the SQLite files, the thread's history or any answer.

use agentplane_suites::attacks::{assert_nowhere, probe};
use agentplane_suites::{create_thread, history, sandbox, start_with_env};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use serde_json::{Value, json};

const CLIENT_SECRET: &str = "s3cret:client/secret";
const CALLS: usize = 8;

/// The upstream, killed when dropped, and its base URL.
async fn upstream(lifetime_secs: u64) -> (tokio::process::Child, String) {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testkit/peers/mcp_upstream.py");
    agentplane_suites::python_peer(&script, &["--oauth", &lifetime_secs.to_string()]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_credentials_tokens_are_refreshed_before_expiry_and_shown_nowhere() {
    let (_upstream, base) = upstream(2).await;
    // Eight calls, each asked for half a second after the last answer.
    let mut steps: Vec<Step> = (0..CALLS)
        .map(|_| Step::tool_call("mcp__up__stamp", json!({})).with_delay_ms(500))
        .collect();
    steps.push(Step::text("stamped"));
    let model = ScriptedServer::start(Scenario::new(steps))
        .await
        .expect("model");
    let sb = sandbox(&format!(
        "[secrets.upstream_secret]\nenv = \"AGENTPLANE_SECRET_UPSTREAM\"\n\
         [policies]\ndir = \"policies\"\n\
         [agents.caller]\nsystem_prompt = \"You stamp.\"\nensembles = [\"up\"]\nmax_steps = 20\n\
         [mcp.servers.up]\nurl = \"{base}/mcp\"\nidle_timeout_secs = 60\n\
         [mcp.servers.up.oauth]\ntoken_url = \"{base}/token\"\nclient_id = \"agentplane\"\n\
         client_secret = \"upstream_secret\"\nscopes = [\"stamp\"]\n"
    ));
    std::fs::create_dir(sb.root.join("policies")).expect("policies dir");
    std::fs::write(
        sb.root.join("policies/upstream.yaml"),
        "name: upstream-secret\ntype: data_scope\ntargets: {agents: [caller]}\n\
         rules: {secrets: [upstream_secret]}\n",
    )
    .expect("policy");
    let served = start_with_env(
        &sb,
        &model.base_url(),
        &[],
        &[
            ("AGENTPLANE_SECRET_UPSTREAM", CLIENT_SECRET),
            ("AGENTPLANE_LOG", "debug"),
        ],
    )
    .await;
    let thread = create_thread(&served, &sb, "caller", "oauth").await;

    let turn = probe(&served, &thread, "stamp eight times").await;
    let results: Vec<String> = turn
        .events
        .iter()
        .filter(|e| e["kind"] == "tool_call_result")
        .map(|e| e.to_string())
        .collect();
    assert_eq!(results.len(), CALLS, "{:#?}", turn.events);
    for (n, result) in results.iter().enumerate() {
        assert!(
            result.contains(&format!("stamp {}", n + 1)),
            "call {} succeeded: {result}",
            n + 1
        );
    }

    let record: Value = reqwest::get(format!("{base}/record"))
        .await
        .expect("record")
        .json()
        .await
        .expect("record JSON");
    let issued = record["issued"].as_array().cloned().unwrap_or_default();
    // About four seconds of calls with tokens replaced after one second: at least 3.
    assert!(issued.len() >= 3, "several tokens were issued: {record}");
    assert!(
        issued.len() <= CALLS + 1,
        "a token is reused while fresh, not fetched per request: {record}"
    );
    // Each replaced before it expired: the upstream refused no request.
    assert_eq!(
        record["refused"], 0,
        "no request carried an expired token: {record}"
    );
    for grant in &issued {
        assert_eq!(
            grant["auth"], "basic",
            "HTTP Basic, RFC 6749 §2.3.1: {grant}"
        );
        assert_eq!(grant["scope"], "stamp");
        assert_eq!(
            grant["resource"],
            format!("{base}/mcp"),
            "RFC 8707 resource"
        );
    }
    assert!(
        served.stderr().contains("MCP access token fetched"),
        "the log says when a token was fetched (never which)"
    );

    eprintln!(
        "upstream-oauth: {CALLS} calls, {} tokens issued, {} requests refused",
        issued.len(),
        record["refused"]
    );
    let mut answers: Vec<String> = turn.events.iter().map(Value::to_string).collect();
    answers.push(history(&served, &thread).await.to_string());
    for path in [format!("/v1/threads/{thread}"), "/v1/threads".to_owned()] {
        let response = agentplane_suites::api(&served, reqwest::Method::GET, &path)
            .send()
            .await
            .expect("read");
        answers.push(response.text().await.expect("body"));
    }
    for grant in &issued {
        let token = grant["token"].as_str().expect("token");
        assert_nowhere(&sb, &served, &answers, token);
    }
    assert_nowhere(&sb, &served, &answers, CLIENT_SECRET);
    let seen: String = model.requests().iter().map(Value::to_string).collect();
    for grant in &issued {
        assert!(!seen.contains(grant["token"].as_str().expect("token")));
    }
}
