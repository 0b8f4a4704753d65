//! What A2A's handlers share: the published agents ([`A2aOptions`]) and the state the
//! routes are built with.
//!
//! What must not live here: routes or methods.

use std::sync::Arc;
use std::time::Duration;

use agentplane_engine::executions::WebhookSender;
use agentplane_engine::hub::Hub;
use tokio_util::sync::CancellationToken;

use super::targets::Registry;
use crate::followers::Followers;

/// What `[a2a]` publishes.
#[derive(Debug, Clone, Default)]
pub struct A2aOptions {
    /// The published agents, in the configured order; empty: A2A is off.
    pub agents: Vec<String>,
    /// The absolute, checked workspace of the threads A2A messages create.
    pub workspace: String,
    /// The OIDC provider's discovery document, when `[auth.oidc]` is configured.
    pub oidc_discovery: Option<String>,
}

/// What the handlers share.
#[derive(Clone)]
pub(crate) struct A2aState {
    pub(crate) hub: Arc<Hub>,
    pub(crate) options: Arc<A2aOptions>,
    pub(crate) heartbeat: Duration,
    pub(crate) end: CancellationToken,
    /// The executions' signed webhooks; `None`: no push notifications.
    pub(crate) webhooks: Option<Arc<dyn WebhookSender>>,
    /// The push notification configurations of the tasks started here.
    pub(crate) pushes: Arc<Registry>,
    /// The streams following threads, `/v1`'s and ours: a `SubscribeToTask` takes a
    /// place under the same caps as `GET /v1/threads/{id}/events`.
    pub(crate) followers: Arc<Followers>,
}
