//! Small local models through the real binary (ADR 0032): what `agentplane agents` says
//! a model server can do — the scripted model's llama.cpp-style `/props`, and, when
//! they run, real llama.cpp servers with SmolLM2-135M (`AGENTPLANE_TEST_LLAMA_URL`, no
//! native tool calls) and Qwen2.5-Coder-1.5B (`AGENTPLANE_TEST_TOOLS_URL`,
//! `scripts/local-model.sh --tools`) — and one real task done by the 1.5B model.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use agentplane_testkit::{Scenario, ScriptedServer};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_agentplane");

struct Sandbox {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

fn sandbox(config: &str) -> Sandbox {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    std::fs::create_dir(root.join("ws")).expect("workspace");
    std::fs::write(
        root.join("agentplane.toml"),
        format!("[store]\npath = \"events.db\"\n{config}"),
    )
    .expect("config");
    Sandbox { _dir: dir, root }
}

fn command(sb: &Sandbox, base_url: &str) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.current_dir(&sb.root)
        .env_remove("AGENTPLANE_CONFIG")
        .env_remove("AGENTPLANE_DB")
        .env_remove("AGENTPLANE_LLM_MODEL")
        .env("AGENTPLANE_LLM_BASE_URL", base_url)
        .env("AGENTPLANE_LOG", "warn")
        .stdin(Stdio::null());
    cmd
}

async fn output(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("join")
        .expect("binary runs")
}

/// `agentplane agents --json`'s entry for `agent`.
async fn listed(sb: &Sandbox, base_url: &str, agent: &str) -> Value {
    let mut cmd = command(sb, base_url);
    cmd.args(["agents", "--json"]);
    let out = output(cmd).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    list.as_array()
        .expect("array")
        .iter()
        .find(|a| a["name"] == agent)
        .cloned()
        .expect("listed")
}

/// A base URL from the environment; CI must give the 135M one (see cli.rs).
fn env_url(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|u| !u.is_empty())
}

#[tokio::test]
async fn agents_shows_what_the_scripted_server_says_it_can_do() {
    for native in [true, false] {
        let server = ScriptedServer::start(Scenario::new(vec![]).with_native_tools(native))
            .await
            .expect("server");
        let sb = sandbox("[llm]\nmodel = \"scripted-model\"\n");
        let engineering = listed(&sb, &server.base_url(), "engineering").await;
        let capabilities = &engineering["model"]["capabilities"];
        assert_eq!(capabilities["native_tools"], native, "{engineering}");
        assert_eq!(capabilities["json_schema"], true);
        assert_eq!(capabilities["source"], "llama.cpp /props");
        assert_eq!(engineering["tool_calls"], "auto");

        let mut cmd = command(&sb, &server.base_url());
        cmd.arg("agents");
        let table = String::from_utf8_lossy(&output(cmd).await.stdout).into_owned();
        let expected = if native {
            "server: native tool calls"
        } else {
            "server: no native tool calls"
        };
        assert!(table.contains(expected), "{table}");
    }
}

#[tokio::test]
async fn agents_shows_what_real_llama_cpp_servers_say() {
    // SmolLM2-135M's template has no tools; Qwen2.5-Coder's has.
    for (var, native) in [
        ("AGENTPLANE_TEST_LLAMA_URL", false),
        ("AGENTPLANE_TEST_TOOLS_URL", true),
    ] {
        let Some(base_url) = env_url(var) else {
            eprintln!("{var} is not set: skipping that server");
            continue;
        };
        let sb = sandbox("");
        let engineering = listed(&sb, &base_url, "engineering").await;
        let capabilities = &engineering["model"]["capabilities"];
        assert_eq!(capabilities["native_tools"], native, "{var}: {engineering}");
        assert_eq!(capabilities["source"], "llama.cpp /props", "{var}");
    }
}

