//! Where a program's connections through the egress proxy may go: the same host rules
//! as `fetch_url` (the agent's data scope, private networks only with
//! `network.allow_private`, agentplane's own ports never), and stricter on loopback.
//!
//! A program runs in a network namespace of its own (`agentplane-process`), so the
//! proxy is its only way out; this is the rule the proxy asks. A loopback address
//! (any `127.x`, `::1`, `0.0.0.0`, their IPv4-mapped and IPv4-compatible forms) is the
//! host's own services — a model server, a database, a second agentplane — and is
//! refused whatever `allow_private` says, unless a `data_scope` names that exact
//! `host:port` (no wildcard).
//!
//! What must not live here: the proxy itself, and the address registry
//! (`crate::web::non_public_kind`).

use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use agentplane_core::policy::DataScope;
use agentplane_process::egress::{Decision, EgressPolicy};

use crate::web::{host_in_scopes, ip_literal, non_public_kind};

/// One call's egress rule.
#[derive(Debug, Clone)]
pub(super) struct ShellEgress {
    pub(super) allow_private: bool,
    pub(super) scope: Option<Arc<Vec<DataScope>>>,
}

impl EgressPolicy for ShellEgress {
    fn admit(&self, host: String, port: u16) -> Pin<Box<dyn Future<Output = Decision> + Send>> {
        let rule = self.clone();
        Box::pin(async move { rule.decide(&host, port).await })
    }
}

impl ShellEgress {
    async fn decide(&self, host: &str, port: u16) -> Decision {
        let exact = format!("{}:{port}", bracketed(host));
        let named_exactly = self.scope.as_ref().is_some_and(|scopes| {
            scopes
                .iter()
                .any(|scope| scope.hosts.iter().any(|glob| glob.as_str() == exact))
        });
        if let Some(scopes) = &self.scope
            && !named_exactly
            && !host_in_scopes(scopes, host)
        {
            return Err(format!("host {host:?} is outside the agent's data scope"));
        }
        let addrs: Vec<SocketAddr> = match ip_literal(host) {
            Some(ip) => vec![SocketAddr::new(ip, port)],
            None => tokio::net::lookup_host((host, port))
                .await
                .map_err(|e| format!("could not resolve {host}: {e}"))?
                .collect(),
        };
        if addrs.is_empty() {
            return Err(format!("{host} has no addresses"));
        }
        let own = agentplane_process::sandbox::own_ports();
        for addr in &addrs {
            let kind = non_public_kind(addr.ip());
            if kind.is_some() && own.contains(&addr.port()) {
                return Err(format!(
                    "{host} resolves to {}, and port {} is agentplane's own; no agent reaches it",
                    addr.ip(),
                    addr.port()
                ));
            }
            if is_loopback(addr.ip()) {
                if !named_exactly {
                    return Err(format!(
                        "{host} resolves to {}, a loopback address (this machine's own \
                         services); allowed only where a data_scope names exactly {exact}",
                        addr.ip()
                    ));
                }
            } else if let Some(kind) = kind
                && !self.allow_private
            {
                return Err(format!(
                    "{host} resolves to {}, a {kind} address; private networks are not \
                     allowed for this agent",
                    addr.ip()
                ));
            }
        }
        Ok(addrs)
    }
}

fn bracketed(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

/// This machine's own addresses, in every spelling that reaches them.
fn is_loopback(ip: IpAddr) -> bool {
    let v4 = |v4: std::net::Ipv4Addr| v4.is_loopback() || v4.is_unspecified();
    match ip {
        IpAddr::V4(ip) => v4(ip),
        IpAddr::V6(ip) => {
            ip.is_loopback()
                || ip.is_unspecified()
                || ip.to_ipv4_mapped().is_some_and(v4)
                || (ip.segments()[..6] == [0; 6]
                    && v4(ip.to_ipv4().unwrap_or(std::net::Ipv4Addr::UNSPECIFIED)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentplane_core::policy::Glob;

    fn rule(allow_private: bool, hosts: &[&str]) -> ShellEgress {
        ShellEgress {
            allow_private,
            scope: (!hosts.is_empty()).then(|| {
                Arc::new(vec![DataScope {
                    paths: Vec::new(),
                    hosts: hosts.iter().map(|h| Glob::new(h).expect("glob")).collect(),
                    secrets: Vec::new(),
                }])
            }),
        }
    }

    #[tokio::test]
    async fn loopback_in_every_spelling_is_refused_even_with_allow_private() {
        let open = rule(true, &[]);
        for host in [
            "127.0.0.1",
            "127.1.2.3",
            "0.0.0.0",
            "::1",
            "::",
            "::ffff:127.0.0.1",
            "::ffff:0.0.0.0",
            "::127.0.0.1",
            "localhost",
        ] {
            assert!(open.decide(host, 5432).await.is_err(), "{host} was allowed");
        }
        // Private but not loopback: allow_private decides.
        assert!(open.decide("10.1.2.3", 80).await.is_ok());
        assert!(rule(false, &[]).decide("10.1.2.3", 80).await.is_err());
        assert!(rule(false, &[]).decide("93.184.215.14", 443).await.is_ok());
    }

    #[tokio::test]
    async fn a_loopback_service_needs_its_exact_host_and_port_in_a_data_scope() {
        let named = rule(false, &["127.0.0.1:5432"]);
        assert!(named.decide("127.0.0.1", 5432).await.is_ok());
        assert!(named.decide("127.0.0.1", 5433).await.is_err());
        assert!(
            rule(true, &["127.0.0.1:*"])
                .decide("127.0.0.1", 5432)
                .await
                .is_err()
        );
        assert!(rule(true, &["*"]).decide("127.0.0.1", 5432).await.is_err());
        // Outside the scope's hosts: refused before any lookup.
        assert!(named.decide("93.184.215.14", 443).await.is_err());
    }

    #[tokio::test]
    async fn agentplane_s_own_port_is_never_a_destination() {
        agentplane_process::sandbox::forbid_ports([41_999]);
        let named = rule(true, &["127.0.0.1:41999"]);
        assert!(named.decide("127.0.0.1", 41_999).await.is_err());
    }
}
