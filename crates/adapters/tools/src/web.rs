//! `web`: `fetch_url`, an HTTP GET confined to what the agent's network access allows.
//!
//! Off unless the agent allows the network at all. Only `http` and `https`, no
//! credentials in the URL. The host is resolved here, and when any of its addresses is
//! not a public one (loopback, private, CGNAT, link-local, unique-local, multicast,
//! documentation…, also inside IPv4-mapped and NAT64/6to4 forms) the fetch is refused
//! unless the agent allows private networks. The connection is then pinned to exactly
//! the checked addresses, so a DNS answer that changes between check and connect (DNS
//! rebinding) cannot send it elsewhere. Redirects are followed by hand, at most
//! [`MAX_REDIRECTS`], and every hop is checked like the first. Proxies from the
//! environment are ignored: a proxy would connect on our behalf and skip the checks.
//!
//! A client is built per hop rather than shared, because the pinned addresses belong
//! to the request. The body is streamed and cut at a size cap; text comes back as
//! text, anything else as its type and size.
//!
//! With a `data_scope` in force ([`ToolContext::scope`]), every hop's host must also
//! match one of the scopes' `hosts` patterns, else the fetch is refused as
//! `data_scope_denied` before anything is resolved or sent.
//!
//! What must not live here: policy about which agent gets the network (the caller
//! passes [`NetworkAccess`]), and any other HTTP client setup.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use agentplane_core::policy::DataScope;
use agentplane_core::{NetworkAccess, ToolErrorKind, ToolSpec};
use agentplane_engine::ports::{Ensemble, ToolContext, ToolError, ToolOutput};
use async_trait::async_trait;
use reqwest::Url;
use reqwest::header::{CONTENT_TYPE, LOCATION};
use serde::Deserialize;
use serde_json::json;

use crate::fs::DATA_SCOPE_DENIED;
use crate::text;

/// The event type of every refused fetch that breaches network confinement.
pub const NETWORK_DENIED: &str = "network_denied";

/// Redirects followed before giving up.
pub const MAX_REDIRECTS: usize = 5;

/// Bounds of one fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebLimits {
    /// Body bytes read at most; the rest is never downloaded. Text shown to the model
    /// is further cut at the call's output cap.
    pub max_bytes: usize,
    /// Wall time of the whole fetch, redirects included (the call's own timeout
    /// applies too; the shorter wins).
    pub timeout: Duration,
}

impl Default for WebLimits {
    fn default() -> Self {
        Self {
            max_bytes: 1024 * 1024,
            timeout: Duration::from_secs(30),
        }
    }
}

/// Decides whether an address may be reached without `allow_private`: `None` for a
/// public address, else what kind of address it is.
type AddressScreen = fn(IpAddr) -> Option<&'static str>;

/// The builtin `web` ensemble for one agent.
#[derive(Debug, Clone)]
pub struct WebEnsemble {
    access: NetworkAccess,
    limits: WebLimits,
    screen: AddressScreen,
}

impl WebEnsemble {
    /// An ensemble that fetches only what `access` allows, within `limits`.
    pub fn new(access: NetworkAccess, limits: WebLimits) -> Self {
        Self {
            access,
            limits,
            screen: non_public_kind,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FetchArgs {
    url: String,
}

#[async_trait]
impl Ensemble for WebEnsemble {
    fn name(&self) -> &str {
        "web"
    }

    fn tools(&self) -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "fetch_url".into(),
            description: "Fetch an http(s) URL with GET and return the status, content type \
                and text body (cut at a size limit; non-text bodies are reported by type \
                and size only). Redirects are followed."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "minLength": 1, "description": "An absolute http or https URL."}
                },
                "required": ["url"],
                "additionalProperties": false
            }),
            // A request leaves the machine: it can change remote state and carry data
            // out, so shadow runs never send it (ADR 0016).
            side_effects: true,
        }]
    }

    async fn call(
        &self,
        tool: &str,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        if tool != "fetch_url" {
            return Err(crate::call::unknown_tool(self.name(), tool));
        }
        let args: FetchArgs = crate::call::parse_args(tool, args)?;
        if !self.access.allowed {
            return Err(denied("network access is not allowed for this agent"));
        }
        let url = Url::parse(&args.url).map_err(|e| {
            ToolError::new(
                ToolErrorKind::InvalidArguments,
                format!("not an absolute URL: {e}"),
            )
        })?;
        let timeout = self.limits.timeout.min(ctx.timeout);
        let scope = ctx.scope.as_deref().map(Vec::as_slice);
        tokio::time::timeout(timeout, self.follow(url, timeout, ctx.output_cap, scope))
            .await
            .map_err(|_| {
                ToolError::new(
                    ToolErrorKind::Timeout,
                    format!("the fetch did not finish within {} ms", timeout.as_millis()),
                )
            })?
    }
}

