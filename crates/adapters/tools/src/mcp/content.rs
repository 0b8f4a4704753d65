//! A tool result as text for the model: text items joined, images and audio as a short
//! note, resources as their text or URI, structured content as JSON when there is no
//! text; cut at the call's output cap.
//!
//! Nothing here talks to the server; binary payloads are described, never decoded.

use agentplane_engine::ports::ToolOutput;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// The result's content as text, at most `cap` bytes (`truncated` set when cut).
pub(crate) fn to_output(result: &CallToolResult, cap: usize) -> ToolOutput {
    let mut parts: Vec<String> = Vec::with_capacity(result.content.len());
    let mut has_text = false;
    for block in &result.content {
        match block {
            ContentBlock::Text(text) => {
                has_text = true;
                parts.push(text.text.clone());
            }
            ContentBlock::Image(image) => parts.push(format!(
                "[image {}, {} bytes]",
                image.mime_type,
                base64_len(&image.data)
            )),
            ContentBlock::Audio(audio) => parts.push(format!(
                "[audio {}, {} bytes]",
                audio.mime_type,
                base64_len(&audio.data)
            )),
            ContentBlock::Resource(embedded) => match &embedded.resource {
                ResourceContents::TextResourceContents { text, .. } => {
                    has_text = true;
                    parts.push(text.clone());
                }
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => parts.push(format!(
                    "[resource {uri}, {}, {} bytes]",
                    mime_type.as_deref().unwrap_or("application/octet-stream"),
                    base64_len(blob)
                )),
                _ => parts.push("[resource]".to_owned()),
            },
            ContentBlock::ResourceLink(link) => parts.push(format!("[resource {}]", link.uri)),
            _ => parts.push("[content of an unknown kind]".to_owned()),
        }
    }
    if !has_text && let Some(structured) = &result.structured_content {
        parts.push(structured.to_string());
    }
    cap_text(parts.join("\n"), cap)
}

/// All text items of a result, for an error message.
pub(crate) fn error_text(result: &CallToolResult, cap: usize) -> String {
    let output = to_output(result, cap);
    if output.content.trim().is_empty() {
        "the tool reported an error without a message".to_owned()
    } else {
        output.content
    }
}

/// Cuts `text` to `cap` bytes on a character boundary.
pub(crate) fn cap_text(mut text: String, cap: usize) -> ToolOutput {
    if text.len() <= cap {
        return ToolOutput::text(text);
    }
    let end = crate::text::char_boundary(text.as_bytes(), cap);
    text.truncate(end);
    ToolOutput {
        content: text,
        truncated: true,
        security: Vec::new(),
        egress: Vec::new(),
    }
}

/// Bytes encoded by a base64 string, without decoding it.
fn base64_len(data: &str) -> usize {
    let data = data.trim_end();
    let padding = data.bytes().rev().take_while(|&b| b == b'=').count().min(2);
    (data.len() / 4 * 3 + (data.len() % 4).saturating_sub(1)).saturating_sub(padding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(value: serde_json::Value) -> CallToolResult {
        serde_json::from_value(value).expect("a result")
    }

    #[test]
    fn every_kind_of_content_becomes_text() {
        let r = result(json!({"content": [
            {"type": "text", "text": "one"},
            {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
            {"type": "audio", "data": "aGk=", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "file:///a", "text": "inside"}},
            {"type": "resource", "resource": {"uri": "file:///b", "blob": "AAAA", "mimeType": "x/y"}},
            {"type": "resource_link", "uri": "file:///c", "name": "c"}
        ], "structuredContent": {"ignored": true}}));
        let out = to_output(&r, 10_000);
        assert_eq!(
            out.content,
            "one\n[image image/png, 5 bytes]\n[audio audio/wav, 2 bytes]\ninside\n\
             [resource file:///b, x/y, 3 bytes]\n[resource file:///c]"
        );
        assert!(!out.truncated);
    }

    #[test]
    fn structured_content_stands_in_for_missing_text_and_output_is_capped() {
        let r = result(json!({"content": [], "structuredContent": {"sum": 3}}));
        assert_eq!(to_output(&r, 100).content, r#"{"sum":3}"#);
        let r = result(json!({"content": [{"type": "text", "text": "é".repeat(10)}]}));
        let out = to_output(&r, 5);
        assert_eq!(out.content, "éé");
        assert!(out.truncated);
        assert_eq!(base64_len(""), 0);
        assert_eq!(base64_len("YQ=="), 1);
        assert_eq!(base64_len("YWI="), 2);
        assert_eq!(base64_len("YWJj"), 3);
    }
}
