//! The wire types against JSON the official SDKs wrote: `a2a-sdk` 1.3.0 (protocol 1.0,
//! `google.protobuf.json_format.MessageToDict` and the server's `agent_card_to_dict`)
//! and `a2a-sdk` 0.3.26 (pydantic `model_dump(by_alias=True, exclude_none=True)`). Each
//! reads and writes back the same JSON.

use agentplane_a2a::v0_3;
use agentplane_a2a::wire::{self, codes};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn round_trip<T: Serialize + DeserializeOwned>(fixture: &str) -> T {
    let original: Value = serde_json::from_str(fixture).expect("fixture is JSON");
    let parsed: T = serde_json::from_value(original.clone()).expect("the SDK's JSON reads");
    let written = serde_json::to_value(&parsed).expect("writes");
    assert_eq!(written, original, "written back as the SDK wrote it");
    parsed
}

const SEND_1_0: &str = r#"{"message": {"messageId": "m1", "contextId": "c1", "role": "ROLE_USER", "parts": [{"text": "hi"}, {"data": "x"}, {"url": "http://f", "filename": "f.txt", "mediaType": "text/plain"}, {"raw": "YWJj", "mediaType": "application/octet-stream"}]}, "configuration": {"acceptedOutputModes": ["text/plain"], "taskPushNotificationConfig": {"url": "http://hook", "token": "t", "authentication": {"scheme": "Bearer", "credentials": "x"}}, "historyLength": 3, "returnImmediately": true}}"#;

const TASK_1_0: &str = r#"{"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_INPUT_REQUIRED", "message": {"messageId": "m2", "role": "ROLE_AGENT", "parts": [{"text": "awaiting"}]}, "timestamp": "2023-11-14T22:13:20Z"}, "artifacts": [{"artifactId": "a1", "name": "result", "parts": [{"text": "done"}]}], "history": [{"messageId": "m1", "contextId": "c1", "role": "ROLE_USER", "parts": [{"text": "hi"}, {"data": "x"}, {"url": "http://f", "filename": "f.txt", "mediaType": "text/plain"}, {"raw": "YWJj", "mediaType": "application/octet-stream"}]}]}"#;

const CARD_1_0: &str = r#"{"name": "reviewer", "description": "Reviews code", "supportedInterfaces": [{"url": "http://127.0.0.1:8080/a2a/reviewer", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}, {"url": "http://127.0.0.1:8080/a2a/reviewer", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}], "version": "v1", "capabilities": {"streaming": true, "pushNotifications": true}, "securitySchemes": {"oidc": {"openIdConnectSecurityScheme": {"openIdConnectUrl": "https://idp/.well-known/openid-configuration"}, "openIdConnectUrl": "https://idp/.well-known/openid-configuration", "type": "openIdConnect"}, "apiKey": {"httpAuthSecurityScheme": {"description": "agentplane API key", "scheme": "bearer"}, "description": "agentplane API key", "scheme": "bearer", "type": "http"}}, "securityRequirements": [{"schemes": {"apiKey": {}}}, {"schemes": {"oidc": {}}}], "defaultInputModes": ["text/plain", "application/json"], "defaultOutputModes": ["text/plain", "application/json"], "skills": [{"id": "reviewer", "name": "reviewer", "description": "Reviews code", "tags": ["agentplane"], "outputModes": ["application/json"]}], "preferredTransport": "JSONRPC", "protocolVersion": "0.3", "security": [{"apiKey": []}, {"oidc": []}], "url": "http://127.0.0.1:8080/a2a/reviewer"}"#;

#[test]
fn send_message_request_of_1_0_round_trips() {
    let request: wire::SendMessageRequest = round_trip(SEND_1_0);
    assert_eq!(request.message.role, wire::Role::User);
    assert_eq!(
        request.message.parts[0].content,
        wire::PartContent::Text("hi".into())
    );
    assert_eq!(
        request.message.parts[1].content,
        wire::PartContent::Data(json!("x"))
    );
    let configuration = request.configuration.expect("configuration");
    assert!(configuration.return_immediately);
    assert_eq!(
        configuration
            .task_push_notification_config
            .expect("push")
            .url,
        "http://hook"
    );
}

