//! Sliding-window rate limits, exact under concurrency: every admission is decided and
//! recorded under one lock, so N concurrent requests against a window of `max` admit
//! exactly `max`. Each counter is a log of admission instants (seed 001 ADR-008's
//! sliding log), at most `max` long; in memory, for one process. It is the default
//! [`RateLimits`]; replicas share theirs in Redis instead (ADR 0021).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use agentplane_core::policy::RateLimit;
use async_trait::async_trait;

use crate::ports::rate::counter_parts;
pub use crate::ports::{Limited, RateError, RateFacts, RateLimits};

/// Admissions between sweeps of idle counters.
const SWEEP_EVERY: u64 = 4_096;

struct Counter {
    window: Duration,
    admitted: VecDeque<Instant>,
}

#[derive(Default)]
struct Counters {
    by_key: HashMap<String, Counter>,
    admissions: u64,
}

/// The counters of every rate-limit policy.
#[derive(Default)]
pub struct RateLimiter {
    counters: Mutex<Counters>,
}

impl RateLimiter {
    /// Admits one request against every limit that applies, or against none: a request
    /// refused by one limit does not use up the others.
    pub fn admit_at(
        &self,
        limits: &[(&str, &RateLimit)],
        facts: RateFacts<'_>,
        now: Instant,
    ) -> Result<(), Limited> {
        if limits.is_empty() {
            return Ok(());
        }
        let mut counters = match self.counters.lock() {
            Ok(counters) => counters,
            Err(poisoned) => poisoned.into_inner(),
        };
        let keys: Vec<String> = limits
            .iter()
            .map(|(policy, limit)| key(policy, limit, facts))
            .collect();
        let mut refusal: Option<Limited> = None;
        for ((policy, limit), key) in limits.iter().zip(&keys) {
            let counter = counters.by_key.entry(key.clone()).or_insert(Counter {
                window: limit.window,
                admitted: VecDeque::new(),
            });
            counter.window = limit.window;
            prune(counter, now);
            if counter.admitted.len() >= limit.max as usize {
                let oldest = counter.admitted.front().copied().unwrap_or(now);
                let retry_after = (oldest + limit.window).saturating_duration_since(now);
                if refusal.as_ref().is_none_or(|r| r.retry_after < retry_after) {
                    refusal = Some(Limited {
                        policy: (*policy).to_owned(),
                        max: limit.max,
                        window: limit.window,
                        retry_after,
                    });
                }
            }
        }
        if let Some(refusal) = refusal {
            return Err(refusal);
        }
        for ((_, limit), key) in limits.iter().zip(&keys) {
            if let Some(counter) = counters.by_key.get_mut(key) {
                counter.admitted.push_back(now);
                // A limit lowered by a reload: keep only what the new max can hold.
                while counter.admitted.len() > limit.max as usize {
                    counter.admitted.pop_front();
                }
            }
        }
        counters.admissions += 1;
        if counters.admissions.is_multiple_of(SWEEP_EVERY) {
            counters.by_key.retain(|_, counter| {
                prune(counter, now);
                !counter.admitted.is_empty()
            });
        }
        Ok(())
    }

    /// How many counters are held (for tests and metrics).
    pub fn counters(&self) -> usize {
        self.counters.lock().map(|c| c.by_key.len()).unwrap_or(0)
    }
}

#[async_trait]
impl RateLimits for RateLimiter {
    async fn admit(
        &self,
        limits: &[(&str, &RateLimit)],
        facts: RateFacts<'_>,
    ) -> Result<(), RateError> {
        self.admit_at(limits, facts, Instant::now())
            .map_err(RateError::Limited)
    }
}

/// Drops admissions that have left the window.
fn prune(counter: &mut Counter, now: Instant) {
    while let Some(&oldest) = counter.admitted.front() {
        if now.saturating_duration_since(oldest) >= counter.window {
            counter.admitted.pop_front();
        } else {
            break;
        }
    }
}

/// The in-memory key of a counter: its parts joined by NUL.
fn key(policy: &str, limit: &RateLimit, facts: RateFacts<'_>) -> String {
    counter_parts(policy, limit, facts).join("\u{0}")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use agentplane_core::policy::CountKey;

    use super::*;

    fn limit(max: u32, secs: u64, per: Vec<CountKey>) -> RateLimit {
        RateLimit {
            window: Duration::from_secs(secs),
            max,
            per,
        }
    }

    fn facts<'a>(agent: &'a str, client: &'a str) -> RateFacts<'a> {
        RateFacts {
            agent,
            tool: Some("t"),
            client,
        }
    }

    #[test]
    fn the_window_slides() {
        let limiter = RateLimiter::default();
        let l = limit(2, 10, vec![]);
        let t0 = Instant::now();
        let limits = [("p", &l)];
        assert!(limiter.admit_at(&limits, facts("a", "c"), t0).is_ok());
        assert!(
            limiter
                .admit_at(&limits, facts("a", "c"), t0 + Duration::from_secs(4))
                .is_ok()
        );
        let refused = limiter
            .admit_at(&limits, facts("a", "c"), t0 + Duration::from_secs(5))
            .expect_err("full");
        assert_eq!(refused.retry_after, Duration::from_secs(5));
        assert_eq!(refused.policy, "p");
        // The first admission leaves the window at t0+10: one slot frees, not two.
        let later = t0 + Duration::from_secs(10);
        assert!(limiter.admit_at(&limits, facts("a", "c"), later).is_ok());
        assert!(limiter.admit_at(&limits, facts("a", "c"), later).is_err());
    }

    #[test]
    fn per_keys_separate_counters_and_a_refusal_uses_up_nothing() {
        let limiter = RateLimiter::default();
        let per_client = limit(1, 60, vec![CountKey::Client]);
        let shared = limit(2, 60, vec![]);
        let limits = [("per-client", &per_client), ("shared", &shared)];
        let now = Instant::now();
        assert!(limiter.admit_at(&limits, facts("a", "alice"), now).is_ok());
        // Alice's own counter is full: refused, and the shared counter is not charged.
        assert!(limiter.admit_at(&limits, facts("a", "alice"), now).is_err());
        assert!(limiter.admit_at(&limits, facts("a", "bob"), now).is_ok());
        // The shared one is now full (alice once, bob once).
        let refused = limiter
            .admit_at(&limits, facts("a", "carol"), now)
            .expect_err("shared full");
        assert_eq!(refused.policy, "shared");
    }

    #[test]
    fn concurrent_requests_never_exceed_the_window() {
        let limiter = Arc::new(RateLimiter::default());
        let l = Arc::new(limit(37, 3600, vec![CountKey::Agent]));
        let now = Instant::now();
        let admitted: usize = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    let limiter = limiter.clone();
                    let l = l.clone();
                    scope.spawn(move || {
                        (0..100)
                            .filter(|_| {
                                limiter.admit_at(&[("p", &l)], facts("a", "c"), now).is_ok()
                            })
                            .count()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("thread")).sum()
        });
        assert_eq!(admitted, 37);
    }
}
