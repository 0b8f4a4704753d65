//! `GET /healthz`: the process is up and serving. Needs no token and no client id, so
//! load balancers and supervisors can call it; it touches neither the store nor the
//! model server.

use axum::Json;

use super::tags;
use crate::body::Health;

/// Liveness.
#[utoipa::path(
    get,
    path = "/healthz",
    operation_id = "healthz",
    tag = tags::SYSTEM,
    responses((status = 200, description = "The server is up.", body = Health))
)]
pub(crate) async fn healthz() -> Json<Health> {
    Json(Health { ok: true })
}
