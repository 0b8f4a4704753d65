//! HTTP toward one remote agent: the card's `GET`, JSON-RPC `POST`s answered with one
//! JSON document, and those answered with a Server-Sent Events stream of them.
//!
//! Every read is capped ([`CARD_MAX`], [`RESPONSE_MAX`], [`EVENT_MAX`]) and stops at
//! the cap: a remote agent cannot make us hold more. Redirects are not followed, so
//! the credential is never sent to a host the card did not name. No error carries a
//! header value (the credential lives in one); a remote's own error text is cut short.

use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap};
use serde_json::Value;

use crate::wire::{JsonRpcRequest, JsonRpcResponse};

/// Bytes of an Agent Card read at most.
pub const CARD_MAX: usize = 256 * 1024;
/// Bytes of one JSON-RPC answer read at most.
pub const RESPONSE_MAX: usize = 4 * 1024 * 1024;
/// Bytes of one Server-Sent Event read at most.
pub const EVENT_MAX: usize = 1024 * 1024;
/// Characters of a remote's own error text kept in ours.
const SHOWN_MAX: usize = 300;

/// Why a request to the remote agent failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// It could not be reached, or the connection broke.
    Transport(String),
    /// It answered with an HTTP error status.
    Status(u16, String),
    /// It answered something that is not what the protocol says.
    Malformed(String),
    /// It answered more than the cap.
    TooLarge(&'static str, usize),
    /// It answered with a JSON-RPC error.
    Rpc { code: i64, message: String },
    /// It did not answer in time.
    Timeout,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Transport(m) => write!(f, "could not reach it: {m}"),
            Self::Status(code, body) if body.is_empty() => write!(f, "it answered HTTP {code}"),
            Self::Status(code, body) => write!(f, "it answered HTTP {code}: {body}"),
            Self::Malformed(m) => write!(f, "it answered something that is not A2A: {m}"),
            Self::TooLarge(what, cap) => write!(f, "its {what} is larger than {cap} bytes"),
            Self::Rpc { code, message } => write!(f, "it refused the request ({code}: {message})"),
            Self::Timeout => write!(f, "it did not answer in time"),
        }
    }
}

impl CallError {
    /// A short word for the `a2a_request` event's outcome.
    pub fn outcome(&self) -> String {
        match self {
            Self::Transport(_) => "unreachable".to_owned(),
            Self::Status(code, _) => format!("http_{code}"),
            Self::Malformed(_) => "malformed".to_owned(),
            Self::TooLarge(..) => "too_large".to_owned(),
            Self::Rpc { code, .. } => format!("error_{code}"),
            Self::Timeout => "timeout".to_owned(),
        }
    }
}

/// Text from the remote, shortened and on one line, for an error message.
pub fn shown(text: &str) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(SHOWN_MAX)
        .collect();
    if text.chars().count() > SHOWN_MAX {
        format!("{}…", line.trim())
    } else {
        line.trim().to_owned()
    }
}

/// The HTTP client of one remote agent.
#[derive(Clone)]
pub struct Http {
    client: reqwest::Client,
}

impl Http {
    /// A client that connects within `connect_timeout` and follows no redirects.
    pub fn new(connect_timeout: Duration) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("agentplane/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("the HTTP client could not be built: {e}"))?;
        Ok(Self { client })
    }

    /// `GET url` as JSON, within `timeout`, at most [`CARD_MAX`] bytes.
    pub async fn get_json(
        &self,
        url: &str,
        headers: HeaderMap,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        let send = self
            .client
            .get(url)
            .headers(headers)
            .timeout(timeout)
            .send();
        let response = send.await.map_err(transport)?;
        let response = checked(response).await?;
        let body = read_capped(response, CARD_MAX, "Agent Card").await?;
        serde_json::from_slice(&body).map_err(|e| CallError::Malformed(format!("the card: {e}")))
    }

    /// A JSON-RPC request answered with one JSON-RPC response: its `result`.
    pub async fn call(
        &self,
        url: &str,
        headers: HeaderMap,
        request: &JsonRpcRequest,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        let send = self
            .client
            .post(url)
            .headers(headers)
            .json(request)
            .timeout(timeout)
            .send();
        let response = checked(send.await.map_err(transport)?).await?;
        let body = read_capped(response, RESPONSE_MAX, "answer").await?;
        result_of(&body)
    }

    /// A JSON-RPC request answered with a stream of JSON-RPC responses (SSE), or with
    /// one JSON document when the remote answers at once (an error, mostly).
    pub async fn stream(
        &self,
        url: &str,
        headers: HeaderMap,
        request: &JsonRpcRequest,
    ) -> Result<Events, CallError> {
        let send = self
            .client
            .post(url)
            .headers(headers)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(request)
            .send();
        let response = checked(send.await.map_err(transport)?).await?;
        let is_sse = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_sse {
            let body = read_capped(response, RESPONSE_MAX, "answer").await?;
            return Ok(Events {
                response: None,
                buffer: Vec::new(),
                single: Some(result_of(&body)),
            });
        }
        Ok(Events {
            response: Some(response),
            buffer: Vec::new(),
            single: None,
        })
    }
}

