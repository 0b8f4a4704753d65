//! The one HTTP client for every MCP server and their token endpoints: built once, no
//! redirect followed (so headers and tokens never reach another host), a bounded
//! connect. The transport (`super::http`) and the token grant (`super::oauth`) both
//! use it.

use std::sync::OnceLock;
use std::time::Duration;

/// How long establishing a TCP (and TLS) connection may take; the startup and call
/// timeouts bound everything else.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The one client for MCP servers, built on first use.
pub(crate) fn client() -> Result<reqwest_mcp::Client, String> {
    static CLIENT: OnceLock<Result<reqwest_mcp::Client, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            // reqwest is built without a TLS provider of its own; ring is the one the
            // workspace builds. A provider already installed is fine.
            let _ = rustls::crypto::ring::default_provider().install_default();
            reqwest_mcp::Client::builder()
                .redirect(reqwest_mcp::redirect::Policy::none())
                .connect_timeout(CONNECT_TIMEOUT)
                .build()
                .map_err(|e| format!("the HTTP client could not be built: {e}"))
        })
        .clone()
}
