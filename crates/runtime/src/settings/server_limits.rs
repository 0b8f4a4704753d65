//! The `[server]` keys that keep `agentplane serve` from being starved (issue 17,
//! ADR 0025): connection timeouts and caps, and caps on event streams.
//!
//! ```toml
//! [server]
//! header_read_timeout_secs = 10      # a request head must be complete this soon after its first byte
//! idle_timeout_secs = 60             # a connection with no request in flight closes after this
//! max_connections = 4096             # open at once; at the cap the oldest idle one makes room
//! max_connections_per_address = 256  # from one address (IPv6: one /64)
//! max_sse_followers = 1024           # `GET /v1/threads/{id}/events` streams at once
//! max_sse_followers_per_client = 32  # ... per client id
//! max_sse_followers_per_address = 256 # ... per remote address (every loopback address is one)
//! ```
//!
//! The server crate owns what the values do; this file only checks them.

use std::time::Duration;

use super::SettingError;

/// The checked values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// Time from a request's first byte until its head is complete.
    pub header_read_timeout: Duration,
    /// Time a connection may stay open with no request in flight.
    pub idle_timeout: Duration,
    /// Connections open at once, in total.
    pub max_connections: usize,
    /// Connections open at once from one address.
    pub max_connections_per_address: usize,
    /// Event streams following threads at once, in total.
    pub max_sse_followers: usize,
    /// Event streams following threads at once, per client.
    pub max_sse_followers_per_client: usize,
    /// Event streams following threads at once, per remote address.
    pub max_sse_followers_per_address: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 4096,
            max_connections_per_address: 256,
            max_sse_followers: 1024,
            max_sse_followers_per_client: 32,
            max_sse_followers_per_address: 256,
        }
    }
}

/// The keys as written (all optional).
#[derive(Debug, Default, Clone, Copy)]
pub struct FileServerLimits {
    pub header_read_timeout_secs: Option<u64>,
    pub idle_timeout_secs: Option<u64>,
    pub max_connections: Option<usize>,
    pub max_connections_per_address: Option<usize>,
    pub max_sse_followers: Option<usize>,
    pub max_sse_followers_per_client: Option<usize>,
    pub max_sse_followers_per_address: Option<usize>,
}

/// The largest timeout accepted: a day.
const MAX_TIMEOUT_SECS: u64 = 86_400;
/// The largest cap accepted: far above what one process's file descriptors allow.
const MAX_CAP: usize = 1_000_000;

impl FileServerLimits {
    /// Checks every key; on error, the key and what is wrong.
    pub fn resolve(self) -> Result<ServerLimits, SettingError> {
        let defaults = ServerLimits::default();
        let secs = |key: &str, value: Option<u64>, default: Duration| match value {
            None => Ok(default),
            Some(v) if (1..=MAX_TIMEOUT_SECS).contains(&v) => Ok(Duration::from_secs(v)),
            Some(_) => Err((
                key.to_owned(),
                format!("must be 1 to {MAX_TIMEOUT_SECS} seconds"),
            )),
        };
        let cap = |key: &str, value: Option<usize>, default: usize| match value {
            None => Ok(default),
            Some(v) if (1..=MAX_CAP).contains(&v) => Ok(v),
            Some(_) => Err((key.to_owned(), format!("must be 1 to {MAX_CAP}"))),
        };
        let limits = ServerLimits {
            header_read_timeout: secs(
                "header_read_timeout_secs",
                self.header_read_timeout_secs,
                defaults.header_read_timeout,
            )?,
            idle_timeout: secs(
                "idle_timeout_secs",
                self.idle_timeout_secs,
                defaults.idle_timeout,
            )?,
            max_connections: cap(
                "max_connections",
                self.max_connections,
                defaults.max_connections,
            )?,
            max_connections_per_address: cap(
                "max_connections_per_address",
                self.max_connections_per_address,
                defaults.max_connections_per_address,
            )?,
            max_sse_followers: cap(
                "max_sse_followers",
                self.max_sse_followers,
                defaults.max_sse_followers,
            )?,
            max_sse_followers_per_client: cap(
                "max_sse_followers_per_client",
                self.max_sse_followers_per_client,
                defaults.max_sse_followers_per_client,
            )?,
            max_sse_followers_per_address: cap(
                "max_sse_followers_per_address",
                self.max_sse_followers_per_address,
                defaults.max_sse_followers_per_address,
            )?,
        };
        Ok(limits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_bounds() {
        assert_eq!(
            FileServerLimits::default().resolve(),
            Ok(ServerLimits::default())
        );
        let zero = FileServerLimits {
            idle_timeout_secs: Some(0),
            ..FileServerLimits::default()
        };
        assert_eq!(zero.resolve().unwrap_err().0, "idle_timeout_secs");
        let huge = FileServerLimits {
            max_connections: Some(usize::MAX),
            ..FileServerLimits::default()
        };
        assert_eq!(huge.resolve().unwrap_err().0, "max_connections");
        let zero = FileServerLimits {
            max_sse_followers_per_address: Some(0),
            ..FileServerLimits::default()
        };
        assert_eq!(
            zero.resolve().unwrap_err().0,
            "max_sse_followers_per_address"
        );
    }
}
