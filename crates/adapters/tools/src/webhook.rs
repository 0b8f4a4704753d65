//! Webhook POSTs of finished executions: the engine's `WebhookSender` port.
//!
//! Here because the process's one outbound address screen lives beside it (`web.rs`):
//! every address a webhook host resolves to must be public unless private webhooks are
//! allowed, the connection is pinned to the screened addresses (no second lookup to
//! rebind), and no redirect is followed. The body is signed with HMAC-SHA256 over
//! `"{timestamp}.{body}"`; the secret never leaves this type (not in `Debug`, logs or
//! errors). What must not live here: retry decisions (the engine's) or any state.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentplane_engine::executions::{WebhookOutcome, WebhookRequest, WebhookSender};
use async_trait::async_trait;
use hmac::{KeyInit, Mac};
use reqwest::Url;
use reqwest::header::CONTENT_TYPE;

use crate::web::{ip_literal, non_public_kind, pinned_client};

/// The header with the delivery id (the same at every attempt: dedupe on it).
pub const DELIVERY_HEADER: &str = "x-agentplane-delivery";
/// The header with the signing time, in Unix seconds.
pub const TIMESTAMP_HEADER: &str = "x-agentplane-timestamp";
/// The header with `sha256=` and the hex HMAC-SHA256 of `"{timestamp}.{body}"`.
pub const SIGNATURE_HEADER: &str = "x-agentplane-signature";
/// The header with the event name.
pub const EVENT_HEADER: &str = "x-agentplane-event";

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// How webhooks are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebhookSettings {
    /// Allow loopback, private, link-local… addresses (a receiver on this machine).
    pub allow_private: bool,
    /// Longest POST, connection included.
    pub timeout: Duration,
}

/// Sends signed webhook POSTs.
pub struct WebhookClient {
    secret: Vec<u8>,
    settings: WebhookSettings,
    screen: fn(IpAddr) -> Option<&'static str>,
}

impl fmt::Debug for WebhookClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookClient")
            .field("secret", &"<redacted>")
            .field("settings", &self.settings)
            .finish()
    }
}

impl WebhookClient {
    /// A client signing with `secret`.
    pub fn new(secret: &[u8], settings: WebhookSettings) -> Self {
        Self {
            secret: secret.to_vec(),
            settings,
            screen: non_public_kind,
        }
    }

    fn parse(&self, url: &str) -> Result<Url, String> {
        let parsed = Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!(
                "scheme {:?} refused: only http and https",
                parsed.scheme()
            ));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err("URLs with credentials are refused".to_owned());
        }
        if parsed.host_str().is_none_or(str::is_empty) {
            return Err("the URL has no host".to_owned());
        }
        Ok(parsed)
    }

    /// Resolves the host and screens every address.
    async fn admit(&self, url: &Url) -> Result<Vec<SocketAddr>, WebhookOutcome> {
        let host = url.host_str().unwrap_or_default();
        let port = url.port_or_known_default().unwrap_or(80);
        let addrs: Vec<SocketAddr> = match ip_literal(host) {
            Some(ip) => vec![SocketAddr::new(ip, port)],
            None => match tokio::net::lookup_host((host, port)).await {
                Ok(addrs) => addrs.collect(),
                Err(e) => {
                    return Err(WebhookOutcome::Failed {
                        status: None,
                        error: format!("could not resolve {host}: {e}"),
                    });
                }
            },
        };
        if addrs.is_empty() {
            return Err(WebhookOutcome::Failed {
                status: None,
                error: format!("{host} has no addresses"),
            });
        }
        if !self.settings.allow_private {
            for addr in &addrs {
                if let Some(kind) = (self.screen)(addr.ip()) {
                    return Err(WebhookOutcome::Refused {
                        error: format!(
                            "{host} resolves to {}, a {kind} address; private webhooks are \
                             not allowed (`[executions] allow_private_webhooks`)",
                            addr.ip()
                        ),
                    });
                }
            }
        }
        Ok(addrs)
    }
}

