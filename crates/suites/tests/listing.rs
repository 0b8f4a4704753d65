//! List-time is call-time, through the real binary: a tool a policy denies outright
//! never appears among the `tools` of any model request (read from the scripted
//! model's request log), whether it is a native tool, an MCP server's tool (npm's
//! server-everything, a real peer) or a tool a gateway client forwards; a tool denied
//! only for some arguments is offered and refused for those arguments only.
//!
//! Needs the MCP peers of `scripts/test-peers.sh`.

use agentplane_suites::{SseReader, api, create_thread, events_of, history, sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer, Step, peers};
use serde_json::{Value, json};

const POLICIES: &str = "\
- name: no-sum-no-search
  type: tool_access
  rules: {deny: [mcp__everything__get-sum, search_text, drop_table]}
- name: no-forbidden-echo
  type: tool_access
  targets: {tools: [mcp__everything__echo]}
  when: {arg: /message, matches: forbidden}
  rules: {deny: ['*']}
";

#[tokio::test]
async fn a_tool_denied_outright_is_never_offered_native_mcp_or_forwarded() {
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::tool_call("mcp__everything__echo", json!({"message": "hello"})),
        Step::tool_call(
            "mcp__everything__echo",
            json!({"message": "a forbidden word"}),
        ),
        // A model that calls a tool it was not offered is refused all the same.
        Step::tool_call("mcp__everything__get-sum", json!({"a": 1, "b": 2})),
        Step::text("done"),
        Step::text("forwarded"),
    ]))
    .await
    .expect("model");
    let sb = sandbox(&format!(
        "[mcp.servers.everything]\n{}cwd = \"servers\"\n\
         [agents.mixed]\nsystem_prompt = \"You mix.\"\nensembles = [\"fs\", \"everything\"]\n\
         [policies]\ndir = \"policies\"\n",
        peers::mcp_everything_toml()
    ));
    std::fs::create_dir_all(sb.root.join("servers")).expect("servers dir");
    std::fs::create_dir(sb.root.join("policies")).expect("policies dir");
    std::fs::write(sb.root.join("policies").join("tools.yaml"), POLICIES).expect("policy");
    let served = start(&sb, &model.base_url(), &[]).await;
    let thread = create_thread(&served, &sb, "mixed", "listing").await;
    SseReader::open(&served, &thread, "echo twice")
        .await
        .until("turn_completed")
        .await;

    let requests = model.requests();
    assert!(requests.len() >= 4, "{requests:?}");
    for request in &requests[..4] {
        let tools = agentplane_testkit::offered_tools(request);
        for listed in [
            "read_file",
            "write_file",
            "mcp__everything__echo",
            "mcp__everything__get-env",
        ] {
            assert!(
                tools.contains(&listed.to_owned()),
                "{listed} offered: {tools:?}"
            );
        }
        for withheld in ["search_text", "mcp__everything__get-sum"] {
            assert!(
                !tools.contains(&withheld.to_owned()),
                "{withheld} withheld: {tools:?}"
            );
        }
    }
    let events = events_of(&history(&served, &thread).await);
    let results: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "tool_call_result")
        .collect();
    assert_eq!(results.len(), 3, "{results:?}");
    assert_eq!(results[0]["status"], "ok", "an echo of other words runs");
    assert_eq!(results[1]["error_type"], "policy_denied", "{}", results[1]);
    assert_eq!(results[2]["error_type"], "policy_denied", "{}", results[2]);
    let denied: Vec<&str> = events
        .iter()
        .filter(|e| e["kind"] == "policy_denied")
        .filter_map(|e| e["policy"].as_str())
        .collect();
    assert_eq!(denied, ["no-forbidden-echo", "no-sum-no-search"]);

    // A gateway client forwards three tools; the upstream sees the two not denied.
    let before = model.requests().len();
    let forwarded: Vec<Value> = ["read_rows", "drop_table", "mcp__everything__echo"]
        .iter()
        .map(|name| {
            json!({
                "type": "function",
                "function": {"name": name, "parameters": {"type": "object"}},
            })
        })
        .collect();
    let response = api(
        &served,
        reqwest::Method::POST,
        "/openai/v1/chat/completions",
    )
    .json(&json!({
        "model": "scripted-model",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": forwarded,
        "tool_choice": {"type": "function", "function": {"name": "drop_table"}},
    }))
    .send()
    .await
    .expect("gateway");
    assert_eq!(
        response.status().as_u16(),
        200,
        "{:?}",
        response.text().await
    );
    let upstream = &model.requests()[before];
    assert_eq!(
        agentplane_testkit::offered_tools(upstream),
        ["read_rows", "mcp__everything__echo"],
        "{upstream}"
    );
    assert!(
        upstream
            .get("tool_choice")
            .is_none_or(|c| !c.to_string().contains("drop_table")),
        "a choice of a withheld tool is dropped: {upstream}"
    );
}
