//! One configured remote agent: its settings with secrets filled in, its HTTP client,
//! its cached card, the contexts it continues per thread, and the three requests the
//! client makes (send, stream, cancel) in the generation the card chose.
//!
//! The credential is held in a [`Credential`], whose `Debug` prints no value, and is
//! put in a header marked sensitive (or, when the card asks for it there, the query).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use reqwest::header::{COOKIE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use url::Url;

use super::card::{self, Placement, Remote, Version};
use super::http::{CallError, Events, Http};
use crate::v0_3;
use crate::wire::{self, JsonRpcRequest};

/// How long a fetched card is used before it is fetched again.
const CARD_TTL: Duration = Duration::from_secs(300);
/// How long a cancel may take before we stop waiting for its answer.
pub const CANCEL_WAIT: Duration = Duration::from_secs(2);

/// A secret value (an API key, a header holding one). `Debug` shows no value.
#[derive(Clone)]
pub struct Credential(String);

impl Credential {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    fn value(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credential(..)")
    }
}

/// A remote agent of `kind = "a2a"` as the runtime resolved it.
#[derive(Debug, Clone)]
pub struct A2aRemoteConfig {
    /// Our name for the agent (`[agents.NAME]`).
    pub name: String,
    /// Where its Agent Card is.
    pub card_url: String,
    /// Sent where the card's security scheme says.
    pub api_key: Option<Credential>,
    /// More headers, on every request (the card's fetch too).
    pub headers: Vec<(String, Credential)>,
    /// Secrets the configuration names that are not set: the agent is unavailable.
    pub missing: Vec<String>,
    /// Connecting, and the card's fetch.
    pub connect_timeout: Duration,
    /// One whole exchange with the remote (a message to its task's end or pause).
    pub task_timeout: Duration,
    /// The most one exchange may cost (`[agents.NAME] max_cost_usd`), in
    /// micro-dollars: the ceiling a budget reserves when a native agent asks it as
    /// the `a2a__NAME` tool.
    pub max_cost_micros: Option<u64>,
}

/// What a remote agent's requests share.
pub struct Connection {
    pub config: A2aRemoteConfig,
    http: Result<Http, String>,
    card: tokio::sync::Mutex<Option<(Remote, Instant)>>,
    /// The remote's context of each of our threads (by thread id), so a thread's next
    /// turn continues it. Kept in memory: after a restart a thread starts a new remote
    /// context, and its earlier turns are sent along as text instead.
    contexts: Mutex<HashMap<String, String>>,
}

impl Connection {
    pub fn new(config: A2aRemoteConfig) -> Self {
        let http = Http::new(config.connect_timeout);
        Self {
            config,
            http,
            card: tokio::sync::Mutex::new(None),
            contexts: Mutex::new(HashMap::new()),
        }
    }

    fn http(&self) -> Result<&Http, CallError> {
        self.http
            .as_ref()
            .map_err(|m| CallError::Transport(m.clone()))
    }

    /// The card, from the cache while it is fresh; `fetched` says whether this call
    /// fetched it (so the fetch is recorded).
    pub async fn card(&self) -> Result<(Remote, bool), String> {
        if let Some(missing) = self.config.missing.first() {
            return Err(format!(
                "the remote A2A agent `{}` needs {missing}",
                self.config.name
            ));
        }
        let mut cached = self.card.lock().await;
        if let Some((remote, at)) = cached.as_ref()
            && at.elapsed() < CARD_TTL
        {
            return Ok((remote.clone(), false));
        }
        let card_url = Url::parse(&self.config.card_url)
            .map_err(|e| format!("the Agent Card URL is not a URL: {e}"))?;
        let http = self.http().map_err(|e| e.to_string())?;
        let value = http
            .get_json(
                card_url.as_str(),
                self.extra_headers()?,
                self.config.connect_timeout,
            )
            .await
            .map_err(|e| {
                format!(
                    "the Agent Card of the remote A2A agent `{}` could not be read: {e}",
                    self.config.name
                )
            })?;
        let remote = card::read(value, &card_url)
            .map_err(|e| format!("the remote A2A agent `{}`: {e}", self.config.name))?;
        *cached = Some((remote.clone(), Instant::now()));
        Ok((remote, true))
    }

