//! How many event streams may follow threads at once (`GET /v1/threads/{id}/events`),
//! per client, per remote address and in total: each holds a live feed in the hub and a
//! connection, so without a cap a client could open them until memory runs out (issue
//! 17, ADR 0025). The per-address cap is there because a client id is only claimed on
//! a server without keys: one caller rotating `X-Client-ID` would otherwise take every
//! place. Addresses count as the connection caps count them (IPv6 by its /64), and
//! every loopback address as one: `127.0.0.2` is the same machine as `127.0.0.1`.
//!
//! A stream over a limit is refused before it subscribes, with 429 `RATE_LIMITED`,
//! `Retry-After` and the standard envelope. The count is a guard moved into the SSE
//! response: it is given back when the client leaves or the stream ends. What must not
//! live here: which client may follow which thread (the hub's tenancy).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};

use agentplane_core::ErrorCode;

use crate::connections::AddressKey;
use crate::error::{ApiError, RETRY_AFTER_DETAIL};

/// How long a refused client is told to wait, in seconds.
const RETRY_AFTER_SECS: u64 = 5;

/// The caps (`[server] max_sse_followers`, `max_sse_followers_per_client` and
/// `max_sse_followers_per_address`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerLimits {
    /// Streams following threads at once, in total.
    pub max_total: usize,
    /// Streams one client (`X-Client-ID`) may have following at once.
    pub max_per_client: usize,
    /// Streams one remote address may have following at once, whatever clients it names.
    pub max_per_address: usize,
}

impl Default for FollowerLimits {
    fn default() -> Self {
        Self {
            max_total: 1024,
            max_per_client: 32,
            max_per_address: 256,
        }
    }
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_client: HashMap<String, usize>,
    per_address: HashMap<AddressKey, usize>,
}

/// Takes one from a count, forgetting the key at zero: gone callers leave nothing
/// behind.
fn release<K: std::hash::Hash + Eq>(counts: &mut HashMap<K, usize>, key: &K) {
    if let Some(count) = counts.get_mut(key) {
        *count -= 1;
        if *count == 0 {
            counts.remove(key);
        }
    }
}

/// The key a remote address counts under: every loopback address is this machine.
fn address_key(addr: SocketAddr) -> AddressKey {
    let key = AddressKey::of(addr);
    // Before the /64 of `::1` (which is `::`) hides it.
    if addr.ip().is_loopback() || key.0.is_loopback() {
        AddressKey(IpAddr::V4(Ipv4Addr::LOCALHOST))
    } else {
        key
    }
}

/// The streams following now.
#[derive(Debug)]
pub(crate) struct Followers {
    limits: FollowerLimits,
    counts: Mutex<Counts>,
}

/// One stream's place, given back when dropped.
pub(crate) struct Follower {
    followers: Arc<Followers>,
    client: String,
    address: Option<AddressKey>,
}

impl Drop for Follower {
    fn drop(&mut self) {
        let mut counts = self.followers.lock();
        counts.total = counts.total.saturating_sub(1);
        release(&mut counts.per_client, &self.client);
        if let Some(address) = &self.address {
            release(&mut counts.per_address, address);
        }
    }
}

