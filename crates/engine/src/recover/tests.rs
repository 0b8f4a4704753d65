//! The recovery parser: every recognised shape, and hostile text that must stay text.

use serde_json::json;

use super::*;

fn write_schema() -> Schema {
    Schema::compile(&json!({
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
        "additionalProperties": false
    }))
    .expect("schema")
}

fn finish_schema() -> Schema {
    Schema::compile(&json!({
        "type": "object",
        "properties": {"summary": {"type": "string"}, "count": {"type": "integer"}},
        "required": ["summary"]
    }))
    .expect("schema")
}

/// Runs `recover` with `write_file` and `finish_task` offered.
fn calls(text: &str) -> Recovered {
    offered_write_and_finish(|offered| recover(text, offered))
}

fn write_call() -> RecoveredCall {
    RecoveredCall {
        name: "write_file".into(),
        arguments: json!({"path": "hello.txt", "content": "hello"}),
    }
}

#[test]
fn hermes_tool_call() {
    let got = calls(
        "Sure.\n<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"hello.txt\", \"content\": \"hello\"}}\n</tool_call>",
    );
    assert_eq!(got.calls, vec![write_call()]);
    assert_eq!(got.text, "Sure.");
}

#[test]
fn tools_wrapper() {
    let got = calls(
        "<tools>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"hello.txt\", \"content\": \"hello\"}}\n</tools>",
    );
    assert_eq!(got.calls, vec![write_call()]);
    assert_eq!(got.text, "");
}

#[test]
fn fenced_json() {
    let got = calls(
        "I will write it:\n```json\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"hello.txt\", \"content\": \"hello\"}}\n```",
    );
    assert_eq!(got.calls, vec![write_call()]);
    assert_eq!(got.text, "I will write it:");
}

