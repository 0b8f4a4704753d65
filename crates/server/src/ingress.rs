//! The ingress guard: one layer around the whole router, so every route family — `/v1`,
//! `/mcp`, `/mcp/gateway`, `/a2a`, `/openai`, `/metrics`, the web UI's files and a
//! route added tomorrow — is protected from what a web page can make a visitor's
//! browser send, before any route, credential check or handler sees the request.
//!
//! A page can make a browser send, without a CORS preflight, a request to
//! `127.0.0.1`: a `GET`, or a `POST` whose `Content-Type` is `text/plain`,
//! `application/x-www-form-urlencoded` or `multipart/form-data`. On a server without a
//! credential nothing else stood in its way (issue 49: `/a2a/{agent}` ran a turn with the
//! page's text). So, in this order, each refusal a `403 FORBIDDEN` in the standard
//! envelope (its `details.refused` says which rule) and a `security_event` line:
//!
//! 1. **`Host`** (DNS rebinding: a foreign name resolving to 127.0.0.1): on a server that
//!    requires no token, only a loopback name (`localhost`, `127.0.0.0/8`, `[::1]`) is
//!    served. With a token the server may have any name, and the token is the guard.
//!    A request naming no host (HTTP/1.0, a test's in-process call) is not a browser's.
//! 2. **`Origin`** (a cross-site request): absent is a non-browser client (CLI, SDKs,
//!    MCP and A2A clients) or a same-origin `GET`, and passes; present, it must be a
//!    loopback origin, one `[server] allowed_origins` lists (`origin.rs`), or — on a
//!    server with a token — this server's own origin (the web UI served under the
//!    public name it is reached by).
//! 3. **No state change from a simple request**: a method other than `GET`, `HEAD`,
//!    `OPTIONS` with one of the three content types above is refused whatever its
//!    origin. No route takes those types, and an old or odd browser may omit `Origin`.
//! 4. **The declared body length** over the limit is `413` (`body_limit.rs`).
//!
//! The stream caps need the caller, so they are counted after authentication, by the
//! one follower registry (`followers.rs`) that every stream following a thread takes a
//! place from: `/v1/threads/{id}/events` and A2A's `SubscribeToTask`. What must not live
//! here: anything about the credential or the client (`auth.rs`), or about one route.

use std::sync::Arc;

use agentplane_core::ErrorCode;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::body_limit;
use crate::error::ApiError;
use crate::origin::{AllowedOrigins, Host, Origin};

/// Longest header value quoted in the log.
const MAX_LOGGED_CHARS: usize = 200;

/// The content types a page may send in a request without a preflight (the Fetch
/// standard's CORS-safelisted `Content-Type` values).
const SIMPLE_CONTENT_TYPES: [&str; 3] = [
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data",
];

/// What the guard checks against, fixed when the router is built.
#[derive(Debug, Clone)]
pub(crate) struct Ingress {
    /// Browser origins accepted besides loopback ones.
    pub(crate) allowed_origins: AllowedOrigins,
    /// Whether a token guards the server: then any `Host` is served, and a page of the
    /// server's own origin is accepted.
    pub(crate) token_required: bool,
    /// The largest request body, in bytes.
    pub(crate) body_limit: usize,
}

/// Which rule refused a request (`details.refused`, and the log's `event_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refused {
    Host,
    Origin,
    SimpleRequest,
}

impl Refused {
    fn detail(self) -> &'static str {
        match self {
            Self::Host => "host",
            Self::Origin => "origin",
            Self::SimpleRequest => "content_type",
        }
    }

    fn event_type(self) -> &'static str {
        match self {
            Self::Host => "host_refused",
            Self::Origin => "origin_refused",
            Self::SimpleRequest => "simple_request_refused",
        }
    }

    fn message(self) -> &'static str {
        match self {
            Self::Host => {
                "this Host is not served: without an auth token only loopback names \
                 (localhost, 127.0.0.1, [::1]) are, against DNS rebinding"
            }
            Self::Origin => {
                "this Origin may not use this server: only loopback origins and \
                 [server] allowed_origins are accepted"
            }
            Self::SimpleRequest => {
                "this content type is what any web page may send without asking: \
                 requests that change state must be application/json"
            }
        }
    }
}

/// The middleware around the whole router.
pub(crate) async fn guard(
    State(ingress): State<Arc<Ingress>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some((refused, quoted)) = ingress.refusal(request.method(), request.headers()) {
        tracing::warn!(
            target: "agentplane::security",
            event_type = refused.event_type(),
            method = %request.method(),
            path = %request.uri().path().escape_debug(),
            value = %quoted.escape_debug(),
            "security_event"
        );
        return ApiError::new(ErrorCode::Forbidden, refused.message())
            .with_detail("refused", refused.detail())
            .into_response();
    }
    let (parts, body) = request.into_parts();
    match body_limit::refuse_oversized(&parts.headers, body, ingress.body_limit).await {
        Ok(refused) => refused,
        Err(body) => next.run(Request::from_parts(parts, body)).await,
    }
}

