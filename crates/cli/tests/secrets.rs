//! Secrets end to end, on the real `agentplane serve`: a secret read from the
//! environment reaches the MCP server whose `env` refers to it, for an agent whose
//! `data_scope` grants it; a scripted model then leaks the value into tool arguments,
//! a tool result, its text answer and the turn input; and afterwards the value appears
//! nowhere — not in the SQLite file (nor its WAL), not in the server's logs, not in any
//! HTTP response (SSE streams, history, threads, errors), not in what the model is sent
//! next. An agent without the grant
//! cannot start that MCP server: its turn fails with a clear error.
//!
//! Needs the MCP peers of `scripts/test-peers.sh` (npm's server-everything).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agentplane_testkit::{Scenario, ScriptedServer, Step, peers};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_agentplane");
const CLIENT: &str = "tester";
const START_BUDGET: Duration = Duration::from_secs(30);
const TURN_BUDGET: Duration = Duration::from_secs(60);
/// The variable the secret is read from. `AGENTPLANE_*` variables are never inherited
/// by MCP servers, so the value reaches the server only through its reference.
const SECRET_VAR: &str = "AGENTPLANE_TEST_SECRET_API_TOKEN";
/// A distinctive run of characters inside the secret: found in any form of the value
/// (raw, JSON-escaped, percent-encoded), so its absence means the value is nowhere.
const CORE: &str = "ZqX7secretCore81";

/// The secret's value: the core between a quote and a backslash, so JSON text, Rust's
/// debug strings and URLs each spell it differently.
fn secret() -> String {
    format!("q\"{CORE}\\w")
}

struct Sandbox {
    _dir: tempfile::TempDir,
    /// Where `serve` starts: holds the configuration folder and the workspace.
    base: PathBuf,
    /// The configuration folder.
    root: PathBuf,
    workspace: PathBuf,
}

/// A config with the secret, the MCP server referring to it, an agent `keeper` granted
/// the secret by a `data_scope` policy (through its tag) and an agent `stranger` that
/// names the same server without a grant.
fn sandbox() -> Sandbox {
    let dir = tempfile::tempdir().expect("tempdir");
    // The configuration in a folder of its own beside the workspace (ADR 0040).
    let base = dir.path().canonicalize().expect("canonical");
    let root = base.join("config");
    std::fs::create_dir(&root).expect("config folder");
    let workspace = base.join("ws");
    std::fs::create_dir_all(&workspace).expect("workspace");
    std::fs::create_dir_all(root.join("policies")).expect("policies");
    std::fs::write(
        root.join("policies/secrets.yaml"),
        "name: trusted-secrets\ntype: data_scope\ntargets:\n  tags: [trusted]\n\
         rules:\n  secrets: [api_token]\n  paths: ['*']\n  hosts: []\n",
    )
    .expect("policy");
    std::fs::write(
        root.join("agentplane.toml"),
        format!(
            "[llm]\nmax_retries = 0\n[store]\npath = \"events.db\"\n\
             [policies]\ndir = \"policies\"\n\
             [secrets.api_token]\nenv = \"{SECRET_VAR}\"\n\
             [mcp.servers.everything]\n{}\
             env = {{ TOKEN = \"${{secret:api_token}}\" }}\n\
             [agents.keeper]\nsystem_prompt = \"You keep secrets.\"\ntags = [\"trusted\"]\n\
             ensembles = [\"everything\"]\nmax_nudges = 0\n\
             [agents.stranger]\nsystem_prompt = \"You are new here.\"\n\
             ensembles = [\"everything\"]\n",
            peers::mcp_everything_toml()
        ),
    )
    .expect("config");
    Sandbox {
        _dir: dir,
        base,
        root,
        workspace,
    }
}