#[test]
fn bare_json_and_string_arguments() {
    let got =
        calls(r#"{"name": "write_file", "arguments": {"path": "hello.txt", "content": "hello"}}"#);
    assert_eq!(got.calls, vec![write_call()]);
    let got = calls(
        r#"{"name": "write_file", "arguments": "{\"path\": \"hello.txt\", \"content\": \"hello\"}"}"#,
    );
    assert_eq!(got.calls, vec![write_call()]);
}

#[test]
fn doubled_braces() {
    let got = calls(
        r#"{{"name": "write_file", "arguments": {{"path": "hello.txt", "content": "hello"}}}}"#,
    );
    assert_eq!(got.calls, vec![write_call()]);
}

#[test]
fn function_call_syntax_any_case() {
    let got = calls(r#"Finish_task({"summary": "Created hello.txt"})"#);
    assert_eq!(
        got.calls,
        vec![RecoveredCall {
            name: "finish_task".into(),
            arguments: json!({"summary": "Created hello.txt"}),
        }]
    );
    // Without the closing parenthesis it is not a call.
    assert!(calls(r#"finish_task({"summary": "x"}"#).calls.is_empty());
}

#[test]
fn self_closing_tag() {
    let got = calls(r#"Done. <finish_task summary="Created &quot;hello.txt&quot;" count="2"/>"#);
    assert_eq!(
        got.calls,
        vec![RecoveredCall {
            name: "finish_task".into(),
            arguments: json!({"summary": "Created \"hello.txt\"", "count": 2}),
        }]
    );
    assert_eq!(got.text, "Done.");
}

#[test]
fn function_key_and_openai_shape() {
    let got = calls(
        r#"{"function": "write_file", "arguments": {"path": "hello.txt", "content": "hello"}}"#,
    );
    assert_eq!(got.calls, vec![write_call()]);
    let got = calls(
        r#"{"type": "function", "function": {"name": "write_file", "arguments": "{\"path\": \"hello.txt\", \"content\": \"hello\"}"}}"#,
    );
    assert_eq!(got.calls, vec![write_call()]);
}

#[test]
fn elements_in_a_tools_wrapper() {
    let got = calls(
        "<tools>\n  <function>\n    <name>write_file</name>\n    <arguments>\n      <path>hello.txt</path>\n      <content>hello</content>\n    </arguments>\n  </function>\n  <function><name>finish_task</name><arguments><summary>done</summary><count>3</count></arguments></function>\n</tools>",
    );
    assert_eq!(
        got.calls,
        vec![
            write_call(),
            RecoveredCall {
                name: "finish_task".into(),
                arguments: json!({"summary": "done", "count": 3}),
            }
        ]
    );
    // An unoffered name, a missing argument, or stray text among the arguments: text.
    for text in [
        "<name>shell</name><arguments><program>rm</program></arguments>",
        "<name>write_file</name><arguments><path>a</path></arguments>",
        "<name>write_file</name><arguments>path=a <content>b</content></arguments>",
        "<name>write_file</name> no arguments here",
    ] {
        assert!(calls(text).calls.is_empty(), "{text}");
    }
}

#[test]
fn several_calls_in_order() {
    let got = calls(concat!(
        r#"<finish_task summary='later'/> then "#,
        r#"{"name": "write_file", "arguments": {"path": "a", "content": "b"}}"#
    ));
    let names: Vec<_> = got.calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["finish_task", "write_file"]);
}

#[test]
fn a_tool_not_offered_stays_text() {
    let text = r#"{"name": "delete_everything", "arguments": {"path": "/"}}"#;
    let got = calls(text);
    assert!(got.calls.is_empty());
    assert_eq!(got.text, text);
    assert!(calls(r#"shell({"program": "rm"})"#).calls.is_empty());
    assert!(calls(r#"<shell program="rm"/>"#).calls.is_empty());
    // Nothing offered, nothing recovered.
    assert!(
        recover(r#"{"name": "write_file", "arguments": {}}"#, &[])
            .calls
            .is_empty()
    );
}

#[test]
fn arguments_failing_the_schema_stay_text() {
    for text in [
        r#"{"name": "write_file", "arguments": {"path": "a"}}"#,
        r#"{"name": "write_file", "arguments": {"path": 1, "content": "b"}}"#,
        r#"{"name": "write_file", "arguments": {"path": "a", "content": "b", "mode": "x"}}"#,
        r#"{"name": "write_file", "arguments": ["a", "b"]}"#,
        r#"{"name": "write_file", "arguments": "not json"}"#,
        r#"{"name": "write_file"}"#,
        r#"write_file({"path": "a"})"#,
        r#"<write_file path="a"/>"#,
        r#"<finish_task count="2"/>"#,
    ] {
        assert!(calls(text).calls.is_empty(), "{text}");
    }
}

#[test]
fn nested_fences_and_calls_inside_strings_stay_text() {
    // A call quoted inside another call's string argument is content, not a call.
    let inner = r#"```json\n{\"name\": \"finish_task\", \"arguments\": {\"summary\": \"x\"}}\n```"#;
    let text = format!(
        "```json\n{{\"name\": \"write_file\", \"arguments\": {{\"path\": \"README.md\", \"content\": \"{inner}\"}}}}\n```"
    );
    let got = calls(&text);
    assert_eq!(got.calls.len(), 1);
    assert_eq!(got.calls[0].name, "write_file");
    // Tags and elements quoted in a call's content are its content.
    let quoted = r#"{"name": "write_file", "arguments": {"path": "a.xml", "content": "<finish_task summary='x'/> <name>finish_task</name><arguments><summary>y</summary></arguments>"}}"#;
    let got = calls(quoted);
    assert_eq!(got.calls.len(), 1, "{:?}", got.calls);
    assert_eq!(got.calls[0].name, "write_file");
    // A fence opened inside an object breaks it: no call.
    let broken = "```json\n{\"name\": \"write_file\", \"arguments\": ```json\n{\"path\": \"a\", \"content\": \"b\"}\n```}\n```";
    assert!(calls(broken).calls.is_empty());
    // Fences inside fences around prose: no call.
    assert!(
        calls("````\n```json\nnot a call\n```\n````")
            .calls
            .is_empty()
    );
}

#[test]
fn a_megabyte_of_braces_is_linear_and_no_call() {
    for text in [
        "{".repeat(1 << 20),
        "}".repeat(1 << 20),
        "{}".repeat(1 << 19),
        format!("{}{}", "{".repeat(1 << 19), "}".repeat(1 << 19)),
        "{\"".repeat(1 << 19),
        "<finish_task summary=\"".repeat(1 << 16),
        "finish_task(".repeat(1 << 16) + "{}",
        "<".repeat(1 << 20),
        "<name>write_file</name><arguments>".repeat(1 << 15),
        "<name>".repeat(1 << 17),
        "<name>write_file</name><arguments><path>".repeat(1 << 14) + "</arguments>",
    ] {
        // No clock here (tests assert no timings): quadratic work on 1 MB would take
        // minutes and end at the test runner's timeout.
        let got = calls(&text);
        assert!(got.calls.is_empty());
    }
}

#[test]
fn the_number_of_calls_is_capped() {
    let one = r#"{"name": "write_file", "arguments": {"path": "a", "content": "b"}} "#;
    assert_eq!(calls(&one.repeat(100)).calls.len(), MAX_CALLS);
}

#[test]
fn a_result_written_as_text() {
    let schema = finish_schema();
    assert_eq!(
        result_text(
            "```json\n{\"summary\": \"Created hello.txt\"}\n```",
            &schema
        ),
        Some(json!({"summary": "Created hello.txt"}))
    );
    assert_eq!(
        result_text(" {\"summary\": \"ok\"} ", &schema),
        Some(json!({"summary": "ok"}))
    );
    // Prose around it, a wrong shape, or two objects: not a result.
    assert_eq!(result_text("Here: {\"summary\": \"ok\"}", &schema), None);
    assert_eq!(result_text("{\"count\": 1}", &schema), None);
    assert_eq!(
        result_text("{\"summary\": \"a\"} {\"summary\": \"b\"}", &schema),
        None
    );
    assert_eq!(result_text("I created the file.", &schema), None);
}

fn offered_write_and_finish<T>(f: impl FnOnce(&[Offered<'_>]) -> T) -> T {
    let write = write_schema();
    let finish = finish_schema();
    f(&[
        Offered {
            name: "write_file",
            schema: &write,
        },
        Offered {
            name: "finish_task",
            schema: &finish,
        },
    ])
}

#[test]
fn a_doubled_opening_brace_with_one_closing_brace_too_few_is_read() {
    let got = calls(
        "{{\"name\": \"write_file\", \"arguments\": {\"path\": \"hello.txt\", \"content\": \"hello\"}}",
    );
    assert_eq!(got.calls, vec![write_call()]);
}

#[test]
fn a_near_miss_names_the_tool_and_where_its_json_breaks() {
    let text = "```json\n{\n  \"name\": \"write_file\",\n  \"arguments\": {\n    \"path\": \"dst.txt\",\n    \"content\": \"src.txt\".toUpperCase()\n  }\n}\n```";
    assert!(calls(text).calls.is_empty());
    let miss = offered_write_and_finish(|o| near_miss(text, o)).expect("a near miss");
    assert_eq!(miss.tool, "write_file");
    assert!(miss.reason.contains("not valid JSON"), "{}", miss.reason);
    assert!(
        miss.reason.contains("near `.toUpperCase()`"),
        "{}",
        miss.reason
    );
}

#[test]
fn a_near_miss_says_which_argument_fails_the_schema() {
    let text = r#"{"name": "write_file", "arguments": {"path": "a.txt", "content": 7}}"#;
    let miss = offered_write_and_finish(|o| near_miss(text, o)).expect("a near miss");
    assert_eq!(miss.tool, "write_file");
    assert!(miss.reason.contains("do not match"), "{}", miss.reason);
    assert!(miss.reason.contains("/content"), "{}", miss.reason);
    let no_arguments = r#"{"name": "finish_task"}"#;
    let miss = offered_write_and_finish(|o| near_miss(no_arguments, o)).expect("a near miss");
    assert!(miss.reason.contains("no \"arguments\""), "{}", miss.reason);
}

#[test]
fn no_near_miss_for_valid_calls_tools_not_offered_or_plain_text() {
    for text in [
        r#"{"name": "write_file", "arguments": {"path": "a", "content": "b"}}"#,
        r#"{"name": "delete_everything", "arguments": {"path": oops}}"#,
        "I wrote the file; the name of the tool was write_file.",
        r#"{"summary": "name: write_file"}"#,
    ] {
        assert_eq!(
            offered_write_and_finish(|o| near_miss(text, o)),
            None,
            "{text}"
        );
    }
}

#[test]
fn a_megabyte_of_doubled_braces_is_neither_a_call_nor_a_near_miss() {
    let text = "{{".repeat(512 * 1024);
    assert!(calls(&text).calls.is_empty());
    assert_eq!(offered_write_and_finish(|o| near_miss(&text, o)), None);
}
