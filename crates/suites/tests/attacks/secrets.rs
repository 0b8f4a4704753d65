//! Secrets leaking into events, logs or errors: `[secrets]` values from a variable and
//! a file, and the model API key, carried by a tool output, a model reply, a tool
//! error, a URL, a turn input, a thread title and an API error. Afterwards the server
//! log, the SQLite files, every API answer and what the model was shown are searched
//! for each value (as is and percent-encoded).

use agentplane_suites::attacks::{Tally, assert_envelope, assert_nowhere, probe, store_files};
use agentplane_suites::start_with_env;
use agentplane_suites::{api, create_thread, history, sandbox};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use reqwest::Method;
use serde_json::{Value, json};

const ENV_SECRET: &str = "envsecret-Vq7LmZ2x";
/// With spaces, so a URL carries it percent-encoded.
const FILE_SECRET: &str = "file secret Kp9Ws3Nd";
const FILE_SECRET_ENCODED: &str = "file%20secret%20Kp9Ws3Nd";
const LLM_KEY: &str = "llmkey-Rt5Yh8Jc";

const CONFIG: &str = "[secrets.API]\nenv = \"AGENTPLANE_SECRET_API\"\n\
    [secrets.FILEKEY]\nfile = \"filekey.secret\"\n\
    [agents.leaky]\nsystem_prompt = \"You read.\"\nensembles = [\"fs\", \"web\"]\n\
    [agents.leaky.network]\nallowed = true\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_reach_events_logs_errors_or_the_model() {
    let model = ScriptedServer::start(Scenario::new(vec![
        // a tool output carrying both secrets, then a model reply carrying them
        Step::tool_call("read_file", json!({"path": "creds.txt"})),
        Step::text(format!("the keys are {ENV_SECRET} and {FILE_SECRET}")),
        // a tool error naming a secret
        Step::tool_call(
            "read_file",
            json!({"path": format!("missing-{FILE_SECRET}.txt")}),
        ),
        Step::text("ok"),
        // URLs carrying secrets, as is and percent-encoded
        Step::tool_call(
            "fetch_url",
            json!({"url": format!("http://127.0.0.1:9/?k={ENV_SECRET}")}),
        ),
        Step::text("ok"),
        Step::tool_call(
            "fetch_url",
            json!({"url": format!("http://127.0.0.1:9/{FILE_SECRET_ENCODED}")}),
        ),
        Step::text("ok"),
        // a model error body carrying a secret
        Step::error(
            500,
            format!("{{\"error\":{{\"message\":\"upstream saw {ENV_SECRET}\"}}}}"),
        ),
        // the turn whose input carries a secret (last: the model sees inputs as typed)
        Step::text("noted"),
    ]))
    .await
    .expect("model");
    let sb = sandbox(CONFIG);
    std::fs::write(sb.root.join("filekey.secret"), format!("{FILE_SECRET}\n")).expect("secret");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        sb.root.join("filekey.secret"),
        std::fs::Permissions::from_mode(0o600),
    )
    .expect("chmod");
    std::fs::write(
        sb.workspace.join("creds.txt"),
        format!("api={ENV_SECRET}\nfile={FILE_SECRET}\n"),
    )
    .expect("creds");
    let served = start_with_env(
        &sb,
        &model.base_url(),
        &[],
        &[
            ("AGENTPLANE_SECRET_API", ENV_SECRET),
            ("AGENTPLANE_LLM_API_KEY", LLM_KEY),
        ],
    )
    .await;
    let mut tally = Tally::default();
    let mut answers: Vec<String> = Vec::new();
    let title = format!("title with {ENV_SECRET}");
    let thread = create_thread(&served, &sb, "leaky", &title).await;

    // A tool output, then a model reply.
    let read = probe(&served, &thread, "tool-output").await;
    read.assert_ok();
    assert!(
        read.output().contains("[REDACTED:API]") && read.output().contains("[REDACTED:FILEKEY]"),
        "the output was read and redacted: {}",
        read.output()
    );
    answers.extend(read.events.iter().map(Value::to_string));
    tally.case(true);
    // A tool error.
    let missing = probe(&served, &thread, "tool-error").await;
    missing.assert_failed("execution_failed");
    answers.extend(missing.events.iter().map(Value::to_string));
    tally.case(true);
    // URLs.
    for case in ["url-plain", "url-encoded"] {
        let fetched = probe(&served, &thread, case).await;
        fetched.assert_refused_as("not_allowed", "network_denied");
        answers.extend(fetched.events.iter().map(Value::to_string));
        tally.case(true);
    }
    // What the model was shown so far as tool results: redacted. (Its own replies and
    // tool-call arguments go back to it as it wrote them; they are its own words.)
    let seen: String = model
        .requests()
        .iter()
        .flat_map(|r| r["messages"].as_array().cloned().unwrap_or_default())
        .filter(|m| m["role"] == "tool")
        .map(|m| m.to_string())
        .collect();
    for secret in [ENV_SECRET, FILE_SECRET, FILE_SECRET_ENCODED] {
        assert!(!seen.contains(secret), "the model was shown {secret:?}");
    }
    assert!(
        seen.contains("[REDACTED:API]"),
        "the model saw the redacted output"
    );

    // A model error carrying a secret: the turn fails, the error is redacted.
    let mut sse = agentplane_suites::SseReader::open(&served, &thread, "model-error").await;
    let failed = sse.until("turn_completed").await;
    assert!(
        failed.iter().any(|e| e.event == "error"),
        "the model error is an event: {failed:?}"
    );
    answers.extend(failed.iter().map(|e| e.data.to_string()));
    tally.case(true);

    // A turn input carrying a secret.
    let mut sse =
        agentplane_suites::SseReader::open(&served, &thread, &format!("remember {ENV_SECRET}"))
            .await;
    answers.extend(
        sse.until("turn_completed")
            .await
            .iter()
            .map(|e| e.data.to_string()),
    );
    tally.case(true);

    // API errors naming a secret.
    for (method, path, body) in [
        (
            Method::POST,
            "/v1/threads".to_owned(),
            json!({"agent": ENV_SECRET}),
        ),
        (
            Method::POST,
            "/v1/threads".to_owned(),
            json!({"agent": FILE_SECRET}),
        ),
        (
            Method::GET,
            format!("/v1/threads/{ENV_SECRET}"),
            Value::Null,
        ),
        (
            Method::GET,
            format!("/v1/threads/{FILE_SECRET_ENCODED}"),
            Value::Null,
        ),
        (
            Method::POST,
            "/v1/executions".to_owned(),
            json!({"agent": "leaky", "input": "x", "webhook_url": format!("http://x/{ENV_SECRET}")}),
        ),
    ] {
        let mut request = api(&served, method, &path);
        if !body.is_null() {
            request = request.json(&body);
        }
        let response = request.send().await.expect("request");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        assert!((400..500).contains(&status), "{path}: {status} {text}");
        let code = serde_json::from_str::<Value>(&text).expect("json")["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert_envelope(&text, &code);
        answers.push(text);
        tally.case(true);
    }

    // Every read of what is stored.
    answers.push(history(&served, &thread).await.to_string());
    for path in [
        "/v1/threads".to_owned(),
        format!("/v1/threads/{thread}"),
        "/v1/costs".to_owned(),
        "/metrics".to_owned(),
    ] {
        let response = api(&served, Method::GET, &path)
            .send()
            .await
            .expect("request");
        answers.push(response.text().await.expect("body"));
    }
    let stored = answers.concat();
    assert!(
        stored.contains("[REDACTED:API]"),
        "the values were redacted, not lost"
    );
    for secret in [ENV_SECRET, FILE_SECRET, FILE_SECRET_ENCODED, LLM_KEY] {
        assert_nowhere(&sb, &served, &answers, secret);
    }
    assert!(
        store_files(&sb).iter().any(|p| p.exists()),
        "the store files were searched"
    );
    // The model key was used (so it was there to leak), and only as the model's key.
    let used = model.received().iter().any(|r| {
        r.authorization
            .as_deref()
            .is_some_and(|v| v.contains(LLM_KEY))
    });
    assert!(used, "the model server got the API key");
    tally.case(true);
    tally.report("secrets");
}

