//! The HTTP metrics: one count and one duration per answered request, labelled by
//! method, route *template* and status.
//!
//! The route label is axum's [`MatchedPath`] (`/v1/threads/{id}`), never the request
//! path, so ids and whatever else a client puts in a URL never become label values;
//! a request no route matched is `unmatched`. The duration runs until the response's
//! headers: an SSE stream counts as answered when it starts, which is what a latency
//! alert wants (the access log has the stream's full length).
//!
//! Installed around every route and the fallbacks when the router has a [`Metrics`];
//! without one there is no layer at all.

use std::sync::Arc;
use std::time::Instant;

use agentplane_metrics::Metrics;
use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::Response;

/// `router` with every request recorded in `metrics`. Call it after the fallbacks are
/// set, so unmatched requests are counted too.
pub(crate) fn around<S>(router: Router<S>, metrics: Arc<Metrics>) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    router.layer(from_fn_with_state(metrics, record))
}

/// The middleware: reads the matched route before the request moves on, records
/// after the response is ready.
async fn record(State(metrics): State<Arc<Metrics>>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let route = request.extensions().get::<MatchedPath>().cloned();
    let response = next.run(request).await;
    metrics.observe_http(
        method.as_str(),
        route.as_ref().map(MatchedPath::as_str),
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}
