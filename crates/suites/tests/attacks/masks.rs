//! The data directory (the database, the setup token) and the configuration directory
//! are masked in every confined program's mount namespace, and an execution's folder,
//! which lies in the data directory, is still its program's workspace. Before the
//! mask was built that way, such a program did not start at all (its workspace lay in
//! a masked directory); with only Landlock, the database file beside it was one
//! `open` away from a rule mistake.

use std::time::Duration;

use agentplane_suites::attacks::{Tally, make_call, probe_value, write_call};
use agentplane_suites::{api, events_of, history, sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use serde_json::{Value, json};

const MAKEFILE: &str = "look:\n\
    \t@echo \"parent: $$(ls -A .. 2>/dev/null | tr '\\n' ' ')\"\n\
    \t@echo \"data: $$(ls -A ../.. 2>/dev/null | tr '\\n' ' ')\"\n\
    \t@echo \"secrets: $$(cat ../../events.db ../../agentplane.toml ../../setup-token 2>/dev/null | wc -c)\"\n\
    \t@echo ok > made.txt && echo \"made: $$(cat made.txt)\"\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execution_runs_in_its_folder_and_sees_nothing_else_of_the_data_directory() {
    let (write_tool, write_args) = write_call("Makefile", MAKEFILE);
    let (make_tool, make_args) = make_call("look");
    let model = ScriptedServer::start(
        Scenario::new(vec![
            Step::tool_call(write_tool, write_args),
            Step::tool_call(make_tool, make_args),
            Step::text("looked"),
        ])
        .repeating(true),
    )
    .await
    .expect("model");
    // The database (`events.db`) lies in the configuration directory, so executions'
    // folders lie in a directory that is masked twice over.
    let sb = sandbox(
        "[agents.batch]\nsystem_prompt = \"You look around.\"\n\
         ensembles = [\"fs\", \"shell\"]\nshell_allow = [\"make\"]\n",
    );
    let served = start(&sb, &model.base_url(), &[]).await;
    let mut tally = Tally::default();
    let mut folders = Vec::new();
    for run in 0..2 {
        let submitted: Value = api(&served, reqwest::Method::POST, "/v1/executions")
            .json(&json!({"agent": "batch", "input": format!("look {run}")}))
            .send()
            .await
            .expect("submit")
            .json()
            .await
            .expect("submitted");
        let id = submitted["id"].as_str().expect("an id").to_owned();
        let thread = submitted["thread_id"]
            .as_str()
            .expect("a thread")
            .to_owned();
        let done = settled(&served, &id).await;
        assert_eq!(done["status"], "succeeded", "{done}");
        let events = events_of(&history(&served, &thread).await);
        let output = events
            .iter()
            .filter(|e| e["kind"] == "tool_call_result" && e["tool"] == "run_command")
            .filter_map(|e| e["output"].as_str())
            .next()
            .unwrap_or_default()
            .to_owned();
        let folder = sb.root.join("executions").join(&id);
        assert_eq!(
            std::fs::read_to_string(folder.join("made.txt"))
                .ok()
                .as_deref(),
            Some("ok\n"),
            "the program did not run in its folder: {output}"
        );
        assert_eq!(probe_value(&output, "made"), "ok", "{output}");
        for other in &folders {
            assert!(
                !output.contains(other),
                "another execution is seen: {output}"
            );
        }
        assert!(
            !probe_value(&output, "data").contains("events.db"),
            "{output}"
        );
        assert_eq!(probe_value(&output, "secrets").trim(), "0", "{output}");
        folders.push(id);
        tally.case(true);
    }
    tally.report("masks");
}

/// The execution `id` once it has ended.
async fn settled(served: &agentplane_suites::Served, id: &str) -> Value {
    for _ in 0..300 {
        let state: Value = api(
            served,
            reqwest::Method::GET,
            &format!("/v1/executions/{id}"),
        )
        .send()
        .await
        .expect("poll")
        .json()
        .await
        .expect("state");
        if !matches!(state["status"].as_str(), Some("queued" | "running")) {
            return state;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("execution {id} did not end: {}", served.stderr());
}
