//! One access log line per request: method, path, status, duration, bytes and client.
//!
//! The line is written when the response body is dropped, so a long SSE stream is
//! logged once, when it ends, with its real duration, and `finished = false` says the
//! client went away before the end. Never logged: the query string (it may carry
//! secrets), the `Authorization` header, bodies, and a client id that fails validation
//! (it could forge log lines).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Body as HttpBody, Frame, SizeHint};

use crate::auth::{CLIENT_ID_HEADER, ClientId};

/// Paths longer than this are cut in the log.
const MAX_LOGGED_PATH: usize = 256;

/// The middleware around every route.
pub(crate) async fn log_requests(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().to_string();
    let path: String = request.uri().path().chars().take(MAX_LOGGED_PATH).collect();
    let client = request
        .headers()
        .get(CLIENT_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|raw| ClientId::parse(raw).ok())
        .map(|c| c.as_str().to_owned());
    let response = next.run(request).await;
    let status = response.status().as_u16();
    let (parts, body) = response.into_parts();
    let body = Body::new(LoggedBody {
        inner: body,
        line: Line {
            started,
            method,
            path,
            status,
            client,
            bytes: 0,
            finished: false,
        },
    });
    Response::from_parts(parts, body)
}

struct Line {
    started: Instant,
    method: String,
    path: String,
    status: u16,
    client: Option<String>,
    bytes: u64,
    finished: bool,
}

/// A response body that writes the access line when it is dropped.
struct LoggedBody {
    inner: Body,
    line: Line,
}

impl HttpBody for LoggedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.line.bytes += data.len() as u64;
                }
            }
            Poll::Ready(None) => this.line.finished = true,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for LoggedBody {
    fn drop(&mut self) {
        let line = &self.line;
        let finished = line.finished || self.inner.is_end_stream();
        tracing::info!(
            target: "agentplane::access",
            method = %line.method,
            path = %line.path,
            status = line.status,
            duration_ms = line.started.elapsed().as_millis() as u64,
            bytes = line.bytes,
            client = line.client.as_deref().unwrap_or("-"),
            finished,
            "request"
        );
    }
}