impl Ingress {
    /// The rule a request breaks, with the value that broke it (for the log).
    fn refusal(&self, method: &Method, headers: &HeaderMap) -> Option<(Refused, String)> {
        let quoted = |name: header::HeaderName| {
            headers
                .get(name)
                .map(|v| {
                    String::from_utf8_lossy(v.as_bytes())
                        .chars()
                        .take(MAX_LOGGED_CHARS)
                        .collect::<String>()
                })
                .unwrap_or_default()
        };
        let host = match headers.get(header::HOST) {
            None => None,
            Some(value) => match value
                .to_str()
                .map_err(|_| ())
                .and_then(|text| Host::parse(text).map_err(|_| ()))
            {
                Ok(host) => Some(host),
                Err(()) => return Some((Refused::Host, quoted(header::HOST))),
            },
        };
        if !self.token_required && host.as_ref().is_some_and(|h| !h.is_loopback()) {
            return Some((Refused::Host, quoted(header::HOST)));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let text = origin.to_str().unwrap_or("");
            let own = || {
                self.token_required
                    && host.as_ref().is_some_and(|host| {
                        Origin::parse(text.trim()).is_ok_and(|page| page.is_host(host))
                    })
            };
            if text.is_empty() || !(self.allowed_origins.allows(text) || own()) {
                return Some((Refused::Origin, quoted(header::ORIGIN)));
            }
        }
        if !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
            && is_simple_content_type(headers)
        {
            return Some((Refused::SimpleRequest, quoted(header::CONTENT_TYPE)));
        }
        None
    }
}

/// Whether the request's `Content-Type` is one a page may send without a preflight.
fn is_simple_content_type(headers: &HeaderMap) -> bool {
    headers.get_all(header::CONTENT_TYPE).iter().any(|value| {
        let text = String::from_utf8_lossy(value.as_bytes());
        let essence = text.split(';').next().unwrap_or("").trim();
        SIMPLE_CONTENT_TYPES
            .iter()
            .any(|simple| essence.eq_ignore_ascii_case(simple))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn ingress(token_required: bool) -> Ingress {
        Ingress {
            allowed_origins: AllowedOrigins::parse(&["https://app.example.com".to_owned()])
                .expect("list"),
            token_required,
            body_limit: 1024,
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_str(value).expect("value"));
        }
        headers
    }

    fn refused(i: &Ingress, method: Method, pairs: &[(&'static str, &str)]) -> Option<Refused> {
        i.refusal(&method, &headers(pairs)).map(|(r, _)| r)
    }

    #[test]
    fn a_page_cannot_reach_a_keyless_server() {
        let open = ingress(false);
        let json = ("content-type", "application/json");
        // A CLI or SDK: no Origin, a loopback Host, JSON.
        assert_eq!(
            refused(&open, Method::POST, &[("host", "127.0.0.1:8686"), json]),
            None
        );
        assert_eq!(
            refused(&open, Method::POST, &[json]),
            None,
            "no Host at all"
        );
        // The web UI on its loopback origin; a listed origin.
        for origin in ["http://127.0.0.1:8686", "https://app.example.com"] {
            let pairs = [("host", "127.0.0.1:8686"), ("origin", origin), json];
            assert_eq!(refused(&open, Method::POST, &pairs), None, "{origin}");
        }
        // A rebound name, even with its own (matching) origin.
        let rebound = [
            ("host", "evil.example:8686"),
            ("origin", "http://evil.example:8686"),
            json,
        ];
        assert_eq!(refused(&open, Method::POST, &rebound), Some(Refused::Host));
        assert_eq!(
            refused(&open, Method::GET, &[("host", "user@localhost")]),
            Some(Refused::Host)
        );
        // A foreign origin, on any method.
        for origin in ["https://evil.example", "null", ""] {
            let pairs = [("host", "127.0.0.1:8686"), ("origin", origin)];
            assert_eq!(
                refused(&open, Method::GET, &pairs),
                Some(Refused::Origin),
                "{origin}"
            );
        }
        // A simple request changing state, without any Origin.
        for simple in [
            "text/plain",
            "text/plain;charset=UTF-8",
            "Application/X-WWW-Form-Urlencoded",
            "multipart/form-data; boundary=x",
        ] {
            for method in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
                let pairs = [("host", "localhost"), ("content-type", simple)];
                assert_eq!(
                    refused(&open, method.clone(), &pairs),
                    Some(Refused::SimpleRequest),
                    "{method} {simple}"
                );
            }
            let pairs = [("host", "localhost"), ("content-type", simple)];
            assert_eq!(
                refused(&open, Method::GET, &pairs),
                None,
                "a GET changes nothing"
            );
        }
    }

    #[test]
    fn a_server_with_a_token_serves_its_own_public_origin_only() {
        let guarded = ingress(true);
        let own = [
            ("host", "agents.example"),
            ("origin", "https://agents.example"),
        ];
        assert_eq!(refused(&guarded, Method::POST, &own), None);
        let foreign = [
            ("host", "agents.example"),
            ("origin", "https://evil.example"),
        ];
        assert_eq!(
            refused(&guarded, Method::POST, &foreign),
            Some(Refused::Origin)
        );
        let simple = [("host", "agents.example"), ("content-type", "text/plain")];
        assert_eq!(
            refused(&guarded, Method::POST, &simple),
            Some(Refused::SimpleRequest)
        );
        // Without a token, the server's own name is not trusted: it may be rebound.
        let open = ingress(false);
        assert_eq!(refused(&open, Method::POST, &own), Some(Refused::Host));
    }
}
