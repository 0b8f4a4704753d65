//! `agentplane run`'s exit code for text answers (ADR 0032), through the real binary and
//! the scripted model server: a plain chat agent answering in text succeeds (0); an
//! agent with an output schema that ends with text, after its corrective messages,
//! fails (1) with a one-line reason on stderr; a result written as text is a result.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use agentplane_testkit::{Scenario, ScriptedServer, Step};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_agentplane");

const AGENTS: &str = "[agents.chat]\nsystem_prompt = \"Answer briefly.\"\n\n\
    [agents.coder]\nsystem_prompt = \"Do the task.\"\nensembles = [\"fs\"]\n";

struct Sandbox {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

fn sandbox() -> Sandbox {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    std::fs::create_dir(root.join("ws")).expect("workspace");
    std::fs::write(
        root.join("agentplane.toml"),
        format!("[llm]\nmax_retries = 0\n[store]\npath = \"events.db\"\n{AGENTS}"),
    )
    .expect("config");
    Sandbox { _dir: dir, root }
}

async fn run(steps: Vec<Step>, agent: &str) -> (Output, usize) {
    let server = ScriptedServer::start(Scenario::new(steps))
        .await
        .expect("server");
    let sb = sandbox();
    let mut cmd = Command::new(BIN);
    cmd.current_dir(&sb.root)
        .env_remove("AGENTPLANE_CONFIG")
        .env_remove("AGENTPLANE_DB")
        .env("AGENTPLANE_LLM_BASE_URL", server.base_url())
        .env("AGENTPLANE_LLM_MODEL", "scripted-model")
        .env("AGENTPLANE_LOG", "warn")
        .stdin(Stdio::null())
        .args([
            "run",
            "--json",
            "--agent",
            agent,
            "--workspace",
            "ws",
            "do it",
        ]);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("join")
        .expect("binary runs");
    (out, server.requests().len())
}

fn doc(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

#[tokio::test]
async fn an_agent_with_a_schema_that_ends_in_text_exits_1_with_a_reason() {
    let steps = vec![
        Step::text("I did it."),
        Step::text("Yes, done."),
        Step::text("Done, really."),
    ];
    let (out, requests) = run(steps, "coder").await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(requests, 3, "the answer, then two corrective messages");
    assert_eq!(doc(&out)["stop_reason"], "text_answer");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let reasons: Vec<_> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(reasons.len(), 1, "{stderr}");
    assert!(reasons[0].contains("text_answer"), "{stderr}");
}

#[tokio::test]
async fn a_chat_agent_without_a_schema_answering_in_text_exits_0() {
    let (out, requests) = run(vec![Step::text("Paris.")], "chat").await;
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(requests, 1);
    assert_eq!(doc(&out)["result"]["text"], "Paris.");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("error"));
}

#[tokio::test]
async fn a_result_written_as_text_finishes_and_exits_0() {
    let steps = vec![Step::text("```json\n{\"summary\": \"nothing to do\"}\n```")];
    let (out, _) = run(steps, "coder").await;
    assert_eq!(out.status.code(), Some(0));
    let doc = doc(&out);
    assert_eq!(doc["stop_reason"], "finished");
    assert_eq!(doc["result"]["summary"], "nothing to do");
}