/// A running `agentplane serve`, its stdout and stderr in files; killed when dropped.
struct Served {
    child: Child,
    base: String,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Served {
    fn logs(&self) -> String {
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        format!("{}\n{}", read(&self.stdout), read(&self.stderr))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

async fn start(sb: &Sandbox, model_url: &str) -> Served {
    let port = free_port();
    let stdout = sb.root.join("serve.out");
    let stderr = sb.root.join("serve.err");
    let child = Command::new(BIN)
        .current_dir(&sb.base)
        .env("AGENTPLANE_CONFIG", sb.root.join("agentplane.toml"))
        .env_remove("AGENTPLANE_DB")
        .env_remove("AGENTPLANE_LISTEN")
        .env_remove("AGENTPLANE_AUTH_TOKEN")
        .env_remove("AGENTPLANE_LLM_API_KEY")
        .env("AGENTPLANE_LLM_BASE_URL", model_url)
        .env("AGENTPLANE_LLM_MODEL", "scripted-model")
        // Everything we log, so a leak in any log line would show.
        .env("AGENTPLANE_LOG", "debug")
        .env(SECRET_VAR, secret())
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).expect("stdout file"))
        .stderr(std::fs::File::create(&stderr).expect("stderr file"))
        .spawn()
        .expect("spawn agentplane serve");
    let mut served = Served {
        child,
        base: format!("http://127.0.0.1:{port}"),
        stdout,
        stderr,
    };
    let deadline = Instant::now() + START_BUDGET;
    loop {
        if let Some(status) = served.child.try_wait().expect("try_wait") {
            panic!("serve exited with {status}:\n{}", served.logs());
        }
        if reqwest::get(format!("{}/healthz", served.base))
            .await
            .is_ok()
        {
            return served;
        }
        assert!(Instant::now() < deadline, "no /healthz:\n{}", served.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every response body the test received, to be searched for the secret at the end.
#[derive(Default)]
struct Responses(Vec<String>);

impl Responses {
    /// Sends a request as `CLIENT`, keeps the body, returns status and body.
    async fn send(&mut self, request: reqwest::RequestBuilder) -> (u16, String) {
        let response = request
            .header("X-Client-ID", CLIENT)
            .send()
            .await
            .expect("request");
        let status = response.status().as_u16();
        let headers = format!("{:?}", response.headers());
        let body = tokio::time::timeout(TURN_BUDGET, response.text())
            .await
            .expect("the response ends in time")
            .expect("body");
        self.0.push(headers);
        self.0.push(body.clone());
        (status, body)
    }
}

async fn create_thread(served: &Served, sb: &Sandbox, r: &mut Responses, agent: &str) -> String {
    let (status, body) = r
        .send(
            reqwest::Client::new()
                .post(format!("{}/v1/threads", served.base))
                .json(&json!({"agent": agent, "cwd": sb.workspace, "title": format!("about {}", secret())})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let thread: Value = serde_json::from_str(&body).expect("thread JSON");
    thread["id"].as_str().expect("id").to_owned()
}

/// Runs a turn over SSE to its end and returns the stream's text.
async fn run_turn(served: &Served, r: &mut Responses, thread: &str, input: &str) -> String {
    let (status, body) = r
        .send(
            reqwest::Client::new()
                .post(format!("{}/v1/threads/{thread}/turns", served.base))
                .json(&json!({"input": input})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("turn_completed"), "{body}");
    body
}

/// The JSON `data:` of every event of an SSE text.
fn sse_events(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect()
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_never_appears_in_the_database_the_logs_or_any_response() {
    let leak = secret();
    let model = ScriptedServer::start(Scenario::new(vec![
        // The server got the secret through its reference: its environment shows it.
        Step::tool_call("mcp__everything__get-env", json!({})),
        // The model leaks the value into a tool call's arguments (and so its result).
        Step::tool_call(
            "mcp__everything__echo",
            json!({"message": format!("leak {leak}")}),
        ),
        // And into its answer.
        Step::text(format!("The token is {leak}.")),
    ]))
    .await
    .expect("model");
    let sb = sandbox();
    let served = start(&sb, &model.base_url()).await;
    let mut r = Responses::default();
    let http = reqwest::Client::new();

    // The granted agent: the MCP server starts with the secret, tools run.
    let keeper = create_thread(&served, &sb, &mut r, "keeper").await;
    let stream = run_turn(&served, &mut r, &keeper, &format!("use {leak} please")).await;
    let events = sse_events(&stream);
    let results: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "tool_call_result")
        .collect();
    assert_eq!(results.len(), 2, "{stream}\n{}", served.logs());
    let env_output = results[0]["output"].as_str().expect("get-env output");
    assert!(
        env_output.contains("\"TOKEN\": \"[REDACTED:api_token]\""),
        "the server had the secret (shown redacted): {env_output}"
    );
    assert!(
        !env_output.contains(SECRET_VAR),
        "the server did not inherit the source variable: {env_output}"
    );
    assert!(
        results[1]["output"]
            .as_str()
            .is_some_and(|o| o.contains("leak [REDACTED:api_token]")),
        "{stream}"
    );
    let completed = events.last().expect("events");
    assert_eq!(completed["kind"], "turn_completed", "{stream}");
    assert_eq!(completed["stop_reason"], "text_answer", "{stream}");

    // The agent without a grant cannot start the server: the turn fails, clearly.
    let stranger = create_thread(&served, &sb, &mut r, "stranger").await;
    let refused = run_turn(&served, &mut r, &stranger, "hello").await;
    assert!(
        refused.contains(
            "agent `stranger` may not use secret `api_token` needed by MCP server \
             `everything`: no data_scope policy grants it"
        ),
        "{refused}"
    );
    let refused_events = sse_events(&refused);
    assert_eq!(
        refused_events.last().expect("events")["stop_reason"],
        "error",
        "{refused}"
    );
    assert_eq!(
        model.chat_request_count(),
        3,
        "the refused turn never reached the model"
    );

    // History, thread lists and errors that quote the value.
    for thread in [&keeper, &stranger] {
        let (status, _) = r
            .send(http.get(format!(
                "{}/v1/threads/{thread}/history?includeEvents=1",
                served.base
            )))
            .await;
        assert_eq!(status, 200);
    }
    let (status, _) = r
        .send(http.get(format!("{}/v1/threads", served.base)))
        .await;
    assert_eq!(status, 200);
    let (status, body) = r
        .send(
            http.post(format!("{}/v1/threads", served.base))
                .json(&json!({"agent": leak, "cwd": sb.workspace})),
        )
        .await;
    assert!(status >= 400, "{body}");
    let encoded: String = leak
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let (status, body) = r
        .send(http.get(format!("{}/v1/threads/{encoded}/history", served.base)))
        .await;
    assert!(status >= 400, "{body}");

    // An API key (ADR 0030): its creation's answer is the one place it shows; used,
    // refused, listed and revoked, it is in no other answer, no log line (at debug)
    // and not in the database in clear.
    // A server without keys: the first key needs the setup token from its file.
    let setup = std::fs::read_to_string(sb.root.join("setup-token")).expect("setup token");
    let created: Value = http
        .post(format!("{}/v1/keys", served.base))
        .header("X-Client-ID", "admin")
        .header("X-Setup-Token", setup.trim())
        .json(&json!({"client": "keyholder", "roles": ["operator"]}))
        .send()
        .await
        .expect("create key")
        .json()
        .await
        .expect("key JSON");
    let key = created["secret"].as_str().expect("secret").to_owned();
    let key_id = created["key"]["id"].as_str().expect("key id").to_owned();
    for (method, path, want) in [
        (reqwest::Method::GET, "/v1/threads".to_owned(), 200),
        (reqwest::Method::GET, "/v1/keys".to_owned(), 403),
        (
            reqwest::Method::GET,
            format!("/v1/threads/{keeper}/history"),
            404,
        ),
        (
            reqwest::Method::POST,
            format!("/v1/keys/{key_id}/revoke"),
            403,
        ),
    ] {
        let response = http
            .request(method, format!("{}{path}", served.base))
            .bearer_auth(&key)
            .send()
            .await
            .expect("request with the key");
        let status = response.status().as_u16();
        let body = response.text().await.unwrap_or_default();
        assert_eq!(status, want, "{path}: {body}");
        r.0.push(body);
    }
    let (status, body) = r
        .send(http.get(format!("{}/v1/threads", served.base)))
        .await;
    assert_eq!(
        status, 401,
        "once a key exists, a request without one is refused: {body}"
    );
    let key_core = key[3..].to_owned();

    // Let the writer settle, then read everything the server left behind.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut database = Vec::new();
    for entry in std::fs::read_dir(&sb.root).expect("root") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.starts_with("events.db") {
            database.extend(std::fs::read(&path).expect("db file"));
        }
    }
    let logs = served.logs();
    drop(served);

    assert!(
        contains(&database, "[REDACTED:api_token]"),
        "the database holds the redacted turn"
    );
    assert!(!contains(&database, CORE), "the database holds the secret");
    assert!(
        !contains(&database, &key_core),
        "the database holds an API key"
    );
    assert!(!logs.contains(&key_core), "the logs hold an API key");
    assert!(!logs.contains(CORE), "the logs hold the secret:\n{logs}");
    assert!(!logs.is_empty(), "the server logged something");
    for body in &r.0 {
        assert!(!body.contains(CORE), "a response holds the secret: {body}");
        assert!(
            !body.contains(&key_core),
            "a response holds an API key: {body}"
        );
    }
    // Tool output is redacted before the model sees it, too (the input and the model's
    // own calls are what the user and the model wrote, and go back as they were).
    let tool_messages: Vec<Value> = model
        .requests()
        .iter()
        .flat_map(|r| r["messages"].as_array().cloned().unwrap_or_default())
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(tool_messages.len(), 3, "two results, the first sent twice");
    for message in tool_messages {
        assert!(
            !message.to_string().contains(CORE),
            "the model was sent the secret: {message}"
        );
    }
}
