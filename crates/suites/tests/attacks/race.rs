//! A workspace swapped in a race, through the real binary (issue 48): thread A's
//! program (`swap_probe.c`, built and run with `make`) rename-exchanges thread B's
//! workspace — a folder inside A's — with a symlink to agentplane's configuration
//! directory in a tight loop, while thread B's turns call every file tool and run
//! programs in that workspace, in parallel, as fast as the server takes them. No call
//! of B may read, list or write anything of the configuration: each runs in B's own
//! folder or is refused. Before the fix: some of B's calls ran inside the
//! configuration directory, read `agentplane.toml` and deleted a policy file.

use agentplane_suites::attacks::{Tally, make_call, probe_value, write_call};
use agentplane_suites::{SseReader, api, create_thread_in, sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer, ScriptedToolCall, Step};
use serde_json::json;

const SWAP_C: &str = include_str!("swap_probe.c");

/// How long A's program swaps.
const SWAP_SECS: u64 = 12;

/// In the configuration and its policy: what no call of B may ever show.
const MARKER: &str = "CONFIG-MARKER-5b2e";

const POLICY: &str = "# CONFIG-MARKER-5b2e\nname: no-deletes\ntype: tool_access\n\
                      targets: {agents: [victim]}\nrules: {deny: [delete_file]}\n";

