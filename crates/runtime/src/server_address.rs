//! The running server's address: `<data directory>/server-address`, the URL a running
//! `serve` answers at, written once it listens and removed when it stops. A command
//! started beside it on the same configuration (`agentplane mcp gateway`, started by a
//! desktop client that knows no flags of `serve`'s) reads it to find the server that
//! holds the store, whichever `--listen` it was started with.
//!
//! The file holds no secret; it is written like the setup token's (0600, whole or not
//! at all). A file left by a killed server names a port nobody answers on: a reader
//! uses it only while a server holds the store, and the next `serve` replaces it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::setup_token::write_private;

/// The file's name in the data directory.
pub const FILE_NAME: &str = "server-address";

/// Where the address of the configured store's server is kept: beside the SQLite file.
pub fn path(config: &Config) -> PathBuf {
    config
        .store
        .path
        .parent()
        .unwrap_or_else(|| Path::new(""))
        .join(FILE_NAME)
}

/// The URL clients reach a server listening on `addr` at: an unspecified address
/// (`0.0.0.0`, `::`) is reached on loopback.
pub fn url_of(addr: SocketAddr) -> String {
    let ip = match addr.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_owned(),
        ip if ip.is_unspecified() => "[::1]".to_owned(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        std::net::IpAddr::V4(ip) => ip.to_string(),
    };
    format!("http://{ip}:{}", addr.port())
}

/// Records that this process serves the configured store at `addr`. A failure is
/// logged, not fatal: commands then fall back to `[server] listen`.
pub fn announce(config: &Config, addr: SocketAddr) {
    let path = path(config);
    let url = url_of(addr);
    if let Err(e) = write_private(&path, format!("{url}\n").as_bytes()) {
        tracing::warn!(path = %path.display(), error = %e,
            "the server's address could not be written; `agentplane mcp gateway` falls back to [server] listen");
    }
}

/// Removes the file this process wrote, if it still names `addr` (a later server's
/// file is left alone).
pub fn withdraw(config: &Config, addr: SocketAddr) {
    let path = path(config);
    if read(config).as_deref() == Some(url_of(addr).as_str()) {
        let _ = std::fs::remove_file(&path);
    }
}

/// The URL the file names, when it names a loopback address: the file is read by
/// commands that send a key or token there, so a file planted to name another host is
/// ignored (with a warning), as is anything that is not `http://IP:PORT`.
pub fn read(config: &Config) -> Option<String> {
    let text = std::fs::read_to_string(path(config)).ok()?;
    let url = loopback_url(&text);
    if url.is_none() {
        tracing::warn!(path = %path(config).display(),
            "the recorded server address is not a loopback http://IP:PORT; ignored");
    }
    url
}

/// `text` as a loopback `http://IP:PORT` URL, if it is one.
fn loopback_url(text: &str) -> Option<String> {
    text.trim()
        .strip_prefix("http://")
        .and_then(|rest| rest.parse::<SocketAddr>().ok())
        .filter(|addr| addr.ip().is_loopback())
        .map(url_of)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_loopback_address_is_read_back() {
        assert_eq!(
            loopback_url("http://127.0.0.1:9001\n").as_deref(),
            Some("http://127.0.0.1:9001")
        );
        assert_eq!(
            loopback_url("http://[::1]:9001").as_deref(),
            Some("http://[::1]:9001")
        );
        for hostile in [
            "http://10.0.0.5:8686",
            "http://0.0.0.0:8686",
            "http://evil.example:80",
            "http://127.0.0.1:9001/steal",
            "http://user@127.0.0.1:9001",
            "https://127.0.0.1:9001",
            "",
            "\u{0}",
        ] {
            assert_eq!(loopback_url(hostile), None, "{hostile:?}");
        }
    }

    #[test]
    fn unspecified_addresses_are_reached_on_loopback() {
        let url = |s: &str| url_of(s.parse().expect("address"));
        assert_eq!(url("127.0.0.1:8686"), "http://127.0.0.1:8686");
        assert_eq!(url("0.0.0.0:9000"), "http://127.0.0.1:9000");
        assert_eq!(url("[::]:9000"), "http://[::1]:9000");
        assert_eq!(url("[::1]:9001"), "http://[::1]:9001");
    }
}
