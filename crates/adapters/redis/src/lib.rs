//! Rate-limit counters shared by replicas in Redis (ADR 0021): the Redis implementation
//! of [`agentplane_engine::ports::RateLimits`].
//!
//! - `limiter`: [`RedisRateLimiter`], one script call per check, reconnecting after a
//!   Redis restart, fail-closed (or local) while Redis cannot be reached.
//! - `keys`: the Redis key of each counter.
//! - `admit.lua`: the script, atomic in Redis.
//!
//! Nothing here knows about HTTP or configuration files; the runtime builds it from
//! `[rate_limits]`.

mod keys;
mod limiter;

pub use keys::{PREFIX as KEY_PREFIX, counter_key};
pub use limiter::{OnUnavailable, RedisRateConfig, RedisRateLimiter, check_url, shown_url};
