//! `[providers.NAME]` and `[routing]`: several named model providers, and which of them
//! a model call goes to, in failover order.
//!
//! ```toml
//! [providers.local]
//! kind = "openai"                     # or "anthropic"
//! base_url = "http://127.0.0.1:11434/v1"
//!
//! [providers.cloud]
//! kind = "anthropic"
//! base_url = "https://api.anthropic.com/v1"
//! api_key_secret = "ANTHROPIC_KEY"    # a `[secrets]` name, never a literal key
//! model = "claude-sonnet-4-5"
//! tool_calls = "native"               # gateway clients: "auto" (recover calls written
//!                                     # as text when local), "native" or "recover"
//!
//! [routing]
//! default = ["local", "cloud"]        # the failover chain when no rule matches
//! [[routing.rules]]
//! size = "large"                      # or agent = "NAME", or tag = "TAG"
//! providers = ["cloud", "local"]
//! ```
//!
//! Without `[providers]`, `[llm]` is the one provider named `default`, as it always was.
//! Only where things are is configuration here; the API keys are read by
//! `crate::secrets` at start-up and the clients are built by the composition root.

use std::collections::BTreeMap;
use std::time::Duration;

use agentplane_engine::models::{CircuitSettings, RouteRule, Routing, RuleMatch, TaskSize};
use serde::Deserialize;

use super::SettingError;
use super::secrets::SecretsConfig;

/// The longest provider name (it becomes a metric label and appears in events).
const MAX_NAME_LEN: usize = 32;

/// The API a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// OpenAI's chat completions: OpenAI, Ollama, vLLM, llama.cpp, LM Studio.
    OpenAi,
    /// Anthropic's Messages API.
    Anthropic,
}

impl ProviderKind {
    /// The name written in `kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
        }
    }
}

/// One `[providers.NAME]` entry as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileProvider {
    kind: Option<String>,
    base_url: Option<String>,
    api_key_secret: Option<String>,
    model: Option<String>,
    stream: Option<bool>,
    request_timeout_secs: Option<u64>,
    connect_timeout_secs: Option<u64>,
    max_retries: Option<u32>,
    max_tokens: Option<u32>,
    /// `"auto"`, `"native"` or `"recover"`: whether a gateway client's call this
    /// provider writes as text is recovered (`auto`: when the provider is local).
    tool_calls: Option<String>,
}

/// `[routing]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileRouting {
    default: Option<Vec<String>>,
    #[serde(default)]
    rules: Vec<FileRule>,
    circuit_failures: Option<u32>,
    circuit_cooldown_secs: Option<u64>,
}

/// One `[[routing.rules]]` entry as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileRule {
    agent: Option<String>,
    tag: Option<String>,
    size: Option<String>,
    providers: Vec<String>,
}

/// A checked provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderSettings {
    pub kind: ProviderKind,
    /// Up to and including the API version (`…/v1`).
    pub base_url: String,
    /// The `[secrets]` entry holding the API key.
    pub api_key_secret: Option<String>,
    /// The model this provider always uses; `None`: the agent's or `[llm] model`.
    pub model: Option<String>,
    pub stream: bool,
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    pub max_retries: u32,
    /// Anthropic's required `max_tokens`.
    pub max_tokens: u32,
    /// Calls written as text are recovered for gateway clients (`tool_calls`).
    pub recover_text_calls: bool,
}

/// `[providers]` and `[routing]`, checked. Empty `providers`: `[llm]` is the one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProvidersConfig {
    pub providers: BTreeMap<String, ProviderSettings>,
    pub routing: Routing,
    pub circuit: CircuitSettings,
}

/// Whether the file configures `[providers]`.
impl ProvidersConfig {
    pub fn is_configured(&self) -> bool {
        !self.providers.is_empty()
    }
}