#[test]
fn task_and_stream_items_of_1_0_round_trip() {
    let task: wire::Task = round_trip(TASK_1_0);
    assert_eq!(task.status.state, wire::TaskState::InputRequired);
    assert!(task.status.state.is_interrupted());
    let status: wire::StreamResponse = round_trip(
        r#"{"statusUpdate": {"taskId": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_COMPLETED"}}}"#,
    );
    assert!(
        matches!(status, wire::StreamResponse::StatusUpdate(ref u) if u.status.state.is_terminal())
    );
    let artifact: wire::StreamResponse = round_trip(
        r#"{"artifactUpdate": {"taskId": "t1", "contextId": "c1", "artifact": {"artifactId": "a1", "parts": [{"text": "x"}]}, "append": true}}"#,
    );
    assert!(
        matches!(artifact, wire::StreamResponse::ArtifactUpdate(ref u) if u.append && !u.last_chunk)
    );
    let _: wire::GetTaskRequest = round_trip(r#"{"id": "t1", "historyLength": 2}"#);
    let _: wire::ListTasksRequest = round_trip(r#"{"contextId": "c1", "pageSize": 5}"#);
    let _: wire::TaskPushNotificationConfig =
        round_trip(r#"{"id": "p1", "taskId": "t1", "url": "http://hook", "token": "tok"}"#);
    let list: wire::ListTasksResponse = serde_json::from_str(&format!(
        r#"{{"tasks": [{TASK_1_0}], "pageSize": 5, "totalSize": 1}}"#
    ))
    .expect("list");
    assert_eq!(list.tasks.len(), 1);
}

#[test]
fn required_fields_are_required_and_unknown_ones_tolerated() {
    assert!(
        serde_json::from_value::<wire::Message>(json!({"role": "ROLE_USER", "parts": []})).is_err()
    );
    assert!(serde_json::from_value::<wire::Task>(json!({"id": "t"})).is_err());
    let message: wire::Message = serde_json::from_value(json!({
        "messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x", "future": 1}], "future": true
    }))
    .expect("unknown fields are tolerated");
    assert_eq!(message.parts.len(), 1);
    assert!(serde_json::from_value::<wire::TaskState>(json!("TASK_STATE_DONE")).is_err());
}

#[test]
fn the_sdk_servers_dual_card_reads_and_is_what_we_publish() {
    let card: wire::AgentCard = serde_json::from_str(CARD_1_0).expect("the SDK's card reads");
    assert_eq!(card.supported_interfaces.len(), 2);
    assert_eq!(
        card.interface(wire::BINDING_JSONRPC, "1.0.3")
            .expect("1.0")
            .protocol_version,
        "1.0"
    );
    assert_eq!(card.capabilities.streaming, Some(true));
    assert!(
        card.security_schemes["apiKey"]
            .http_auth_security_scheme
            .is_some()
    );
    assert!(
        card.security_schemes["oidc"]
            .open_id_connect_security_scheme
            .is_some()
    );
    // What we serve for the same card is exactly what the SDK's server serves.
    let expected: Value = serde_json::from_str(CARD_1_0).expect("json");
    assert_eq!(v0_3::dual_card(&card), expected);
    // A 0.3 client reads the same document as a 0.3 card.
    let legacy: v0_3::AgentCard = serde_json::from_str(CARD_1_0).expect("0.3 reads it");
    assert_eq!(legacy.url, "http://127.0.0.1:8080/a2a/reviewer");
    assert_eq!(legacy.protocol_version.as_deref(), Some("0.3"));
    // And the 0.3 card converts back to 1.0 interfaces.
    let back = v0_3::card_to_v1(&legacy);
    assert_eq!(back.supported_interfaces[0].protocol_version, "0.3");
    assert!(
        back.security_schemes["apiKey"]
            .http_auth_security_scheme
            .is_some()
    );
}

#[test]
fn errors_carry_the_sdks_codes_and_details() {
    let sdk: Value = serde_json::from_str(
        r#"{"error": {"code": -32001, "message": "Task not found", "data": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND", "domain": "a2a-protocol.org", "metadata": {}}]}, "id": "1", "jsonrpc": "2.0"}"#,
    )
    .expect("json");
    let ours = wire::JsonRpcResponse::err(
        json!("1"),
        wire::JsonRpcError::new(codes::TASK_NOT_FOUND, "Task not found"),
    );
    assert_eq!(serde_json::to_value(&ours).expect("json"), sdk);
    let legacy = wire::JsonRpcResponse::err(
        json!("1"),
        wire::JsonRpcError::plain(codes::TASK_NOT_FOUND, "Task not found"),
    );
    assert_eq!(
        serde_json::to_value(&legacy).expect("json"),
        json!({"error":{"code":-32001,"message":"Task not found"},"id":"1","jsonrpc":"2.0"})
    );
}

// 0.3 fixtures (a2a-sdk 0.3.26).

#[test]
fn v0_3_send_params_round_trip_and_convert() {
    let request: wire::JsonRpcRequest = serde_json::from_str(r#"{"id":"1","jsonrpc":"2.0","method":"message/send","params":{"configuration":{"acceptedOutputModes":["text/plain"],"blocking":false,"pushNotificationConfig":{"token":"tok","url":"http://hook"}},"message":{"contextId":"c1","kind":"message","messageId":"m1","parts":[{"kind":"text","text":"hi"},{"data":{"k":1},"kind":"data"},{"file":{"mimeType":"text/plain","name":"f.txt","uri":"http://f"},"kind":"file"}],"role":"user"}}}"#).expect("request");
    assert_eq!(
        v0_3::method_to_v1(&request.method),
        Some(wire::methods::SEND_MESSAGE)
    );
    let params = request.params.expect("params");
    let parsed: v0_3::MessageSendParams = round_trip(&params.to_string());
    let v1 = v0_3::send_params_to_v1(&parsed);
    assert!(v1.configuration.as_ref().expect("conf").return_immediately);
    assert_eq!(
        v1.message.parts[1].content,
        wire::PartContent::Data(json!({"k": 1}))
    );
    assert_eq!(
        v1.message.parts[2].content,
        wire::PartContent::Url("http://f".into())
    );
    assert_eq!(
        serde_json::to_value(v0_3::send_params_from_v1(&v1)).expect("json")["message"],
        params["message"]
    );
}

#[test]
fn v0_3_tasks_and_events_round_trip_and_convert() {
    let task: v0_3::Task = round_trip(
        r#"{"artifacts":[{"artifactId":"a1","parts":[{"data":{"ok":true},"kind":"data"}]}],"contextId":"c1","id":"t1","kind":"task","status":{"message":{"kind":"message","messageId":"m2","parts":[{"kind":"text","text":"awaiting"}],"role":"agent"},"state":"input-required","timestamp":"2023-11-14T22:13:20Z"}}"#,
    );
    let v1 = v0_3::task_to_v1(&task);
    assert_eq!(v1.status.state, wire::TaskState::InputRequired);
    assert_eq!(v0_3::task_from_v1(&v1), task);
    let status: v0_3::Event = round_trip(
        r#"{"contextId":"c1","final":true,"kind":"status-update","status":{"state":"completed"},"taskId":"t1"}"#,
    );
    assert!(matches!(status, v0_3::Event::StatusUpdate(ref u) if u.is_final));
    let back = v0_3::event_from_v1(&v0_3::event_to_v1(&status));
    assert_eq!(back, status);
    let artifact: v0_3::Event = round_trip(
        r#"{"append":true,"artifact":{"artifactId":"a1","parts":[{"kind":"text","text":"x"}]},"contextId":"c1","kind":"artifact-update","lastChunk":false,"taskId":"t1"}"#,
    );
    assert_eq!(v0_3::event_from_v1(&v0_3::event_to_v1(&artifact)), artifact);
    let as_task: v0_3::Event = serde_json::from_str(
        r#"{"kind":"task","id":"t","contextId":"c","status":{"state":"working"}}"#,
    )
    .expect("task");
    assert!(matches!(as_task, v0_3::Event::Task(_)));
    let states: Vec<v0_3::TaskState> = serde_json::from_str(r#"["submitted", "working", "input-required", "completed", "canceled", "failed", "rejected", "auth-required", "unknown"]"#).expect("every 0.3 state");
    for state in states {
        assert_eq!(v0_3::state_from_v1(v0_3::state_to_v1(state)), state);
    }
}

#[test]
fn v0_3_methods_map_both_ways() {
    for (legacy, current) in [
        ("message/send", "SendMessage"),
        ("message/stream", "SendStreamingMessage"),
        ("tasks/get", "GetTask"),
        ("tasks/cancel", "CancelTask"),
        ("tasks/resubscribe", "SubscribeToTask"),
        (
            "tasks/pushNotificationConfig/set",
            "CreateTaskPushNotificationConfig",
        ),
    ] {
        assert_eq!(v0_3::method_to_v1(legacy), Some(current));
        assert_eq!(v0_3::method_from_v1(current), Some(legacy));
    }
    assert_eq!(v0_3::method_to_v1("SendMessage"), None);
    assert_eq!(v0_3::method_from_v1(wire::methods::LIST_TASKS), None);
    let _: v0_3::TaskQueryParams = round_trip(r#"{"historyLength":2,"id":"t1"}"#);
    let _: v0_3::TaskIdParams = round_trip(r#"{"id":"t1"}"#);
    let _: v0_3::TaskPushNotificationConfig = round_trip(
        r#"{"pushNotificationConfig":{"authentication":{"credentials":"c","schemes":["Bearer"]},"id":"p1","url":"http://hook"},"taskId":"t1"}"#,
    );
}
