//! Exponential backoff with jitter, for execution retries and webhook redeliveries.
//!
//! Pure arithmetic and a random number: no clock, no sleeping (the store schedules).

use std::hash::{BuildHasher, Hasher, RandomState};
use std::time::Duration;

/// Delays that double from `base` up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The delay before the first retry.
    pub base: Duration,
    /// No delay is longer.
    pub max: Duration,
}

impl Backoff {
    /// The delay before retry number `retry` (1 for the first): `base · 2^(retry-1)`,
    /// capped at `max`, then drawn uniformly from its upper half ("equal jitter"), so
    /// retries of many executions failing together spread out but never come sooner
    /// than half the nominal delay.
    pub fn delay(&self, retry: u32) -> Duration {
        let nominal = self.nominal(retry);
        let half = nominal / 2;
        let spread = u64::try_from((nominal - half).as_millis()).unwrap_or(u64::MAX);
        let jitter = if spread == 0 {
            0
        } else {
            random() % (spread + 1)
        };
        half + Duration::from_millis(jitter)
    }

    /// The delay before jitter.
    pub fn nominal(&self, retry: u32) -> Duration {
        let doublings = retry.saturating_sub(1).min(32);
        self.base
            .checked_mul(1u32 << doublings.min(31))
            .unwrap_or(self.max)
            .min(self.max)
    }
}

/// A random number from the standard library's per-instance SipHash keys: enough for
/// jitter, without a dependency.
fn random() -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u8(0);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap_and_stay_in_the_upper_half() {
        let backoff = Backoff {
            base: Duration::from_millis(100),
            max: Duration::from_secs(1),
        };
        assert_eq!(backoff.nominal(1), Duration::from_millis(100));
        assert_eq!(backoff.nominal(2), Duration::from_millis(200));
        assert_eq!(backoff.nominal(4), Duration::from_millis(800));
        assert_eq!(backoff.nominal(5), Duration::from_secs(1));
        assert_eq!(backoff.nominal(u32::MAX), Duration::from_secs(1));
        for retry in 1..10 {
            let nominal = backoff.nominal(retry);
            for _ in 0..50 {
                let d = backoff.delay(retry);
                assert!(d >= nominal / 2 && d <= nominal, "{d:?} for {nominal:?}");
            }
        }
        assert_eq!(
            Backoff {
                base: Duration::ZERO,
                max: Duration::ZERO
            }
            .delay(3),
            Duration::ZERO
        );
    }
}
