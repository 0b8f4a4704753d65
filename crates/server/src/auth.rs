//! Who is calling `/v1/*`, `/mcp`, `/openai/v1` and `/metrics`: the credential first
//! (the single `--auth-token`, or an API key the hub checks), then the client it acts
//! as (ADR 0030).
//!
//! The credential is checked first, so an unauthenticated caller learns nothing else.
//! A key acts as its own client: an `X-Client-ID` naming another is 403 (unless the
//! key is an admin's), an absent one takes the key's. The token is an admin that names
//! its client with `X-Client-ID`. With neither a token nor any key, the client is
//! whoever `X-Client-ID` claims, as before keys existed. The token comparison hashes
//! both sides and compares the digests without early exit. The result is an
//! [`Identity`] in the request's extensions: the hub's [`Caller`], which every hub
//! method checks for its roles. This file never logs or echoes `Authorization`.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::header;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::Response;
use sha2::{Digest, Sha256};

use agentplane_core::identity::looks_like_key;
use agentplane_engine::identity::Caller;
use agentplane_engine::services::identity;

use crate::error::ApiError;

/// The header that names the calling client.
pub const CLIENT_ID_HEADER: &str = "x-client-id";
/// Longest accepted client id, in characters.
pub const MAX_CLIENT_ID_CHARS: usize = 128;
/// The client id's shape as a regular expression (for the OpenAPI document).
pub const CLIENT_ID_PATTERN: &str = "^[A-Za-z0-9._:@-]{1,128}$";

/// A client id, validated: 1 to 128 characters of `[A-Za-z0-9._:@-]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientId(String);

impl ClientId {
    /// Validates an id received from outside.
    pub fn parse(raw: &str) -> Result<Self, String> {
        if raw.is_empty() || raw.len() > MAX_CLIENT_ID_CHARS {
            return Err(format!(
                "X-Client-ID must be 1 to {MAX_CLIENT_ID_CHARS} characters long"
            ));
        }
        if !raw
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '@' | '-'))
        {
            return Err(
                "X-Client-ID may use only letters, digits and `.`, `_`, `:`, `@`, `-`".to_owned(),
            );
        }
        Ok(Self(raw.to_owned()))
    }

    /// The id as text: the owner recorded on threads.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A caller the middleware authenticated, for handlers to pass to the hub. Only the
/// middleware creates one.
#[derive(Debug, Clone)]
pub struct Identity(pub Caller);

impl<S: Send + Sync> FromRequestParts<S> for Identity {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<Identity>()
            .cloned()
            // Only reachable if a route were mounted without the middleware.
            .ok_or_else(|| ApiError::unauthorized("this route was mounted without auth"))
    }
}

/// The credentials the routes require: the token, if any, and the identity service.
#[derive(Clone)]
pub(crate) struct Gate {
    token: Option<Arc<[u8; 32]>>,
    identity: Arc<identity::Identity>,
}

impl Gate {
    /// A gate for `token` (`None` or empty: no token) and the identity service.
    pub(crate) fn new(token: Option<&str>, identity: Arc<identity::Identity>) -> Self {
        Self {
            token: token
                .filter(|t| !t.is_empty())
                .map(|t| Arc::new(digest(t.as_bytes()))),
            identity,
        }
    }

    /// Whether a token is required.
    pub(crate) fn required(&self) -> bool {
        self.token.is_some()
    }

    /// The caller (see [`Gate::caller`]), if its roles grant `access`: a route that
    /// asks the hub nothing (`/metrics`) checks the role table here.
    pub(crate) async fn caller_with(
        &self,
        parts: &Parts,
        fallback: Option<&str>,
        access: agentplane_engine::identity::Access,
        action: &str,
    ) -> Result<Caller, ApiError> {
        let caller = self.caller(parts, fallback).await?;
        self.identity.authorize(&caller, access, action)?;
        Ok(caller)
    }

    /// The caller of a request; `fallback` is the client of a token or claimed caller
    /// that names none (the metrics scraper), else `X-Client-ID` is required for them.
    pub(crate) async fn caller(
        &self,
        parts: &Parts,
        fallback: Option<&str>,
    ) -> Result<Caller, ApiError> {
        // `x-api-key` is how Anthropic's clients send theirs: the same credential, taken
        // on Anthropic's routes only (everywhere else a credential is `Authorization`).
        let anthropic = parts.uri.path().starts_with("/anthropic/");
        let presented = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_token)
            .or_else(|| {
                if !anthropic {
                    return None;
                }
                parts
                    .headers
                    .get("x-api-key")
                    .and_then(|v| v.to_str().ok())
                    .map(str::trim)
                    .filter(|key| !key.is_empty())
            });
        let token_matches = match (&self.token, presented) {
            (Some(expected), Some(t)) => same_digest(&digest(t.as_bytes()), expected),
            _ => false,
        };
        if token_matches {
            let client = claimed_client(parts, fallback)?;
            return Ok(Caller::token(client.as_str()));
        }
        if let Some(jwt) = presented
            && self.identity.verifies_tokens()
            && looks_like_jwt(jwt)
        {
            let caller = self.identity.authenticate_token(jwt, None).await?;
            let claimed = optional_client(parts)?;
            return Ok(self
                .identity
                .act_as(caller, claimed.as_ref().map(ClientId::as_str))?);
        }
        let keys = self.identity.keys_required().await?;
        if let Some(secret) = presented
            && (keys || looks_like_key(secret))
        {
            let caller = self.identity.authenticate_key(secret, None).await?;
            let claimed = optional_client(parts)?;
            return Ok(self
                .identity
                .act_as(caller, claimed.as_ref().map(ClientId::as_str))?);
        }
        if self.token.is_some() || keys {
            return Err(match presented {
                None => ApiError::unauthorized("a bearer token or API key is required"),
                Some(_) => ApiError::unauthorized("the bearer token is not valid"),
            });
        }
        let client = claimed_client(parts, fallback)?;
        Ok(Caller::claimed(client.as_str()))
    }
}

