//! Browser origins and the names this server answers to, as data: the parsing and the
//! allowlist the ingress guard (`ingress.rs`) applies to every route. The MCP
//! transport requires a server to validate `Origin` and answer `403` when it is present
//! and not allowed; we hold every route to it, so that a web page cannot drive the
//! agents through a visitor's browser (a cross-site request, or DNS rebinding, where a
//! foreign name resolves to 127.0.0.1 and the `Host` header alone looks local).
//!
//! The rule is an allowlist. A browser origin on a loopback host (`localhost`,
//! `127.0.0.0/8`, `[::1]`, `http` or `https`, any port) is allowed; any other only when
//! `[server] allowed_origins` lists it exactly (scheme, host, port; a missing port is
//! the scheme's own). `null` (sandboxed frames, `file:` pages) and everything else is
//! refused. The same server's own name is not trusted for that reason alone: under DNS
//! rebinding it is the attacker's (the guard trusts it only where a credential guards
//! the server, see `ingress.rs`). What must not live here: the middleware, and anything
//! about the credential (`auth.rs`).

use std::net::IpAddr;

/// One browser origin: scheme, host (lower case; IPv6 without brackets) and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

impl Origin {
    /// Parses a serialized origin (`https://app.example.com`, `http://127.0.0.1:6274`,
    /// `http://[::1]:3000`): `http` or `https`, a host, an optional port, nothing more.
    pub(crate) fn parse(text: &str) -> Result<Origin, String> {
        let (scheme, rest) = text
            .split_once("://")
            .ok_or_else(|| format!("`{text}` is not an origin (scheme://host[:port])"))?;
        let scheme = scheme.to_ascii_lowercase();
        let default_port = match scheme.as_str() {
            "http" => 80,
            "https" => 443,
            _ => return Err(format!("`{text}`: only http and https origins exist here")),
        };
        let (host, port) = match rest.strip_prefix('[') {
            Some(v6) => {
                let (host, after) = v6
                    .split_once(']')
                    .ok_or_else(|| format!("`{text}`: an IPv6 host needs its closing `]`"))?;
                host.parse::<std::net::Ipv6Addr>()
                    .map_err(|_| format!("`{text}`: `{host}` is not an IPv6 address"))?;
                (host.to_owned(), after)
            }
            None => {
                let end = rest.find(':').unwrap_or(rest.len());
                (rest[..end].to_ascii_lowercase(), &rest[end..])
            }
        };
        let valid_name = |h: &str| {
            !h.is_empty()
                && h.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b':'))
        };
        if !valid_name(&host) {
            return Err(format!("`{text}`: `{host}` is not a host name"));
        }
        let port = match port {
            "" => default_port,
            p => p
                .strip_prefix(':')
                .filter(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|digits| digits.parse::<u16>().ok())
                .ok_or_else(|| format!("`{text}`: an origin has no path, query or bad port"))?,
        };
        Ok(Origin { scheme, host, port })
    }

    /// Whether the host is this machine: `localhost`, `127.0.0.0/8` or `::1`.
    fn is_loopback(&self) -> bool {
        is_loopback_name(&self.host)
    }

    /// Whether a request's `Host` names this origin's host and port (a `Host` without
    /// a port is on the origin scheme's own port): a page of this server's own origin.
    pub(crate) fn is_host(&self, host: &Host) -> bool {
        let default_port = if self.scheme == "https" { 443 } else { 80 };
        self.host == host.name && host.port.unwrap_or(default_port) == self.port
    }
}

/// Whether a host name (lower case, IPv6 without brackets) is this machine.
fn is_loopback_name(name: &str) -> bool {
    name == "localhost" || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// A request's `Host`: a name (lower case; IPv6 without brackets) and maybe a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Host {
    name: String,
    port: Option<u16>,
}

impl Host {
    /// Parses a `Host` header's value: a name or address and an optional port, with no
    /// user, path or anything else.
    pub(crate) fn parse(text: &str) -> Result<Host, String> {
        let authority = axum::http::uri::Authority::try_from(text.trim())
            .map_err(|_| format!("`{text}` is not a host"))?;
        if authority.as_str().contains('@') {
            return Err(format!("`{text}` is not a host"));
        }
        let name = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        if name.is_empty() {
            return Err("an empty host".to_owned());
        }
        Ok(Host {
            name,
            port: authority.port_u16(),
        })
    }

    /// Whether the name is this machine's: what a page on a rebound name cannot send.
    pub(crate) fn is_loopback(&self) -> bool {
        is_loopback_name(&self.name)
    }
}

