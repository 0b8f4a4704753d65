//! Auth bypasses with `--auth-token`: every way of presenting no token, a wrong one or
//! the right one in the wrong place is `401` in the envelope, on `/v1`, `/metrics`,
//! `/mcp` and the gateway `/openai/v1`; the token never shows in an answer or the log.

use agentplane_suites::attacks::{Tally, assert_envelope};
use agentplane_suites::{sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use reqwest::Method;
use serde_json::json;

const TOKEN: &str = "tok-Auth-8d2f61e0c4b7";

/// The routes behind the token, with a request each would otherwise accept.
fn guarded() -> Vec<(Method, &'static str, Option<serde_json::Value>)> {
    vec![
        (Method::GET, "/v1/threads", None),
        (Method::POST, "/v1/threads", Some(json!({"agent": "chat"}))),
        (Method::GET, "/v1/agents", None),
        (Method::GET, "/v1/policies", None),
        (Method::GET, "/metrics", None),
        (
            Method::POST,
            "/mcp",
            Some(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})),
        ),
        (Method::GET, "/openai/v1/models", None),
        (
            Method::POST,
            "/openai/v1/chat/completions",
            Some(json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}]})),
        ),
    ]
}

/// Authorization headers (and query strings) that must not let anyone in.
fn presentations() -> Vec<(&'static str, Option<String>, &'static str)> {
    let upper = TOKEN.to_uppercase();
    vec![
        ("missing", None, ""),
        ("empty-header", Some(String::new()), ""),
        ("bearer-empty", Some("Bearer ".to_owned()), ""),
        ("bearer-spaces", Some("Bearer    ".to_owned()), ""),
        ("wrong-token", Some("Bearer wrong-token".to_owned()), ""),
        ("token-case", Some(format!("Bearer {upper}")), ""),
        (
            "token-prefix",
            Some(format!("Bearer {}", &TOKEN[..TOKEN.len() - 1])),
            "",
        ),
        ("token-suffix", Some(format!("Bearer {TOKEN}x")), ""),
        ("token-without-scheme", Some(TOKEN.to_owned()), ""),
        ("basic-scheme", Some(format!("Basic {TOKEN}")), ""),
        ("token-scheme", Some(format!("Token {TOKEN}")), ""),
        ("bearer-no-space", Some(format!("Bearer{TOKEN}")), ""),
        ("two-tokens", Some(format!("Bearer wrong {TOKEN}")), ""),
        ("query-access-token", None, "?access_token="),
        ("query-token", None, "?token="),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_behind_the_token_answers_without_it() {
    let model = ScriptedServer::start(Scenario::new(vec![Step::text("hi")]).repeating(true))
        .await
        .expect("model");
    let sb = sandbox("");
    let served = start(&sb, &model.base_url(), &["--auth-token", TOKEN]).await;
    let http = reqwest::Client::new();
    let mut tally = Tally::default();
    let mut answers = Vec::new();

    for (name, header, query) in presentations() {
        for (method, path, body) in guarded() {
            let query = if query.is_empty() {
                String::new()
            } else {
                format!("{query}{TOKEN}")
            };
            let mut request = http
                .request(method.clone(), format!("{}{path}{query}", served.base))
                .header("X-Client-ID", "intruder")
                .header("Accept", "application/json, text/event-stream");
            if let Some(value) = &header {
                request = request.header("Authorization", value);
            }
            if let Some(body) = &body {
                request = request.json(body);
            }
            let response = request.send().await.expect("request");
            let status = response.status().as_u16();
            let text = response.text().await.unwrap_or_default();
            assert_eq!(status, 401, "{name}: {method} {path}{query}: {text}");
            assert_envelope(&text, "UNAUTHORIZED");
            answers.push(text);
        }
        tally.case(true);
    }

    // A wrong token first and the right one second is still the wrong one.
    let response = http
        .get(format!("{}/v1/threads", served.base))
        .header("X-Client-ID", "intruder")
        .header("Authorization", "Bearer wrong")
        .header("Authorization", format!("Bearer {TOKEN}"))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 401, "duplicate Authorization headers");
    answers.push(response.text().await.unwrap_or_default());
    tally.case(true);

    // Other spellings of the paths do not reach a route without the gate.
    for path in [
        "/V1/threads",
        "/v1//threads",
        "//v1/threads",
        "/v1/threads/",
        "/%76%31/threads",
        "/v1/./threads",
        "/v1/../v1/threads",
        "/METRICS",
        "/metrics/",
        "/openai/v1/models/",
        "/mcp/",
    ] {
        let response = http
            .get(format!("{}{path}", served.base))
            .header("X-Client-ID", "intruder")
            .send()
            .await
            .expect("request");
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        assert!(
            status == 401 || status == 404,
            "{path}: {status} without a token: {text}"
        );
        assert!(
            !text.contains("\"threads\""),
            "{path} listed threads: {text}"
        );
        answers.push(text);
        tally.case(true);
    }

    // The right token, in any case of its scheme, gets in (so the refusals above are
    // about the token); without a client id it is still a 400.
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let response = http
            .get(format!("{}/v1/threads", served.base))
            .header("X-Client-ID", "owner")
            .header("Authorization", format!("{scheme} {TOKEN}"))
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 200, "{scheme}");
    }
    let response = http
        .get(format!("{}/v1/threads", served.base))
        .header("Authorization", format!("Bearer {TOKEN}"))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 400);
    assert_envelope(&response.text().await.expect("body"), "INVALID_ARGUMENT");
    tally.case(true);

    // Open routes stay open but say nothing secret.
    for path in ["/healthz", "/openapi.json"] {
        let response = http
            .get(format!("{}{path}", served.base))
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 200, "{path}");
        answers.push(response.text().await.unwrap_or_default());
    }

    for answer in &answers {
        assert!(
            !answer.contains(TOKEN),
            "an answer echoes the token: {answer}"
        );
    }
    assert!(
        !served.stderr().contains(TOKEN),
        "the log holds the token:\n{}",
        served.stderr()
    );
    let _ = Method::GET;
    tally.report("auth");
}
