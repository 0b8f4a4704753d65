//! What a model server says a model can do (ADR 0032): llama.cpp's `GET /props`
//! (`chat_template_caps.supports_tool_calls`; its server constrains answers to a JSON
//! schema), else Ollama's `POST /api/show` (`capabilities` listing `tools`; it takes a
//! JSON schema as `format`). Both live beside the OpenAI API, at the base URL without
//! `/v1`. Any failure is "unknown", never an error: most servers have neither route.

use std::time::Duration;

use agentplane_engine::ports::Capabilities;
use serde_json::{Value, json};

use super::{MAX_ERROR_BODY_BYTES, OpenAiCompatible, read_body};

/// How long one probe may take: discovery must not wait on a slow server.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// The capabilities of `model` on this server, as far as it says.
pub(super) async fn probe(model: &OpenAiCompatible, name: &str) -> Capabilities {
    let Some(root) = model.config.base_url.strip_suffix("/v1") else {
        return Capabilities::default();
    };
    if let Some(props) = fetch(model, model.client.get(format!("{root}/props"))).await
        && let Some(capabilities) = llama_cpp(&props)
    {
        return capabilities;
    }
    let show = model
        .client
        .post(format!("{root}/api/show"))
        .json(&json!({ "model": name }));
    if let Some(shown) = fetch(model, show).await
        && let Some(capabilities) = ollama(&shown)
    {
        return capabilities;
    }
    Capabilities::default()
}

async fn fetch(model: &OpenAiCompatible, request: reqwest::RequestBuilder) -> Option<Value> {
    let response = tokio::time::timeout(PROBE_TIMEOUT, model.authorized(request).send())
        .await
        .ok()?
        .ok()?;
    if !response.status().is_success() {
        return None;
    }
    let body = read_body(response, MAX_ERROR_BODY_BYTES * 64, PROBE_TIMEOUT)
        .await
        .ok()?;
    serde_json::from_slice(&body).ok()
}

/// llama.cpp's `/props`: the chat template's caps.
pub(crate) fn llama_cpp(props: &Value) -> Option<Capabilities> {
    let caps = props.get("chat_template_caps")?;
    Some(Capabilities {
        native_tools: caps["supports_tool_calls"].as_bool(),
        json_schema: Some(true),
        source: "llama.cpp /props".to_owned(),
    })
}

/// Ollama's `/api/show`: its `capabilities` list (`completion`, `tools`, …).
pub(crate) fn ollama(shown: &Value) -> Option<Capabilities> {
    let listed = shown.get("capabilities")?.as_array()?;
    Some(Capabilities {
        native_tools: Some(listed.iter().any(|c| c == "tools")),
        json_schema: Some(true),
        source: "ollama /api/show".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_cpp_props_are_read() {
        let props =
            json!({"chat_template_caps": {"supports_tool_calls": false, "supports_tools": false}});
        assert_eq!(llama_cpp(&props).map(|c| c.native_tools), Some(Some(false)));
        assert_eq!(llama_cpp(&json!({"model_path": "x"})), None);
        let unsure = llama_cpp(&json!({"chat_template_caps": {}})).expect("caps");
        assert_eq!(unsure.native_tools, None);
    }

    #[test]
    fn ollama_capabilities_are_read() {
        let shown = json!({"capabilities": ["completion", "tools"]});
        assert_eq!(ollama(&shown).map(|c| c.native_tools), Some(Some(true)));
        let plain = json!({"capabilities": ["completion"]});
        assert_eq!(ollama(&plain).map(|c| c.native_tools), Some(Some(false)));
        assert_eq!(ollama(&json!({"capabilities": "tools"})), None);
    }
}
