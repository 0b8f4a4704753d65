//! `[server]`: what `agentplane serve` listens on and how it treats callers; its caps
//! and timeouts are checked by `server_limits.rs`.
//!
//! ```toml
//! [server]
//! listen = "127.0.0.1:8686"        # or AGENTPLANE_LISTEN
//! auth_token = "…"                 # or AGENTPLANE_AUTH_TOKEN
//! allow_public = false             # listen beyond loopback
//! permission_timeout_secs = 300    # a turn's wait for a permission decision
//! shutdown_grace_secs = 30         # running turns' time to finish on shutdown
//! allowed_origins = ["https://app.example"] # browser origins every route accepts besides loopback
//! workspace_roots = ["/srv/work"]  # where outside callers' workspaces must lie
//! ```

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::BadValue;
use super::overrides::Overrides;
use super::server_limits::{FileServerLimits, ServerLimits};

/// The default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8686";

/// `[server]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileServer {
    listen: Option<String>,
    auth_token: Option<String>,
    allow_public: Option<bool>,
    permission_timeout_secs: Option<u64>,
    shutdown_grace_secs: Option<u64>,
    allowed_origins: Option<Vec<String>>,
    header_read_timeout_secs: Option<u64>,
    idle_timeout_secs: Option<u64>,
    max_connections: Option<usize>,
    max_connections_per_address: Option<usize>,
    max_sse_followers: Option<usize>,
    max_sse_followers_per_client: Option<usize>,
    max_sse_followers_per_address: Option<usize>,
    workspace_roots: Option<Vec<PathBuf>>,
}

/// `agentplane serve`.
#[derive(Clone, PartialEq)]
pub struct ServerConfig {
    /// The address to listen on; loopback unless `allow_public`.
    pub listen: String,
    /// Bearer token required on `/v1/*` (`AGENTPLANE_AUTH_TOKEN`).
    pub auth_token: Option<String>,
    pub allow_public: bool,
    /// How long a turn waits for a permission decision before declining.
    pub permission_timeout: Duration,
    /// How long shutdown lets running turns finish before cancelling them.
    pub shutdown_grace: Duration,
    /// Browser origins every route accepts besides loopback ones, as written (the server
    /// parses them when it starts).
    pub allowed_origins: Vec<String>,
    /// Connection timeouts and caps, event stream caps.
    pub limits: ServerLimits,
    /// Absolute directories that outside callers' workspaces must lie in (ADR 0031);
    /// `None`: `serve` on loopback uses the directory it started in.
    pub workspace_roots: Option<Vec<PathBuf>>,
}

impl fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerConfig")
            .field("listen", &self.listen)
            .field(
                "auth_token",
                &self.auth_token.as_ref().map(|_| "<redacted>"),
            )
            .field("allow_public", &self.allow_public)
            .field("permission_timeout", &self.permission_timeout)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("allowed_origins", &self.allowed_origins)
            .field("limits", &self.limits)
            .field("workspace_roots", &self.workspace_roots)
            .finish()
    }
}

/// Checks `[server]` under `AGENTPLANE_LISTEN` and `AGENTPLANE_AUTH_TOKEN`. A bad
/// listen address is reported as the file's `listen` wherever it came from.
pub fn resolve(file: FileServer, env: &Overrides) -> Result<ServerConfig, BadValue> {
    let listen = env
        .listen
        .clone()
        .or(file.listen)
        .unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
    if listen.parse::<std::net::SocketAddr>().is_err() {
        return Err((
            "listen",
            format!("must be an address such as 127.0.0.1:8686, got {listen:?}"),
        )
            .into());
    }
    let workspace_roots = file.workspace_roots;
    if let Some(root) = workspace_roots
        .iter()
        .flatten()
        .find(|root| !root.is_absolute())
    {
        return Err((
            "workspace_roots",
            format!(
                "every root must be an absolute directory, got {}",
                root.display()
            ),
        )
            .into());
    }
    let permission_timeout_secs = file.permission_timeout_secs.unwrap_or(300);
    if permission_timeout_secs == 0 {
        return Err(("permission_timeout_secs", "must be at least 1".into()).into());
    }
    let limits = FileServerLimits {
        header_read_timeout_secs: file.header_read_timeout_secs,
        idle_timeout_secs: file.idle_timeout_secs,
        max_connections: file.max_connections,
        max_connections_per_address: file.max_connections_per_address,
        max_sse_followers: file.max_sse_followers,
        max_sse_followers_per_client: file.max_sse_followers_per_client,
        max_sse_followers_per_address: file.max_sse_followers_per_address,
    }
    .resolve()?;
    Ok(ServerConfig {
        listen,
        auth_token: env
            .auth_token
            .clone()
            .or(file.auth_token.filter(|t| !t.is_empty())),
        allow_public: file.allow_public.unwrap_or(false),
        permission_timeout: Duration::from_secs(permission_timeout_secs),
        shutdown_grace: Duration::from_secs(file.shutdown_grace_secs.unwrap_or(30)),
        allowed_origins: file.allowed_origins.unwrap_or_default(),
        limits,
        workspace_roots,
    })
}