    /// Forgets the cached card (after a request failed: the agent may have moved).
    pub async fn forget_card(&self) {
        *self.card.lock().await = None;
    }

    pub fn context_of(&self, thread: &str) -> Option<String> {
        self.contexts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(thread)
            .cloned()
    }

    pub fn remember_context(&self, thread: &str, context: &str) {
        if context.is_empty() {
            return;
        }
        self.contexts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(thread.to_owned(), context.to_owned());
    }

    /// The configured headers, without the credential.
    fn extra_headers(&self) -> Result<HeaderMap, String> {
        let mut headers = HeaderMap::new();
        for (name, value) in &self.config.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("`{name}` is not a header name"))?;
            let mut value = HeaderValue::from_str(value.value())
                .map_err(|_| format!("the header `{name}` has a value that cannot be sent"))?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        Ok(headers)
    }

    /// The endpoint and headers of a request to `remote`, the credential placed where
    /// its card says.
    fn target(&self, remote: &Remote) -> Result<(Url, HeaderMap), CallError> {
        let mut headers = self.extra_headers().map_err(CallError::Transport)?;
        let mut endpoint = remote.endpoint.clone();
        if remote.version == Version::V1_0 {
            headers.insert(
                wire::VERSION_HEADER,
                HeaderValue::from_static(wire::PROTOCOL_VERSION),
            );
        }
        if let Some(key) = &self.config.api_key {
            let unsendable =
                || CallError::Transport("the API key cannot be sent in an HTTP header".into());
            let sensitive = |text: String| {
                HeaderValue::from_str(&text).map(|mut v| {
                    v.set_sensitive(true);
                    v
                })
            };
            match &remote.placement {
                Placement::Bearer => {
                    let value =
                        sensitive(format!("Bearer {}", key.value())).map_err(|_| unsendable())?;
                    headers.insert(reqwest::header::AUTHORIZATION, value);
                }
                Placement::Header(name) => {
                    let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                        CallError::Malformed("the card names an invalid API key header".into())
                    })?;
                    let value = sensitive(key.value().to_owned()).map_err(|_| unsendable())?;
                    headers.insert(name, value);
                }
                Placement::Query(name) => {
                    endpoint.query_pairs_mut().append_pair(name, key.value());
                }
                Placement::Cookie(name) => {
                    let value =
                        sensitive(format!("{name}={}", key.value())).map_err(|_| unsendable())?;
                    headers.insert(COOKIE, value);
                }
            }
        }
        Ok((endpoint, headers))
    }

    /// `SendMessage` (`message/send`): the task or message it answered, as 1.0.
    pub async fn send(
        &self,
        remote: &Remote,
        message: &wire::Message,
    ) -> Result<wire::StreamResponse, CallError> {
        let (url, headers) = self.target(remote)?;
        let request = request(remote, Method::Send, message_params(remote, message));
        let result = self
            .http()?
            .call(url.as_str(), headers, &request, self.config.task_timeout)
            .await?;
        decode(remote.version, result)
    }

    /// `SendStreamingMessage` (`message/stream`): its events.
    pub async fn stream(
        &self,
        remote: &Remote,
        message: &wire::Message,
    ) -> Result<Events, CallError> {
        let (url, headers) = self.target(remote)?;
        let request = request(remote, Method::Stream, message_params(remote, message));
        self.http()?.stream(url.as_str(), headers, &request).await
    }

    /// `GetTask` (`tasks/get`): the task as it stands, as 1.0.
    pub async fn get(
        &self,
        remote: &Remote,
        task: &str,
    ) -> Result<wire::StreamResponse, CallError> {
        let (url, headers) = self.target(remote)?;
        let params = match remote.version {
            Version::V1_0 => serde_json::to_value(wire::GetTaskRequest {
                tenant: remote.tenant.clone(),
                id: task.to_owned(),
                history_length: Some(0),
            }),
            Version::V0_3 => serde_json::to_value(v0_3::TaskQueryParams {
                id: task.to_owned(),
                history_length: Some(0),
                metadata: None,
            }),
        }
        .unwrap_or(Value::Null);
        let request = request(remote, Method::Get, params);
        let result = self
            .http()?
            .call(url.as_str(), headers, &request, self.config.connect_timeout)
            .await?;
        // A task, whichever generation: a 0.3 task carries `kind: "task"`.
        match remote.version {
            Version::V1_0 => serde_json::from_value::<wire::Task>(result)
                .map(wire::StreamResponse::Task)
                .map_err(|e| CallError::Malformed(format!("an unreadable task ({e})"))),
            Version::V0_3 => decode(remote.version, result),
        }
    }

    /// `CancelTask` (`tasks/cancel`), waiting at most [`CANCEL_WAIT`].
    pub async fn cancel(&self, remote: &Remote, task: &str) -> Result<(), CallError> {
        let (url, headers) = self.target(remote)?;
        let params = match remote.version {
            Version::V1_0 => serde_json::to_value(wire::CancelTaskRequest {
                tenant: remote.tenant.clone(),
                id: task.to_owned(),
                metadata: None,
            }),
            Version::V0_3 => serde_json::to_value(v0_3::TaskIdParams {
                id: task.to_owned(),
                metadata: None,
            }),
        }
        .unwrap_or(Value::Null);
        let request = request(remote, Method::Cancel, params);
        self.http()?
            .call(url.as_str(), headers, &request, CANCEL_WAIT)
            .await
            .map(|_| ())
    }
}