impl WebEnsemble {
    /// Fetches `url`, following redirects by hand and checking every hop.
    async fn follow(
        &self,
        mut url: Url,
        timeout: Duration,
        output_cap: usize,
        scope: Option<&[DataScope]>,
    ) -> Result<ToolOutput, ToolError> {
        let mut hops = 0;
        loop {
            let addrs = self.admit(&url, scope).await?;
            let client = pinned_client(&url, &addrs, timeout)?;
            let response = client
                .get(url.clone())
                .send()
                .await
                .map_err(request_failure)?;
            let status = response.status().as_u16();
            let location = response
                .headers()
                .get(LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            match location {
                Some(location) if matches!(status, 301 | 302 | 303 | 307 | 308) => {
                    if hops == MAX_REDIRECTS {
                        return Err(ToolError::new(
                            ToolErrorKind::ExecutionFailed,
                            format!("more than {MAX_REDIRECTS} redirects; stopped at {url}"),
                        ));
                    }
                    hops += 1;
                    url = url.join(&location).map_err(|e| {
                        ToolError::new(
                            ToolErrorKind::ExecutionFailed,
                            format!("redirect to an invalid location {location:?}: {e}"),
                        )
                    })?;
                }
                _ => return read_body(response, self.limits.max_bytes, output_cap).await,
            }
        }
    }

    /// Checks one hop's URL and resolves its host: the addresses to pin the
    /// connection to, all of them acceptable.
    async fn admit(
        &self,
        url: &Url,
        scope: Option<&[DataScope]>,
    ) -> Result<Vec<SocketAddr>, ToolError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(denied(&format!(
                "scheme {:?} refused: only http and https URLs may be fetched",
                url.scheme()
            )));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(ToolError::new(
                ToolErrorKind::NotAllowed,
                "URLs with credentials are refused",
            ));
        }
        let host = url.host_str().unwrap_or_default();
        if let Some(scopes) = scope
            && !host_in_scopes(scopes, host)
        {
            return Err(ToolError::violation(
                ToolErrorKind::PolicyDenied,
                DATA_SCOPE_DENIED,
                format!("host {host:?} is outside the agent's data scope"),
            ));
        }
        let port = url.port_or_known_default().unwrap_or(80);
        let addrs: Vec<SocketAddr> = match ip_literal(host) {
            Some(ip) => vec![SocketAddr::new(ip, port)],
            None if host.is_empty() => {
                return Err(ToolError::new(
                    ToolErrorKind::InvalidArguments,
                    "the URL has no host",
                ));
            }
            None => tokio::net::lookup_host((host, port))
                .await
                .map_err(|e| {
                    ToolError::new(
                        ToolErrorKind::ExecutionFailed,
                        format!("could not resolve {host}: {e}"),
                    )
                })?
                .collect(),
        };
        if addrs.is_empty() {
            return Err(ToolError::new(
                ToolErrorKind::ExecutionFailed,
                format!("{host} has no addresses"),
            ));
        }
        // agentplane's own API is never a target, whatever the agent may reach: a
        // fetch from inside would act with the server's own address (issue 30).
        let own = agentplane_process::sandbox::own_ports();
        if let Some(addr) = addrs
            .iter()
            .find(|addr| own.contains(&addr.port()) && (self.screen)(addr.ip()).is_some())
        {
            return Err(denied(&format!(
                "{host} resolves to {}, and port {} is agentplane's own; no agent reaches it",
                addr.ip(),
                addr.port()
            )));
        }
        if !self.access.allow_private {
            for addr in &addrs {
                if let Some(kind) = (self.screen)(addr.ip()) {
                    return Err(denied(&format!(
                        "{host} resolves to {}, a {kind} address; private networks are not \
                         allowed for this agent",
                        addr.ip()
                    )));
                }
            }
        }
        Ok(addrs)
    }
}

