//! The OpenAI-compatible chat model: Ollama, vLLM, llama.cpp's server, LM Studio and
//! OpenAI behind one `ChatModel`.
//!
//! Here live the client setup, the attempt/retry loop and the reading of response
//! bodies (bounded, with timeouts). The wire format is in `wire.rs`, error mapping in
//! `failure.rs`, model listing in `listing.rs`, capability probing in `capabilities.rs`,
//! the `ChatModel` port over all of them in `port.rs`. The API key is only ever put in the
//! `Authorization` header; it is redacted from everything else.

pub(crate) mod capabilities;
pub(crate) mod embeddings;
pub(crate) mod failure;
pub(crate) mod listing;
mod port;
pub(crate) mod wire;

use std::time::Duration;

use agentplane_core::{ChatRequest, ChatResponse};
use agentplane_engine::ports::ModelError;
use reqwest::header::{ACCEPT, CONTENT_TYPE};

use crate::exchange::Exchange;
pub(crate) use crate::exchange::{MAX_ERROR_BODY_BYTES, MAX_RESPONSE_BYTES, read_body};

/// The longest pause between two retries, whatever the attempt number.
pub(crate) const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);

/// How to reach an OpenAI-compatible server.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// Up to and including the API version, e.g. `http://127.0.0.1:11434/v1`; the
    /// client appends `/chat/completions` and `/models`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer …` when set and not empty; never shown.
    pub api_key: Option<String>,
    /// Non-streamed calls: the longest wait for the whole answer. Streamed calls: the
    /// longest wait for the headers and then for each next piece of the stream, so a
    /// long answer that keeps flowing is never cut.
    pub request_timeout: Duration,
    /// The longest wait for a TCP (and TLS) connection.
    pub connect_timeout: Duration,
    /// Further attempts after a 429, a 5xx or a connection failure (0: one attempt).
    pub max_retries: u32,
    /// The pause before the first retry; it doubles each time (capped at 30 s).
    pub retry_base_delay: Duration,
    /// Ask for an SSE stream (text reaches `on_text` as it is generated).
    pub stream: bool,
}

impl OpenAiConfig {
    /// Defaults for a local server at `base_url`: no key, streaming, 2 retries from
    /// 500 ms, 10 s to connect, 300 s for an answer (local models can be slow).
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            request_timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(10),
            max_retries: 2,
            retry_base_delay: Duration::from_millis(500),
            stream: true,
        }
    }
}

impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &failure::display_url(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("max_retries", &self.max_retries)
            .field("retry_base_delay", &self.retry_base_delay)
            .field("stream", &self.stream)
            .finish()
    }
}

/// A `ChatModel` over the OpenAI chat-completions API, read leniently.
///
/// Retries are bounded and deterministic (`retry_base_delay × 2^n`) and happen only
/// on 429, 5xx and connection failures, and only before any text was passed to
/// `on_text`: a half-consumed stream is never replayed.
pub struct OpenAiCompatible {
    client: reqwest::Client,
    config: OpenAiConfig,
    /// `base_url` without credentials, for error messages.
    shown_url: String,
}

