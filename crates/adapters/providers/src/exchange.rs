//! One HTTP exchange with a model server, the same for every wire format: send a
//! request and turn a non-success status into a failure (`send`), then read the answer
//! whole or as a server-sent event stream (`read_answer`), within the size and time
//! limits. What differs per provider — how a whole answer parses, how stream events
//! assemble — comes in as a function and an [`Assembly`].

use std::time::Duration;

use agentplane_core::ChatResponse;
use agentplane_engine::ports::ModelError;
use reqwest::header::{CONTENT_TYPE, HeaderValue};

use crate::openai_compatible::failure::{self, Failure};
use crate::sse::SseDecoder;

/// The largest answer read, streamed or whole.
pub(crate) const MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;
/// The most of an error body kept for the message.
pub(crate) const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// Prepares a configured server: trims the base URL, drops an empty key, checks that
/// the URL is http(s) and that `header(key)` can be sent, and builds the HTTP client.
/// Returns the client and the URL as messages show it (without credentials). Fails as
/// `Unreachable`, naming the URL.
pub(crate) fn prepare(
    base_url: &mut String,
    api_key: &mut Option<String>,
    connect_timeout: Duration,
    header: impl Fn(&str) -> String,
) -> Result<(reqwest::Client, String), ModelError> {
    *base_url = base_url.trim().trim_end_matches('/').to_owned();
    if api_key.as_deref().is_some_and(|k| k.trim().is_empty()) {
        *api_key = None;
    }
    let shown_url = failure::display_url(base_url);
    let invalid = |detail: &str| ModelError::Unreachable {
        url: shown_url.clone(),
        detail: detail.to_owned(),
    };
    match reqwest::Url::parse(base_url) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => {}
        _ => return Err(invalid("the base URL is not an http(s) URL")),
    }
    if let Some(key) = api_key.as_deref()
        && HeaderValue::from_str(&header(key)).is_err()
    {
        return Err(invalid(
            "the API key has characters an HTTP header cannot carry",
        ));
    }
    let client = reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .user_agent(concat!("agentplane/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| invalid(&failure::transport_detail(e, None)))?;
    Ok((client, shown_url))
}

/// Builds an answer from a provider's stream events (the `data` of each).
pub(crate) trait Assembly {
    /// Applies one event; returns text to show at once, if it carried any.
    fn apply(&mut self, data: &str) -> Result<Option<String>, ModelError>;
    /// Whether the stream said it is complete.
    fn is_done(&self) -> bool;
    /// The assembled answer.
    fn finish(self) -> Result<ChatResponse, ModelError>;
}

/// How to talk to one configured server.
pub(crate) struct Exchange<'a> {
    /// How long one read (and the send) may take.
    pub timeout: Duration,
    /// Whether an answer whose content type says neither is a stream.
    pub stream: bool,
    /// Kept out of every message.
    pub api_key: Option<&'a str>,
    /// The server's URL as messages show it.
    pub shown_url: &'a str,
}