fn is_provider_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Checks both sections. Errors name the key under `providers.` or `routing.`, e.g.
/// `("providers.cloud.kind", …)`. `check_url` is the loader's URL check.
pub fn resolve(
    providers: BTreeMap<String, FileProvider>,
    routing: Option<FileRouting>,
    secrets: &SecretsConfig,
    check_url: &dyn Fn(&str) -> Result<String, String>,
) -> Result<ProvidersConfig, SettingError> {
    if providers.is_empty() {
        return match routing {
            Some(_) => Err((
                "routing".to_owned(),
                "needs `[providers.NAME]` sections to route between".to_owned(),
            )),
            None => Ok(ProvidersConfig::default()),
        };
    }
    let mut checked = BTreeMap::new();
    for (name, file) in providers {
        let key = |field: &str| format!("providers.{name}.{field}");
        if !is_provider_name(&name) {
            return Err((
                format!("providers.{name}"),
                format!("provider names use letters, digits, `-` and `_`, at most {MAX_NAME_LEN}"),
            ));
        }
        let kind = match file.kind.as_deref() {
            Some("openai") => ProviderKind::OpenAi,
            Some("anthropic") => ProviderKind::Anthropic,
            Some(other) => {
                return Err((
                    key("kind"),
                    format!("must be \"openai\" or \"anthropic\", got {other:?}"),
                ));
            }
            None => {
                return Err((
                    key("kind"),
                    "is required (\"openai\" or \"anthropic\")".into(),
                ));
            }
        };
        let base_url = match &file.base_url {
            Some(url) => check_url(url).map_err(|m| (key("base_url"), m))?,
            None => return Err((key("base_url"), "is required".into())),
        };
        if let Some(secret) = &file.api_key_secret
            && !super::secrets::is_secret_name(secret)
        {
            // Never echo it: it may be a key written where its name belongs.
            return Err((
                key("api_key_secret"),
                "must be the name of a [secrets] entry (letters, digits and `_`), never \
                 the key itself"
                    .into(),
            ));
        }
        if let Some(secret) = &file.api_key_secret
            && !secrets.sources.contains_key(secret)
        {
            return Err((
                key("api_key_secret"),
                format!(
                    "names `{secret}`, which is not in [secrets]; API keys come only from \
                     [secrets.NAME] (an environment variable or a file)"
                ),
            ));
        }
        if file.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
            return Err((key("model"), "must not be empty".into()));
        }
        let request_timeout_secs = file.request_timeout_secs.unwrap_or(300);
        if request_timeout_secs == 0 {
            return Err((key("request_timeout_secs"), "must be at least 1".into()));
        }
        let connect_timeout_secs = file.connect_timeout_secs.unwrap_or(5);
        if connect_timeout_secs == 0 {
            return Err((key("connect_timeout_secs"), "must be at least 1".into()));
        }
        let max_retries = file.max_retries.unwrap_or(2);
        if max_retries > 10 {
            return Err((key("max_retries"), "must be at most 10".into()));
        }
        let max_tokens = file.max_tokens.unwrap_or(4096);
        if max_tokens == 0 {
            return Err((key("max_tokens"), "must be at least 1".into()));
        }
        if kind == ProviderKind::OpenAi && file.max_tokens.is_some() {
            return Err((key("max_tokens"), "is for kind = \"anthropic\"".into()));
        }
        let recover_text_calls = match file.tool_calls.as_deref() {
            None | Some("auto") => super::llm::is_loopback_url(&base_url),
            Some("native") => false,
            Some("recover") => true,
            Some(other) => {
                return Err((
                    key("tool_calls"),
                    format!("must be \"auto\", \"native\" or \"recover\", got {other:?}"),
                ));
            }
        };
        checked.insert(
            name,
            ProviderSettings {
                kind,
                base_url,
                api_key_secret: file.api_key_secret,
                model: file.model,
                stream: file.stream.unwrap_or(true),
                request_timeout: Duration::from_secs(request_timeout_secs),
                connect_timeout: Duration::from_secs(connect_timeout_secs),
                max_retries,
                max_tokens,
                recover_text_calls,
            },
        );
    }
    let routing = routing.unwrap_or_default();
    let known = |key: String, chain: &[String]| -> Result<(), SettingError> {
        if chain.is_empty() {
            return Err((key, "must name at least one provider".into()));
        }
        for (n, name) in chain.iter().enumerate() {
            if !checked.contains_key(name) {
                return Err((
                    key,
                    format!(
                        "names `{name}`, which is not a provider; the providers are: {}",
                        checked.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
            if chain[..n].contains(name) {
                return Err((key, format!("names `{name}` twice")));
            }
        }
        Ok(())
    };
    let default = match routing.default {
        Some(chain) => {
            known("routing.default".to_owned(), &chain)?;
            chain
        }
        None if checked.len() == 1 => checked.keys().cloned().collect(),
        None => {
            return Err((
                "routing.default".to_owned(),
                "is required with more than one provider: the failover order, e.g. \
                 [\"local\", \"cloud\"]"
                    .to_owned(),
            ));
        }
    };
    let mut rules = Vec::with_capacity(routing.rules.len());
    for (n, rule) in routing.rules.into_iter().enumerate() {
        let key = |field: &str| format!("routing.rules[{n}].{field}");
        let matches = match (rule.agent, rule.tag, rule.size) {
            (Some(agent), None, None) if !agent.is_empty() => RuleMatch::Agent(agent),
            (None, Some(tag), None) if !tag.is_empty() => RuleMatch::Tag(tag),
            (None, None, Some(size)) => {
                RuleMatch::Size(TaskSize::parse(&size).ok_or_else(|| {
                    (
                        key("size"),
                        format!("must be \"small\", \"medium\" or \"large\", got {size:?}"),
                    )
                })?)
            }
            _ => {
                return Err((
                    format!("routing.rules[{n}]"),
                    "give exactly one of `agent`, `tag` or `size` (not empty)".to_owned(),
                ));
            }
        };
        known(key("providers"), &rule.providers)?;
        rules.push(RouteRule {
            matches,
            providers: rule.providers,
        });
    }
    let defaults = CircuitSettings::default();
    let failures = routing.circuit_failures.unwrap_or(defaults.failures);
    if failures == 0 {
        return Err((
            "routing.circuit_failures".into(),
            "must be at least 1".into(),
        ));
    }
    let cooldown = routing
        .circuit_cooldown_secs
        .map_or(defaults.cooldown, Duration::from_secs);
    if cooldown.is_zero() {
        return Err((
            "routing.circuit_cooldown_secs".into(),
            "must be at least 1".into(),
        ));
    }
    Ok(ProvidersConfig {
        providers: checked,
        routing: Routing { default, rules },
        circuit: CircuitSettings { failures, cooldown },
    })
}