/// Whether one of `scopes` grants `host` (as the URL has it: lower case, IPv6 without
/// brackets). An empty host matches nothing.
pub fn host_in_scopes(scopes: &[DataScope], host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    !host.is_empty()
        && scopes
            .iter()
            .any(|scope| scope.hosts.iter().any(|glob| glob.matches(host)))
}

/// A client for one hop: no redirects, no proxy, and the host pinned to `addrs`.
pub(crate) fn pinned_client(
    url: &Url,
    addrs: &[SocketAddr],
    timeout: Duration,
) -> Result<reqwest::Client, ToolError> {
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(timeout)
        .user_agent(concat!("agentplane/", env!("CARGO_PKG_VERSION")));
    if let Some(host) = url.host_str().filter(|h| ip_literal(h).is_none()) {
        builder = builder.resolve_to_addrs(host, addrs);
    }
    builder.build().map_err(|e| {
        ToolError::new(
            ToolErrorKind::ExecutionFailed,
            format!("could not set up the HTTP client: {e}"),
        )
    })
}

/// The address of a URL host that is an IP literal (IPv6 in brackets, as `Url`
/// prints it), `None` for a domain name.
pub(crate) fn ip_literal(host: &str) -> Option<IpAddr> {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// Streams the body up to `max_bytes` and renders it for the model.
async fn read_body(
    mut response: reqwest::Response,
    max_bytes: usize,
    output_cap: usize,
) -> Result<ToolOutput, ToolError> {
    let status = response.status();
    let final_url = response.url().clone();
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);

    let keep = max_bytes.min(output_cap);
    let mut kept = Vec::new();
    let mut total = 0usize;
    let mut over_limit = false;
    while let Some(chunk) = response.chunk().await.map_err(request_failure)? {
        let room = keep.saturating_sub(kept.len());
        kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
        total += chunk.len();
        if total > max_bytes {
            over_limit = true;
            break;
        }
    }

    let mut content = format!(
        "HTTP {} {}\nurl: {final_url}\ncontent-type: {}\n\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        content_type.as_deref().unwrap_or("(none)")
    );
    let textual = match content_type.as_deref() {
        Some(kind) => is_textual(kind),
        None => !text::looks_binary(&kept),
    };
    let size = if over_limit {
        format!("more than {max_bytes} bytes")
    } else {
        format!("{total} bytes")
    };
    if !textual {
        content.push_str(&format!("[body not shown: not text, {size}]"));
        return Ok(ToolOutput::text(content));
    }
    let (body, cut) = text::prefix(&kept, keep);
    let truncated = over_limit || cut || total > kept.len();
    content.push_str(&body);
    if truncated {
        content.push_str(&format!(
            "\n[truncated: body is {size}, first {} shown]",
            body.len()
        ));
    }
    Ok(ToolOutput {
        content,
        truncated,
        security: Vec::new(),
        egress: Vec::new(),
    })
}

