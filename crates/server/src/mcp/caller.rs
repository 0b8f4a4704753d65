//! Who owns the threads an MCP call creates: one client for a whole stdio connection,
//! or the identity the auth middleware put on each HTTP request. Both handlers (the
//! agents' and the gateway's) read it.

use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use crate::auth::Identity;

/// Who owns the threads a call creates.
#[derive(Clone, Debug)]
pub(super) enum Caller {
    /// One client for the whole connection (stdio: the local user).
    Fixed(String),
    /// The `Identity` the auth middleware put on each HTTP request.
    PerRequest,
}

impl Caller {
    /// The caller of a request: the local client (stdio), or the one the auth
    /// middleware authenticated, whose roles the hub checks.
    pub(super) fn of(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<agentplane_engine::identity::Caller, ErrorData> {
        match self {
            Caller::Fixed(client) => {
                Ok(agentplane_engine::identity::Caller::local(client.as_str()))
            }
            Caller::PerRequest => context
                .extensions
                .get::<axum::http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<Identity>())
                .map(|identity| identity.0.clone())
                // Only reachable if the route were mounted without the auth middleware.
                .ok_or_else(|| {
                    ErrorData::invalid_request("the X-Client-ID header is required", None)
                }),
        }
    }
}