/// The results of a streamed answer, one per event.
pub struct Events {
    response: Option<reqwest::Response>,
    buffer: Vec<u8>,
    /// A non-stream answer, given once.
    single: Option<Result<Value, CallError>>,
}

impl Events {
    /// The next event's `result`; `None` at the end of the stream.
    pub async fn next(&mut self) -> Option<Result<Value, CallError>> {
        if let Some(single) = self.single.take() {
            return Some(single);
        }
        loop {
            if let Some(event) = take_event(&mut self.buffer) {
                let data = data_of(&event);
                if data.trim().is_empty() {
                    continue; // a comment or keep-alive
                }
                return Some(result_of(data.as_bytes()));
            }
            if self.buffer.len() > EVENT_MAX {
                self.response = None;
                return Some(Err(CallError::TooLarge("stream event", EVENT_MAX)));
            }
            let response = self.response.as_mut()?;
            match response.chunk().await {
                Ok(Some(chunk)) => self.buffer.extend_from_slice(&chunk),
                Ok(None) => {
                    self.response = None;
                    // A last event without its blank line still counts.
                    let rest = std::mem::take(&mut self.buffer);
                    let data = data_of(&rest);
                    return (!data.trim().is_empty()).then(|| result_of(data.as_bytes()));
                }
                Err(e) => {
                    self.response = None;
                    return Some(Err(transport(e)));
                }
            }
        }
    }
}

/// Takes one whole event (up to a blank line) off the front of `buffer`.
fn take_event(buffer: &mut Vec<u8>) -> Option<Vec<u8>> {
    let end = (0..buffer.len()).find_map(|i| {
        if buffer[i..].starts_with(b"\n\n") {
            Some((i, 2))
        } else if buffer[i..].starts_with(b"\r\n\r\n") {
            Some((i, 4))
        } else {
            None
        }
    })?;
    let (at, len) = end;
    let event = buffer[..at].to_vec();
    buffer.drain(..at + len);
    Some(event)
}

/// The `data:` lines of one event, joined by newlines.
fn data_of(event: &[u8]) -> String {
    String::from_utf8_lossy(event)
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|data| data.strip_prefix(' ').unwrap_or(data))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A JSON-RPC response's `result`, or its error.
fn result_of(body: &[u8]) -> Result<Value, CallError> {
    let response: JsonRpcResponse = serde_json::from_slice(body)
        .map_err(|e| CallError::Malformed(format!("not a JSON-RPC response ({e})")))?;
    if let Some(error) = response.error {
        return Err(CallError::Rpc {
            code: error.code,
            message: shown(&error.message),
        });
    }
    response.result.ok_or_else(|| {
        CallError::Malformed("a JSON-RPC response with neither result nor error".into())
    })
}

/// The response when its status is a success; otherwise the status and the start of
/// its body.
async fn checked(response: reqwest::Response) -> Result<reqwest::Response, CallError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let body = read_capped(response, 4096, "error")
        .await
        .map(|b| shown(&String::from_utf8_lossy(&b)))
        .unwrap_or_default();
    Err(CallError::Status(status.as_u16(), body))
}

/// The body, refused once it passes `cap` bytes (the rest is never read).
async fn read_capped(
    mut response: reqwest::Response,
    cap: usize,
    what: &'static str,
) -> Result<Vec<u8>, CallError> {
    if response
        .content_length()
        .is_some_and(|len| len as usize > cap)
    {
        return Err(CallError::TooLarge(what, cap));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(transport)? {
        if body.len() + chunk.len() > cap {
            return Err(CallError::TooLarge(what, cap));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A reqwest failure, without the URL's query (an API key may sit there).
fn transport(error: reqwest::Error) -> CallError {
    if error.is_timeout() {
        return CallError::Timeout;
    }
    let error = error.without_url();
    let mut message = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    CallError::Transport(shown(&message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_on_blank_lines_and_join_their_data_lines() {
        let mut buffer = b"data: {\"a\":\ndata: 1}\n\n: keep-alive\r\n\r\ndata: x".to_vec();
        let first = take_event(&mut buffer).expect("one event");
        assert_eq!(data_of(&first), "{\"a\":\n1}");
        let second = take_event(&mut buffer).expect("a comment");
        assert_eq!(data_of(&second), "");
        assert!(take_event(&mut buffer).is_none());
        assert_eq!(buffer, b"data: x");
    }

    #[test]
    fn a_json_rpc_error_is_an_error_and_garbage_is_malformed() {
        let error =
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"Task not found"}}"#;
        assert_eq!(
            result_of(error),
            Err(CallError::Rpc {
                code: -32001,
                message: "Task not found".into()
            })
        );
        assert!(matches!(result_of(b"<html>"), Err(CallError::Malformed(_))));
        assert!(matches!(
            result_of(br#"{"jsonrpc":"2.0","id":1}"#),
            Err(CallError::Malformed(_))
        ));
    }
}
