//! The real binary with several providers: a task that fails over from a closed port
//! to the scripted server, shown on stderr and in the runlog, and `agents --json`
//! listing each agent's provider chain.

use std::process::{Command, Output, Stdio};

use agentplane_testkit::{Scenario, ScriptedServer, Step};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_agentplane");

fn sandbox(providers: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("ws")).expect("workspace");
    std::fs::write(
        dir.path().join("agentplane.toml"),
        format!("[llm]\nmodel = \"scripted-model\"\n[store]\npath = \"events.db\"\n{providers}"),
    )
    .expect("config");
    dir
}

fn command(dir: &tempfile::TempDir) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.current_dir(dir.path())
        .env_remove("AGENTPLANE_CONFIG")
        .env_remove("AGENTPLANE_DB")
        .env_remove("AGENTPLANE_LLM_API_KEY")
        .env_remove("AGENTPLANE_LLM_BASE_URL")
        .env_remove("AGENTPLANE_LLM_MODEL")
        .env("AGENTPLANE_LOG", "error")
        .stdin(Stdio::null());
    cmd
}

async fn output(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("join")
        .expect("binary runs")
}

fn chain(closed: std::net::SocketAddr, cloud: &str) -> String {
    format!(
        "[providers.local]\nkind = \"openai\"\nbase_url = \"http://{closed}/v1\"\nmax_retries = 0\n\
         [providers.cloud]\nkind = \"openai\"\nbase_url = \"{cloud}\"\nmax_retries = 0\n\
         [routing]\ndefault = [\"local\", \"cloud\"]\n"
    )
}

#[tokio::test]
async fn a_task_fails_over_and_the_runlog_records_both_providers() {
    let server = ScriptedServer::start(Scenario::new(vec![Step::tool_call(
        "finish_task",
        json!({"summary": "done in the cloud"}),
    )]))
    .await
    .expect("server");
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr");
    let dir = sandbox(&chain(closed, &server.base_url()));
    let mut cmd = command(&dir);
    cmd.args(["run", "--workspace"])
        .arg(dir.path().join("ws"))
        .arg("do it");
    let out = output(cmd).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("! provider local failed, trying cloud"),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("done in the cloud"));

    let turn = stderr
        .split_whitespace()
        .find(|w| w.starts_with("turn_"))
        .expect("the runlog hint names the turn")
        .to_owned();
    let mut cmd = command(&dir);
    cmd.args(["runlog", &turn]);
    let out = output(cmd).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kinds: Vec<(String, String)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|event| {
            let kind = event["kind"].as_str()?.to_owned();
            let who = match kind.as_str() {
                "provider_failover" => format!("{}->{}", event["from"], event["to"]),
                "usage" | "cost" => event["provider"].to_string(),
                _ => return None,
            };
            Some((kind, who))
        })
        .collect();
    assert_eq!(
        kinds,
        [
            (
                "provider_failover".to_owned(),
                r#""local"->"cloud""#.to_owned()
            ),
            ("usage".to_owned(), r#""cloud""#.to_owned()),
            ("cost".to_owned(), r#""cloud""#.to_owned()),
        ]
    );
}

#[tokio::test]
async fn agents_json_lists_each_agents_provider_chain() {
    let server = ScriptedServer::start(Scenario::new(vec![]))
        .await
        .expect("server");
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr");
    let dir = sandbox(&format!(
        "{}[[routing.rules]]\nagent = \"research\"\nproviders = [\"cloud\"]\n",
        chain(closed, &server.base_url())
    ));
    let mut cmd = command(&dir);
    cmd.args(["agents", "--json"]);
    let out = output(cmd).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: Value = serde_json::from_slice(&out.stdout).expect("json");
    let find = |name: &str| {
        list.as_array()
            .expect("array")
            .iter()
            .find(|a| a["name"] == name)
            .cloned()
            .expect("listed")
    };
    assert_eq!(find("research")["providers"], json!(["cloud"]));
    assert_eq!(find("engineering")["providers"], json!(["local", "cloud"]));
    // The dead first provider is skipped: the model is ready on the next one.
    assert_eq!(find("engineering")["model"]["status"], "ready");
}
