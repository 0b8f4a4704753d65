//! OIDC sign-in (`[auth.oidc]`, ADR 0030): tokens minted by a third-party library
//! (PyJWT) against a JWKS served on 127.0.0.1, through the real binary.

use std::time::Duration;

use agentplane_suites::attacks::Tally;
use agentplane_suites::{sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use reqwest::Method;
use serde_json::{Value, json};

use crate::identity::{call, refused, send};

/// A JWKS endpoint on 127.0.0.1 whose key set can be swapped (a rotation), counting
/// the fetches.
struct Jwks {
    url: String,
    body: std::sync::Arc<std::sync::Mutex<String>>,
    hits: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Jwks {
    async fn serve(body: String) -> Jwks {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/jwks.json", listener.local_addr().expect("addr"));
        let body = std::sync::Arc::new(std::sync::Mutex::new(body));
        let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (served, counted) = (body.clone(), hits.clone());
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let text = served.lock().expect("body").clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let _ = socket.read(&mut buf).await;
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n{text}",
                        text.len()
                    );
                    let _ = socket.write_all(answer.as_bytes()).await;
                });
            }
        });
        Jwks { url, body, hits }
    }

    fn hits(&self) -> usize {
        self.hits.load(std::sync::atomic::Ordering::SeqCst)
    }
}

const ISSUER: &str = "https://id.example.test";
const AUDIENCE: &str = "agentplane-tests";

/// Tokens minted by PyJWT for [`ISSUER`] and [`AUDIENCE`], their JWKS served on
/// 127.0.0.1, and the binary with `[auth.oidc]` pointed at both.
async fn oidc_server() -> (
    Value,
    Jwks,
    ScriptedServer,
    agentplane_suites::Sandbox,
    agentplane_suites::Served,
) {
    let minted = std::process::Command::new(agentplane_testkit::peers::python())
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testkit/peers/mint_jwts.py"))
        .args([ISSUER, AUDIENCE])
        .output()
        .expect("python");
    assert!(
        minted.status.success(),
        "{}",
        String::from_utf8_lossy(&minted.stderr)
    );
    let minted: Value = serde_json::from_slice(&minted.stdout).expect("minted JSON");
    let jwks = Jwks::serve(minted["jwks_before"].to_string()).await;
    let model = ScriptedServer::start(Scenario::new(vec![Step::text("hi")]).repeating(true))
        .await
        .expect("model");
    let sb = sandbox(&format!(
        "[auth.oidc]\nissuer = \"{ISSUER}\"\naudience = \"{AUDIENCE}\"\njwks_url = \"{}\"\n",
        jwks.url
    ));
    let served = start(&sb, &model.base_url(), &[]).await;
    (minted, jwks, model, sb, served)
}