/// The origins every route accepts besides loopback ones (`[server] allowed_origins`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedOrigins {
    listed: Vec<Origin>,
}

impl AllowedOrigins {
    /// Parses the configured list; an entry that is not an origin (a path, a wildcard,
    /// `null`) is an error naming it.
    pub fn parse(entries: &[String]) -> Result<AllowedOrigins, String> {
        let listed = entries
            .iter()
            .map(|entry| match entry.trim() {
                "null" => Err("`null` is never allowed: any sandboxed page sends it".to_owned()),
                "*" => Err("`*` would let every web page drive the agents".to_owned()),
                e => Origin::parse(e),
            })
            .collect::<Result<_, _>>()?;
        Ok(AllowedOrigins { listed })
    }

    /// Whether a request with this `Origin` value may reach the routes, whatever its
    /// `Host` (a loopback origin, or a listed one).
    pub(crate) fn allows(&self, value: &str) -> bool {
        match Origin::parse(value.trim()) {
            Ok(origin) => origin.is_loopback() || self.listed.contains(&origin),
            // `null`, and anything that is not an origin.
            Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(entries: &[&str]) -> AllowedOrigins {
        AllowedOrigins::parse(&entries.iter().map(|e| (*e).to_owned()).collect::<Vec<_>>())
            .expect("valid list")
    }

    #[test]
    fn loopback_origins_pass_and_foreign_ones_do_not() {
        let none = AllowedOrigins::default();
        for ok in [
            "http://localhost",
            "http://localhost:6274",
            "https://LOCALHOST:8443",
            "http://127.0.0.1:8686",
            "http://127.0.0.2",
            "http://[::1]:3000",
            "https://[::1]",
        ] {
            assert!(none.allows(ok), "{ok}");
        }
        for refused in [
            "null",
            "",
            "https://evil.example",
            "http://evil.example:8686",
            "http://localhost.evil.example",
            "http://127.0.0.1.nip.io",
            "http://[::2]",
            "http://[::ffff:127.0.0.1]",
            "file://",
            "ftp://localhost",
            "http://localhost/path",
            "http://localhost:99999",
            "http://localhost:",
            "http://user@localhost",
            "localhost",
            "http://[::1",
        ] {
            assert!(!none.allows(refused), "{refused}");
        }
    }

    #[test]
    fn listed_origins_match_exactly_with_default_ports() {
        let list = allowed(&["https://app.example.com", "http://tools.example:8080"]);
        assert!(list.allows("https://app.example.com"));
        assert!(list.allows("https://app.example.com:443"));
        assert!(list.allows("HTTPS://App.Example.com"));
        assert!(list.allows("http://tools.example:8080"));
        assert!(!list.allows("http://app.example.com"), "another scheme");
        assert!(!list.allows("https://app.example.com:8443"), "another port");
        assert!(!list.allows("https://evil.app.example.com"), "a subdomain");
        assert!(!list.allows("http://tools.example"), "port 80 is not 8080");
    }

    #[test]
    fn hosts_are_parsed_and_only_this_machine_is_loopback() {
        for local in [
            "127.0.0.1:8686",
            "localhost",
            "LOCALHOST:1",
            "[::1]:3000",
            "127.9.9.9",
        ] {
            assert!(Host::parse(local).expect(local).is_loopback(), "{local}");
        }
        for foreign in [
            "evil.example",
            "evil.example:8686",
            "localhost.evil",
            "[::2]:1",
        ] {
            assert!(
                !Host::parse(foreign).expect(foreign).is_loopback(),
                "{foreign}"
            );
        }
        for bad in ["", "user@localhost", "localhost/path", "a b"] {
            assert!(Host::parse(bad).is_err(), "{bad}");
        }
        let page = |o: &str| Origin::parse(o).expect(o);
        let host = |h: &str| Host::parse(h).expect(h);
        assert!(page("https://agents.example").is_host(&host("agents.example")));
        assert!(page("https://agents.example").is_host(&host("agents.example:443")));
        assert!(page("http://agents.example:8686").is_host(&host("Agents.Example:8686")));
        assert!(!page("https://agents.example").is_host(&host("agents.example:8686")));
        assert!(!page("https://evil.example").is_host(&host("agents.example")));
    }

    #[test]
    fn a_configured_list_refuses_what_is_not_an_origin() {
        for bad in [
            "null",
            "*",
            "example.com",
            "https://a.example/path",
            "gopher://x",
        ] {
            assert!(
                AllowedOrigins::parse(&[bad.to_owned()]).is_err(),
                "{bad} accepted"
            );
        }
    }
}
