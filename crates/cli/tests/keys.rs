//! The first key of a server without keys or token, through the real binary: only the
//! holder of the one-time setup token `serve` writes to its data directory creates it
//! over HTTP (an attack found anything on loopback could, and lock the operator out),
//! and `agentplane keys` works beside a running `serve` through its API.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Output;

use agentplane_suites::attacks::assert_envelope;
use agentplane_suites::{Sandbox, Served, command, sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer};
use reqwest::header::HeaderValue;
use serde_json::{Value, json};

const HEADER: &str = "X-Setup-Token";

fn setup_file(sb: &Sandbox) -> std::path::PathBuf {
    sb.root.join("setup-token")
}

/// `POST /v1/keys` as a client that is only claimed, with `setup` as `X-Setup-Token`.
async fn create(served: &Served, setup: Option<HeaderValue>, body: &str) -> (u16, String) {
    let mut request = reqwest::Client::new()
        .post(format!("{}/v1/keys", served.base))
        .header("X-Client-ID", "mallory")
        .header("Content-Type", "application/json")
        .body(body.to_owned());
    if let Some(value) = setup {
        request = request.header(HEADER, value);
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

const ADMIN: &str = r#"{"client": "mallory", "roles": ["admin"]}"#;

async fn run(sb: &Sandbox, args: &[&str]) -> Output {
    let mut cmd = command(sb, "http://127.0.0.1:9");
    cmd.args(args);
    tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("join")
        .expect("binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyless_server_makes_its_first_key_only_for_the_setup_token() {
    let model = ScriptedServer::start(Scenario::new(vec![]))
        .await
        .expect("model");
    let sb = sandbox("");
    let served = start(&sb, &model.base_url(), &[]).await;
    let file = setup_file(&sb);
    let token = std::fs::read_to_string(&file).expect("setup token file");
    let token = token.trim().to_owned();
    assert!(token.starts_with("apsetup_"), "{token}");
    assert_eq!(mode(&file), 0o600, "the setup token file is 0600");
    let summary = served.stderr();
    assert!(
        summary.contains(&format!(
            "  Setup   no keys yet: the first key needs the one-time setup token in {} \
             (`agentplane keys create` reads it)\n",
            file.display()
        )),
        "the summary says where the setup token is:\n{summary}"
    );

    // Without it, with wrong and hostile values, and as a bearer: 401 in the envelope,
    // before the body is read (broken JSON too).
    let mut near = token.clone();
    near.pop();
    near.push(if token.ends_with('0') { '1' } else { '0' });
    let refusals: Vec<(&str, Option<HeaderValue>, &str)> = vec![
        ("no token", None, ADMIN),
        ("no token, broken JSON", None, "{"),
        ("empty", Some(HeaderValue::from_static("")), ADMIN),
        (
            "one digit off",
            Some(HeaderValue::from_str(&near).expect("hv")),
            ADMIN,
        ),
        (
            "a prefix",
            Some(HeaderValue::from_str(&token[..20]).expect("hv")),
            ADMIN,
        ),
        (
            "the token and more",
            Some(HeaderValue::from_str(&format!("{token}x")).expect("hv")),
            ADMIN,
        ),
        (
            "huge",
            Some(HeaderValue::from_str(&"a".repeat(8_000)).expect("hv")),
            ADMIN,
        ),
        (
            "not ASCII",
            Some(HeaderValue::from_bytes("apsetup_é\u{202e}".as_bytes()).expect("hv")),
            ADMIN,
        ),
        (
            "not UTF-8",
            Some(HeaderValue::from_bytes(b"apsetup_\xff\xfe").expect("hv")),
            ADMIN,
        ),
        (
            "wrong, broken JSON",
            Some(HeaderValue::from_static("x")),
            "{",
        ),
    ];
    for (what, value, body) in refusals {
        let (status, answer) = create(&served, value, body).await;
        assert_eq!(status, 401, "{what}: {answer}");
        assert_envelope(&answer, "UNAUTHORIZED");
        assert!(answer.contains("X-Setup-Token"), "{what}: {answer}");
    }
    // The setup token is no bearer credential.
    let response = reqwest::Client::new()
        .post(format!("{}/v1/keys", served.base))
        .header("X-Client-ID", "mallory")
        .bearer_auth(&token)
        .json(&json!({"client": "mallory", "roles": ["admin"]}))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 401);
    let log = served.stderr();
    assert!(
        log.contains("security_event") && log.contains("setup_token_refused"),
        "each refusal is a security_event:\n{log}"
    );

    // With it but an invalid request: 400, and the token still holds.
    let right = || Some(HeaderValue::from_str(&token).expect("hv"));
    let (status, answer) = create(&served, right(), r#"{"client": "x", "roles": []}"#).await;
    assert_eq!(status, 400, "{answer}");
    assert!(
        file.exists(),
        "a refused request does not consume the token"
    );

    // Two callers racing with it: one key.
    let (a, b) = tokio::join!(
        create(&served, right(), ADMIN),
        create(&served, right(), ADMIN)
    );
    let mut statuses = [a.0, b.0];
    statuses.sort_unstable();
    assert_eq!(statuses, [201, 401], "{a:?} {b:?}");
    let created: Value = serde_json::from_str(if a.0 == 201 { &a.1 } else { &b.1 }).expect("json");
    let secret = created["secret"].as_str().expect("secret").to_owned();
    assert!(secret.starts_with("ap_"), "{created}");
    assert!(
        !file.exists(),
        "the setup token file is gone once the key exists"
    );

    // A second use fails; keys now exist, so everything needs one.
    let (status, answer) = create(&served, right(), ADMIN).await;
    assert_eq!(status, 401, "{answer}");
    let listed = reqwest::Client::new()
        .get(format!("{}/v1/keys", served.base))
        .bearer_auth(&secret)
        .send()
        .await
        .expect("list");
    assert_eq!(listed.status(), 200);
    let log = served.stderr();
    assert!(!log.contains(&token), "the setup token is in no log line");
    assert!(!log.contains(&token[8..]), "nor its digits");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_create_works_beside_a_running_serve() {
    let model = ScriptedServer::start(Scenario::new(vec![]))
        .await
        .expect("model");
    let sb = sandbox("");
    let mut served = start(&sb, &model.base_url(), &[]).await;
    assert!(setup_file(&sb).exists());

    // The store is locked by serve: the command asks it, with the setup token.
    let out = run(
        &sb,
        &[
            "keys",
            "create",
            "--client",
            "root",
            "--role",
            "admin",
            "--server",
            &served.base,
        ],
    )
    .await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(&format!("asking it at {}", served.base)),
        "{}",
        text(&out.stderr)
    );
    assert!(stdout.contains("client=root  roles=admin"), "{stdout}");
    let admin = stdout.lines().last().expect("a last line").to_owned();
    assert!(admin.starts_with("ap_") && admin.len() == 67, "{stdout}");
    assert!(!setup_file(&sb).exists(), "the first key consumed it");

    // Now only an admin's key creates, lists and revokes.
    let out = run(
        &sb,
        &[
            "keys",
            "create",
            "--client",
            "eve",
            "--role",
            "admin",
            "--server",
            &served.base,
        ],
    )
    .await;
    assert!(!out.status.success(), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("error [UNAUTHORIZED]"),
        "{}",
        text(&out.stderr)
    );
    let with_key = |args: &[&str]| {
        let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        all.extend([
            "--server".into(),
            served.base.clone(),
            "--key".into(),
            admin.clone(),
        ]);
        all
    };
    let args = with_key(&["keys", "create", "--client", "bob", "--role", "viewer"]);
    let out = run(&sb, &args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let args = with_key(&["keys", "list", "--json"]);
    let out = run(&sb, &args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listed: Value = serde_json::from_slice(&out.stdout).expect("json");
    let clients: Vec<&str> = listed
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|k| k["client"].as_str())
        .collect();
    assert_eq!(clients, ["root", "bob"], "{listed}");
    let bob = listed[1]["id"].as_str().expect("id").to_owned();
    let args = with_key(&["keys", "revoke", &bob]);
    let out = run(&sb, &args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with(&format!("revoked {bob}")));

    // A restart with keys writes no setup token and names none.
    served.kill_9();
    let served = start(&sb, &model.base_url(), &[]).await;
    assert!(!setup_file(&sb).exists());
    assert!(!served.stderr().contains("Setup "), "{}", served.stderr());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_a_token_writes_no_setup_token_and_each_start_writes_a_new_one() {
    let model = ScriptedServer::start(Scenario::new(vec![]))
        .await
        .expect("model");
    let sb = sandbox("");
    let mut served = start(&sb, &model.base_url(), &[]).await;
    let first = std::fs::read_to_string(setup_file(&sb)).expect("first");
    served.kill_9();
    let mut served = start(&sb, &model.base_url(), &[]).await;
    let second = std::fs::read_to_string(setup_file(&sb)).expect("second");
    assert_ne!(
        first, second,
        "each start while no key exists writes a new token"
    );
    assert_eq!(mode(&setup_file(&sb)), 0o600);
    served.kill_9();
    let served = start(&sb, &model.base_url(), &["--auth-token", "tok-setup-3f1c"]).await;
    assert!(
        !setup_file(&sb).exists(),
        "the token holder needs none; the stale file is removed"
    );
    assert!(!served.stderr().contains("Setup "), "{}", served.stderr());
    let response = reqwest::Client::new()
        .post(format!("{}/v1/keys", served.base))
        .header("X-Client-ID", "root")
        .bearer_auth("tok-setup-3f1c")
        .json(&json!({"client": "root", "roles": ["admin"]}))
        .send()
        .await
        .expect("request");
    assert_eq!(
        response.status(),
        201,
        "the token holder creates the first key"
    );
}
