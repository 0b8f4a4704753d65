//! Who is calling `/v1/*`: the bearer token (when one is configured), then the
//! client's identity from `X-Client-ID`.
//!
//! The token is checked first, so an unauthenticated caller learns nothing else. The
//! comparison hashes both sides and compares the digests without early exit, so its
//! time depends on neither the token's content nor its length. The client id is the
//! tenancy key (a thread belongs to one client; another client's thread is 404), so it
//! is validated strictly and handed to handlers as [`ClientId`]. This file never
//! logs or echoes the `Authorization` header.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::header;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::Response;
use sha2::{Digest, Sha256};

use crate::error::ApiError;

/// The header that names the calling client.
pub const CLIENT_ID_HEADER: &str = "x-client-id";
/// Longest accepted client id, in characters.
pub const MAX_CLIENT_ID_CHARS: usize = 128;
/// The client id's shape as a regular expression (for the OpenAPI document).
pub const CLIENT_ID_PATTERN: &str = "^[A-Za-z0-9._:@-]{1,128}$";

/// The calling client, validated: 1 to 128 characters of `[A-Za-z0-9._:@-]`.
/// Only the auth middleware creates one, so a handler that takes it runs for a
/// validated caller.
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

impl<S: Send + Sync> FromRequestParts<S> for ClientId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        match parts.extensions.get::<ClientId>() {
            Some(client) => Ok(client.clone()),
            // Only reachable if a route was mounted without the middleware.
            None => client_from_header(parts),
        }
    }
}

/// The token `/v1/*` requires, if any.
#[derive(Clone)]
pub(crate) struct Gate {
    token: Option<Arc<[u8; 32]>>,
}

impl Gate {
    /// A gate for `token`; `None` or an empty token lets every caller through.
    pub(crate) fn new(token: Option<&str>) -> Self {
        Self {
            token: token
                .filter(|t| !t.is_empty())
                .map(|t| Arc::new(digest(t.as_bytes()))),
        }
    }

    /// Whether a token is required.
    pub(crate) fn required(&self) -> bool {
        self.token.is_some()
    }

    fn admits(&self, parts: &Parts) -> Result<(), ApiError> {
        let Some(expected) = &self.token else {
            return Ok(());
        };
        let presented = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_token)
            .ok_or_else(|| ApiError::unauthorized("a bearer token is required"))?;
        if same_digest(&digest(presented.as_bytes()), expected) {
            Ok(())
        } else {
            Err(ApiError::unauthorized("the bearer token is not valid"))
        }
    }
}

/// The middleware in front of `/v1/*`.
pub(crate) async fn authenticate(
    State(gate): State<Gate>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let (mut parts, body) = request.into_parts();
    gate.admits(&parts)?;
    let client = client_from_header(&parts)?;
    parts.extensions.insert(client);
    Ok(next.run(Request::from_parts(parts, body)).await)
}

fn client_from_header(parts: &Parts) -> Result<ClientId, ApiError> {
    let raw = parts
        .headers
        .get(CLIENT_ID_HEADER)
        .ok_or_else(|| ApiError::invalid("the X-Client-ID header is required"))?;
    let raw = raw
        .to_str()
        .map_err(|_| ApiError::invalid("X-Client-ID must be printable ASCII"))?;
    ClientId::parse(raw).map_err(ApiError::invalid)
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
        assert!(!Gate::new(Some("")).required());
    }
}
