//! `RateLimits`: where the counters of `rate_limit` policies live (ADR 0021).
//!
//! One process keeps them in memory ([`crate::governance::RateLimiter`], the default);
//! replicas share them in Redis (`agentplane-redis`). The engine asks once per request
//! with every limit that applies to it.
//!
//! Invariants every implementation keeps:
//! - all or none: a request is charged against every limit it counts against, or, when
//!   one of them is full, against none;
//! - exact under concurrency: N concurrent requests against a window of `max` admit
//!   exactly `max` (across every process sharing the counters);
//! - a refusal names the full window whose oldest admission leaves last (`Limited`);
//! - when the counters cannot be reached the answer is `Unavailable`, never an
//!   admission the implementation was not told to make.

use std::time::Duration;

use agentplane_core::policy::{CountKey, RateLimit};
use async_trait::async_trait;

/// The facts a counter may be keyed by.
#[derive(Debug, Clone, Copy)]
pub struct RateFacts<'a> {
    pub agent: &'a str,
    pub tool: Option<&'a str>,
    pub client: &'a str,
}

/// A refusal: which policy's window is full and when it next admits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limited {
    pub policy: String,
    pub max: u32,
    pub window: Duration,
    /// How long until the oldest admission leaves the window.
    pub retry_after: Duration,
}

impl Limited {
    /// The refusal in words.
    pub fn message(&self) -> String {
        format!(
            "rate limit `{}` allows {} per {} s; retry in {} s",
            self.policy,
            self.max,
            self.window.as_secs(),
            self.retry_after.as_secs().max(1)
        )
    }
}

/// Why a request was not admitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RateError {
    /// A window is full.
    #[error("{}", .0.message())]
    Limited(Limited),
    /// The shared counters could not be reached, so nothing was admitted (fail-closed).
    /// The message says what failed and never holds credentials.
    #[error("rate limits cannot be checked, so the request is refused: {0}")]
    Unavailable(String),
}

/// The counters of every rate-limit policy.
#[async_trait]
pub trait RateLimits: Send + Sync {
    /// Admits one request against every limit in `limits` (policy name, limit), or
    /// against none. An empty `limits` always admits without any I/O.
    async fn admit(
        &self,
        limits: &[(&str, &RateLimit)],
        facts: RateFacts<'_>,
    ) -> Result<(), RateError>;
}

/// The counter a request counts against under one limit: the policy name, then each of
/// the limit's `per` facts in order (no tool counts as `""`). Every implementation keys
/// its counters by these parts, so a limit means the same thing in memory and in Redis.
pub fn counter_parts<'a>(policy: &'a str, limit: &RateLimit, facts: RateFacts<'a>) -> Vec<&'a str> {
    std::iter::once(policy)
        .chain(limit.per.iter().map(|part| match part {
            CountKey::Agent => facts.agent,
            CountKey::Tool => facts.tool.unwrap_or(""),
            CountKey::Client => facts.client,
        }))
        .collect()
}