impl Exchange<'_> {
    fn timeout_error(&self) -> ModelError {
        ModelError::Timeout {
            seconds: self.timeout.as_secs().max(1),
        }
    }

    /// One request: its response if the status is a success, else the failure.
    pub(crate) async fn send(
        &self,
        builder: reqwest::RequestBuilder,
        model: &str,
    ) -> Result<reqwest::Response, Failure> {
        let sent = tokio::time::timeout(self.timeout, builder.send()).await;
        let response = match sent {
            Err(_) => return Err(Failure::fatal(self.timeout_error())),
            Ok(Err(e)) => return Err(failure::from_send(e, self.shown_url, self.api_key)),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body = read_body(response, MAX_ERROR_BODY_BYTES, self.timeout)
            .await
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default();
        Err(failure::from_status(status, &body, model, self.api_key))
    }

    /// One chat attempt after the headers: reads and assembles the answer, parsing a
    /// whole one with `whole` and a stream with `assembly`. A whole answer must be
    /// complete by `deadline`. Sets `delivered` once any text went to `on_text`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn read_answer<A: Assembly, F: FnMut(&str) + Send + ?Sized>(
        &self,
        response: reqwest::Response,
        model: &str,
        deadline: tokio::time::Instant,
        whole: fn(&[u8], &str) -> Result<ChatResponse, ModelError>,
        assembly: A,
        on_text: &mut F,
        delivered: &mut bool,
    ) -> Result<ChatResponse, Failure> {
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let is_stream = if content_type.contains("event-stream") {
            true
        } else if content_type.contains("json") {
            false
        } else {
            self.stream
        };
        if is_stream {
            return self
                .read_stream(response, assembly, on_text, delivered)
                .await;
        }
        let body = match tokio::time::timeout_at(
            deadline,
            read_body(response, MAX_RESPONSE_BYTES, self.timeout),
        )
        .await
        {
            Err(_) => return Err(Failure::fatal(self.timeout_error())),
            Ok(Err(failure)) => return Err(failure),
            Ok(Ok(body)) => body,
        };
        let answer = whole(&body, model)?;
        if !answer.content.is_empty() {
            *delivered = true;
            on_text(&answer.content);
        }
        Ok(answer)
    }

    async fn read_stream<A: Assembly, F: FnMut(&str) + Send + ?Sized>(
        &self,
        mut response: reqwest::Response,
        mut assembly: A,
        on_text: &mut F,
        delivered: &mut bool,
    ) -> Result<ChatResponse, Failure> {
        let mut decoder = SseDecoder::new(MAX_RESPONSE_BYTES);
        let mut total = 0usize;
        loop {
            let chunk = match tokio::time::timeout(self.timeout, response.chunk()).await {
                Err(_) => return Err(Failure::fatal(self.timeout_error())),
                Ok(Err(e)) => return Err(cut_off(e, self.api_key)),
                Ok(Ok(None)) => break,
                Ok(Ok(Some(chunk))) => chunk,
            };
            total += chunk.len();
            if total > MAX_RESPONSE_BYTES {
                return Err(Failure::fatal(too_large()));
            }
            for event in decoder.feed(&chunk).map_err(ModelError::Protocol)? {
                if let Some(text) = assembly.apply(&event)? {
                    *delivered = true;
                    on_text(&text);
                }
                if assembly.is_done() {
                    return Ok(assembly.finish()?);
                }
            }
        }
        if let Some(event) = decoder.finish().map_err(ModelError::Protocol)?
            && let Some(text) = assembly.apply(&event)?
        {
            *delivered = true;
            on_text(&text);
        }
        Ok(assembly.finish()?)
    }
}

pub(crate) fn too_large() -> ModelError {
    ModelError::Protocol(format!(
        "the answer is larger than {} MiB",
        MAX_RESPONSE_BYTES / (1024 * 1024)
    ))
}

/// A body that broke off mid-way: retryable as far as the transport goes; the retry
/// loop still refuses once text was delivered.
pub(crate) fn cut_off(error: reqwest::Error, api_key: Option<&str>) -> Failure {
    Failure::transient(ModelError::Protocol(format!(
        "the answer was cut off mid-way: {}",
        failure::transport_detail(error, api_key)
    )))
}

/// Reads a whole body, refusing more than `limit` bytes; each read waits at most
/// `idle`.
pub(crate) async fn read_body(
    mut response: reqwest::Response,
    limit: usize,
    idle: Duration,
) -> Result<Vec<u8>, Failure> {
    let mut body = Vec::new();
    loop {
        match tokio::time::timeout(idle, response.chunk()).await {
            Err(_) => {
                return Err(Failure::fatal(ModelError::Timeout {
                    seconds: idle.as_secs().max(1),
                }));
            }
            Ok(Err(e)) => return Err(cut_off(e, None)),
            Ok(Ok(None)) => return Ok(body),
            Ok(Ok(Some(chunk))) => {
                if body.len() + chunk.len() > limit {
                    return Err(Failure::fatal(too_large()));
                }
                body.extend_from_slice(&chunk);
            }
        }
    }
}

/// A temperature as the decimal that was configured: `0.2_f32` widened to `f64` would
/// go on the wire as `0.20000000298023224`.
pub(crate) fn temperature(value: f32) -> serde_json::Value {
    value
        .to_string()
        .parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map_or(serde_json::Value::Null, serde_json::Value::Number)
}
