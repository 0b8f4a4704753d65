//! One span per HTTP request (`ports::telemetry::request_span`), the parent of the
//! turns it starts, and the child of the caller's W3C `traceparent` when it sent one.
//! Disabled (one cached check) unless traces are exported. The span's route has ids
//! replaced by `{id}`, so its name stays one per route.

use agentplane_engine::ports::telemetry;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

/// Prefixes of the ids that appear in paths.
const ID_PREFIXES: &[&str] = &[
    "thr_",
    "turn_",
    "apr_",
    "perm_",
    "exec_",
    "key_",
    "mcpc_",
    "dlv_",
    "chatcmpl-",
];
/// Longest header value read.
const MAX_HEADER: usize = 512;

/// The middleware around every route.
pub(crate) async fn trace_requests(request: Request, next: Next) -> Response {
    let span = telemetry::request_span(request.method().as_str(), &route_of(request.uri().path()));
    if !span.is_disabled() {
        let header = |name: &str| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .filter(|v| v.len() <= MAX_HEADER)
        };
        if let Some(parent) = header("traceparent") {
            telemetry::adopt_parent(&span, parent, header("tracestate"));
        }
    }
    let response = next.run(request).instrument(span.clone()).await;
    span.record(
        "http.response.status_code",
        i64::from(response.status().as_u16()),
    );
    response
}

/// `path` with every id segment as `{id}`, at most 8 segments.
fn route_of(path: &str) -> String {
    let mut route = String::with_capacity(path.len().min(128));
    for segment in path.split('/').filter(|s| !s.is_empty()).take(8) {
        route.push('/');
        if ID_PREFIXES.iter().any(|p| segment.starts_with(p)) {
            route.push_str("{id}");
        } else {
            route.extend(segment.chars().take(48));
        }
    }
    if route.is_empty() {
        route.push('/');
    }
    route
}

#[cfg(test)]
mod tests {
    use super::route_of;

    #[test]
    fn ids_become_placeholders() {
        assert_eq!(
            route_of("/v1/threads/thr_0123/turns"),
            "/v1/threads/{id}/turns"
        );
        assert_eq!(route_of("/"), "/");
        assert_eq!(route_of("/a/b/c/d/e/f/g/h/i/j"), "/a/b/c/d/e/f/g/h");
        assert_eq!(route_of(&format!("/{}", "x".repeat(100))).len(), 49);
    }
}
