//! The body limit, enforced from the declared length: a request whose `Content-Length`
//! is over the limit is refused with `413` in the standard envelope before anything
//! reads it, on every route (`/v1`, `/openai/v1`, `/mcp`).
//!
//! Without it a route learns the size only while reading, so a client declaring
//! 99,999,999,999 bytes and sending a few held its request open until the body
//! timeout. A body without a declared length (chunked) is still cut at the limit by
//! the reader (`extract.rs`, rmcp's own limit on `/mcp`). The ingress guard
//! (`ingress.rs`) applies it; what must not live here: any other check of the request.
//!
//! A refusal sent while the client is still writing its body, with the connection then
//! closed on unread bytes, is lost: the kernel answers the unread bytes with a reset,
//! and the client sees a broken pipe, not the `413`. So a body that declares at most
//! [`DRAIN_MAX`] bytes is read and dropped first (for at most [`DRAIN_TIME`]); a larger
//! declaration is answered at once and the connection closed.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;

use crate::error::ApiError;

/// The largest declared body read (and dropped) so that its client sees the refusal.
const DRAIN_MAX: u64 = 16 * 1024 * 1024;

/// The longest a refused body is read for before the refusal is sent anyway.
const DRAIN_TIME: Duration = Duration::from_secs(5);

/// The `413` for a request whose declared length is over `limit`, once its body has
/// been read and dropped where that is cheap enough; the body back, unread, when the
/// declared length is within the limit (or none is declared).
pub(crate) async fn refuse_oversized(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Response, Body> {
    let Some(refused) = refusal(headers, limit) else {
        return Err(body);
    };
    let declared = declared_length(headers).unwrap_or(u64::MAX);
    let mut response = refused.into_response();
    if declared <= DRAIN_MAX {
        let mut frames = body.into_data_stream();
        let drained = tokio::time::timeout(DRAIN_TIME, async {
            let mut read = 0u64;
            while let Some(Ok(chunk)) = frames.next().await {
                read += chunk.len() as u64;
                if read > declared {
                    break;
                }
            }
        })
        .await;
        if drained.is_ok() {
            return Ok(response);
        }
    }
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    Ok(response)
}

/// The refusal of a request whose declared length is over `limit` bytes, if it is
/// (the ingress guard, `ingress.rs`, asks before any route reads the body).
fn refusal(headers: &HeaderMap, limit: usize) -> Option<ApiError> {
    let declared = declared_length(headers)?;
    (declared > limit as u64).then(|| {
        ApiError::invalid(format!(
            "the request body is larger than the server accepts ({declared} bytes declared, \
             at most {limit})"
        ))
        .with_status(StatusCode::PAYLOAD_TOO_LARGE)
        .with_detail("max_bytes", limit)
    })
}

/// The length a request declares, if it declares one that is a number (hyper has
/// already refused conflicting or malformed `Content-Length` headers).
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn with_length(value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn the_declared_length_is_read_as_a_number() {
        assert_eq!(declared_length(&HeaderMap::new()), None);
        assert_eq!(declared_length(&with_length("0")), Some(0));
        assert_eq!(
            declared_length(&with_length("99999999999")),
            Some(99_999_999_999)
        );
        assert_eq!(
            declared_length(&with_length("18446744073709551615")),
            Some(u64::MAX)
        );
        // Past u64, signed or not a number: not a declared length (hyper refuses these
        // before a handler runs).
        for bad in ["18446744073709551616", "-1", "12abc", ""] {
            assert_eq!(declared_length(&with_length(bad)), None, "{bad}");
        }
    }
}
