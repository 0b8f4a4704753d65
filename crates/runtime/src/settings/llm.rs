//! `[llm]`: the model server when no `[providers]` are configured, and the checks every
//! model server URL gets (`check_base_url`, also for providers and MCP servers).
//!
//! ```toml
//! [llm]
//! base_url = "http://127.0.0.1:11434/v1"  # or AGENTPLANE_LLM_BASE_URL
//! model = "qwen2.5:7b"                    # or AGENTPLANE_LLM_MODEL
//! api_key = "…"                           # or AGENTPLANE_LLM_API_KEY
//! ensure_available = true                 # default: on for a loopback URL (ADR 0033)
//! ```

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use super::BadValue;
use super::overrides::Overrides;

/// Defaults: Ollama's OpenAI-compatible endpoint and a tool-capable model it offers.
pub const DEFAULT_LLM_BASE_URL: &str = "http://127.0.0.1:11434/v1";
/// The default model, one Ollama offers that calls tools.
pub const DEFAULT_LLM_MODEL: &str = "qwen2.5:7b";

/// `[llm]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileLlm {
    base_url: Option<String>,
    model: Option<String>,
    api_key: Option<String>,
    stream: Option<bool>,
    request_timeout_secs: Option<u64>,
    connect_timeout_secs: Option<u64>,
    max_retries: Option<u32>,
    ensure_available: Option<bool>,
    start_command: Option<Vec<String>>,
    start_timeout_secs: Option<u64>,
}

impl FileLlm {
    /// The keys naming a server that the file sets (`base_url`, `api_key`): unused, so
    /// refused, when `[providers]` are configured.
    pub fn server_keys(&self) -> Vec<&'static str> {
        [
            ("base_url", self.base_url.is_some()),
            ("api_key", self.api_key.is_some()),
        ]
        .into_iter()
        .filter_map(|(key, set)| set.then_some(key))
        .collect()
    }
}

/// The model server.
#[derive(Clone, PartialEq)]
pub struct LlmConfig {
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub stream: bool,
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    pub max_retries: u32,
    /// Start the model server when it does not answer (ADR 0033); default on for a
    /// loopback URL.
    pub ensure_available: bool,
    /// What to start: program and arguments (empty: `ollama serve` for Ollama's URL
    /// when `ollama` is on `PATH`, else nothing).
    pub start_command: Vec<String>,
    /// How long a started server has to answer.
    pub start_timeout: Duration,
}

impl fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("stream", &self.stream)
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("max_retries", &self.max_retries)
            .field("ensure_available", &self.ensure_available)
            .field("start_command", &self.start_command)
            .field("start_timeout", &self.start_timeout)
            .finish()
    }
}

/// Checks `[llm]` under the `AGENTPLANE_LLM_*` overrides; a variable wins over the
/// file's key (whose value is then not checked).
pub fn resolve(file: FileLlm, env: &Overrides) -> Result<LlmConfig, BadValue> {
    let base_url = match &env.llm_base_url {
        Some(url) => {
            check_base_url(url).map_err(|m| BadValue::Variable("AGENTPLANE_LLM_BASE_URL", m))?
        }
        None => match file.base_url {
            Some(url) => check_base_url(&url).map_err(|m| BadValue::Key("base_url".into(), m))?,
            None => DEFAULT_LLM_BASE_URL.to_owned(),
        },
    };
    let model = env
        .llm_model
        .clone()
        .or(file.model)
        .unwrap_or_else(|| DEFAULT_LLM_MODEL.to_owned());
    let api_key = env
        .llm_api_key
        .clone()
        .or(file.api_key.filter(|k| !k.is_empty()));
    let request_timeout_secs = file.request_timeout_secs.unwrap_or(300);
    if request_timeout_secs == 0 {
        return Err(("request_timeout_secs", "must be at least 1".into()).into());
    }
    let connect_timeout_secs = file.connect_timeout_secs.unwrap_or(5);
    if connect_timeout_secs == 0 {
        return Err(("connect_timeout_secs", "must be at least 1".into()).into());
    }
    let max_retries = file.max_retries.unwrap_or(3);
    if max_retries > 10 {
        return Err(("max_retries", "must be at most 10".into()).into());
    }
    let start_command = file.start_command.unwrap_or_default();
    if start_command.first().is_some_and(|p| p.trim().is_empty()) {
        return Err((
            "start_command",
            "the program (first item) must not be empty".into(),
        )
            .into());
    }
    let start_timeout_secs = file.start_timeout_secs.unwrap_or(300);
    if start_timeout_secs == 0 {
        return Err(("start_timeout_secs", "must be at least 1".into()).into());
    }
    let ensure_available = file
        .ensure_available
        .unwrap_or_else(|| is_loopback_url(&base_url));
    Ok(LlmConfig {
        base_url,
        model,
        api_key,
        stream: file.stream.unwrap_or(true),
        request_timeout: Duration::from_secs(request_timeout_secs),
        connect_timeout: Duration::from_secs(connect_timeout_secs),
        max_retries,
        ensure_available,
        start_command,
        start_timeout: Duration::from_secs(start_timeout_secs),
    })
}

/// An `http://` or `https://` URL naming a host, without its trailing `/`.
pub fn check_base_url(url: &str) -> Result<String, String> {
    let trimmed = url.trim().trim_end_matches('/');
    let rest = trimmed
        .strip_prefix("http://")
        .or_else(|| trimmed.strip_prefix("https://"))
        .ok_or_else(|| format!("must be an http:// or https:// URL, got {url:?}"))?;
    if rest.is_empty() || rest.starts_with('/') || rest.chars().any(char::is_whitespace) {
        return Err(format!("must name a host, got {url:?}"));
    }
    Ok(trimmed.to_owned())
}

/// Whether a model server URL names this machine (`127.0.0.1`, `::1`, `localhost`):
/// the servers `[llm] ensure_available` starts by default.
pub(crate) fn is_loopback_url(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let host = rest.split(['/', '?']).next().unwrap_or_default();
    let host = host.rsplit_once('@').map_or(host, |(_, host)| host);
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.split(':').next().unwrap_or_default(),
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ensure_available_defaults_to_loopback_urls_only() {
        for url in [
            "http://127.0.0.1:11434/v1",
            "http://localhost:8080/v1",
            "http://[::1]:1/v1",
            "http://user:pw@127.0.0.2/v1",
        ] {
            assert!(is_loopback_url(url), "{url}");
        }
        for url in [
            "https://api.openai.com/v1",
            "http://10.0.0.1:11434/v1",
            "http://localhost.example.com/v1",
            "http://127.0.0.1.nip.io/v1",
        ] {
            assert!(!is_loopback_url(url), "{url}");
        }
    }
}