/// The middleware in front of `/v1/*`, `/mcp` and `/openai/v1`.
pub(crate) async fn authenticate(
    State(gate): State<Gate>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let (mut parts, body) = request.into_parts();
    let caller = gate.caller(&parts, None).await?;
    parts.extensions.insert(Identity(caller));
    Ok(next.run(Request::from_parts(parts, body)).await)
}

/// The client an MCP request acts as when it names none: desktop assistants and IDEs
/// cannot add headers, so `/mcp` does not require `X-Client-ID`. A key or an OIDC
/// token still names its own client; with the single `--auth-token`, or on a server
/// without credentials, a request without `X-Client-ID` is this client's.
pub const MCP_DEFAULT_CLIENT: &str = "mcp";

/// The middleware in front of `/mcp`: as [`authenticate`], with
/// [`MCP_DEFAULT_CLIENT`] for a request that names no client.
/// An unauthenticated request gets `401` with the MCP authorization challenge: where
/// the protected-resource metadata is (`mcp/authorization.rs`, RFC 9728).
pub(crate) async fn authenticate_mcp(
    State(gate): State<Gate>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    match gate.caller(&parts, Some(MCP_DEFAULT_CLIENT)).await {
        Ok(caller) => {
            parts.extensions.insert(Identity(caller));
            next.run(Request::from_parts(parts, body)).await
        }
        Err(error) => {
            let unauthorized = error.code() == agentplane_core::ErrorCode::Unauthorized;
            let mut response = axum::response::IntoResponse::into_response(error);
            if unauthorized {
                crate::mcp::authorization::challenge(&parts, &mut response);
            }
            response
        }
    }
}

/// The client `X-Client-ID` names (validated), or `fallback`; one is required.
fn claimed_client(parts: &Parts, fallback: Option<&str>) -> Result<ClientId, ApiError> {
    match (optional_client(parts)?, fallback) {
        (Some(client), _) => Ok(client),
        (None, Some(fallback)) => ClientId::parse(fallback).map_err(ApiError::invalid),
        (None, None) => Err(ApiError::invalid("the X-Client-ID header is required")),
    }
}

/// The client `X-Client-ID` names, validated, if it is present.
fn optional_client(parts: &Parts) -> Result<Option<ClientId>, ApiError> {
    let Some(raw) = parts.headers.get(CLIENT_ID_HEADER) else {
        return Ok(None);
    };
    let raw = raw
        .to_str()
        .map_err(|_| ApiError::invalid("X-Client-ID must be printable ASCII"))?;
    ClientId::parse(raw).map(Some).map_err(ApiError::invalid)
}

/// Whether a bearer credential has a JWT's shape: three base64url parts.
fn looks_like_jwt(token: &str) -> bool {
    let parts: Vec<&str> = token.split('.').collect();
    parts.len() == 3
        && parts[..2].iter().all(|p| !p.is_empty())
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The token of `Bearer <token>`; the scheme is case-insensitive.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Compares two digests in time independent of where they differ.
fn same_digest(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let difference = a
        .iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(difference) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_ids_are_validated() {
        for good in [
            "a",
            "client-1",
            "me@example.com",
            "svc:prod.v2_x",
            &"x".repeat(128),
        ] {
            assert!(ClientId::parse(good).is_ok(), "{good}");
        }
        for bad in ["", " ", "a b", "../x", "a/b", "é", "a\nb", &"x".repeat(129)] {
            assert!(ClientId::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn jwts_are_told_from_keys_and_tokens() {
        assert!(looks_like_jwt("eyJh.eyJz.c2ln"));
        assert!(looks_like_jwt("eyJh.eyJz."));
        assert!(!looks_like_jwt("ap_0123"));
        assert!(!looks_like_jwt("a.b"));
        assert!(!looks_like_jwt("a.b.c.d"));
        assert!(!looks_like_jwt("a b.c.d"));
    }

    #[test]
    fn bearer_tokens_are_read_strictly() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer  abc "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer"), None);
        assert_eq!(bearer_token("Bearer "), None);
    }

    #[test]
    fn digests_compare_equal_only_when_equal() {
        assert!(same_digest(&digest(b"secret"), &digest(b"secret")));
        assert!(!same_digest(&digest(b"secret"), &digest(b"secreT")));
        assert!(!same_digest(&digest(b"secret"), &digest(b"secret-longer")));
    }
}