/// OIDC sign-in (`[auth.oidc]`): tokens minted by PyJWT against a JWKS served on
/// 127.0.0.1. A valid RS256 or ES256 token acts as its `sub`, with its roles; a wrong
/// audience or issuer, an expired or not-yet-valid token, `alg: none`, HS256 signed
/// with the public key, a tampered payload, another key's signature and an
/// algorithm that does not match the key are 401; a key rotated in is fetched on its
/// first token, and a flood of unknown `kid`s fetches the set at most once a second. A
/// token without a `kid` is accepted only against a key set of one key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oidc_tokens_from_a_third_party_library_are_verified() {
    let (minted, jwks, _model, sb, served) = oidc_server().await;
    let mut tally = Tally::default();
    let token = |name: &str| minted[name].as_str().expect(name).to_owned();

    let (status, text) = send(call(
        &served,
        Method::GET,
        "/v1/threads",
        None,
        Some("alice"),
    ))
    .await;
    refused(
        &mut tally,
        status,
        &text,
        401,
        "UNAUTHORIZED",
        "no token, OIDC configured",
    );
    let valid = token("valid");
    let (status, text) = send(
        call(&served, Method::POST, "/v1/threads", Some(&valid), None)
            .json(&json!({"agent": "chat", "cwd": sb.workspace})),
    )
    .await;
    assert_eq!(status, 201, "a valid RS256 token: {text}");
    let thread: Value = serde_json::from_str(&text).expect("json");
    let (status, text) = send(call(
        &served,
        Method::GET,
        &format!("/v1/threads/{}", thread["id"].as_str().expect("id")),
        Some(&valid),
        Some("alice"),
    ))
    .await;
    assert_eq!(status, 200, "the token acts as its subject: {text}");
    let (status, text) = send(call(
        &served,
        Method::GET,
        "/v1/threads",
        Some(&valid),
        Some("bob"),
    ))
    .await;
    refused(
        &mut tally,
        status,
        &text,
        403,
        "FORBIDDEN",
        "a token naming another client",
    );
    let es = token("valid_es256");
    let (status, text) = send(call(&served, Method::GET, "/v1/approvals", Some(&es), None)).await;
    assert_eq!(
        status, 200,
        "a valid ES256 token with the approver role: {text}"
    );
    let (status, text) = send(call(&served, Method::GET, "/v1/threads", Some(&es), None)).await;
    refused(
        &mut tally,
        status,
        &text,
        403,
        "FORBIDDEN",
        "an approver token reading threads",
    );

    for (name, bad) in minted["bad"].as_object().expect("bad tokens") {
        let bad = bad.as_str().expect("token");
        let (status, text) = send(call(&served, Method::GET, "/v1/threads", Some(bad), None)).await;
        refused(&mut tally, status, &text, 401, "UNAUTHORIZED", name);
        assert!(!text.contains(bad), "{name}: the answer echoes the token");
    }

    // A token without a kid while the provider publishes two keys: which one it means
    // is not for the token to say.
    let no_kid = token("no_kid");
    let (status, text) = send(call(
        &served,
        Method::GET,
        "/v1/threads",
        Some(&no_kid),
        None,
    ))
    .await;
    refused(
        &mut tally,
        status,
        &text,
        401,
        "UNAUTHORIZED",
        "no kid, two keys published",
    );

    // A rotation: the new key's token is refused until the provider publishes it, then
    // fetched on its first use.
    let rotated = token("rotated");
    let (status, text) = send(call(
        &served,
        Method::GET,
        "/v1/threads",
        Some(&rotated),
        None,
    ))
    .await;
    refused(
        &mut tally,
        status,
        &text,
        401,
        "UNAUTHORIZED",
        "a key not yet published",
    );
    *jwks.body.lock().expect("body") = minted["jwks_after"].to_string();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let before = jwks.hits();
    let (status, text) = send(call(
        &served,
        Method::GET,
        "/v1/threads",
        Some(&rotated),
        None,
    ))
    .await;
    assert_eq!(
        status, 200,
        "the rotated key is fetched and accepted: {text}"
    );
    assert_eq!(jwks.hits(), before + 1, "one fetch for the new kid");
    let (status, text) = send(call(
        &served,
        Method::GET,
        "/v1/threads",
        Some(&valid),
        None,
    ))
    .await;
    refused(
        &mut tally,
        status,
        &text,
        401,
        "UNAUTHORIZED",
        "a token of the retired key",
    );

    // A flood of made-up kids: refused, and the provider asked at most once a second.
    let started = std::time::Instant::now();
    let before = jwks.hits();
    for kid_token in minted["unknown_kids"].as_array().expect("kids") {
        let (status, text) = send(call(
            &served,
            Method::GET,
            "/v1/threads",
            kid_token.as_str(),
            None,
        ))
        .await;
        assert_eq!(status, 401, "{text}");
    }
    let fetched = jwks.hits() - before;
    let allowed = 1 + started.elapsed().as_secs() as usize;
    assert!(
        fetched <= allowed,
        "{fetched} fetches in {:?}",
        started.elapsed()
    );
    tally.case(true);
    println!(
        "identity-figures oidc: 20 unknown kids in {:?} fetched the key set {fetched} time(s)",
        started.elapsed()
    );
    // A provider with a single key that names no kid (docs/identity.md): a token
    // without a kid is checked against that key; one signed by another key, or naming
    // a kid, is not accepted.
    *jwks.body.lock().expect("body") = minted["jwks_single_no_kid"].to_string();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (status, text) = send(call(
        &served,
        Method::GET,
        "/v1/threads",
        Some(&no_kid),
        None,
    ))
    .await;
    assert_eq!(status, 200, "no kid, the provider's only key: {text}");
    for (what, bad) in [
        ("no kid, signed by another key", token("no_kid_other_key")),
        ("a kid the single-key set does not name", valid.clone()),
    ] {
        let (status, text) =
            send(call(&served, Method::GET, "/v1/threads", Some(&bad), None)).await;
        refused(&mut tally, status, &text, 401, "UNAUTHORIZED", what);
    }
    let log = served.stderr();
    for secret in [&valid, &es, &rotated, &no_kid] {
        let signature = secret.rsplit('.').next().expect("signature");
        assert!(!log.contains(signature), "the log holds a token");
    }
    tally.report("oidc");
}

/// MCP authorization, resource-server side: `/mcp` without a token is `401` with a
/// challenge naming the protected-resource metadata (RFC 9728), which names the OIDC
/// issuer; a token of that issuer opens an MCP session without `X-Client-ID`.
#[tokio::test]
async fn mcp_clients_are_pointed_at_the_issuer_and_its_tokens_are_accepted() {
    let (minted, _jwks, _model, _sb, served) = oidc_server().await;
    let issuer = ISSUER;
    let http = reqwest::Client::new();
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "probe", "version": "0"}}
    });
    let mcp = |token: Option<&str>| {
        let mut request = http
            .post(format!("{}/mcp", served.base))
            .header("Accept", "application/json, text/event-stream")
            .json(&initialize);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    for token in [
        None,
        Some("not-a-token"),
        Some(minted["bad"]["expired"].as_str().expect("expired")),
    ] {
        let answer = mcp(token).await.expect("request");
        assert_eq!(answer.status().as_u16(), 401, "{token:?}");
        let challenge = answer
            .headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok())
            .expect("a challenge")
            .to_owned();
        let metadata_url = format!("{}/.well-known/oauth-protected-resource/mcp", served.base);
        assert!(
            challenge.starts_with("Bearer ")
                && challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")),
            "{challenge}"
        );
        let envelope: Value = answer.json().await.expect("envelope");
        assert_eq!(envelope["error"]["code"], "UNAUTHORIZED");
    }
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let metadata: Value = http
            .get(format!("{}{path}", served.base))
            .send()
            .await
            .expect("metadata")
            .json()
            .await
            .expect("JSON");
        assert_eq!(
            metadata["resource"],
            format!("{}/mcp", served.base),
            "{metadata}"
        );
        assert_eq!(
            metadata["authorization_servers"],
            json!([issuer]),
            "{metadata}"
        );
        assert_eq!(metadata["bearer_methods_supported"], json!(["header"]));
    }
    // The issuer's token opens a session; no X-Client-ID needed.
    let valid = minted["valid"].as_str().expect("valid");
    let answer = mcp(Some(valid)).await.expect("request");
    assert_eq!(answer.status().as_u16(), 200);
    assert!(answer.headers().get("mcp-session-id").is_some());
    assert!(!served.stderr().contains(valid), "the token is in no log");
}