/// `sha256=` and the hex HMAC-SHA256 of `"{timestamp}.{body}"` with `secret`: the
/// value of [`SIGNATURE_HEADER`].
pub fn signature(secret: &[u8], timestamp: u64, body: &[u8]) -> String {
    // HMAC takes a key of any length: this never fails, and if it did, a signature
    // that matches nothing is what a receiver must refuse anyway.
    let Ok(mut mac) = HmacSha256::new_from_slice(secret) else {
        return "sha256=".to_owned();
    };
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let mut hex = String::with_capacity(7 + digest.len() * 2);
    hex.push_str("sha256=");
    for byte in digest.iter() {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

#[async_trait]
impl WebhookSender for WebhookClient {
    fn check(&self, url: &str) -> Result<(), String> {
        let parsed = self.parse(url)?;
        if !self.settings.allow_private
            && let Some(ip) = parsed.host_str().and_then(ip_literal)
            && let Some(kind) = (self.screen)(ip)
        {
            return Err(format!(
                "{ip} is a {kind} address; private webhooks are not allowed"
            ));
        }
        Ok(())
    }

    async fn send(&self, request: WebhookRequest<'_>) -> WebhookOutcome {
        let url = match self.parse(request.url) {
            Ok(url) => url,
            Err(error) => return WebhookOutcome::Refused { error },
        };
        let addrs = match self.admit(&url).await {
            Ok(addrs) => addrs,
            Err(outcome) => return outcome,
        };
        let client = match pinned_client(&url, &addrs, self.settings.timeout) {
            Ok(client) => client,
            Err(e) => {
                return WebhookOutcome::Failed {
                    status: None,
                    error: e.message,
                };
            }
        };
        let timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        let mut extra = reqwest::header::HeaderMap::new();
        for (name, value) in request.headers {
            let (Ok(name), Ok(value)) = (
                reqwest::header::HeaderName::from_bytes(name.as_bytes()),
                reqwest::header::HeaderValue::from_str(value),
            ) else {
                return WebhookOutcome::Refused {
                    error: format!("the header {name:?} is not a valid header"),
                };
            };
            extra.insert(name, value);
        }
        // The delivery's span (`webhook_span`), so a receiver that traces continues it.
        if let Some(traceparent) = agentplane_engine::ports::telemetry::current_traceparent()
            && let Ok(value) = reqwest::header::HeaderValue::from_str(&traceparent)
        {
            extra.insert("traceparent", value);
        }
        let sent = client
            .post(url)
            .headers(extra)
            .header(CONTENT_TYPE, "application/json")
            .header(DELIVERY_HEADER, request.delivery.as_str())
            .header(TIMESTAMP_HEADER, timestamp.to_string())
            .header(
                SIGNATURE_HEADER,
                signature(&self.secret, timestamp, request.body),
            )
            .header(EVENT_HEADER, request.event)
            .body(request.body.to_vec())
            .send()
            .await;
        match sent {
            Ok(response) if response.status().is_success() => WebhookOutcome::Delivered {
                status: response.status().as_u16(),
            },
            Ok(response) => WebhookOutcome::Failed {
                status: Some(response.status().as_u16()),
                error: format!("the receiver answered {}", response.status()),
            },
            Err(e) if e.is_timeout() => WebhookOutcome::Failed {
                status: None,
                error: "the POST timed out".to_owned(),
            },
            Err(e) => WebhookOutcome::Failed {
                status: None,
                error: format!("the POST failed: {}", without_url(&e)),
            },
        }
    }
}

/// A reqwest error's text without the URL (which may carry a token in its query).
fn without_url(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    if let Some(url) = error.url() {
        text = text.replace(url.as_str(), "<url>");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(allow_private: bool) -> WebhookClient {
        WebhookClient::new(
            b"secret",
            WebhookSettings {
                allow_private,
                timeout: Duration::from_secs(1),
            },
        )
    }

    #[test]
    fn urls_are_checked_before_anything_is_queued() {
        let strict = client(false);
        assert!(strict.check("https://hooks.example.com/x?y=1").is_ok());
        for bad in [
            "",
            "hooks.example.com",
            "ftp://example.com/",
            "file:///etc/passwd",
            "https://user:pw@example.com/",
            "http://127.0.0.1:9/",
            "http://[::1]/",
            "http://10.1.2.3/",
            "http://169.254.169.254/latest/meta-data",
            "http://[::ffff:127.0.0.1]/",
            "http://0.0.0.0/",
        ] {
            assert!(strict.check(bad).is_err(), "{bad} passed");
        }
        assert!(client(true).check("http://127.0.0.1:9/").is_ok());
    }

    #[test]
    fn the_signature_is_hmac_sha256_over_timestamp_dot_body() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        let sig = signature(b"Jefe", 0, b"");
        assert!(sig.starts_with("sha256=") && sig.len() == 7 + 64, "{sig}");
        let mut mac = HmacSha256::new_from_slice(b"Jefe").expect("key");
        mac.update(b"what do ya want for nothing?");
        let hex: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_ne!(signature(b"Jefe", 1, b"x"), signature(b"Jefe", 2, b"x"));
        assert_ne!(signature(b"a", 1, b"x"), signature(b"b", 1, b"x"));
    }

    #[test]
    fn the_secret_is_never_printed() {
        let text = format!("{:?}", client(false));
        // `b"secret"` as bytes would start `[115, 101`.
        assert!(
            !text.contains("115, 101") && !text.contains("secret\\"),
            "{text}"
        );
        assert!(text.contains("<redacted>"), "{text}");
    }
}
