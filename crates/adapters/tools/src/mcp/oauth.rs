//! Access tokens for an HTTP server from an OAuth 2.0 client-credentials grant (RFC
//! 6749 §4.4): fetched on first use, cached, fetched again before they expire or once
//! after the server refused one. One [`TokenSource`] per server, shared by all its
//! connections; concurrent callers wait for one fetch (the cache's lock is held
//! across it).
//!
//! Tokens and the client secret never appear in `Debug` output, errors or logs: a
//! token is an [`AccessToken`], and an error from the token endpoint is reported by
//! its HTTP status and its `error` code only (never its body or description). What
//! must not live here: how a token reaches a request (`bearer`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest_mcp::header::{ACCEPT, CONTENT_TYPE};
use serde::Deserialize;

use super::client;
use super::spec::{ClientAuth, OAuthClient};

/// How long a token request may take, body included.
const TOKEN_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest token response read; past it the answer is refused, not parsed.
const MAX_TOKEN_RESPONSE: usize = 16 * 1024;

/// A token is fetched again when less than this, or a fifth of its lifetime, is left
/// (whichever is longer, but never more than half its lifetime).
const MIN_REFRESH_MARGIN: Duration = Duration::from_secs(30);

/// The longest lifetime believed (a year); a larger `expires_in` counts as this.
const MAX_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);

/// An access token. Shown nowhere: `Debug` prints `[redacted]`, and there is no
/// `Display`.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct AccessToken(Arc<str>);

impl AccessToken {
    /// The token itself, for the `Authorization` header only.
    pub(crate) fn secret(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Why no token could be had; the message names the server, never a token or secret.
#[derive(Debug, Clone)]
pub(crate) struct TokenError(String);

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TokenError {}

/// The tokens of one server's grant.
pub(crate) struct TokenSource {
    server: String,
    grant: OAuthClient,
    cache: tokio::sync::Mutex<Option<Cached>>,
}

struct Cached {
    token: AccessToken,
    /// When to fetch a new one; `None` (no `expires_in`): when the server refuses it.
    refresh_at: Option<Instant>,
}

/// A token response (RFC 6749 §5.1); other fields are ignored.
#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    token_type: Option<String>,
    #[serde(default)]
    expires_in: Option<serde_json::Value>,
}

/// An error response (RFC 6749 §5.2): only its code is read.
#[derive(Deserialize)]
struct ErrorResponse {
    error: String,
}

impl TokenSource {
    /// The token source of server `server`'s grant; nothing is fetched yet.
    pub(crate) fn new(server: &str, grant: OAuthClient) -> Self {
        Self {
            server: server.to_owned(),
            grant,
            cache: tokio::sync::Mutex::new(None),
        }
    }

    /// A token to send now: the cached one while it is fresh, else a new one.
    pub(crate) async fn token(&self) -> Result<AccessToken, TokenError> {
        let mut cache = self.cache.lock().await;
        if let Some(cached) = cache.as_ref()
            && cached.refresh_at.is_none_or(|at| Instant::now() < at)
        {
            return Ok(cached.token.clone());
        }
        let fresh = self.fetch().await?;
        let token = fresh.token.clone();
        *cache = Some(fresh);
        Ok(token)
    }

    /// A token to send instead of `rejected`, which the server refused: the cached one
    /// if another caller already replaced it, else a new one.
    pub(crate) async fn replace(&self, rejected: &AccessToken) -> Result<AccessToken, TokenError> {
        let mut cache = self.cache.lock().await;
        if let Some(cached) = cache.as_ref()
            && &cached.token != rejected
        {
            return Ok(cached.token.clone());
        }
        *cache = None;
        let fresh = self.fetch().await?;
        let token = fresh.token.clone();
        *cache = Some(fresh);
        Ok(token)
    }

    fn failed(&self, reason: impl std::fmt::Display) -> TokenError {
        TokenError(format!(
            "no access token for MCP server `{}` from its token endpoint: {reason}",
            self.server
        ))
    }

    /// The token request's form body, and the HTTP Basic credentials when the client
    /// authenticates that way (RFC 6749 §2.3.1: id and secret form-encoded first).
    fn form(&self) -> (String, Option<(String, String)>) {
        let grant = &self.grant;
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", "client_credentials");
        if !grant.scopes.is_empty() {
            form.append_pair("scope", &grant.scopes.join(" "));
        }
        if let Some(resource) = &grant.resource {
            form.append_pair("resource", resource);
        }
        if let Some(audience) = &grant.audience {
            form.append_pair("audience", audience);
        }
        let basic = match grant.client_auth {
            ClientAuth::Basic => Some((
                form_encoded(&grant.client_id),
                form_encoded(&grant.client_secret),
            )),
            ClientAuth::Post => {
                form.append_pair("client_id", &grant.client_id);
                form.append_pair("client_secret", &grant.client_secret);
                None
            }
        };
        (form.finish(), basic)
    }

