//! `[rate_limits]`: where the counters of `rate_limit` policies live (ADR 0021).
//!
//! ```toml
//! [rate_limits]
//! redis = "redis://127.0.0.1:6379/0"  # or AGENTPLANE_REDIS_URL; unset: in memory
//! on_unavailable = "refuse"           # or "local": count in memory while Redis is down
//! timeout_ms = 1000                   # connecting, and each check
//! ```
//!
//! Without `redis` each process counts alone, which is exact for one replica. Replicas
//! behind one load balancer share a Redis so a limit holds across all of them. The URL
//! may hold a password: it is never logged or shown except with the password hidden.

use std::time::Duration;

use agentplane_redis::{OnUnavailable, RedisRateConfig, check_url};
use serde::Deserialize;

use super::BadValue;
use super::overrides::Overrides;

/// The default of `timeout_ms`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);

/// `[rate_limits]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileRateLimits {
    redis: Option<String>,
    on_unavailable: Option<String>,
    timeout_ms: Option<u64>,
}

/// `[rate_limits]`, checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RateLimitsConfig {
    /// `None`: the in-memory limiter of this process.
    pub redis: Option<RedisRateConfig>,
}

/// Checks `[rate_limits]`; `AGENTPLANE_REDIS_URL` wins over the file's `redis`. A bad
/// URL is reported without its text (it may hold a password).
pub fn resolve(file: FileRateLimits, env: &Overrides) -> Result<RateLimitsConfig, BadValue> {
    let on_unavailable = match file.on_unavailable.as_deref() {
        None | Some("refuse") => OnUnavailable::Refuse,
        Some("local") => OnUnavailable::Local,
        Some(other) => {
            return Err(BadValue::Key(
                "on_unavailable".into(),
                format!("must be \"refuse\" or \"local\", got {other:?}"),
            ));
        }
    };
    let timeout = match file.timeout_ms {
        None => DEFAULT_TIMEOUT,
        Some(0) => return Err(("timeout_ms", "must be at least 1".into()).into()),
        Some(ms) if ms > 60_000 => {
            return Err(("timeout_ms", "must be at most 60000".into()).into());
        }
        Some(ms) => Duration::from_millis(ms),
    };
    let (url, from_env) = match (env.redis_url.clone(), file.redis) {
        (Some(url), _) => (url, true),
        (None, Some(url)) => (url, false),
        (None, None) => {
            if file.on_unavailable.is_some() || file.timeout_ms.is_some() {
                return Err(BadValue::Key(
                    "redis".into(),
                    "is needed for on_unavailable and timeout_ms (without it rate limits \
                     are counted in memory)"
                        .into(),
                ));
            }
            return Ok(RateLimitsConfig::default());
        }
    };
    check_url(&url).map_err(|m| {
        if from_env {
            BadValue::Variable("AGENTPLANE_REDIS_URL", m)
        } else {
            BadValue::Key("redis".into(), m)
        }
    })?;
    Ok(RateLimitsConfig {
        redis: Some(RedisRateConfig {
            url,
            on_unavailable,
            timeout,
        }),
    })
}
