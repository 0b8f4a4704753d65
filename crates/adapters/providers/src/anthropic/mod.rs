//! The Anthropic Messages API as a `ChatModel`.
//!
//! Here live the client setup, the headers (`x-api-key`, `anthropic-version`), the
//! attempt/retry loop and the reading of bodies, bounded and with timeouts, as the
//! OpenAI-compatible client does (and with its error mapping, `failure.rs`). The wire
//! format is in `wire.rs`. The API key is only ever put in the `x-api-key` header.

pub(crate) mod wire;

use std::time::Duration;

use agentplane_core::{ChatRequest, ChatResponse};
use agentplane_engine::ports::model::TextSink;
use agentplane_engine::ports::{ChatModel, ModelError, ModelInfo};
use async_trait::async_trait;
use reqwest::header::{ACCEPT, CONTENT_TYPE};

use crate::exchange::{Exchange, MAX_RESPONSE_BYTES, read_body};
use crate::openai_compatible::failure;
use crate::openai_compatible::{MAX_RETRY_DELAY, listing};

/// The API version sent as `anthropic-version`.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// How to reach the Messages API.
#[derive(Clone)]
pub struct AnthropicConfig {
    /// Up to and including the API version, e.g. `https://api.anthropic.com/v1`; the
    /// client appends `/messages` and `/models`.
    pub base_url: String,
    /// Sent as `x-api-key`; never shown.
    pub api_key: Option<String>,
    /// The answer's token limit (`max_tokens`, which the API requires): sent when the
    /// request sets none, and the ceiling of what a request may set.
    pub max_tokens: u32,
    /// As `OpenAiConfig::request_timeout`: the whole answer, or each stream piece.
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    /// Further attempts after a 429, a 5xx, a 529 or a connection failure.
    pub max_retries: u32,
    pub retry_base_delay: Duration,
    pub stream: bool,
}

impl AnthropicConfig {
    /// Defaults: no key, streaming, 4096 tokens, 2 retries from 500 ms, 10 s to
    /// connect, 300 s for an answer.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            max_tokens: 4096,
            request_timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(10),
            max_retries: 2,
            retry_base_delay: Duration::from_millis(500),
            stream: true,
        }
    }
}

impl std::fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("base_url", &failure::display_url(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("max_tokens", &self.max_tokens)
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("max_retries", &self.max_retries)
            .field("stream", &self.stream)
            .finish()
    }
}

/// A `ChatModel` over Anthropic's Messages API.
///
/// Retries follow the OpenAI-compatible client: bounded, `retry_base_delay × 2^n`,
/// only on 429, 5xx (529 "overloaded" included) and connection failures, and only
/// before any text reached `on_text`.
pub struct Anthropic {
    client: reqwest::Client,
    config: AnthropicConfig,
    shown_url: String,
}

impl std::fmt::Debug for Anthropic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Anthropic")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Anthropic {
    /// A client for `config`. Fails (as `Unreachable`, naming the URL) when the base
    /// URL is not an http(s) URL or the key cannot be sent in a header.
    pub fn new(mut config: AnthropicConfig) -> Result<Self, ModelError> {
        let (client, shown_url) = crate::exchange::prepare(
            &mut config.base_url,
            &mut config.api_key,
            config.connect_timeout,
            |key| key.to_owned(),
        )?;
        Ok(Self {
            client,
            config,
            shown_url,
        })
    }

    fn api_key(&self) -> Option<&str> {
        self.config.api_key.as_deref()
    }

    fn authorized(&self, builder: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let builder = builder.header("anthropic-version", ANTHROPIC_VERSION);
        match self.api_key() {
            Some(key) => builder.header("x-api-key", key),
            None => builder,
        }
    }

    fn retry_delay(&self, retry: u32) -> Duration {
        self.config
            .retry_base_delay
            .checked_mul(2u32.saturating_pow(retry))
            .unwrap_or(MAX_RETRY_DELAY)
            .min(MAX_RETRY_DELAY)
    }

    /// One model call, passing each text delta to `on_text` as it arrives.
    pub async fn chat_with<F>(
        &self,
        request: &ChatRequest,
        on_text: &mut F,
    ) -> Result<ChatResponse, ModelError>
    where
        F: FnMut(&str) + Send + ?Sized,
    {
        let body =
            wire::request_body(request, self.config.max_tokens, self.config.stream).to_string();
        let url = format!("{}/messages", self.config.base_url);
        // The model call's span, as the W3C parent of the server's work (if exported).
        let traceparent = agentplane_engine::ports::telemetry::current_traceparent();
        let mut retry = 0;
        loop {
            let mut delivered = false;
            let mut builder = self
                .client
                .post(&url)
                .header(CONTENT_TYPE, "application/json")
                .header(
                    ACCEPT,
                    if self.config.stream {
                        "text/event-stream"
                    } else {
                        "application/json"
                    },
                )
                .body(body.clone());
            if let Some(traceparent) = &traceparent {
                builder = builder.header("traceparent", traceparent);
            }
            let started = tokio::time::Instant::now();
            let attempt = match self
                .exchange()
                .send(self.authorized(builder), &request.model)
                .await
            {
                Ok(response) => {
                    let deadline = started + self.config.request_timeout;
                    let assembly = wire::StreamAssembly::new(&request.model);
                    self.exchange()
                        .read_answer(
                            response,
                            &request.model,
                            deadline,
                            wire::parse_message,
                            assembly,
                            on_text,
                            &mut delivered,
                        )
                        .await
                }
                Err(failure) => Err(failure),
            };
            match attempt {
                Ok(answer) => return Ok(answer),
                Err(failure)
                    if failure.retryable && !delivered && retry < self.config.max_retries =>
                {
                    let delay = self.retry_delay(retry);
                    tracing::debug!(retry = retry + 1, delay_ms = delay.as_millis() as u64, error = %failure.error, "retrying the Anthropic API");
                    tokio::time::sleep(delay).await;
                    retry += 1;
                }
                Err(failure) => return Err(failure.error),
            }
        }
    }

    fn exchange(&self) -> Exchange<'_> {
        Exchange {
            timeout: self.config.request_timeout,
            stream: self.config.stream,
            api_key: self.api_key(),
            shown_url: &self.shown_url,
        }
    }
}

#[async_trait]
impl ChatModel for Anthropic {
    fn provider(&self) -> &str {
        "anthropic"
    }

    async fn list_models(&self) -> Result<Vec<ModelInfo>, ModelError> {
        // The API pages its list (20 by default); one page of its maximum is every model.
        let url = format!("{}/models?limit=1000", self.config.base_url);
        let mut retry = 0;
        let response = loop {
            match self
                .exchange()
                .send(self.authorized(self.client.get(&url)), "")
                .await
            {
                Ok(response) => break response,
                Err(failure) if failure.retryable && retry < self.config.max_retries => {
                    tokio::time::sleep(self.retry_delay(retry)).await;
                    retry += 1;
                }
                Err(failure) => return Err(failure.error),
            }
        };
        let body = read_body(response, MAX_RESPONSE_BYTES, self.config.request_timeout)
            .await
            .map_err(|failure| failure.error)?;
        listing::parse_model_list(&body)
    }

    async fn chat(
        &self,
        request: &ChatRequest,
        on_text: &mut TextSink<'_>,
    ) -> Result<ChatResponse, ModelError> {
        self.chat_with(request, on_text).await
    }
}
