//! [`RedisRateLimiter`]: each check is one call of `admit.lua`, which reads Redis's own
//! clock, prunes, counts and admits in one atomic step. So replicas' clocks do not
//! matter, and N concurrent requests from any number of processes admit exactly `max`.
//!
//! The connection is made on the first check, not at start-up, and made again after an
//! error: a Redis restart costs the checks made while it is down, nothing after. While
//! Redis cannot be reached a check is refused (`RateError::Unavailable`), or, when the
//! configuration opts in, answered by an in-memory limiter of this process alone.
//! The URL may hold a password: only [`shown_url`] is ever logged or returned.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentplane_core::policy::RateLimit;
use agentplane_engine::governance::RateLimiter;
use agentplane_engine::ports::{Limited, RateError, RateFacts, RateLimits};
use async_trait::async_trait;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, RedisError, Script};

use crate::keys::counter_key;

/// After a failed connection attempt, checks are answered without trying again for this
/// long, so an outage does not queue every request behind a connect.
const RETRY_CONNECT_AFTER: Duration = Duration::from_millis(250);

/// What a check does while Redis cannot be reached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnUnavailable {
    /// Refuse the request (`UPSTREAM_UNAVAILABLE`): no limit is ever exceeded.
    #[default]
    Refuse,
    /// Count in this process's memory instead: each replica then admits up to `max` on
    /// its own, so N replicas may admit N × `max` until Redis is back.
    Local,
}

/// How to reach Redis.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisRateConfig {
    /// `redis://[user:password@]host[:port][/db]` (or `redis+unix:///path`).
    pub url: String,
    pub on_unavailable: OnUnavailable,
    /// Longest wait for a connection, and for the answer of one check.
    pub timeout: Duration,
}

impl std::fmt::Debug for RedisRateConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisRateConfig")
            .field("url", &shown_url(&self.url))
            .field("on_unavailable", &self.on_unavailable)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Whether `url` names a Redis server this build can reach. The message never repeats
/// the URL (it may hold a password).
pub fn check_url(url: &str) -> Result<(), String> {
    let usage = "must be a URL such as redis://127.0.0.1:6379/0 (or redis+unix:///path)";
    let scheme = url.split_once("://").map(|(scheme, _)| scheme);
    match scheme {
        Some("redis" | "redis+unix" | "unix") => {}
        Some("rediss") => return Err("rediss:// (TLS) is not supported by this build".into()),
        _ => return Err(usage.into()),
    }
    Client::open(url).map(|_| ()).map_err(|_| usage.into())
}

/// `url` with any password replaced by `***`: the form that may be logged.
pub fn shown_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            if parsed.password().is_some() {
                // Only fails for URLs that cannot have a password at all.
                let _ = parsed.set_password(Some("***"));
            }
            parsed.to_string()
        }
        Err(_) => "<a Redis URL that does not parse>".to_owned(),
    }
}

/// Rate-limit counters in Redis, shared by every process that uses the same server and
/// database.
pub struct RedisRateLimiter {
    client: Client,
    connect: AsyncConnectionConfig,
    shown: String,
    on_unavailable: OnUnavailable,
    /// Used only while Redis cannot be reached and `on_unavailable` is `Local`.
    local: RateLimiter,
    script: Script,
    /// The connection in use; `None` until the first check and after an error.
    connection: Mutex<Option<MultiplexedConnection>>,
    /// One connection attempt at a time.
    connecting: tokio::sync::Mutex<()>,
    /// When the last connection attempt failed.
    failed_at: Mutex<Option<Instant>>,
    /// Whether the last check reached Redis: an outage is logged once, not per request.
    reachable: AtomicBool,
    /// Members are `instance:n`, unique across processes and admissions.
    instance: String,
    admissions: AtomicU64,
}

impl RedisRateLimiter {
    /// A limiter for `config`. Checks the URL but does not connect: a replica starts
    /// while Redis is down, and refuses (or counts locally) until it is back.
    pub fn new(config: &RedisRateConfig) -> Result<Self, String> {
        check_url(&config.url)?;
        let client = Client::open(config.url.as_str())
            .map_err(|_| "the Redis URL must be such as redis://127.0.0.1:6379/0".to_owned())?;
        Ok(Self {
            client,
            connect: AsyncConnectionConfig::new()
                .set_connection_timeout(Some(config.timeout))
                .set_response_timeout(Some(config.timeout)),
            shown: shown_url(&config.url),
            on_unavailable: config.on_unavailable,
            local: RateLimiter::default(),
            script: Script::new(include_str!("admit.lua")),
            connection: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
            failed_at: Mutex::new(None),
            reachable: AtomicBool::new(true),
            instance: uuid::Uuid::now_v7().simple().to_string(),
            admissions: AtomicU64::new(0),
        })
    }

    /// The URL as it may be shown (password hidden).
    pub fn shown_url(&self) -> &str {
        &self.shown
    }

