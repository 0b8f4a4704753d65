//! What an agent reports, in our words: `session/update`s become `ExternalUpdate`s,
//! `session/request_permission` a `PermissionAsk`, and the agent's tool kinds our tool
//! names, so policies written for our own tools (`tool_access`, `approval_required`,
//! `rate_limit`) name what an external agent does. The agent's own title is kept
//! beside the name, for people.
//!
//! What must not live here: policy decisions (the engine's driver makes them).

use agent_client_protocol::v1::schema::{
    ContentBlock, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    SelectedPermissionOutcome, SessionUpdate, ToolCallContent, ToolCallStatus, ToolKind,
};
use agentplane_engine::ports::external::{ExternalToolStatus, ExternalUpdate, PermissionAsk};
use serde_json::{Value, json};

/// Our tool name for an ACP tool kind. Kinds that have a tool of ours take its name;
/// the others get a name of their own (`delete_file`, `move_file`), so a policy can
/// still name them. `think` and `other` (and no kind at all) are `agent_tool`: the
/// agent did not say what the call does.
pub(crate) fn tool_for_kind(kind: Option<ToolKind>) -> &'static str {
    match kind {
        Some(ToolKind::Read) => "read_file",
        Some(ToolKind::Edit) => "write_file",
        Some(ToolKind::Delete) => "delete_file",
        Some(ToolKind::Move) => "move_file",
        Some(ToolKind::Search) => "search_text",
        Some(ToolKind::Execute) => "run_command",
        Some(ToolKind::Fetch) => "fetch_url",
        Some(ToolKind::Think) => "think",
        _ => "agent_tool",
    }
}

/// The agent's title, when it gave a non-empty one (else its tool's `name`).
fn title_of(title: Option<&str>, name: Option<&str>) -> Option<String> {
    [title, name]
        .into_iter()
        .flatten()
        .map(str::trim)
        .find(|t| !t.is_empty())
        .map(str::to_owned)
}

/// Our view of a `session/update`; kinds we do not record map to nothing (usage is
/// read by [`crate::usage`]).
pub(crate) fn map_update(update: SessionUpdate) -> Vec<ExternalUpdate> {
    match update {
        SessionUpdate::AgentMessageChunk(chunk) => match chunk.content {
            ContentBlock::Text(text) => vec![ExternalUpdate::Text(text.text)],
            _ => Vec::new(),
        },
        SessionUpdate::ToolCall(call) => {
            let id = call.tool_call_id.0.to_string();
            let mut out = vec![ExternalUpdate::ToolCall {
                call_id: id.clone(),
                tool: tool_for_kind(Some(call.kind)).to_owned(),
                title: title_of(Some(&call.title), call.name.as_deref()),
                arguments: call.raw_input.clone().unwrap_or(Value::Null),
            }];
            if let Some(status) = tool_status(call.status) {
                out.push(ExternalUpdate::ToolCallUpdate {
                    call_id: id,
                    status: Some(status),
                    output: content_text(&call.content, call.raw_output.as_ref()),
                    arguments: None,
                });
            }
            out
        }
        SessionUpdate::ToolCallUpdate(update) => {
            let fields = update.fields;
            vec![ExternalUpdate::ToolCallUpdate {
                call_id: update.tool_call_id.0.to_string(),
                status: fields.status.and_then(tool_status),
                output: content_text(
                    fields.content.as_deref().unwrap_or_default(),
                    fields.raw_output.as_ref(),
                ),
                arguments: fields.raw_input,
            }]
        }
        SessionUpdate::Plan(plan) => {
            vec![ExternalUpdate::Plan(
                serde_json::to_value(&plan.entries).unwrap_or(Value::Null),
            )]
        }
        _ => Vec::new(),
    }
}

fn tool_status(status: ToolCallStatus) -> Option<ExternalToolStatus> {
    match status {
        ToolCallStatus::Completed => Some(ExternalToolStatus::Completed),
        ToolCallStatus::Failed => Some(ExternalToolStatus::Failed),
        ToolCallStatus::InProgress => Some(ExternalToolStatus::Running),
        _ => None,
    }
}

fn content_text(content: &[ToolCallContent], raw: Option<&Value>) -> Option<String> {
    let mut text = String::new();
    for item in content {
        match item {
            ToolCallContent::Content(c) => {
                if let ContentBlock::Text(t) = &c.content {
                    text.push_str(&t.text);
                }
            }
            ToolCallContent::Diff(diff) => {
                text.push_str(&format!("[diff of {}]\n", diff.path.display()));
            }
            _ => {}
        }
    }
    if text.is_empty()
        && let Some(raw) = raw
    {
        text = match raw {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
    }
    (!text.is_empty()).then_some(text)
}

/// The permission the agent asks for, under our tool name for the call's kind.
pub(crate) fn permission_ask(request: &RequestPermissionRequest) -> PermissionAsk {
    let fields = &request.tool_call.fields;
    let tool = tool_for_kind(fields.kind).to_owned();
    let title = title_of(fields.title.as_deref(), fields.name.as_deref());
    let options: Vec<Value> = request
        .options
        .iter()
        .map(|o| json!({"id": o.option_id.0.as_ref(), "name": o.name, "kind": format!("{:?}", o.kind)}))
        .collect();
    PermissionAsk {
        call_id: request.tool_call.tool_call_id.0.to_string(),
        tool,
        arguments: json!({
            "input": fields.raw_input.clone().unwrap_or(Value::Null),
            "agent_title": title,
            "agent_options": options,
        }),
        title,
        input: fields.raw_input.clone(),
    }
}

/// The option answering a decision: the narrowest allow for an approval, the
/// narrowest reject otherwise; without such an option, `cancelled` (never an allow).
pub(crate) fn outcome_for(
    request: &RequestPermissionRequest,
    approved: bool,
) -> RequestPermissionOutcome {
    let wanted: &[PermissionOptionKind] = if approved {
        &[
            PermissionOptionKind::AllowOnce,
            PermissionOptionKind::AllowAlways,
        ]
    } else {
        &[
            PermissionOptionKind::RejectOnce,
            PermissionOptionKind::RejectAlways,
        ]
    };
    wanted
        .iter()
        .find_map(|kind| request.options.iter().find(|o| o.kind == *kind))
        .map(|o| {
            RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(o.option_id.clone()))
        })
        .unwrap_or(RequestPermissionOutcome::Cancelled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_with_a_tool_of_ours_takes_its_name() {
        assert_eq!(tool_for_kind(Some(ToolKind::Read)), "read_file");
        assert_eq!(tool_for_kind(Some(ToolKind::Edit)), "write_file");
        assert_eq!(tool_for_kind(Some(ToolKind::Execute)), "run_command");
        assert_eq!(tool_for_kind(Some(ToolKind::Fetch)), "fetch_url");
        assert_eq!(tool_for_kind(Some(ToolKind::Search)), "search_text");
        assert_eq!(tool_for_kind(Some(ToolKind::Other)), "agent_tool");
        assert_eq!(tool_for_kind(None), "agent_tool");
    }

    #[test]
    fn a_title_is_kept_and_an_empty_one_falls_back_to_the_name() {
        assert_eq!(
            title_of(Some("edit a.rs"), None).as_deref(),
            Some("edit a.rs")
        );
        assert_eq!(title_of(Some(" "), Some("bash")).as_deref(), Some("bash"));
        assert_eq!(title_of(None, None), None);
    }
}
