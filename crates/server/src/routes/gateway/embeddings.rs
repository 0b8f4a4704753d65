//! OpenAI's embeddings as the gateway speaks them (`POST /openai/v1/embeddings`): the
//! request RAG applications and `client.embeddings.create` send, and the `list` of
//! `embedding` objects they get back.
//!
//! `input` is a string or a list of strings; token arrays are refused (the gateway
//! screens text, and cannot screen tokens). `encoding_format` is `float` or `base64`
//! (little-endian `f32`s, what OpenAI's Python SDK asks for by default). Unknown fields
//! (`user`) are ignored.

use agentplane_core::{ChatMessage, ChatRequest};
use agentplane_engine::gateway::EmbeddingReply;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::ApiError;

/// Most inputs one request may carry (OpenAI's own limit).
const MAX_INPUTS: usize = 2048;

/// `POST /openai/v1/embeddings`.
#[derive(Debug, Deserialize)]
pub(crate) struct EmbeddingsRequest {
    model: String,
    input: Value,
    #[serde(default)]
    encoding_format: Option<String>,
    #[serde(default)]
    dimensions: Option<u32>,
}

/// A parsed request: the inputs as the messages of an admitted call.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub request: ChatRequest,
    pub dimensions: Option<u32>,
    pub base64: bool,
}

impl EmbeddingsRequest {
    pub(crate) fn parse(self) -> Result<Parsed, ApiError> {
        let inputs: Vec<String> = match self.input {
            Value::String(text) => vec![text],
            Value::Array(items) => items
                .into_iter()
                .enumerate()
                .map(|(i, item)| match item {
                    Value::String(text) => Ok(text),
                    _ => Err(ApiError::invalid(format!(
                        "input[{i}] must be a string; token arrays are not accepted, send text"
                    ))),
                })
                .collect::<Result<_, _>>()?,
            _ => {
                return Err(ApiError::invalid(
                    "input must be a string or a list of strings",
                ));
            }
        };
        if inputs.is_empty() || inputs.len() > MAX_INPUTS {
            return Err(ApiError::invalid(format!(
                "input must hold 1 to {MAX_INPUTS} strings"
            )));
        }
        if let Some(i) = inputs.iter().position(String::is_empty) {
            return Err(ApiError::invalid(format!("input[{i}] must not be empty")));
        }
        let base64 = match self.encoding_format.as_deref() {
            None | Some("float") => false,
            Some("base64") => true,
            Some(other) => {
                return Err(ApiError::invalid(format!(
                    "encoding_format must be `float` or `base64`, got {other:?}"
                )));
            }
        };
        if self.dimensions == Some(0) {
            return Err(ApiError::invalid("dimensions must be at least 1"));
        }
        Ok(Parsed {
            request: ChatRequest {
                model: self.model,
                messages: inputs.into_iter().map(ChatMessage::user).collect(),
                tools: Vec::new(),
                temperature: None,
                max_tokens: None,
                tool_choice: None,
                response_schema: None,
            },
            dimensions: self.dimensions,
            base64,
        })
    }
}

/// The `list` document of a finished call.
pub(crate) fn list(reply: &EmbeddingReply, base64: bool) -> Value {
    let data: Vec<Value> = reply
        .embeddings
        .vectors
        .iter()
        .enumerate()
        .map(|(index, vector)| {
            let embedding = if base64 {
                let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
                json!(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(vector)
            };
            json!({"object": "embedding", "index": index, "embedding": embedding})
        })
        .collect();
    let tokens = reply.embeddings.input_tokens.unwrap_or(0);
    json!({
        "object": "list",
        "data": data,
        "model": reply.embeddings.model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentplane_engine::ports::Embeddings;

    fn parse(body: Value) -> Result<Parsed, String> {
        let request: EmbeddingsRequest = serde_json::from_value(body).map_err(|e| e.to_string())?;
        request.parse().map_err(|e| e.message().to_owned())
    }

    #[test]
    fn inputs_become_messages_and_hostile_shapes_are_refused() {
        let parsed = parse(json!({"model": "e", "input": ["a", "b"], "encoding_format": "base64"}))
            .expect("valid");
        assert_eq!(parsed.request.messages.len(), 2);
        assert!(parsed.base64);
        for (body, needle) in [
            (json!({"model": "e", "input": [1, 2]}), "token arrays"),
            (json!({"model": "e", "input": []}), "1 to 2048"),
            (json!({"model": "e", "input": [""]}), "empty"),
            (json!({"model": "e", "input": {"a": 1}}), "string or a list"),
            (
                json!({"model": "e", "input": "a", "encoding_format": "hex"}),
                "encoding_format",
            ),
            (
                json!({"model": "e", "input": "a", "dimensions": 0}),
                "dimensions",
            ),
            (json!({"model": "e"}), "input"),
        ] {
            let error = parse(body.clone()).expect_err(&body.to_string());
            assert!(error.contains(needle), "{body}: {error}");
        }
    }

    #[test]
    fn base64_is_little_endian_f32s() {
        let reply = EmbeddingReply {
            embeddings: Embeddings {
                vectors: vec![vec![1.0, -2.5]],
                model: "e".into(),
                input_tokens: Some(3),
            },
        };
        let encoded = list(&reply, true);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded["data"][0]["embedding"].as_str().expect("text"))
            .expect("base64");
        assert_eq!(
            bytes,
            [1.0f32.to_le_bytes(), (-2.5f32).to_le_bytes()].concat()
        );
        assert_eq!(
            list(&reply, false)["data"][0]["embedding"],
            json!([1.0, -2.5])
        );
        assert_eq!(encoded["usage"]["prompt_tokens"], 3);
    }
}
