//! MCP authorization on our side (the MCP spec's resource-server role): `/mcp` answers an
//! unauthenticated request with `401` and a `WWW-Authenticate` challenge pointing at
//! its protected-resource metadata (RFC 9728), served unauthenticated at
//! `/.well-known/oauth-protected-resource/mcp` (and at the well-known path without the
//! suffix, for clients that look there; the gateway's two paths have their own), naming the configured OIDC issuer as the
//! authorization server. Tokens are then checked as everywhere (`auth.rs`): keys and the
//! single token as bearers, OIDC tokens of that issuer.

use std::sync::Arc;

use agentplane_engine::hub::Hub;
use axum::Json;
use axum::extract::State;
use axum::http::request::Parts;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use serde_json::{Value, json};

/// Where the metadata of `/mcp` is, relative to the server's base URL.
pub(crate) const METADATA_PATH: &str = "/.well-known/oauth-protected-resource/mcp";
/// Where the metadata of `/mcp/gateway` is.
pub(crate) const GATEWAY_METADATA_PATH: &str = "/.well-known/oauth-protected-resource/mcp/gateway";
/// The MCP gateway again, at a path ending in `/mcp`: the MCP Inspector and other
/// clients take a URL's transport from that ending.
pub(crate) const GATEWAY_MCP_PATH: &str = "/gateway/mcp";
/// Where the metadata of [`GATEWAY_MCP_PATH`] is.
pub(crate) const GATEWAY_MCP_METADATA_PATH: &str =
    "/.well-known/oauth-protected-resource/gateway/mcp";
/// The same document of `/mcp` at the path without the resource's suffix.
pub(crate) const METADATA_ROOT_PATH: &str = "/.well-known/oauth-protected-resource";

/// The server's base URL as the client reached it: the `Host` it sent, `https` when a
/// proxy says so (`X-Forwarded-Proto`), else `http`. `None` without a usable `Host`.
pub(crate) fn base_url(parts: &Parts) -> Option<String> {
    let host = parts.headers.get(header::HOST)?.to_str().ok()?;
    if host.is_empty() || host.contains(['/', '\\', '@', ' ', '"']) {
        return None;
    }
    let https = parts
        .headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|p| p.eq_ignore_ascii_case("https"));
    Some(format!("{}://{host}", if https { "https" } else { "http" }))
}

/// Adds the resource-metadata link to a `401` answer of `/mcp`.
pub(crate) fn challenge(parts: &Parts, response: &mut Response) {
    let Some(base) = base_url(parts) else {
        return;
    };
    let path = parts.uri.path();
    let metadata = if path.starts_with("/mcp/gateway") {
        GATEWAY_METADATA_PATH
    } else if path.starts_with(GATEWAY_MCP_PATH) {
        GATEWAY_MCP_METADATA_PATH
    } else {
        METADATA_PATH
    };
    let value = format!(
        "{}, resource_metadata=\"{base}{metadata}\"",
        crate::error::BEARER_CHALLENGE
    );
    if let Ok(value) = HeaderValue::from_str(&value) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
}

/// `GET /.well-known/oauth-protected-resource[/mcp[/gateway]]`: RFC 9728's metadata of
/// `/mcp` (or of `/mcp/gateway`, at its own path).
pub(crate) async fn metadata(State(hub): State<Arc<Hub>>, parts: Parts) -> Json<Value> {
    let base = base_url(&parts).unwrap_or_default();
    let resource = match parts.uri.path() {
        GATEWAY_METADATA_PATH => "/mcp/gateway",
        GATEWAY_MCP_METADATA_PATH => GATEWAY_MCP_PATH,
        _ => "/mcp",
    };
    let mut document = json!({
        "resource": format!("{base}{resource}"),
        "bearer_methods_supported": ["header"],
        "resource_name": "agentplane",
    });
    if let Some(issuer) = hub.identity().token_issuer() {
        document["authorization_servers"] = json!([issuer]);
    }
    Json(document)
}