    /// Runs the script once; on a broken connection (Redis restarted), once more on a
    /// fresh one. A retry can only count an admission twice, never miss one.
    async fn check(
        &self,
        limits: &[(&str, &RateLimit)],
        facts: RateFacts<'_>,
    ) -> Result<Vec<i64>, RedisError> {
        let member = format!(
            "{}:{}",
            self.instance,
            self.admissions.fetch_add(1, Ordering::Relaxed)
        );
        let mut invocation = self.script.prepare_invoke();
        for (policy, limit) in limits {
            invocation
                .key(counter_key(policy, limit, facts))
                .arg(u64::try_from(limit.window.as_micros()).unwrap_or(u64::MAX / 2))
                .arg(limit.max);
        }
        invocation.arg(member);
        let mut connection = self.connection().await?;
        match invocation.invoke_async(&mut connection).await {
            Ok(answer) => Ok(answer),
            Err(e) if broken(&e) => {
                self.forget();
                let mut connection = self.connection().await?;
                invocation
                    .invoke_async(&mut connection)
                    .await
                    .inspect_err(|e| {
                        if broken(e) {
                            self.forget();
                        }
                    })
            }
            Err(e) => Err(e),
        }
    }

    /// The connection in use, or a new one.
    async fn connection(&self) -> Result<MultiplexedConnection, RedisError> {
        if let Some(connection) = self.cached() {
            return Ok(connection);
        }
        let _one_at_a_time = self.connecting.lock().await;
        if let Some(connection) = self.cached() {
            return Ok(connection);
        }
        let recently_failed =
            lock(&self.failed_at).is_some_and(|at| at.elapsed() < RETRY_CONNECT_AFTER);
        if recently_failed {
            return Err(RedisError::from((
                redis::ErrorKind::Io,
                "the last connection attempt failed moments ago",
            )));
        }
        match self
            .client
            .get_multiplexed_async_connection_with_config(&self.connect)
            .await
        {
            Ok(connection) => {
                *lock(&self.connection) = Some(connection.clone());
                *lock(&self.failed_at) = None;
                Ok(connection)
            }
            Err(e) => {
                *lock(&self.failed_at) = Some(Instant::now());
                Err(e)
            }
        }
    }

    fn cached(&self) -> Option<MultiplexedConnection> {
        lock(&self.connection).clone()
    }

    fn forget(&self) {
        *lock(&self.connection) = None;
    }

    /// Notes whether Redis answered, logging the changes.
    fn reached(&self, ok: bool, error: Option<&RedisError>) {
        let was = self.reachable.swap(ok, Ordering::Relaxed);
        match (was, ok, error) {
            (true, false, Some(e)) => tracing::warn!(
                redis = %self.shown,
                error = %e,
                on_unavailable = ?self.on_unavailable,
                "the Redis holding rate limits cannot be reached"
            ),
            (false, true, _) => {
                tracing::info!(redis = %self.shown, "the Redis holding rate limits is back")
            }
            _ => {}
        }
    }
}

#[async_trait]
impl RateLimits for RedisRateLimiter {
    async fn admit(
        &self,
        limits: &[(&str, &RateLimit)],
        facts: RateFacts<'_>,
    ) -> Result<(), RateError> {
        if limits.is_empty() {
            return Ok(());
        }
        match self.check(limits, facts).await {
            Ok(answer) => {
                self.reached(true, None);
                refusal(limits, &answer).map_or(Ok(()), |limited| Err(RateError::Limited(limited)))
            }
            Err(e) => {
                self.reached(false, Some(&e));
                match self.on_unavailable {
                    OnUnavailable::Local => self
                        .local
                        .admit_at(limits, facts, Instant::now())
                        .map_err(RateError::Limited),
                    OnUnavailable::Refuse => Err(RateError::Unavailable(format!(
                        "the Redis at {} did not answer ({}); set [rate_limits] \
                         on_unavailable = \"local\" to count in memory meanwhile",
                        self.shown,
                        reason(&e)
                    ))),
                }
            }
        }
    }
}

/// The script's answer as a refusal: `{0, 0}` admits, `{i, retry_us}` names limit `i`.
fn refusal(limits: &[(&str, &RateLimit)], answer: &[i64]) -> Option<Limited> {
    let index = usize::try_from(*answer.first()?).ok()?.checked_sub(1)?;
    let (policy, limit) = limits.get(index)?;
    let retry_us = answer.get(1).copied().unwrap_or(0).max(0);
    Some(Limited {
        policy: (*policy).to_owned(),
        max: limit.max,
        window: limit.window,
        retry_after: Duration::from_micros(retry_us.unsigned_abs()),
    })
}

/// Whether the connection is worth replacing after `e`.
fn broken(e: &RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error() || e.is_timeout()
}

/// A short reason for a failure, without server details that could be confusing.
fn reason(e: &RedisError) -> String {
    if e.is_timeout() {
        "timed out".to_owned()
    } else if e.is_connection_refusal() {
        "connection refused".to_owned()
    } else {
        e.to_string()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}
