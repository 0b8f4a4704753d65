//! Builds the engine's [`Providers`] from `[providers]` and `[routing]`, or from `[llm]`
//! alone: the one place that knows which adapter serves which provider kind.
//!
//! API keys come from `[secrets]` only (read by `crate::secrets`); a provider whose
//! `api_key_secret` has no value cannot be built. Nothing here contacts a server.

use std::sync::Arc;
use std::time::Duration;

use agentplane_engine::models::{ProviderConfig, Providers};
use agentplane_engine::ports::Telemetry;
use agentplane_engine::ports::{ChatModel, ModelError};
use agentplane_providers::{Anthropic, AnthropicConfig, OpenAiCompatible, OpenAiConfig};

use crate::config::{Config, ConfigError};
use crate::model_server::{KeeperConfig, KeptModel, ModelServerKeeper};
use crate::secrets::Secrets;
use crate::settings::providers::ProviderKind;

/// The pause before a first retry, for every provider.
const RETRY_BASE_DELAY: Duration = Duration::from_millis(250);

/// Why the providers could not be built: a setting (a provider's secret has no value,
/// routing names an unknown provider), or a client that cannot be made from its
/// settings. The composition root turns each into its `RuntimeError`.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A setting that cannot be used as it is.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A client that cannot be made (a URL or key a request cannot carry).
    #[error(transparent)]
    Model(#[from] ModelError),
}

/// The `[llm]` client.
pub fn llm_client(config: &Config) -> Result<Arc<dyn ChatModel>, ModelError> {
    Ok(Arc::new(OpenAiCompatible::new(OpenAiConfig {
        base_url: config.llm.base_url.clone(),
        api_key: config.llm.api_key.clone(),
        request_timeout: config.llm.request_timeout,
        connect_timeout: config.llm.connect_timeout,
        max_retries: config.llm.max_retries,
        retry_base_delay: RETRY_BASE_DELAY,
        stream: config.llm.stream,
    })?))
}

/// The keeper of `[llm]`'s server (ADR 0033), when `ensure_available` is on and there
/// is something to start: `start_command`, else `ollama serve` when the URL is Ollama's
/// port and `ollama` is on `PATH`. `[providers]` servers are not kept.
pub fn model_server_keeper(config: &Config) -> Option<ModelServerKeeper> {
    if config.providers.is_configured() || !config.llm.ensure_available {
        return None;
    }
    let command = if !config.llm.start_command.is_empty() {
        config.llm.start_command.clone()
    } else if config.llm.base_url.contains(":11434")
        && agentplane_process::process::find_program("ollama").is_some()
    {
        vec!["ollama".to_owned(), "serve".to_owned()]
    } else {
        return None;
    };
    Some(ModelServerKeeper::new(KeeperConfig {
        base_url: config.llm.base_url.clone(),
        command,
        timeout: config.llm.start_timeout,
    }))
}

/// The providers `config` describes, reporting to `telemetry`; the `[llm]` client kept
/// available by `keeper` when there is one.
pub fn build(
    config: &Config,
    secrets: &Secrets,
    telemetry: Telemetry,
    keeper: Option<Arc<ModelServerKeeper>>,
) -> Result<Providers, BuildError> {
    if !config.providers.is_configured() {
        let model = llm_client(config)?;
        let model = match keeper {
            Some(keeper) => Arc::new(KeptModel {
                inner: model,
                keeper,
            }) as Arc<dyn ChatModel>,
            None => model,
        };
        // `tool_calls = "auto"` for `[llm]`: recovered when the server is this machine's.
        let local = crate::settings::llm::is_loopback_url(&config.llm.base_url);
        return Ok(Providers::single_reporting(model, telemetry).recovering_text_calls(local));
    }
    let mut built = Vec::with_capacity(config.providers.providers.len());
    for (name, settings) in &config.providers.providers {
        let api_key = match &settings.api_key_secret {
            Some(secret) => Some(
                secrets
                    .get(secret)
                    .ok_or_else(|| ConfigError {
                        source_name: format!("providers.{name}.api_key_secret"),
                        message: format!("secret `{secret}` has no value"),
                    })?
                    .to_owned(),
            ),
            None => None,
        };
        let client: Arc<dyn ChatModel> = match settings.kind {
            ProviderKind::OpenAi => Arc::new(OpenAiCompatible::new(OpenAiConfig {
                base_url: settings.base_url.clone(),
                api_key,
                request_timeout: settings.request_timeout,
                connect_timeout: settings.connect_timeout,
                max_retries: settings.max_retries,
                retry_base_delay: RETRY_BASE_DELAY,
                stream: settings.stream,
            })?),
            ProviderKind::Anthropic => Arc::new(Anthropic::new(AnthropicConfig {
                base_url: settings.base_url.clone(),
                api_key,
                max_tokens: settings.max_tokens,
                request_timeout: settings.request_timeout,
                connect_timeout: settings.connect_timeout,
                max_retries: settings.max_retries,
                retry_base_delay: RETRY_BASE_DELAY,
                stream: settings.stream,
            })?),
        };
        built.push(ProviderConfig {
            name: name.clone(),
            kind: settings.kind.as_str().to_owned(),
            model: settings.model.clone(),
            client,
            recover_text_calls: settings.recover_text_calls,
        });
    }
    Providers::new(
        built,
        config.providers.routing.clone(),
        config.providers.circuit,
        telemetry,
    )
    .map_err(|message| {
        ConfigError {
            source_name: "providers".to_owned(),
            message,
        }
        .into()
    })
}
