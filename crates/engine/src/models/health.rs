//! Per-provider health: a circuit breaker over consecutive upstream failures.
//!
//! After `failures` upstream failures in a row a provider's circuit opens: chains skip
//! it for `cooldown`, then it is tried again (half-open) and one success closes it.
//! Only upstream failures count (unreachable, 5xx, 429, a broken stream, a timeout);
//! a capability or request error says nothing about whether the server is up. State
//! is in memory: a restart starts every provider closed. No I/O here. A failure is kept
//! (and shown) as `said` words it: redacted first.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use agentplane_core::policy::Timestamp;

/// When a circuit opens and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CircuitSettings {
    /// Consecutive upstream failures that open the circuit (at least 1).
    pub failures: u32,
    /// How long an open circuit skips the provider.
    pub cooldown: Duration,
}

impl Default for CircuitSettings {
    fn default() -> Self {
        Self {
            failures: 3,
            cooldown: Duration::from_secs(30),
        }
    }
}

/// A provider's health as shown in `GET /v1/agents`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HealthReport {
    /// False while the circuit is open.
    pub up: bool,
    /// Upstream failures since the last success.
    pub consecutive_failures: u32,
    /// The last error, upstream or not (already free of secrets: adapters redact).
    pub last_error: Option<String>,
    /// RFC 3339 times of the last success and the last failure.
    pub last_success: Option<String>,
    pub last_failure: Option<String>,
    /// Seconds until an open circuit lets a call through again.
    pub retry_in_secs: Option<u64>,
}

#[derive(Debug, Default)]
struct State {
    consecutive: u32,
    open_until: Option<Instant>,
    last_error: Option<String>,
    last_success: Option<String>,
    last_failure: Option<String>,
}

/// One provider's circuit.
#[derive(Debug, Default)]
pub(crate) struct Health {
    state: Mutex<State>,
}

impl Health {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Plain data: a panic while holding the lock leaves it consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the circuit is open at `now` (the provider is skipped when others can
    /// be tried).
    pub(crate) fn is_open(&self, now: Instant) -> bool {
        self.state().open_until.is_some_and(|until| now < until)
    }

    /// A call succeeded: the circuit closes. Returns true if it was open (or half-open).
    pub(crate) fn succeeded(&self) -> bool {
        let mut state = self.state();
        let was_down = state.open_until.is_some();
        state.consecutive = 0;
        state.open_until = None;
        state.last_success = Some(Timestamp::now().to_string());
        was_down
    }

    /// An upstream failure. Returns true if this one opened the circuit.
    pub(crate) fn failed_upstream(
        &self,
        error: String,
        settings: &CircuitSettings,
        now: Instant,
    ) -> bool {
        let mut state = self.state();
        state.consecutive = state.consecutive.saturating_add(1);
        state.last_error = Some(error);
        state.last_failure = Some(Timestamp::now().to_string());
        if state.consecutive >= settings.failures.max(1) {
            let was_closed = state.open_until.is_none_or(|until| now >= until);
            state.open_until = Some(now + settings.cooldown);
            return was_closed;
        }
        false
    }

    /// A failure that is not the server's health (a capability or request error):
    /// remembered for people to read, not counted.
    pub(crate) fn failed_otherwise(&self, error: String) {
        let mut state = self.state();
        state.last_error = Some(error);
        state.last_failure = Some(Timestamp::now().to_string());
    }

    /// The report at `now`.
    pub(crate) fn report(&self, now: Instant) -> HealthReport {
        let state = self.state();
        let open = state.open_until.filter(|until| now < *until);
        HealthReport {
            up: open.is_none(),
            consecutive_failures: state.consecutive,
            last_error: state.last_error.clone(),
            last_success: state.last_success.clone(),
            last_failure: state.last_failure.clone(),
            retry_in_secs: open.map(|until| (until - now).as_secs_f64().ceil() as u64),
        }
    }
}

/// What a provider's failure says, kept in its health and shown in the agents view:
/// an upstream's error text may echo back what it was sent, so it passes the secrets'
/// redaction and, since no call's content policies apply outside a call, the built-in
/// detectors of keys, cards, IBANs and addresses.
pub(crate) fn said(error: &crate::ports::ModelError) -> String {
    use agentplane_core::content::{Detector, Detectors};
    static SHOWN: std::sync::LazyLock<Detectors> = std::sync::LazyLock::new(|| {
        Detectors::new(vec![
            Detector::Secret,
            Detector::Card,
            Detector::Iban,
            Detector::Email,
        ])
    });
    let text = error.to_string();
    let text = agentplane_core::secret::redact(&text);
    SHOWN.redact(&text).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_n_failures_and_closes_on_success() {
        let settings = CircuitSettings {
            failures: 2,
            cooldown: Duration::from_secs(10),
        };
        let health = Health::default();
        let t0 = Instant::now();
        assert!(!health.failed_upstream("a".into(), &settings, t0));
        assert!(!health.is_open(t0));
        assert!(health.failed_upstream("b".into(), &settings, t0));
        assert!(health.is_open(t0));
        let report = health.report(t0);
        assert!(!report.up);
        assert_eq!(report.retry_in_secs, Some(10));
        assert_eq!(report.last_error.as_deref(), Some("b"));
        // After the cooldown it is tried again; a failure re-opens it at once.
        let later = t0 + Duration::from_secs(11);
        assert!(!health.is_open(later));
        assert!(health.failed_upstream("c".into(), &settings, later));
        assert!(health.is_open(later));
        assert!(health.succeeded());
        assert!(!health.is_open(later));
        assert_eq!(health.report(later).consecutive_failures, 0);
        assert!(health.report(later).up);
    }

    #[test]
    fn other_failures_do_not_count() {
        let health = Health::default();
        let settings = CircuitSettings {
            failures: 1,
            cooldown: Duration::from_secs(1),
        };
        health.failed_otherwise("400".into());
        let now = Instant::now();
        assert!(!health.is_open(now));
        assert_eq!(health.report(now).consecutive_failures, 0);
        assert_eq!(health.report(now).last_error.as_deref(), Some("400"));
        assert!(health.failed_upstream("x".into(), &settings, now));
    }
}