/// The CI subset of `scripts/eval-local.sh`: the 1.5B model writes a file and ends the
/// turn `finished`, in `constrained` mode (3 of 3 in the eval). The model samples, so a
/// run may miss; up to three runs, one of which must succeed — every failed run is
/// printed. Runs when `AGENTPLANE_TEST_TOOLS_URL` is set (`.ci/run` sets it once the
/// unit suites are done).
#[tokio::test]
async fn a_real_small_model_writes_a_file_and_finishes() {
    let Some(base_url) = env_url("AGENTPLANE_TEST_TOOLS_URL") else {
        eprintln!("AGENTPLANE_TEST_TOOLS_URL is not set: scripts/local-model.sh --tools");
        return;
    };
    let mut failures = Vec::new();
    for attempt in 1..=3 {
        let sb = sandbox(
            "[agents.coder]\nsystem_prompt = \"You are a careful assistant working in a \
             workspace through tools. Use the tools to do the task, then call finish_task.\"\n\
             ensembles = [\"fs\"]\nmax_steps = 8\nmax_output_tokens = 512\n\
             tool_calls = \"constrained\"\n",
        );
        let mut cmd = command(&sb, &base_url);
        cmd.args([
            "run",
            "--json",
            "--agent",
            "coder",
            "--workspace",
            "ws",
            "Create a file hello.txt containing the word hello, then finish.",
        ]);
        let out = output(cmd).await;
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let written = std::fs::read_to_string(sb.root.join("ws/hello.txt")).unwrap_or_default();
        if doc["stop_reason"] == "finished"
            && out.status.code() == Some(0)
            && written.trim().to_lowercase() == "hello"
        {
            eprintln!("succeeded on run {attempt}; failed runs before it: {failures:#?}");
            return;
        }
        failures.push(format!(
            "run {attempt}: exit {:?}, file {written:?}\nstdout: {}\nstderr: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    panic!(
        "no run of three wrote hello.txt and finished:\n{}",
        failures.join("\n")
    );
}

/// The scripted model's binary, built beside this test's (`cargo build` of the
/// workspace, which `scripts/test.sh` and CI do, builds it).
fn scripted_llm() -> PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let bin = dir.join("scripted-llm");
    assert!(
        bin.exists(),
        "{} is missing: cargo build -p agentplane-testkit --bin scripted-llm",
        bin.display()
    );
    bin
}

/// Whether anything accepts connections on `port` of 127.0.0.1.
fn answers(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        std::time::Duration::from_millis(200),
    )
    .is_ok()
}

/// Processes whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|cmdline| String::from_utf8_lossy(cmdline).contains(needle))
        .count()
}

#[tokio::test]
async fn a_stopped_model_server_is_started_by_start_command_and_stopped_at_shutdown() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    assert!(!answers(port), "the model server is stopped before the run");
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = dir.path().join("kept-model-scenario.json");
    std::fs::write(
        &scenario,
        r#"{"steps": [{"tool_calls": [{"name": "finish_task", "arguments": {"summary": "done"}}]}]}"#,
    )
    .expect("scenario");
    let base_url = format!("http://127.0.0.1:{port}/v1");
    let sb = sandbox(&format!(
        "[llm]\nbase_url = \"{base_url}\"\nmodel = \"scripted-model\"\nmax_retries = 0\n\
         ensure_available = true\nstart_timeout_secs = 60\n\
         start_command = [{:?}, \"--listen\", \"127.0.0.1:{port}\", \"--scenario\", {:?}]\n",
        scripted_llm().display().to_string(),
        scenario.display().to_string(),
    ));
    let mut cmd = command(&sb, &base_url);
    cmd.args(["run", "--json", "--workspace", "ws", "finish at once"]);
    let out = output(cmd).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["stop_reason"], "finished", "{doc}");
    assert!(stderr.contains("did not answer; starting"), "{stderr}");
    assert!(stderr.contains("the model server answers"), "{stderr}");
    // agentplane started it, so agentplane stopped it: nothing listens, no process left.
    assert!(
        !answers(port),
        "the model server still answers after the run"
    );
    assert_eq!(processes_mentioning("kept-model-scenario.json"), 0);
}

#[tokio::test]
async fn a_model_server_that_answers_is_not_started_again() {
    let server = ScriptedServer::start(Scenario::new(vec![agentplane_testkit::Step::tool_call(
        "finish_task",
        serde_json::json!({"summary": "ok"}),
    )]))
    .await
    .expect("server");
    let sb = sandbox(
        "[llm]\nmodel = \"scripted-model\"\nensure_available = true\n\
         start_command = [\"/bin/false\"]\n",
    );
    let mut cmd = command(&sb, &server.base_url());
    cmd.args(["run", "--json", "--workspace", "ws", "finish at once"]);
    let out = output(cmd).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("starting"), "{stderr}");
}