    /// One token request.
    async fn fetch(&self) -> Result<Cached, TokenError> {
        let (form, basic) = self.form();
        let client = client::client().map_err(|e| self.failed(e))?;
        let mut request = client
            .post(&self.grant.token_url)
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(ACCEPT, "application/json")
            .timeout(TOKEN_TIMEOUT)
            .body(form);
        if let Some((id, secret)) = basic {
            request = request.basic_auth(id, Some(secret));
        }
        let mut response = request
            .send()
            .await
            .map_err(|e| self.failed(request_error(e)))?;
        let status = response.status();
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() + chunk.len() > MAX_TOKEN_RESPONSE {
                        return Err(self.failed(format!(
                            "HTTP {}, an answer over {} KiB",
                            status.as_u16(),
                            MAX_TOKEN_RESPONSE / 1024
                        )));
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => return Err(self.failed(request_error(e))),
            }
        }
        if !status.is_success() {
            let code = serde_json::from_slice::<ErrorResponse>(&body)
                .ok()
                .and_then(|e| printable_code(&e.error))
                .map_or_else(|| "no error code".to_owned(), |code| format!("`{code}`"));
            return Err(self.failed(format!("HTTP {} ({code})", status.as_u16())));
        }
        let answer: TokenResponse = serde_json::from_slice(&body).map_err(|_| {
            self.failed(format!(
                "HTTP {}, but not a token response (JSON with `access_token`)",
                status.as_u16()
            ))
        })?;
        if let Some(kind) = &answer.token_type
            && !kind.eq_ignore_ascii_case("bearer")
        {
            let kind = printable_code(kind).unwrap_or_else(|| "?".to_owned());
            return Err(self.failed(format!(
                "token_type `{kind}`; only Bearer tokens are supported"
            )));
        }
        // RFC 6750 §2.1: a b64token, so it fits an `Authorization` header as is.
        if answer.access_token.is_empty()
            || !answer
                .access_token
                .bytes()
                .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\' && b != b',')
        {
            return Err(self.failed("an access token that is not a bearer token's characters"));
        }
        let lifetime = lifetime(answer.expires_in.as_ref()).map_err(|m| self.failed(m))?;
        tracing::debug!(
            server = %self.server,
            lifetime_secs = lifetime.map(|l| l.as_secs_f64()),
            "MCP access token fetched"
        );
        Ok(Cached {
            token: AccessToken(answer.access_token.into()),
            refresh_at: lifetime.map(|lifetime| Instant::now() + lifetime - margin(lifetime)),
        })
    }
}

/// How long before its expiry a token of `lifetime` is replaced.
fn margin(lifetime: Duration) -> Duration {
    (lifetime / 5).max(MIN_REFRESH_MARGIN).min(lifetime / 2)
}

/// `expires_in` as a lifetime: a positive number of seconds (a numeric string too, as
/// some issuers send); absent means unknown (`None`).
fn lifetime(expires_in: Option<&serde_json::Value>) -> Result<Option<Duration>, String> {
    let Some(value) = expires_in else {
        return Ok(None);
    };
    let seconds = match value {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
    .filter(|s| s.is_finite())
    .ok_or_else(|| "an `expires_in` that is not a number of seconds".to_owned())?;
    if seconds <= 0.0 {
        return Err(format!(
            "a token that has already expired (expires_in {seconds})"
        ));
    }
    Ok(Some(
        Duration::try_from_secs_f64(seconds)
            .unwrap_or(MAX_LIFETIME)
            .min(MAX_LIFETIME),
    ))
}

/// An OAuth error code as RFC 6749 §5.2 allows it (printable ASCII without `"` and
/// `\`), at most 64 characters; anything else is not shown.
fn printable_code(code: &str) -> Option<String> {
    let fits = !code.is_empty()
        && code.len() <= 64
        && code
            .bytes()
            .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\');
    fits.then(|| code.to_owned())
}

fn form_encoded(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// A failed request, its causes, and not its URL.
fn request_error(error: reqwest_mcp::Error) -> String {
    let timed_out = error.is_timeout();
    let error = error.without_url();
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    if timed_out {
        text.push_str(&format!(
            " (no answer within {} s)",
            TOKEN_TIMEOUT.as_secs()
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn refresh_margins() {
        assert_eq!(margin(Duration::from_secs(2)), Duration::from_secs(1));
        assert_eq!(margin(Duration::from_secs(100)), Duration::from_secs(30));
        assert_eq!(margin(Duration::from_secs(3600)), Duration::from_secs(720));
    }

    #[test]
    fn lifetimes() {
        assert_eq!(lifetime(None), Ok(None));
        assert_eq!(lifetime(Some(&json!(2))), Ok(Some(Duration::from_secs(2))));
        assert_eq!(
            lifetime(Some(&json!("60"))),
            Ok(Some(Duration::from_secs(60)))
        );
        assert_eq!(lifetime(Some(&json!(1e300))), Ok(Some(MAX_LIFETIME)));
        for bad in [json!(0), json!(-5), json!("soon"), json!(null), json!([1])] {
            assert!(lifetime(Some(&bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn tokens_and_codes_are_never_shown_raw() {
        let token = AccessToken("tok-abc".into());
        assert_eq!(format!("{token:?}"), "[redacted]");
        assert_eq!(
            printable_code("invalid_client").as_deref(),
            Some("invalid_client")
        );
        assert_eq!(printable_code("a\"b"), None);
        assert_eq!(printable_code(&"x".repeat(65)), None);
        assert_eq!(
            form_encoded("s3cret:client/secret"),
            "s3cret%3Aclient%2Fsecret"
        );
    }
}
