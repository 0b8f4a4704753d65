//! The streamable HTTP side of a connection: the rmcp transport for one server's URL,
//! headers and access tokens, over the one HTTP client (`super::client`).
//!
//! Header values are credentials: they are marked sensitive and never appear in an
//! error message (a bad header is named by its name only). Redirects are not followed,
//! so headers never reach another host.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use reqwest_mcp::header::{HeaderName, HeaderValue};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::common::client_side_sse::FixedInterval;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use super::bearer::BearerClient;
use super::client::client;
use super::oauth::TokenSource;

/// The transport to `url`, sending `headers` and, with `tokens`, the current access
/// token with every request.
pub(crate) fn transport(
    url: &str,
    headers: &BTreeMap<String, String>,
    tokens: Option<Arc<TokenSource>>,
) -> Result<StreamableHttpClientTransport<BearerClient>, String> {
    let mut custom = HashMap::with_capacity(headers.len());
    for (name, value) in headers {
        let header = HeaderName::try_from(name.as_str())
            .map_err(|_| format!("`{name}` is not a valid HTTP header name"))?;
        let mut value = HeaderValue::try_from(value.as_str())
            .map_err(|_| format!("the value of header `{name}` is not a valid header value"))?;
        value.set_sensitive(true);
        custom.insert(header, value);
    }
    // An error page is diagnostics only: its first bytes are enough.
    let mut config = StreamableHttpClientTransportConfig::with_uri(url)
        .custom_headers(custom)
        .max_error_response_size(1024);
    // A broken event stream is resumed a few times, quickly; a server that is gone
    // fails the call instead of being retried for minutes.
    let mut retry = FixedInterval::default();
    retry.max_times = Some(3);
    retry.duration = Duration::from_millis(200);
    config.retry_config = Arc::new(retry);
    Ok(StreamableHttpClientTransport::with_client(
        BearerClient::new(client()?, tokens),
        config,
    ))
}