fn call(name: &str, arguments: serde_json::Value) -> ScriptedToolCall {
    ScriptedToolCall {
        id: None,
        name: name.to_owned(),
        arguments,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_swapped_by_another_threads_program_is_never_left() {
    let sb = sandbox("");
    let config = sb.root.clone();
    let makefile = format!(
        "swap: swap.c\n\tTMPDIR=$(CURDIR) cc -O1 -o swap swap.c\n\t./swap {} {SWAP_SECS}\n",
        config.display()
    );
    let (write_tool, write_c) = write_call("swap.c", SWAP_C);
    let (_, write_make) = write_call("Makefile", &makefile);
    let (make_tool, make_args) = make_call("swap");
    let swapper_model = ScriptedServer::start(Scenario::new(vec![
        Step::tool_call(write_tool.clone(), write_c),
        Step::tool_call(write_tool, write_make),
        Step::tool_call(make_tool, make_args),
        Step::text("swapped"),
    ]))
    .await
    .expect("model");
    // B's every step: each file tool and two programs, at once.
    let victim_model = ScriptedServer::start(
        Scenario::new(vec![Step::tool_calls(vec![
            call("read_file", json!({"path": "mine.txt"})),
            call("write_file", json!({"path": "w.txt", "content": "from b"})),
            call("list_files", json!({"path": "."})),
            call("search_files", json!({"pattern": "MARKER", "path": "."})),
            call("run_command", json!({"program": "ls", "args": ["-A"]})),
            call(
                "run_command",
                json!({"program": "cat", "args": ["mine.txt"]}),
            ),
            call("delete_file", json!({"path": "w.txt"})),
        ])])
        .repeating(true),
    )
    .await
    .expect("model");
    std::fs::write(
        config.join("agentplane.toml"),
        agentplane_suites::without_nudges(&format!(
            "# {MARKER}\n[store]\npath = \"events.db\"\n[policies]\ndir = \"policies\"\n\
             [routing]\ndefault = [\"victim\"]\n\
             [providers.victim]\nkind = \"openai\"\nbase_url = \"{}\"\n\
             model = \"scripted-model\"\nmax_retries = 0\n\
             [providers.swapper]\nkind = \"openai\"\nbase_url = \"{}\"\n\
             model = \"scripted-model\"\nmax_retries = 0\n\
             [[routing.rules]]\nagent = \"swapper\"\nproviders = [\"swapper\"]\n\
             [agents.swapper]\nsystem_prompt = \"You swap.\"\nensembles = [\"fs\", \"shell\"]\n\
             shell_allow = [\"make\"]\ntool_timeout_ms = 60000\n\
             [agents.victim]\nsystem_prompt = \"You work.\"\nensembles = [\"fs\", \"shell\"]\n\
             shell_allow = [\"ls\", \"cat\"]\nmax_steps = 40\n",
            victim_model.base_url(),
            swapper_model.base_url(),
        )),
    )
    .expect("config");
    std::fs::create_dir(config.join("policies")).expect("policies");
    std::fs::write(config.join("policies/deny.yaml"), POLICY).expect("policy");
    let victim_ws = sb.workspace.join("b");
    std::fs::create_dir(&victim_ws).expect("b");
    std::fs::write(victim_ws.join("mine.txt"), "b's own file").expect("file");
    let served = start(&sb, &victim_model.base_url(), &[]).await;
    let swapper = create_thread_in(&served, &sb.workspace, "swapper", "a").await;
    let victim = create_thread_in(&served, &victim_ws, "victim", "b").await;

    let swapping = {
        let mut reader = SseReader::open(&served, &swapper, "swap").await;
        tokio::spawn(async move { reader.until("turn_completed").await })
    };
    let (mut ran, mut refused) = (0usize, 0usize);
    let (mut turns, mut turns_refused) = (0usize, 0usize);
    while !swapping.is_finished() {
        let response = api(
            &served,
            reqwest::Method::POST,
            &format!("/v1/threads/{victim}/turns"),
        )
        .json(&json!({"input": "work"}))
        .send()
        .await
        .expect("start turn");
        // A turn that starts while the folder is swapped out is refused as a whole.
        if response.status() == 403 {
            let body = response.text().await.unwrap_or_default();
            assert!(!body.contains(MARKER), "{body}");
            turns_refused += 1;
            continue;
        }
        assert_eq!(response.status(), 200, "{}", served.stderr());
        let events = SseReader::from_response(response)
            .until("turn_completed")
            .await;
        turns += 1;
        for event in events.iter().filter(|e| e.event == "tool_call_result") {
            let seen = event.data.to_string();
            assert!(!seen.contains(MARKER), "B saw the configuration: {seen}");
            assert!(
                !seen.contains("agentplane.toml"),
                "B listed the configuration: {seen}"
            );
            assert!(!seen.contains("events.db"), "B listed the data: {seen}");
            if event.data["status"] == "ok" {
                ran += 1;
            } else {
                refused += 1;
            }
        }
    }
    let swapped = swapping.await.expect("swapper");
    let output = swapped
        .iter()
        .filter(|e| e.event == "tool_call_result" && e.data["tool"] == "run_command")
        .filter_map(|e| e.data["output"].as_str())
        .next()
        .unwrap_or_default()
        .to_owned();
    let swaps: u64 = probe_value(&output, "swaps").parse().unwrap_or(0);
    assert!(swaps > 1000, "the swapper did not run: {output}");
    // The configuration is as it was: nothing written, nothing deleted.
    let toml = std::fs::read_to_string(config.join("agentplane.toml")).expect("config");
    assert!(toml.contains(MARKER), "the configuration was rewritten");
    assert_eq!(
        std::fs::read_to_string(config.join("policies/deny.yaml"))
            .ok()
            .as_deref(),
        Some(POLICY),
        "the policy was changed or deleted"
    );
    for planted in ["w.txt", "mine.txt"] {
        assert!(
            !config.join(planted).exists(),
            "{planted} written into the configuration"
        );
    }
    assert!(ran > 0, "no call of B ran at all ({refused} refused)");
    eprintln!(
        "race-figures: {turns} turns of B ({turns_refused} more refused at start), {} calls \
         ({ran} ran in B's folder, {refused} refused), {swaps} swaps",
        ran + refused
    );
    // One attack, however many calls it took.
    let mut tally = Tally::default();
    tally.case(true);
    tally.report("workspace-race");
}
