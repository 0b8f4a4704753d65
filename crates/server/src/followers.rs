//! How many event streams may follow threads at once (`GET /v1/threads/{id}/events`),
//! per client and in total: each holds a live feed in the hub and a connection, so
//! without a cap a client could open them until memory runs out (issue 17, ADR 0025).
//!
//! A stream over a limit is refused before it subscribes, with 429 `RATE_LIMITED`,
//! `Retry-After` and the standard envelope. The count is a guard moved into the SSE
//! response: it is given back when the client leaves or the stream ends. What must not
//! live here: which client may follow which thread (the hub's tenancy).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use agentplane_core::ErrorCode;

use crate::error::{ApiError, RETRY_AFTER_DETAIL};

/// How long a refused client is told to wait, in seconds.
const RETRY_AFTER_SECS: u64 = 5;

/// The caps (`[server] max_sse_followers` and `max_sse_followers_per_client`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerLimits {
    /// Streams following threads at once, in total.
    pub max_total: usize,
    /// Streams one client (`X-Client-ID`) may have following at once.
    pub max_per_client: usize,
}

impl Default for FollowerLimits {
    fn default() -> Self {
        Self {
            max_total: 1024,
            max_per_client: 32,
        }
    }
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_client: HashMap<String, usize>,
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
}

impl Drop for Follower {
    fn drop(&mut self) {
        let mut counts = self.followers.lock();
        counts.total = counts.total.saturating_sub(1);
        if let Some(count) = counts.per_client.get_mut(&self.client) {
            *count -= 1;
            if *count == 0 {
                // Gone clients leave nothing behind.
                counts.per_client.remove(&self.client);
            }
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

    /// A place for one more stream of `client`, or `RATE_LIMITED`.
    pub(crate) fn admit(self: &Arc<Self>, client: &str) -> Result<Follower, ApiError> {
        let mut counts = self.lock();
        let mine = counts.per_client.get(client).copied().unwrap_or(0);
        let refused = if mine >= self.limits.max_per_client {
            Some(format!(
                "this client already follows {mine} event streams, the most allowed \
                 (server.max_sse_followers_per_client); close one first"
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
        Ok(Follower {
            followers: self.clone(),
            client: client.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_client_and_total_caps_hold_and_places_come_back() {
        let followers = Arc::new(Followers::new(FollowerLimits {
            max_total: 3,
            max_per_client: 2,
        }));
        let a1 = followers.admit("a").expect("a1");
        let _a2 = followers.admit("a").expect("a2");
        let refused = followers.admit("a").err().expect("a3 refused");
        assert_eq!(refused.code(), ErrorCode::RateLimited);
        let _b1 = followers.admit("b").expect("b1");
        assert!(followers.admit("c").is_err(), "total cap");
        drop(a1);
        let _c1 = followers.admit("c").expect("a place came back");
        drop(_c1);
        drop(_b1);
        assert!(!followers.lock().per_client.contains_key("b"));
    }
}
