//! The HTTP client rmcp's streamable HTTP transport uses: reqwest, with the server's
//! current OAuth access token (when it has a grant) set on every request, so a
//! connection kept for many turns sends each refreshed token. A request the server
//! answers with 401 is sent once more with a replaced token.
//!
//! Without a grant it is plain reqwest. A request whose `_meta` carries a W3C
//! `traceparent` (SEP-414; `connection.rs` sets it from the calling span) also carries it
//! as the HTTP header, so the server's HTTP tracing continues the caller's trace even
//! though rmcp posts from a task of its own. What must not live here: getting tokens
//! (`oauth`).

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use reqwest_mcp::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, GetMeta, JsonRpcMessage};
use rmcp::transport::common::client_side_sse::BoxedSseResponse;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};

use super::oauth::{AccessToken, TokenError, TokenSource};

type HttpError = StreamableHttpError<reqwest_mcp::Error>;

/// reqwest, and the token source of the server's grant if it has one.
#[derive(Clone)]
pub(crate) struct BearerClient {
    http: reqwest_mcp::Client,
    tokens: Option<Arc<TokenSource>>,
}

impl BearerClient {
    pub(crate) fn new(http: reqwest_mcp::Client, tokens: Option<Arc<TokenSource>>) -> Self {
        Self { http, tokens }
    }

    /// Runs `send` with the current token (or rmcp's own `auth`, none, without a
    /// grant); after a 401, once more with a replaced token.
    async fn authorized<T, F, Fut>(&self, auth: Option<String>, send: F) -> Result<T, HttpError>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = Result<T, HttpError>>,
    {
        let Some(tokens) = &self.tokens else {
            return send(auth).await;
        };
        let token = tokens.token().await.map_err(token_failure)?;
        match send(Some(token.secret().to_owned())).await {
            Err(error) if is_unauthorized(&error) => {
                let fresh: AccessToken = tokens.replace(&token).await.map_err(token_failure)?;
                tracing::debug!("MCP server refused its access token; sent again with a new one");
                send(Some(fresh.secret().to_owned())).await
            }
            other => other,
        }
    }
}

/// `headers` with the `traceparent` and `tracestate` of `message`'s `_meta`, if any.
fn with_trace(
    message: &ClientJsonRpcMessage,
    mut headers: HashMap<HeaderName, HeaderValue>,
) -> HashMap<HeaderName, HeaderValue> {
    let JsonRpcMessage::Request(request) = message else {
        return headers;
    };
    let params = match &request.request {
        ClientRequest::CallToolRequest(call) => call.params.meta.as_ref(),
        _ => None,
    };
    let extensions = request.request.get_meta();
    for (name, value) in [
        (
            "traceparent",
            extensions
                .get_traceparent()
                .or_else(|| params.and_then(|m| m.get_traceparent())),
        ),
        (
            "tracestate",
            extensions
                .get_tracestate()
                .or_else(|| params.and_then(|m| m.get_tracestate())),
        ),
    ] {
        if let Some(Ok(value)) = value.map(HeaderValue::from_str) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    headers
}

/// A token failure as a transport error (rmcp's error type is generic over the HTTP
/// client's only); `connection` shows its message as is.
fn token_failure(error: TokenError) -> HttpError {
    StreamableHttpError::Io(std::io::Error::other(error))
}

/// Whether the server answered 401: with a challenge (rmcp's `AuthRequired`) or
/// without one.
fn is_unauthorized(error: &HttpError) -> bool {
    match error {
        StreamableHttpError::AuthRequired(_) => true,
        StreamableHttpError::UnexpectedServerResponse(text) => text.starts_with("HTTP 401"),
        StreamableHttpError::Client(error) => {
            error.status() == Some(reqwest_mcp::StatusCode::UNAUTHORIZED)
        }
        _ => false,
    }
}

impl StreamableHttpClient for BearerClient {
    type Error = reqwest_mcp::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let headers = with_trace(&message, headers);
        self.authorized(auth, |token| {
            self.http.post_message(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                headers.clone(),
            )
        })
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let headers = with_trace(&message, headers);
        self.authorized(auth, |token| {
            self.http.post_message_with_max_sse_event_size(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let headers = with_trace(&message, headers);
        self.authorized(auth, |token| {
            self.http.post_message_with_response_limits(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                headers.clone(),
                limits,
            )
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        self.authorized(auth, |token| {
            self.http
                .delete_session(uri.clone(), session_id.clone(), token, headers.clone())
        })
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxedSseResponse, HttpError> {
        self.authorized(auth, |token| {
            self.http.get_stream(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                headers.clone(),
            )
        })
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxedSseResponse, HttpError> {
        self.authorized(auth, |token| {
            self.http.get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }
}