impl std::fmt::Debug for OpenAiCompatible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiCompatible")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl OpenAiCompatible {
    /// A client for `config`. Fails (as `Unreachable`, naming the URL) when the base
    /// URL is not an http(s) URL or the key cannot be sent in a header.
    pub fn new(mut config: OpenAiConfig) -> Result<Self, ModelError> {
        let (client, shown_url) = crate::exchange::prepare(
            &mut config.base_url,
            &mut config.api_key,
            config.connect_timeout,
            |key| format!("Bearer {key}"),
        )?;
        Ok(Self {
            client,
            config,
            shown_url,
        })
    }

    /// One model call, passing each text delta to `on_text` as it arrives (once, whole,
    /// for a non-streamed answer). What `ChatModel::chat` does, usable with any sink.
    pub async fn chat_with<F>(
        &self,
        request: &ChatRequest,
        on_text: &mut F,
    ) -> Result<ChatResponse, ModelError>
    where
        F: FnMut(&str) + Send + ?Sized,
    {
        let body = wire::request_body(request, self.config.stream).to_string();
        let url = format!("{}/chat/completions", self.config.base_url);
        // The model call's span, as the W3C parent of the server's work (if exported).
        let traceparent = agentplane_engine::ports::telemetry::current_traceparent();
        let build = || {
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
            self.authorized(builder)
        };
        let mut retry = 0;
        loop {
            let mut delivered = false;
            let started = tokio::time::Instant::now();
            let attempt = match self.exchange().send(build(), &request.model).await {
                Ok(response) => {
                    let deadline = started + self.config.request_timeout;
                    let assembly = wire::StreamAssembly::new(&request.model);
                    self.exchange()
                        .read_answer(
                            response,
                            &request.model,
                            deadline,
                            wire::parse_completion,
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
                    self.pause_before_retry(retry, &failure.error).await;
                    retry += 1;
                }
                Err(failure) => return Err(failure.error),
            }
        }
    }

    fn api_key(&self) -> Option<&str> {
        self.config.api_key.as_deref()
    }

    fn authorized(&self, builder: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self.api_key() {
            Some(key) => builder.bearer_auth(key),
            None => builder,
        }
    }

    /// The pause before retry number `retry` (0-based): base × 2^retry, capped.
    fn retry_delay(&self, retry: u32) -> Duration {
        self.config
            .retry_base_delay
            .checked_mul(2u32.saturating_pow(retry))
            .unwrap_or(MAX_RETRY_DELAY)
            .min(MAX_RETRY_DELAY)
    }

    /// Sends a request built by `build` and returns a successful response, retrying
    /// transient failures. Non-success statuses become errors here.
    async fn send_with_retries(
        &self,
        build: impl Fn() -> reqwest::RequestBuilder,
        model: &str,
    ) -> Result<reqwest::Response, ModelError> {
        let mut retry = 0;
        loop {
            match self.exchange().send(build(), model).await {
                Ok(response) => return Ok(response),
                Err(failure) if failure.retryable && retry < self.config.max_retries => {
                    self.pause_before_retry(retry, &failure.error).await;
                    retry += 1;
                }
                Err(failure) => return Err(failure.error),
            }
        }
    }

    async fn pause_before_retry(&self, retry: u32, error: &ModelError) {
        let delay = self.retry_delay(retry);
        tracing::debug!(
            retry = retry + 1,
            delay_ms = delay.as_millis() as u64,
            %error,
            "retrying the model server"
        );
        tokio::time::sleep(delay).await;
    }

    /// How this server is talked to: timeouts, streaming, the key kept out of messages.
    pub(crate) fn exchange(&self) -> Exchange<'_> {
        Exchange {
            timeout: self.config.request_timeout,
            stream: self.config.stream,
            api_key: self.api_key(),
            shown_url: &self.shown_url,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delays_double_and_are_capped() {
        let mut config = OpenAiConfig::new("http://127.0.0.1:1/v1");
        config.retry_base_delay = Duration::from_millis(100);
        let model = OpenAiCompatible::new(config).expect("valid");
        let delays: Vec<u64> = (0..4)
            .map(|n| model.retry_delay(n).as_millis() as u64)
            .collect();
        assert_eq!(delays, vec![100, 200, 400, 800]);
        assert_eq!(model.retry_delay(40), MAX_RETRY_DELAY);
    }

    #[test]
    fn bad_configs_are_refused_without_showing_secrets() {
        let mut config = OpenAiConfig::new("ftp://u:hunter2@host/v1");
        assert!(matches!(
            OpenAiCompatible::new(config.clone()),
            Err(ModelError::Unreachable { .. })
        ));
        config.base_url = "not a url".to_owned();
        assert!(OpenAiCompatible::new(config.clone()).is_err());

        let mut config = OpenAiConfig::new("http://u:hunter2@127.0.0.1:1/v1/");
        config.api_key = Some("sk-line\nbreak".to_owned());
        let err = OpenAiCompatible::new(config.clone()).expect_err("bad key");
        let shown = err.to_string();
        assert!(
            !shown.contains("hunter2") && !shown.contains("sk-line"),
            "{shown}"
        );
        assert!(!format!("{config:?}").contains("sk-line"));
        assert!(!format!("{config:?}").contains("hunter2"));

        config.api_key = Some("  ".to_owned());
        let model = OpenAiCompatible::new(config).expect("blank key is no key");
        assert_eq!(model.api_key(), None);
        assert_eq!(model.config.base_url, "http://u:hunter2@127.0.0.1:1/v1");
    }
}