/// A model that streams a secret cut into pieces, each piece its own `message_delta`
/// (chunks 80 ms apart, past the engine's 50 ms coalescing): no delta, no SSE event and
/// no stored event carries the value or a recognisable half of it, and the text the
/// deltas add up to has it redacted whole (issue 17).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_streamed_in_pieces_never_reaches_a_delta_or_the_stream() {
    let text = format!("The key is {ENV_SECRET}, and the other is {LLM_KEY}. Done.");
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::text(text.clone())
            .with_split(24)
            .with_chunk_delay_ms(80),
    ]))
    .await
    .expect("model");
    let sb = sandbox(CONFIG);
    std::fs::write(sb.root.join("filekey.secret"), format!("{FILE_SECRET}\n")).expect("secret");
    let served = start_with_env(
        &sb,
        &model.base_url(),
        &[],
        &[
            ("AGENTPLANE_SECRET_API", ENV_SECRET),
            ("AGENTPLANE_LLM_API_KEY", LLM_KEY),
        ],
    )
    .await;
    let thread = create_thread(&served, &sb, "chat", "split").await;
    let mut reader = agentplane_suites::SseReader::open(&served, &thread, "tell me").await;
    let streamed = reader.until("turn_completed").await;
    let deltas: Vec<String> = streamed
        .iter()
        .filter(|e| e.event == "message_delta")
        .map(|e| {
            e.data["text"]
                .as_str()
                .expect("a delta has text")
                .to_owned()
        })
        .collect();
    assert!(
        deltas.len() >= 6,
        "the text came in many pieces: {deltas:?}"
    );
    let halves = |secret: &str| {
        let (a, b) = secret.split_at(secret.len() / 2);
        [secret.to_owned(), a.to_owned(), b.to_owned()]
    };
    for delta in &deltas {
        for part in halves(ENV_SECRET).iter().chain(halves(LLM_KEY).iter()) {
            assert!(
                !delta.contains(part.as_str()),
                "a delta carried {part:?}: {deltas:?}"
            );
        }
    }
    let joined: String = deltas.concat();
    assert!(joined.contains("[REDACTED:API]"), "{joined}");
    assert!(joined.contains("[REDACTED:llm.api_key]"), "{joined}");
    assert!(
        joined.ends_with("Done."),
        "nothing held back was lost: {joined}"
    );
    let all = history(&served, &thread).await.to_string();
    let everything = format!("{all}{}", served.stderr());
    for secret in [ENV_SECRET, LLM_KEY] {
        assert!(!everything.contains(secret), "{secret} leaked");
    }
    // The environment the server was started with no longer shows the credentials,
    // even to root (this test's user): overwritten in place, then unset.
    let environ = std::fs::read(format!("/proc/{}/environ", served.pid())).unwrap_or_default();
    for secret in [ENV_SECRET, LLM_KEY] {
        assert!(
            !environ
                .windows(secret.len())
                .any(|w| w == secret.as_bytes()),
            "/proc/<pid>/environ still shows {secret}"
        );
    }
    println!(
        "attack-figures split-secret: {} deltas, none with a secret or half of one; environ \
         readable by this user: {}",
        deltas.len(),
        !environ.is_empty()
    );
}