/// The requests the client makes.
#[derive(Debug, Clone, Copy)]
pub enum Method {
    Send,
    Stream,
    Get,
    Cancel,
}

impl Method {
    /// The method's name in `version`.
    pub fn name(self, version: Version) -> &'static str {
        match (version, self) {
            (Version::V1_0, Self::Send) => wire::methods::SEND_MESSAGE,
            (Version::V1_0, Self::Stream) => wire::methods::SEND_STREAMING_MESSAGE,
            (Version::V1_0, Self::Get) => wire::methods::GET_TASK,
            (Version::V1_0, Self::Cancel) => wire::methods::CANCEL_TASK,
            (Version::V0_3, Self::Send) => v0_3::methods::MESSAGE_SEND,
            (Version::V0_3, Self::Stream) => v0_3::methods::MESSAGE_STREAM,
            (Version::V0_3, Self::Get) => v0_3::methods::TASKS_GET,
            (Version::V0_3, Self::Cancel) => v0_3::methods::TASKS_CANCEL,
        }
    }
}

fn request(remote: &Remote, method: Method, params: Value) -> JsonRpcRequest {
    JsonRpcRequest::new(
        uuid::Uuid::now_v7().to_string(),
        method.name(remote.version),
        params,
    )
}

fn message_params(remote: &Remote, message: &wire::Message) -> Value {
    match remote.version {
        Version::V1_0 => serde_json::to_value(wire::SendMessageRequest {
            tenant: remote.tenant.clone(),
            message: message.clone(),
            configuration: Some(wire::SendMessageConfiguration {
                accepted_output_modes: vec!["text/plain".into(), "application/json".into()],
                ..Default::default()
            }),
            metadata: None,
        }),
        Version::V0_3 => serde_json::to_value(v0_3::MessageSendParams {
            message: v0_3::message_from_v1(message),
            configuration: None,
            metadata: None,
        }),
    }
    .unwrap_or(Value::Null)
}

/// A send result or stream item of `version`, as 1.0.
pub fn decode(version: Version, result: Value) -> Result<wire::StreamResponse, CallError> {
    let malformed =
        |e: serde_json::Error| CallError::Malformed(format!("an unreadable result ({e})"));
    match version {
        Version::V1_0 => serde_json::from_value(result).map_err(malformed),
        Version::V0_3 => {
            let event: v0_3::Event = serde_json::from_value(result).map_err(malformed)?;
            Ok(v0_3::event_to_v1(&event))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_never_prints_its_value() {
        let config = A2aRemoteConfig {
            name: "peer".into(),
            card_url: "http://127.0.0.1:9/".into(),
            api_key: Some(Credential::new("s3cr3t-value")),
            headers: vec![("X-Key".into(), Credential::new("s3cr3t-value"))],
            missing: Vec::new(),
            connect_timeout: Duration::from_secs(1),
            task_timeout: Duration::from_secs(1),
            max_cost_micros: None,
        };
        let shown = format!("{config:?}");
        assert!(
            shown.contains("peer") && !shown.contains("s3cr3t"),
            "{shown}"
        );
    }
}