/// Whether a `Content-Type` is text worth showing to a model.
fn is_textual(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence.starts_with("text/")
        || essence.ends_with("+json")
        || essence.ends_with("+xml")
        || matches!(
            essence.as_str(),
            "application/json"
                | "application/xml"
                | "application/javascript"
                | "application/ecmascript"
                | "application/x-www-form-urlencoded"
                | "application/yaml"
                | "application/x-yaml"
                | "application/toml"
        )
}

/// `None` for an address that is reachable on the public internet, else its kind.
/// Embedded IPv4 addresses (compatible, NAT64, 6to4) are judged as IPv4; IPv4-mapped
/// ones (`::ffff:0:0/96`) are refused whatever they embed: a dual-stack socket turns
/// them into IPv4 connections behind the screen's back, and no public host needs them.
///
/// Checked against the IANA special-purpose address registries
/// (iana-ipv4-special-registry and iana-ipv6-special-registry, as of 2024-2025): every
/// block there whose "Globally Reachable" is False or N/A is refused below; the blocks
/// marked True pass (192.31.196.0/24 and 192.175.48.0/24 AS112, 192.52.193.0/24 AMT,
/// 64:ff9b::/96 judged by the IPv4 it embeds, 2620:4f:8000::/48 AS112), except inside
/// 192.0.0.0/24 and 2001::/23, refused whole (their few anycast services are no target
/// for an agent's `fetch`). The test `the_screen_covers_the_iana_registries` lists each
/// block with a sample address.
pub(crate) fn non_public_kind(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => non_public_v6(v6),
    }
}

fn non_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    if a == 0 {
        Some("unspecified")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private")
    } else if a == 100 && (b & 0xC0) == 64 {
        Some("shared (CGNAT)")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if ip.is_broadcast() {
        Some("broadcast")
    } else if ip.is_multicast() {
        Some("multicast")
    } else if ip.is_documentation() {
        Some("documentation")
    } else if a == 198 && (b & 0xFE) == 18 {
        Some("benchmarking")
    } else if a == 192 && b == 0 && c == 0 {
        Some("protocol-assignment")
    } else if a == 192 && b == 88 && c == 99 {
        Some("deprecated 6to4 relay")
    } else if a >= 240 {
        Some("reserved")
    } else {
        None
    }
}

fn non_public_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    let embedded_v4 = |high: u16, low: u16| {
        let [a, b] = high.to_be_bytes();
        let [c, d] = low.to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    };
    if ip.is_unspecified() {
        Some("unspecified")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if s[..6] == [0, 0, 0, 0, 0, 0xffff] {
        Some("IPv4-mapped")
    } else if s[..6] == [0; 6] {
        // Deprecated IPv4-compatible form (::a.b.c.d).
        non_public_v4(embedded_v4(s[6], s[7])).or(Some("IPv4-compatible"))
    } else if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        non_public_v4(embedded_v4(s[6], s[7]))
    } else if s[..3] == [0x64, 0xff9b, 1] {
        Some("local-use NAT64")
    } else if s[0] == 0x2002 {
        non_public_v4(embedded_v4(s[1], s[2]))
    } else if (s[0] & 0xfe00) == 0xfc00 {
        Some("unique-local")
    } else if (s[0] & 0xffc0) == 0xfe80 {
        Some("link-local")
    } else if (s[0] & 0xffc0) == 0xfec0 {
        Some("site-local")
    } else if (s[0] & 0xff00) == 0xff00 {
        Some("multicast")
    } else if (s[0] == 0x2001 && s[1] == 0x0db8) || (s[0] == 0x3fff && (s[1] & 0xf000) == 0) {
        // 2001:db8::/32 and 3fff::/20.
        Some("documentation")
    } else if s[0] == 0x2001 && s[1] == 0 {
        Some("Teredo")
    } else if s[0] == 0x2001 && s[1] < 0x200 {
        // 2001::/23, IETF protocol assignments (benchmarking, ORCHID, AMT, ...).
        Some("protocol-assignment")
    } else if s[..4] == [0x100, 0, 0, 0] {
        Some("discard-only")
    } else if s[..4] == [0x100, 0, 0, 1] {
        Some("dummy prefix")
    } else if s[0] == 0x5f00 {
        Some("SRv6 SID")
    } else {
        None
    }
}

