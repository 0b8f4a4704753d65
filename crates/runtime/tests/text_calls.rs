//! Tool calls and results written as text (ADR 0032), end to end: the scripted model
//! server over HTTP answers in text the way small local models do, and the turn recovers
//! calls, accepts a result, nudges, or constrains, per the agent's `tool_calls` mode.

use std::path::{Path, PathBuf};

use agentplane_core::{Event, EventPayload, StopReason};
use agentplane_engine::NoObserver;
use agentplane_runtime::config::ConfigSource;
use agentplane_runtime::{Config, Runtime, Task};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

struct Harness {
    server: ScriptedServer,
    _dir: tempfile::TempDir,
    workspace: PathBuf,
    runtime: Runtime,
}

const WRITE_FENCED: &str = "I will write it.\n```json\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"hello.txt\", \"content\": \"hello\"}}\n```";
const RESULT_TEXT: &str = "{\"summary\": \"Created hello.txt\"}";

async fn harness(steps: Vec<Step>) -> Harness {
    let server = ScriptedServer::start(Scenario::new(steps))
        .await
        .expect("scripted server");
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    let workspace = root.join("ws");
    std::fs::create_dir(&workspace).expect("workspace");
    let runtime = start(&root, &server.base_url()).await;
    Harness {
        server,
        _dir: dir,
        workspace,
        runtime,
    }
}

async fn start(root: &Path, base_url: &str) -> Runtime {
    let file = root.join("agentplane.toml");
    let mut agents = String::new();
    for mode in ["auto", "native", "recover", "constrained"] {
        agents.push_str(&format!(
            "[agents.{mode}]\nsystem_prompt = \"Do the task.\"\nensembles = [\"fs\"]\n\
             tool_calls = \"{mode}\"\nmax_steps = 6\n\n"
        ));
    }
    agents.push_str(
        "[agents.cool]\nsystem_prompt = \"Do the task.\"\nensembles = [\"fs\"]\n\
         tool_calls = \"recover\"\ntemperature = 0.2\n\n",
    );
    agents.push_str("[agents.chat]\nsystem_prompt = \"Answer briefly.\"\n");
    std::fs::write(
        &file,
        format!(
            "[llm]\nbase_url = \"{base_url}\"\nmodel = \"scripted-model\"\nmax_retries = 1\n\
             [store]\npath = \"events.db\"\n{agents}"
        ),
    )
    .expect("config");
    let env = |_: &str| None;
    let config = Config::load_from(&ConfigSource {
        explicit: Some(&file),
        cwd: root,
        env: &env,
    })
    .expect("config loads");
    Runtime::start(config).await.expect("runtime starts")
}

impl Harness {
    async fn run(&self, agent: &str) -> (agentplane_engine::TurnOutcome, Vec<Event>) {
        let outcome = self
            .runtime
            .run_task(
                Task {
                    agent: agent.to_owned(),
                    workspace: self.workspace.clone(),
                    input: "Create hello.txt containing hello, then finish.".to_owned(),
                },
                &NoObserver,
                CancellationToken::new(),
            )
            .await
            .expect("turn runs");
        let events = self
            .runtime
            .store()
            .turn_events(&outcome.turn)
            .await
            .expect("events");
        (outcome, events)
    }

    fn hello(&self) -> Option<String> {
        std::fs::read_to_string(self.workspace.join("hello.txt")).ok()
    }
}

/// (tool, recovered) of every planned call.
fn planned(events: &[Event]) -> Vec<(String, bool)> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ToolCallPlanned {
                tool, recovered, ..
            } => Some((tool.clone(), *recovered)),
            _ => None,
        })
        .collect()
}

