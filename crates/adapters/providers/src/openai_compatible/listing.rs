//! What a server offers: `GET /models`, enriched from Ollama's `/api/tags` when the
//! server looks like Ollama (base URL ending in `/v1`).
//!
//! The OpenAI listing decides which models exist; Ollama's tags only add parameter
//! sizes and families, and their failure is ignored (most servers have no such route).

use std::collections::HashMap;

use agentplane_engine::ports::{ModelError, ModelInfo};
use serde_json::Value;

use super::{MAX_ERROR_BODY_BYTES, MAX_RESPONSE_BYTES, OpenAiCompatible, read_body};

/// Lists the server's models.
pub(super) async fn list_models(model: &OpenAiCompatible) -> Result<Vec<ModelInfo>, ModelError> {
    let url = format!("{}/models", model.config.base_url);
    let response = model
        .send_with_retries(|| model.authorized(model.client.get(&url)), "")
        .await?;
    let body = read_body(response, MAX_RESPONSE_BYTES, model.config.request_timeout)
        .await
        .map_err(|failure| failure.error)?;
    let mut models = parse_model_list(&body)?;
    if let Some(root) = model.config.base_url.strip_suffix("/v1") {
        let details = ollama_details(model, root).await;
        for info in &mut models {
            if let Some((size, families)) = details.get(&tag_key(&info.id)) {
                info.parameter_size = size.clone();
                info.families = families.clone();
            }
        }
    }
    Ok(models)
}

/// Reads `{"data":[{"id":…}]}`; also `{"models":[{"name":…}]}` from servers that
/// answer in Ollama's shape on this route.
pub(crate) fn parse_model_list(body: &[u8]) -> Result<Vec<ModelInfo>, ModelError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ModelError::Protocol(format!("the model list is not valid JSON ({e})")))?;
    let entries = value["data"]
        .as_array()
        .or_else(|| value["models"].as_array())
        .ok_or_else(|| ModelError::Protocol("the model list has no `data` array".to_owned()))?;
    Ok(entries
        .iter()
        .filter_map(|entry| {
            ["id", "name", "model"]
                .iter()
                .find_map(|key| entry[*key].as_str().filter(|s| !s.is_empty()))
                .or_else(|| entry.as_str())
        })
        .map(|id| ModelInfo {
            id: id.to_owned(),
            parameter_size: None,
            families: Vec::new(),
        })
        .collect())
}

/// Ollama names `llama3` and `llama3:latest` the same model.
fn tag_key(name: &str) -> String {
    name.strip_suffix(":latest").unwrap_or(name).to_owned()
}

type Details = HashMap<String, (Option<String>, Vec<String>)>;

/// Sizes and families by model name from `{root}/api/tags`; empty on any failure.
async fn ollama_details(model: &OpenAiCompatible, root: &str) -> Details {
    let request = model.authorized(model.client.get(format!("{root}/api/tags")));
    let Ok(Ok(response)) = tokio::time::timeout(model.config.request_timeout, request.send()).await
    else {
        return Details::new();
    };
    if !response.status().is_success() {
        return Details::new();
    }
    match read_body(
        response,
        MAX_ERROR_BODY_BYTES * 16,
        model.config.request_timeout,
    )
    .await
    {
        Ok(body) => parse_tags(&body),
        Err(_) => Details::new(),
    }
}

fn parse_tags(body: &[u8]) -> Details {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return Details::new();
    };
    let mut details = Details::new();
    for entry in value["models"].as_array().into_iter().flatten() {
        let Some(name) = entry["name"].as_str().or_else(|| entry["model"].as_str()) else {
            continue;
        };
        let info = &entry["details"];
        let size = info["parameter_size"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        let mut families: Vec<String> = info["families"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str().map(str::to_owned))
            .collect();
        if families.is_empty()
            && let Some(family) = info["family"].as_str().filter(|f| !f.is_empty())
        {
            families.push(family.to_owned());
        }
        details.insert(tag_key(name), (size, families));
    }
    details
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_lists_in_both_shapes() {
        let openai = parse_model_list(br#"{"object":"list","data":[{"id":"a"},{"id":""},{}]}"#)
            .expect("list");
        assert_eq!(
            openai.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
            ["a"]
        );
        let ollama = parse_model_list(br#"{"models":[{"name":"b:latest"}]}"#).expect("list");
        assert_eq!(ollama[0].id, "b:latest");
        for hostile in [&b"{"[..], b"{}", b"[]", b"{\"data\":7}"] {
            assert!(matches!(
                parse_model_list(hostile),
                Err(ModelError::Protocol(_))
            ));
        }
    }

    #[test]
    fn tags_give_sizes_and_families_and_ignore_junk() {
        let details = parse_tags(
            br#"{"models":[
                {"name":"llama3:latest","details":{"parameter_size":"8.0B","families":["llama"]}},
                {"name":"bert","details":{"family":"bert"}},
                {"details":{}}, 7]}"#,
        );
        assert_eq!(
            details["llama3"],
            (Some("8.0B".to_owned()), vec!["llama".to_owned()])
        );
        assert_eq!(details["bert"], (None, vec!["bert".to_owned()]));
        assert_eq!(details.len(), 2);
        assert!(parse_tags(b"not json").is_empty());
    }
}