impl Followers {
    pub(crate) fn new(limits: FollowerLimits) -> Self {
        Self {
            limits,
            counts: Mutex::new(Counts::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Counts> {
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A place for one more stream of `client` from `peer` (unknown only for a router
    /// served without the accept loop), or `RATE_LIMITED`.
    pub(crate) fn admit(
        self: &Arc<Self>,
        client: &str,
        peer: Option<SocketAddr>,
    ) -> Result<Follower, ApiError> {
        let address = peer.map(address_key);
        let mut counts = self.lock();
        let mine = counts.per_client.get(client).copied().unwrap_or(0);
        let from_address = address
            .and_then(|a| counts.per_address.get(&a).copied())
            .unwrap_or(0);
        let refused = if mine >= self.limits.max_per_client {
            Some(format!(
                "this client already follows {mine} event streams, the most allowed \
                 (server.max_sse_followers_per_client); close one first"
            ))
        } else if from_address >= self.limits.max_per_address {
            Some(format!(
                "this address already follows {from_address} event streams, the most \
                 allowed (server.max_sse_followers_per_address); close one first"
            ))
        } else if counts.total >= self.limits.max_total {
            tracing::warn!(
                open = counts.total,
                "event stream refused: server.max_sse_followers streams are open"
            );
            Some(format!(
                "the server already serves {} event streams, the most allowed \
                 (server.max_sse_followers); retry later",
                counts.total
            ))
        } else {
            None
        };
        if let Some(message) = refused {
            return Err(ApiError::new(ErrorCode::RateLimited, message)
                .with_detail(RETRY_AFTER_DETAIL, RETRY_AFTER_SECS));
        }
        counts.total += 1;
        *counts.per_client.entry(client.to_owned()).or_insert(0) += 1;
        if let Some(address) = address {
            *counts.per_address.entry(address).or_insert(0) += 1;
        }
        Ok(Follower {
            followers: self.clone(),
            client: client.to_owned(),
            address,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(text: &str) -> Option<SocketAddr> {
        Some(text.parse().expect("address"))
    }

    #[test]
    fn per_client_and_total_caps_hold_and_places_come_back() {
        let followers = Arc::new(Followers::new(FollowerLimits {
            max_total: 3,
            max_per_client: 2,
            max_per_address: 10,
        }));
        let a1 = followers.admit("a", None).expect("a1");
        let _a2 = followers.admit("a", None).expect("a2");
        let refused = followers.admit("a", None).err().expect("a3 refused");
        assert_eq!(refused.code(), ErrorCode::RateLimited);
        let _b1 = followers.admit("b", None).expect("b1");
        assert!(followers.admit("c", None).is_err(), "total cap");
        drop(a1);
        let _c1 = followers.admit("c", None).expect("a place came back");
        drop(_c1);
        drop(_b1);
        assert!(!followers.lock().per_client.contains_key("b"));
    }

    #[test]
    fn one_address_cannot_take_every_place_by_rotating_client_ids() {
        let followers = Arc::new(Followers::new(FollowerLimits {
            max_total: 100,
            max_per_client: 10,
            max_per_address: 3,
        }));
        let held: Vec<Follower> = (0..3)
            .map(|i| {
                followers
                    .admit(&format!("c{i}"), peer("10.0.0.1:1000"))
                    .expect("under the cap")
            })
            .collect();
        let refused = followers
            .admit("fresh", peer("10.0.0.1:2000"))
            .err()
            .expect("a fourth client id from the same address");
        assert_eq!(refused.code(), ErrorCode::RateLimited);
        assert!(refused.message().contains("max_sse_followers_per_address"));
        // Another address is not held back; nor is the same client from it.
        let other = followers.admit("c0", peer("10.0.0.2:1")).expect("other");
        // An IPv6 host counts by its /64; every loopback address is one machine.
        let _v6: Vec<Follower> = ["[2001:db8::1]:1", "[2001:db8::2]:1", "[2001:db8::3]:1"]
            .iter()
            .enumerate()
            .map(|(i, a)| followers.admit(&format!("v{i}"), peer(a)).expect("v6"))
            .collect();
        assert!(followers.admit("v9", peer("[2001:db8::ffff]:1")).is_err());
        let _local: Vec<Follower> = ["127.0.0.1:1", "127.0.0.2:1", "[::1]:1"]
            .iter()
            .enumerate()
            .map(|(i, a)| followers.admit(&format!("l{i}"), peer(a)).expect("local"))
            .collect();
        assert!(followers.admit("l9", peer("127.9.9.9:1")).is_err());
        // Places come back, and a gone address leaves nothing behind.
        drop(held);
        followers
            .admit("fresh", peer("10.0.0.1:3"))
            .expect("a place came back");
        drop(other);
        let counts = followers.lock();
        assert!(
            !counts
                .per_address
                .contains_key(&AddressKey(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2))))
        );
    }
}
