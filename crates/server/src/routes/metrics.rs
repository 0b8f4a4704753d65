//! `GET /metrics`: every metric in Prometheus' text format, for scrapers.
//!
//! Mounted only when the router is given a [`Metrics`]. It names agents, tools and
//! policies, so it sits behind the same bearer token as `/v1/*` when one is
//! configured. A scraper sends the token and nothing else, so a request without
//! `X-Client-ID` is taken as the client [`SCRAPER_CLIENT`] rather than refused; the
//! endpoint reads no client's data, so the id only has to be valid. Not in the
//! OpenAPI document: its contract is Prometheus'.

use std::sync::Arc;

use agentplane_metrics::{CONTENT_TYPE, Metrics};
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use agentplane_engine::identity::Access;

use crate::auth::Gate;
use crate::error::ApiError;

/// The client id a scrape without `X-Client-ID` runs as.
pub(crate) const SCRAPER_CLIENT: &str = "metrics-scraper";

/// The `/metrics` route with its own state, behind `gate`; merges into any router.
pub(crate) fn routes<S>(metrics: Arc<Metrics>, gate: Gate) -> Router<S> {
    Router::new()
        .route("/metrics", get(render))
        .route_layer(from_fn_with_state(gate, authenticate))
        .with_state(metrics)
}

/// The metrics, encoded when asked: a scrape costs one pass over the registry.
async fn render(State(metrics): State<Arc<Metrics>>) -> Response {
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE))],
        metrics.encode(),
    )
        .into_response()
}

/// The `/v1/*` check (the credential first, then a valid client id), with the
/// scraper's id when a token or claimed caller names none; a key acts as its own and
/// needs a role that reads (`viewer`, `operator`, `admin`: `docs/identity.md`).
async fn authenticate(
    State(gate): State<Gate>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    gate.caller_with(
        &parts,
        Some(SCRAPER_CLIENT),
        Access::Read,
        "reading the metrics",
    )
    .await?;
    Ok(next.run(Request::from_parts(parts, body)).await)
}
