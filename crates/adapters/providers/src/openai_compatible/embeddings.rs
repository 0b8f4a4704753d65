//! `POST /embeddings`: the vectors of each input, in order, as OpenAI, vLLM, Ollama
//! and llama.cpp (with `--embeddings`) serve them.
//!
//! The answer is checked, not trusted: one vector per input, each a list of finite
//! numbers, in `index` order when the server gives indexes.

use agentplane_engine::ports::{EmbeddingRequest, Embeddings, ModelError};
use reqwest::header::CONTENT_TYPE;
use serde_json::{Value, json};

use super::{MAX_RESPONSE_BYTES, OpenAiCompatible, read_body};

/// The embeddings of `request`'s inputs.
pub(super) async fn embed(
    model: &OpenAiCompatible,
    request: &EmbeddingRequest,
) -> Result<Embeddings, ModelError> {
    let url = format!("{}/embeddings", model.config.base_url);
    let mut body = json!({"model": request.model, "input": request.inputs});
    if let Some(dimensions) = request.dimensions {
        body["dimensions"] = json!(dimensions);
    }
    let body = body.to_string();
    let response = model
        .send_with_retries(
            || {
                model.authorized(
                    model
                        .client
                        .post(&url)
                        .header(CONTENT_TYPE, "application/json")
                        .body(body.clone()),
                )
            },
            &request.model,
        )
        .await?;
    let body = read_body(response, MAX_RESPONSE_BYTES, model.config.request_timeout)
        .await
        .map_err(|failure| failure.error)?;
    parse(&body, request)
}

/// Reads `{"data": [{"index", "embedding": [...]}], "model", "usage": {"prompt_tokens"}}`.
pub(crate) fn parse(body: &[u8], request: &EmbeddingRequest) -> Result<Embeddings, ModelError> {
    let bad = |what: &str| ModelError::Protocol(format!("the embeddings answer {what}"));
    let value: Value = serde_json::from_slice(body).map_err(|_| bad("is not valid JSON"))?;
    let data = value["data"]
        .as_array()
        .ok_or_else(|| bad("has no `data` array"))?;
    if data.len() != request.inputs.len() {
        return Err(bad(&format!(
            "has {} vectors for {} inputs",
            data.len(),
            request.inputs.len()
        )));
    }
    let mut vectors: Vec<Option<Vec<f32>>> = vec![None; data.len()];
    for (position, entry) in data.iter().enumerate() {
        let index = match entry.get("index") {
            None => position,
            Some(index) => index
                .as_u64()
                .and_then(|i| usize::try_from(i).ok())
                .filter(|i| *i < data.len())
                .ok_or_else(|| bad("has an index out of range"))?,
        };
        let vector = entry["embedding"]
            .as_array()
            .ok_or_else(|| bad("has an entry without an `embedding` list"))?
            .iter()
            .map(|x| x.as_f64().filter(|x| x.is_finite()).map(|x| x as f32))
            .collect::<Option<Vec<f32>>>()
            .ok_or_else(|| bad("has a vector that is not all numbers"))?;
        if vectors[index].replace(vector).is_some() {
            return Err(bad("names one index twice"));
        }
    }
    Ok(Embeddings {
        vectors: vectors.into_iter().flatten().collect(),
        model: value["model"]
            .as_str()
            .filter(|m| !m.is_empty())
            .unwrap_or(&request.model)
            .to_owned(),
        input_tokens: value["usage"]["prompt_tokens"].as_u64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(n: usize) -> EmbeddingRequest {
        EmbeddingRequest {
            model: "e".into(),
            inputs: vec!["x".into(); n],
            dimensions: None,
        }
    }

    #[test]
    fn vectors_come_back_in_index_order_with_usage() {
        let body =
            br#"{"data": [{"index": 1, "embedding": [2.0]}, {"index": 0, "embedding": [1.0, 0.5]}],
                        "model": "nomic", "usage": {"prompt_tokens": 4, "total_tokens": 4}}"#;
        let got = parse(body, &request(2)).expect("valid");
        assert_eq!(got.vectors, vec![vec![1.0, 0.5], vec![2.0]]);
        assert_eq!(got.model, "nomic");
        assert_eq!(got.input_tokens, Some(4));
    }

    #[test]
    fn an_answer_that_lies_is_a_protocol_error() {
        for body in [
            &b"nope"[..],
            br#"{"data": {}}"#,
            br#"{"data": [{"embedding": [1]}]}"#,
            br#"{"data": [{"index": 0, "embedding": [1]}, {"index": 0, "embedding": [2]}]}"#,
            br#"{"data": [{"index": 7, "embedding": [1]}, {"index": 0, "embedding": [2]}]}"#,
            br#"{"data": [{"embedding": ["a"]}, {"embedding": [2]}]}"#,
            br#"{"data": [{"embedding": null}, {"embedding": [2]}]}"#,
        ] {
            let error = parse(body, &request(2)).expect_err(&String::from_utf8_lossy(body));
            assert!(matches!(error, ModelError::Protocol(_)), "{error}");
        }
    }
}