fn denied(message: &str) -> ToolError {
    ToolError::violation(ToolErrorKind::NotAllowed, NETWORK_DENIED, message)
}

fn request_failure(error: reqwest::Error) -> ToolError {
    if error.is_timeout() {
        return ToolError::new(ToolErrorKind::Timeout, "the fetch timed out");
    }
    // reqwest's own message is generic ("error sending request"); the cause is below.
    let mut message = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    ToolError::new(ToolErrorKind::ExecutionFailed, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn only_public_addresses_pass_the_screen() {
        let refused = [
            "0.0.0.0",
            "0.1.2.3",
            "127.0.0.1",
            "127.255.0.9",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "100.64.0.1",
            "100.127.255.255",
            "169.254.169.254",
            "224.0.0.1",
            "255.255.255.255",
            "192.0.2.1",
            "198.51.100.7",
            "203.0.113.9",
            "198.18.0.1",
            "240.0.0.1",
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "::ffff:8.8.8.8",
            "64:ff9b:1::808:808",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "64:ff9b::a00:1",
            "2002:c0a8:101::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "2001:db8::1",
            "100::1",
        ];
        for text in refused {
            let ip: IpAddr = text.parse().unwrap();
            assert!(non_public_kind(ip).is_some(), "{text} should be refused");
        }
        let public = [
            "1.1.1.1",
            "8.8.8.8",
            "100.128.0.1",
            "172.32.0.1",
            "192.169.0.1",
            "2606:4700::1111",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ];
        for text in public {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(non_public_kind(ip), None, "{text} should pass");
        }
    }

    /// Every block of the IANA IPv4 and IPv6 special-purpose address registries, a
    /// sample address in it, and whether the screen lets it through (only blocks the
    /// registry marks globally reachable do).
    #[test]
    fn the_screen_covers_the_iana_registries() {
        let registry: &[(&str, &str, bool)] = &[
            // iana-ipv4-special-registry
            ("0.0.0.0/8", "0.0.0.1", false),
            ("0.0.0.0/32", "0.0.0.0", false),
            ("10.0.0.0/8", "10.200.0.1", false),
            ("100.64.0.0/10", "100.100.0.1", false),
            ("127.0.0.0/8", "127.1.2.3", false),
            ("169.254.0.0/16", "169.254.1.1", false),
            ("172.16.0.0/12", "172.20.0.1", false),
            ("192.0.0.0/24", "192.0.0.9", false),
            ("192.0.0.0/29", "192.0.0.1", false),
            ("192.0.0.8/32", "192.0.0.8", false),
            ("192.0.0.170/32", "192.0.0.170", false),
            ("192.0.2.0/24", "192.0.2.10", false),
            ("192.31.196.0/24", "192.31.196.1", true),
            ("192.52.193.0/24", "192.52.193.1", true),
            ("192.88.99.0/24", "192.88.99.1", false),
            ("192.168.0.0/16", "192.168.10.1", false),
            ("192.175.48.0/24", "192.175.48.1", true),
            ("198.18.0.0/15", "198.19.0.1", false),
            ("198.51.100.0/24", "198.51.100.1", false),
            ("203.0.113.0/24", "203.0.113.1", false),
            ("240.0.0.0/4", "250.0.0.1", false),
            ("255.255.255.255/32", "255.255.255.255", false),
            // iana-ipv6-special-registry
            ("::1/128", "::1", false),
            ("::/128", "::", false),
            ("::ffff:0:0/96", "::ffff:8.8.8.8", false),
            ("64:ff9b::/96", "64:ff9b::1.1.1.1", true),
            ("64:ff9b::/96 (private v4)", "64:ff9b::10.0.0.1", false),
            ("64:ff9b:1::/48", "64:ff9b:1::8.8.8.8", false),
            ("100::/64", "100::1", false),
            ("100:0:0:1::/64", "100:0:0:1::1", false),
            ("2001::/23", "2001:1::1", false),
            (
                "2001::/32 (Teredo)",
                "2001:0:4136:e378:8000:63bf:3fff:fdd2",
                false,
            ),
            ("2001:1::1/128", "2001:1::1", false),
            ("2001:2::/48", "2001:2::1", false),
            ("2001:3::/32", "2001:3::1", false),
            ("2001:4:112::/48", "2001:4:112::1", false),
            ("2001:10::/28", "2001:10::1", false),
            ("2001:20::/28", "2001:20::1", false),
            ("2001:30::/28", "2001:30::1", false),
            ("2001:db8::/32", "2001:db8::1", false),
            ("2002::/16 (private v4)", "2002:a00:1::1", false),
            ("2002::/16 (public v4)", "2002:808:808::1", true),
            ("2620:4f:8000::/48", "2620:4f:8000::1", true),
            ("3fff::/20", "3fff:fff::1", false),
            ("5f00::/16", "5f00::1", false),
            ("fc00::/7", "fd00::1", false),
            ("fe80::/10", "fe80::1", false),
            // Not in the registries, refused all the same.
            ("fec0::/10 (deprecated site-local)", "fec0::1", false),
            ("ff00::/8 (multicast)", "ff0e::1", false),
            ("224.0.0.0/4 (multicast)", "239.1.1.1", false),
            // Ordinary unicast just outside the refused blocks.
            ("2001:200::/23 neighbour", "2001:200::1", true),
            ("3fff:1000::/20 neighbour", "3fff:1000::1", true),
        ];
        for (block, sample, public) in registry {
            let ip: IpAddr = sample.parse().unwrap();
            assert_eq!(
                non_public_kind(ip).is_none(),
                *public,
                "{block}: {sample} got {:?}",
                non_public_kind(ip)
            );
        }
    }

    #[test]
    fn textual_content_types() {
        assert!(is_textual("text/html; charset=utf-8"));
        assert!(is_textual("Application/JSON"));
        assert!(is_textual("application/ld+json"));
        assert!(!is_textual("image/png"));
        assert!(!is_textual("application/octet-stream"));
    }

    /// Treats exactly 127.0.0.1 as public, so a redirect from a real local server to
    /// another loopback address exercises the per-hop check (every real server in a
    /// test is on loopback, so the public `tests/` cannot set this up).
    fn all_but_127_0_0_1(ip: IpAddr) -> Option<&'static str> {
        if ip == IpAddr::V4(Ipv4Addr::LOCALHOST) {
            None
        } else {
            non_public_kind(ip)
        }
    }

    #[tokio::test]
    async fn a_redirect_to_loopback_is_refused_at_the_hop() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = hits.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut buf = [0u8; 4096];
                let _ = socket.read(&mut buf).await;
                let reply = format!(
                    "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.2:{port}/secret\r\n\
                     Content-Length: 0\r\nConnection: close\r\n\r\n"
                );
                let _ = socket.write_all(reply.as_bytes()).await;
            }
        });

        let mut web = WebEnsemble::new(
            NetworkAccess {
                allowed: true,
                allow_private: false,
            },
            WebLimits::default(),
        );
        web.screen = all_but_127_0_0_1;
        let ctx = ToolContext {
            workspace: std::env::temp_dir(),
            timeout: Duration::from_secs(10),
            output_cap: 4096,
            scope: None,
        };
        let err = web
            .call(
                "fetch_url",
                json!({"url": format!("http://127.0.0.1:{port}/start")}),
                &ctx,
            )
            .await
            .unwrap_err();
        assert_eq!(err.kind, ToolErrorKind::NotAllowed);
        assert_eq!(err.security.as_ref().unwrap().event_type, NETWORK_DENIED);
        assert!(err.message.contains("127.0.0.2"), "{}", err.message);
        assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
