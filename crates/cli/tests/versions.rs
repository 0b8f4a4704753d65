//! `agentplane versions` against the real `agentplane serve` (ADR 0016): create a
//! version, promote it twice, split traffic 50/50, roll back, set a shadow; refusals
//! come back as the server's error with a non-zero exit, bad arguments fail before
//! anything is sent.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use agentplane_testkit::{Scenario, ScriptedServer};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_agentplane");
/// How long a server may take to answer `/healthz` on a busy 2-core machine.
const START_BUDGET: Duration = Duration::from_secs(30);

const CONFIG: &str = "[llm]\nmax_retries = 0\n[store]\npath = \"events.db\"\n\
    [agents.chat]\nsystem_prompt = \"Answer briefly.\"\n";

/// A running `agentplane serve`; killed and reaped when dropped.
struct Served {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn command(root: &std::path::Path, model_url: &str) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.current_dir(root)
        .env_remove("AGENTPLANE_CONFIG")
        .env_remove("AGENTPLANE_DB")
        .env_remove("AGENTPLANE_LISTEN")
        .env_remove("AGENTPLANE_AUTH_TOKEN")
        .env_remove("AGENTPLANE_SERVER")
        .env_remove("AGENTPLANE_CLIENT_ID")
        .env_remove("AGENTPLANE_LLM_API_KEY")
        .env("AGENTPLANE_LLM_BASE_URL", model_url)
        .env("AGENTPLANE_LLM_MODEL", "scripted-model")
        .stdin(Stdio::null());
    cmd
}

async fn serve(model_url: &str) -> Served {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    std::fs::write(root.join("agentplane.toml"), CONFIG).expect("config");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let child = command(&root, model_url)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn agentplane serve");
    let served = Served {
        child,
        base: format!("http://127.0.0.1:{port}"),
        _dir: dir,
        root,
    };
    let deadline = Instant::now() + START_BUDGET;
    loop {
        let healthy = reqwest::Client::new()
            .get(format!("{}/healthz", served.base))
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200);
        if healthy {
            return served;
        }
        assert!(Instant::now() < deadline, "no /healthz in time");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn versions(served: &Served, args: &[&str]) -> Output {
    command(&served.root, "http://127.0.0.1:9")
        .arg("versions")
        .args(args)
        .args(["--server", &served.base, "--client-id", "ops"])
        .output()
        .expect("agentplane versions")
}

fn json_of(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON on stdout")
}

#[tokio::test]
async fn versions_are_created_promoted_split_and_rolled_back_from_the_terminal() {
    let model = ScriptedServer::start(Scenario::new(vec![]))
        .await
        .expect("scripted model");
    let served = serve(&model.base_url()).await;

    let created = json_of(&versions(
        &served,
        &[
            "create",
            "chat",
            "1.1.0",
            "--system-prompt",
            "Answer in one word.",
            "--json",
        ],
    ));
    assert_eq!(created["stage"], "draft");
    assert_eq!(created["spec"]["system_prompt"], "Answer in one word.");
    for stage in ["staging", "production"] {
        let promoted = json_of(&versions(&served, &["promote", "chat", "1.1.0", "--json"]));
        assert_eq!(promoted["stage"], stage);
    }
    let split = json_of(&versions(
        &served,
        &["traffic", "chat", "1.0.0=50", "1.1.0=50", "--json"],
    ));
    assert_eq!(split["traffic"]["1.1.0"], 50);
    let back = json_of(&versions(&served, &["rollback", "chat", "--json"]));
    assert_eq!(back["traffic"], serde_json::json!({"1.0.0": 100}));
    let table = versions(&served, &["list", "chat"]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(table.status.success());
    assert!(
        text.contains("1.1.0") && text.contains("production"),
        "{text}"
    );
    assert!(text.contains("traffic: 1.0.0=100"), "{text}");

    // The server's refusals: production is immutable, there is nothing to roll back.
    let refused = versions(&served, &["edit", "chat", "1.1.0", "--system-prompt", "x"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("CONFLICT"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(!versions(&served, &["rollback", "chat"]).status.success());

    // Bad arguments fail before anything is sent.
    for bad in [
        vec!["create", "../etc", "1.2.0"],
        vec!["create", "chat", "v1"],
        vec!["traffic", "chat", "1.0.0"],
        vec!["create", "chat", "1.2.0", "--spec", "[1]"],
    ] {
        let output = versions(&served, &bad);
        assert!(!output.status.success(), "{bad:?}");
    }
    let listed = json_of(&versions(&served, &["list", "chat", "--json"]));
    assert_eq!(listed["versions"].as_array().map(Vec::len), Some(2));
    let shadow = json_of(&versions(&served, &["shadow", "chat", "1.1.0", "--json"]));
    assert_eq!(shadow["shadow"], "1.1.0");
    let cleared = json_of(&versions(&served, &["shadow", "chat", "--clear", "--json"]));
    assert_eq!(cleared["shadow"], Value::Null);
}