/// The text of the last message of a request the model server received.
fn last_message(request: &Value) -> String {
    let messages = request["messages"].as_array().expect("messages");
    messages.last().expect("a message")["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_call_written_as_text_runs_and_a_result_written_as_text_finishes() {
    let h = harness(vec![Step::text(WRITE_FENCED), Step::text(RESULT_TEXT)]).await;
    let (outcome, events) = h.run("recover").await;
    assert_eq!(outcome.stop_reason, StopReason::Finished, "{events:#?}");
    assert_eq!(outcome.result, json!({"summary": "Created hello.txt"}));
    assert_eq!(h.hello().as_deref(), Some("hello"));
    assert_eq!(
        planned(&events),
        [("write_file".into(), true), ("finish_task".into(), true)]
    );
    // The stored event says so; a native call's event has no `recovered` key at all.
    let stored = serde_json::to_value(&events[planned_index(&events)]).expect("json");
    assert_eq!(stored["recovered"], true);
    // The model sees its recovered call as it wrote it, and the result as a message
    // naming the tool: no native call, no `tool` role it did not use (ADR 0038).
    let second = &h.server.requests()[1];
    let messages = second["messages"].as_array().expect("messages");
    let assistant = &messages[messages.len() - 2];
    assert_eq!(assistant["role"], "assistant");
    assert!(assistant.get("tool_calls").is_none(), "{assistant}");
    let written = assistant["content"].as_str().expect("text");
    assert!(
        written.starts_with("I will write it.\n{")
            && written.contains(r#""name":"write_file""#)
            && written.contains(r#""content":"hello""#),
        "{written}"
    );
    assert_result_shown(messages, "write_file", "wrote 5 bytes");
    assert!(messages.iter().all(|m| m["role"] != "tool"));
}

#[tokio::test]
async fn a_constrained_step_sees_recovered_calls_as_written_too() {
    let write = r#"{"thought": "Write it.", "name": "write_file", "arguments": {"path": "hello.txt", "content": "hello"}}"#;
    let finish = r#"{"thought": "Done.", "name": "finish_task", "arguments": {"summary": "Created hello.txt"}}"#;
    let h = harness(vec![Step::text(write), Step::text(finish)]).await;
    let (outcome, events) = h.run("constrained").await;
    assert_eq!(outcome.stop_reason, StopReason::Finished, "{events:#?}");
    // Both steps were constrained; the second shows the first call as the JSON object
    // it was, and its result as a user message (ADR 0038): a model shown its calls in
    // the template's native form repeated them (the eval's read_answer, rich_finish).
    let requests = h.server.requests();
    assert!(
        requests
            .iter()
            .all(|r| r["response_format"]["type"] == "json_schema")
    );
    let messages = requests[1]["messages"].as_array().expect("messages");
    let assistant = &messages[messages.len() - 2];
    assert!(assistant.get("tool_calls").is_none(), "{assistant}");
    let written: Value =
        serde_json::from_str(assistant["content"].as_str().expect("text")).expect("json");
    assert_eq!(
        written,
        json!({"name": "write_file", "arguments": {"path": "hello.txt", "content": "hello"}})
    );
    assert_result_shown(messages, "write_file", "wrote 5 bytes");
}

/// The last message of a request is the result of a recovered call to `tool`, shown as
/// a user message naming it (ADR 0038).
fn assert_result_shown(messages: &[Value], tool: &str, begins: &str) {
    let result = messages.last().expect("a message");
    assert_eq!(result["role"], "user");
    let expected = format!("Result of {tool}:\n{begins}");
    assert!(
        result["content"]
            .as_str()
            .is_some_and(|text| text.starts_with(&expected)),
        "{result}"
    );
}

fn planned_index(events: &[Event]) -> usize {
    events
        .iter()
        .position(|e| e.payload.kind() == "tool_call_planned")
        .expect("a planned call")
}

#[tokio::test]
async fn native_mode_keeps_text_as_text() {
    let h = harness(vec![Step::text(WRITE_FENCED)]).await;
    let (outcome, events) = h.run("native").await;
    assert_eq!(outcome.stop_reason, StopReason::TextAnswer);
    assert!(planned(&events).is_empty());
    assert_eq!(h.hello(), None);
    assert_eq!(h.server.requests().len(), 1, "no nudge in native mode");
}

#[tokio::test]
async fn a_native_call_is_not_marked() {
    let h = harness(vec![
        Step::tool_call(
            "write_file",
            json!({"path": "hello.txt", "content": "hello"}),
        ),
        Step::tool_call("finish_task", json!({"summary": "done"})),
    ])
    .await;
    let (outcome, events) = h.run("auto").await;
    assert_eq!(outcome.stop_reason, StopReason::Finished);
    assert_eq!(
        planned(&events),
        [("write_file".into(), false), ("finish_task".into(), false)]
    );
    let stored = serde_json::to_value(&events[planned_index(&events)]).expect("json");
    assert!(stored.get("recovered").is_none(), "{stored}");
    // Native calls worked: `auto` never constrained the answer.
    assert!(
        h.server
            .requests()
            .iter()
            .all(|r| r.get("response_format").is_none())
    );
}

#[tokio::test]
async fn text_without_a_call_is_nudged_then_ends_as_text_answer() {
    let h = harness(vec![
        Step::text("I created the file."),
        Step::text("It is done."),
        Step::text("Really done."),
        Step::text("never asked"),
    ])
    .await;
    let (outcome, _) = h.run("recover").await;
    assert_eq!(outcome.stop_reason, StopReason::TextAnswer);
    assert_eq!(outcome.result, json!({"text": "Really done."}));
    let requests = h.server.requests();
    assert_eq!(
        requests.len(),
        3,
        "two nudges (max_nudges = 2), then the end"
    );
    for nudged in &requests[1..] {
        let text = last_message(nudged);
        assert!(text.contains("finish_task"), "{text}");
        assert!(
            text.contains("\"summary\""),
            "the schema is in the nudge: {text}"
        );
        assert!(
            text.contains(r#"{"name": "finish_task", "arguments": {"summary": <string>}}"#),
            "the call to write is shown: {text}"
        );
    }
}

#[tokio::test]
async fn a_nudged_model_can_still_finish() {
    let h = harness(vec![
        Step::text(WRITE_FENCED),
        Step::text("The file is written."),
        Step::text("Finish_task({\"summary\": \"wrote hello.txt\"})"),
    ])
    .await;
    let (outcome, events) = h.run("recover").await;
    assert_eq!(outcome.stop_reason, StopReason::Finished, "{events:#?}");
    assert_eq!(outcome.result, json!({"summary": "wrote hello.txt"}));
}

#[tokio::test]
async fn a_plain_chat_agent_is_never_nudged() {
    let h = harness(vec![Step::text("Hello!"), Step::text("never asked")]).await;
    let (outcome, _) = h.run("chat").await;
    assert_eq!(outcome.stop_reason, StopReason::TextAnswer);
    assert_eq!(h.server.requests().len(), 1);
}

#[tokio::test]
async fn constrained_mode_sends_a_schema_of_the_offered_calls() {
    let bare = r#"{"name": "write_file", "arguments": {"path": "hello.txt", "content": "hello"}}"#;
    let finish = r#"{"name": "finish_task", "arguments": {"summary": "ok"}}"#;
    let h = harness(vec![Step::text(bare), Step::text(finish)]).await;
    let (outcome, events) = h.run("constrained").await;
    assert_eq!(outcome.stop_reason, StopReason::Finished, "{events:#?}");
    assert_eq!(h.hello().as_deref(), Some("hello"));
    for request in h.server.requests() {
        assert!(
            request["max_tokens"].as_u64().is_some(),
            "the output cap is sent"
        );
        let format = &request["response_format"];
        assert_eq!(format["type"], "json_schema");
        let choices = format["json_schema"]["schema"]["anyOf"]
            .as_array()
            .expect("one choice per tool");
        let names: Vec<_> = choices
            .iter()
            .map(|c| {
                c["properties"]["name"]["const"]
                    .as_str()
                    .unwrap_or_default()
            })
            .collect();
        assert!(
            names.contains(&"write_file") && names.contains(&"finish_task"),
            "{names:?}"
        );
        let write = choices
            .iter()
            .find(|c| c["properties"]["name"]["const"] == "write_file")
            .expect("write_file");
        assert_eq!(
            write["properties"]["arguments"]["required"],
            json!(["path", "content"])
        );
        // The answer says what it knows and what it does next before it chooses.
        assert_eq!(write["required"], json!(["thought", "name", "arguments"]));
        assert_eq!(write["properties"]["thought"]["type"], "string");
        // No native tools (a template would ask for its own call form, which the
        // schema forbids): the system message lists them, with their arguments.
        assert!(request.get("tools").is_none(), "{request}");
        assert_tools_listed(&request);
    }
}

/// The system message of a constrained request lists every offered tool with its
/// arguments' schema and says how to write a call.
fn assert_tools_listed(request: &Value) {
    let system = request["messages"][0]["content"]
        .as_str()
        .expect("a system message");
    assert_eq!(request["messages"][0]["role"], "system");
    let listing = system
        .split_once("You can call these tools:\n")
        .map(|(_, listing)| listing)
        .unwrap_or_else(|| panic!("no tool list in {system:?}"));
    let write = listing
        .lines()
        .find(|line| line.starts_with("- write_file: "))
        .unwrap_or_else(|| panic!("write_file not listed: {listing}"));
    let (_, schema) = write.split_once(" Arguments: ").expect("its arguments");
    let schema: Value = serde_json::from_str(schema).expect("the schema as JSON");
    assert_eq!(schema["required"], json!(["path", "content"]));
    assert!(
        listing
            .lines()
            .any(|line| line.starts_with("- finish_task: ")),
        "{listing}"
    );
    assert!(
        listing.contains("answer with only this JSON object"),
        "{listing}"
    );
}

const WRITE_BARE: &str =
    r#"{"name": "write_file", "arguments": {"path": "hello.txt", "content": "hello"}}"#;
const FINISH_BARE: &str = r#"{"name": "finish_task", "arguments": {"summary": "ok"}}"#;

#[tokio::test]
async fn auto_mode_asks_a_step_answered_in_text_again_constrained() {
    let h = harness(vec![
        // A call that cannot be read: asked again under the constraint, this answer unused.
        Step::text(
            r#"{"name": "write_file", "arguments": {"path": "hello.txt", "content": 1 + 1}}"#,
        ),
        Step::text(WRITE_BARE),
        Step::text(FINISH_BARE),
    ])
    .await;
    let (outcome, events) = h.run("auto").await;
    assert_eq!(outcome.stop_reason, StopReason::Finished, "{events:#?}");
    assert_eq!(h.hello().as_deref(), Some("hello"));
    assert_eq!(
        planned(&events),
        [("write_file".into(), true), ("finish_task".into(), true)]
    );
    let requests = h.server.requests();
    assert_eq!(requests.len(), 3);
    assert!(requests[0].get("response_format").is_none());
    assert!(
        requests[0]["tools"].is_array(),
        "a free step offers native tools"
    );
    let messages = |r: &Value| r["messages"].as_array().expect("messages").clone();
    assert_eq!(
        messages(&requests[0])[1..],
        messages(&requests[1])[1..],
        "the same step, asked again"
    );
    let free = requests[0]["messages"][0]["content"]
        .as_str()
        .expect("prompt");
    let listed = requests[1]["messages"][0]["content"]
        .as_str()
        .expect("prompt");
    assert!(
        listed.starts_with(free) && listed.len() > free.len(),
        "the constrained step's prompt is the free one's with the tools listed"
    );
    for constrained in &requests[1..] {
        assert_eq!(constrained["response_format"]["type"], "json_schema");
        assert!(constrained.get("tools").is_none());
        assert_tools_listed(constrained);
    }
}

#[tokio::test]
async fn auto_mode_starts_constrained_once_the_model_was_seen_writing_text() {
    let h = harness(vec![
        Step::text(""),
        Step::text(WRITE_BARE),
        Step::text(FINISH_BARE),
        // The second turn: constrained from its first call.
        Step::text(FINISH_BARE),
    ])
    .await;
    let (first, _) = h.run("auto").await;
    assert_eq!(first.stop_reason, StopReason::Finished);
    let (second, _) = h.run("auto").await;
    assert_eq!(second.stop_reason, StopReason::Finished);
    let requests = h.server.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(requests[3]["response_format"]["type"], "json_schema");
}

#[tokio::test]
async fn a_call_that_cannot_be_read_is_named_in_the_correction() {
    let broken = "```json\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"hello.txt\", \"content\": \"hi\".toUpperCase()}}\n```";
    let h = harness(vec![
        Step::text(broken),
        Step::text(WRITE_FENCED),
        Step::text(RESULT_TEXT),
    ])
    .await;
    let (outcome, events) = h.run("recover").await;
    assert_eq!(outcome.stop_reason, StopReason::Finished, "{events:#?}");
    assert_eq!(h.hello().as_deref(), Some("hello"));
    let correction = last_message(&h.server.requests()[1]);
    assert!(
        correction.starts_with("The call to write_file could not be read"),
        "{correction}"
    );
    assert!(correction.contains("near `.toUpperCase()"), "{correction}");
}

#[tokio::test]
async fn the_agents_temperature_is_sent_with_every_call() {
    let h = harness(vec![Step::text(WRITE_FENCED), Step::text(RESULT_TEXT)]).await;
    let (outcome, _) = h.run("cool").await;
    assert_eq!(outcome.stop_reason, StopReason::Finished);
    for request in h.server.requests() {
        assert_eq!(request["temperature"], json!(0.2), "{request}");
    }
    // An agent without one leaves the server's own.
    let h = harness(vec![Step::text(WRITE_FENCED), Step::text(RESULT_TEXT)]).await;
    h.run("recover").await;
    assert!(h.server.requests()[0].get("temperature").is_none());
}

#[tokio::test]
async fn a_repeated_call_gets_a_note_after_its_result() {
    let h = harness(vec![
        Step::text(WRITE_FENCED),
        Step::text(WRITE_FENCED),
        Step::text(RESULT_TEXT),
    ])
    .await;
    let (outcome, _) = h.run("recover").await;
    assert_eq!(outcome.stop_reason, StopReason::Finished);
    let requests = h.server.requests();
    assert!(!last_message(&requests[1]).contains("same as the one before"));
    assert!(last_message(&requests[2]).contains("same as the one before"));
}

#[tokio::test]
async fn only_the_first_of_several_calls_written_as_text_runs() {
    // A read and a write that guesses what the read will say, in one answer.
    let both = "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"src.txt\"}}\n\
        {\"name\": \"write_file\", \"arguments\": {\"path\": \"hello.txt\", \"content\": \"GUESS\"}}\n```";
    let h = harness(vec![
        Step::text(both),
        Step::text(WRITE_FENCED),
        Step::text(RESULT_TEXT),
    ])
    .await;
    std::fs::write(h.workspace.join("src.txt"), "hello").expect("src");
    let (outcome, events) = h.run("recover").await;
    assert_eq!(outcome.stop_reason, StopReason::Finished, "{events:#?}");
    assert_eq!(
        planned(&events),
        [
            ("read_file".into(), true),
            ("write_file".into(), true),
            ("finish_task".into(), true)
        ]
    );
    assert_eq!(
        h.hello().as_deref(),
        Some("hello"),
        "the guessed write never ran"
    );
}

#[tokio::test]
async fn a_model_stuck_on_one_answer_is_asked_again_hotter() {
    let h = harness(vec![
        Step::text("Done."),
        Step::text("Done."),
        Step::text(RESULT_TEXT),
    ])
    .await;
    let (outcome, _) = h.run("cool").await;
    assert_eq!(outcome.stop_reason, StopReason::Finished);
    let temperatures: Vec<Value> = h
        .server
        .requests()
        .iter()
        .map(|r| r["temperature"].clone())
        .collect();
    assert_eq!(
        temperatures,
        [json!(0.2), json!(0.2), json!(1.0)],
        "the same answer twice: the next call is hotter"
    );
}

#[tokio::test]
async fn recover_mode_tells_the_model_how_to_write_a_call() {
    let system = |request: &Value| {
        request["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let h = harness(vec![Step::text(WRITE_FENCED), Step::text(RESULT_TEXT)]).await;
    h.run("recover").await;
    let prompt = system(&h.server.requests()[0]);
    assert!(
        prompt.starts_with("Do the task.\n\nTo call a tool, answer with only this JSON object"),
        "{prompt}"
    );
    assert!(
        prompt.contains("call `finish_task` the same way"),
        "{prompt}"
    );
    // A model that may make native calls is not told to write them as text; a
    // constrained step is, beside the list of tools it is not sent natively.
    for mode in ["native", "auto"] {
        let h = harness(vec![Step::text(FINISH_BARE)]).await;
        h.run(mode).await;
        assert_eq!(system(&h.server.requests()[0]), "Do the task.", "{mode}");
    }
    let h = harness(vec![Step::text(FINISH_BARE)]).await;
    h.run("constrained").await;
    let constrained = &h.server.requests()[0];
    assert!(
        system(constrained).starts_with("Do the task.\n\nYou can call these tools:\n"),
        "{constrained}"
    );
    assert_tools_listed(constrained);
}
