//! Sliding-window rate limits, exact under concurrency.
#[derive(Default)]
pub struct RateLimiter {}
