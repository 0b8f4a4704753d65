//! `[executions]`: the worker pool, retries, restart behaviour and webhooks of
//! asynchronous executions.
//!
//! ```toml
//! [executions]
//! workers = 2                     # executions run at once
//! max_attempts = 3                # turns per execution, retries included
//! backoff_base_ms = 2000          # first retry delay; doubles, with jitter…
//! backoff_max_ms = 300000         # …up to this
//! on_restart = "retry"            # or "interrupt": executions running at a crash
//! poll_interval_ms = 500          # idle workers look for due retries this often
//! webhook_secret = "WEBHOOK_KEY"  # a [secrets] name; without it webhooks are refused
//! allow_private_webhooks = false  # loopback/private/link-local receivers
//! webhook_max_attempts = 8
//! webhook_backoff_base_ms = 5000
//! webhook_backoff_max_ms = 3600000
//! webhook_timeout_secs = 10
//! ```

use std::time::Duration;

use agentplane_engine::executions::{Backoff, ExecutionConfig};
use agentplane_engine::ports::RestartMode;
use serde::Deserialize;

use super::SettingError;
use super::secrets::SecretsConfig;

/// `[executions]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileExecutions {
    workers: Option<usize>,
    max_attempts: Option<u32>,
    backoff_base_ms: Option<u64>,
    backoff_max_ms: Option<u64>,
    on_restart: Option<String>,
    poll_interval_ms: Option<u64>,
    webhook_secret: Option<String>,
    allow_private_webhooks: Option<bool>,
    webhook_max_attempts: Option<u32>,
    webhook_backoff_base_ms: Option<u64>,
    webhook_backoff_max_ms: Option<u64>,
    webhook_timeout_secs: Option<u64>,
}

/// `[executions]`, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionsConfig {
    pub workers: usize,
    pub max_attempts: u32,
    pub backoff: Backoff,
    pub on_restart: RestartMode,
    pub poll_interval: Duration,
    /// The `[secrets]` name webhooks are signed with; `None`: webhooks are refused.
    pub webhook_secret: Option<String>,
    pub allow_private_webhooks: bool,
    pub webhook_max_attempts: u32,
    pub webhook_backoff: Backoff,
    pub webhook_timeout: Duration,
}

impl Default for ExecutionsConfig {
    fn default() -> Self {
        let engine = ExecutionConfig::default();
        Self {
            workers: engine.workers,
            max_attempts: engine.max_attempts,
            backoff: engine.backoff,
            on_restart: engine.on_restart,
            poll_interval: engine.poll_interval,
            webhook_secret: None,
            allow_private_webhooks: false,
            webhook_max_attempts: engine.webhook_max_attempts,
            webhook_backoff: engine.webhook_backoff,
            webhook_timeout: Duration::from_secs(10),
        }
    }
}

impl ExecutionsConfig {
    /// The engine's settings.
    pub fn engine(&self) -> ExecutionConfig {
        ExecutionConfig {
            workers: self.workers,
            max_attempts: self.max_attempts,
            backoff: self.backoff,
            on_restart: self.on_restart,
            poll_interval: self.poll_interval,
            webhook_max_attempts: self.webhook_max_attempts,
            webhook_backoff: self.webhook_backoff,
            // A POST never takes longer than its timeout; the lease covers it twice.
            webhook_lease: (self.webhook_timeout * 2).max(Duration::from_secs(5)),
            ..ExecutionConfig::default()
        }
    }
}

fn range<T: PartialOrd + Copy + std::fmt::Display>(
    key: &str,
    value: Option<T>,
    default: T,
    min: T,
    max: T,
) -> Result<T, SettingError> {
    match value {
        None => Ok(default),
        Some(v) if v < min || v > max => Err((
            key.to_owned(),
            format!("must be between {min} and {max}, got {v}"),
        )),
        Some(v) => Ok(v),
    }
}

/// Checks the section; `webhook_secret` must name a configured secret.
pub fn resolve(
    file: FileExecutions,
    secrets: &SecretsConfig,
) -> Result<ExecutionsConfig, SettingError> {
    let d = ExecutionsConfig::default();
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let backoff = |base_key: &str, base, max_key: &str, max, default: Backoff| {
        let base = range(base_key, base, ms(default.base), 0, 86_400_000)?;
        let max = range(max_key, max, ms(default.max).max(base), 0, 86_400_000)?;
        if max < base {
            return Err((
                max_key.to_owned(),
                format!("must be at least {base_key} ({base})"),
            ));
        }
        Ok(Backoff {
            base: Duration::from_millis(base),
            max: Duration::from_millis(max),
        })
    };
    let on_restart = match file.on_restart.as_deref() {
        None | Some("retry") => RestartMode::Retry,
        Some("interrupt") => RestartMode::Interrupt,
        Some(other) => {
            return Err((
                "on_restart".into(),
                format!("must be \"retry\" or \"interrupt\", got {other:?}"),
            ));
        }
    };
    if let Some(name) = &file.webhook_secret
        && !secrets.sources.contains_key(name)
    {
        return Err((
            "webhook_secret".into(),
            format!("names no secret: add `[secrets.{name}]`"),
        ));
    }
    Ok(ExecutionsConfig {
        workers: range("workers", file.workers, d.workers, 1, 256)?,
        max_attempts: range("max_attempts", file.max_attempts, d.max_attempts, 1, 100)?,
        backoff: backoff(
            "backoff_base_ms",
            file.backoff_base_ms,
            "backoff_max_ms",
            file.backoff_max_ms,
            d.backoff,
        )?,
        on_restart,
        poll_interval: Duration::from_millis(range(
            "poll_interval_ms",
            file.poll_interval_ms,
            ms(d.poll_interval),
            10,
            60_000,
        )?),
        webhook_secret: file.webhook_secret,
        allow_private_webhooks: file.allow_private_webhooks.unwrap_or(false),
        webhook_max_attempts: range(
            "webhook_max_attempts",
            file.webhook_max_attempts,
            d.webhook_max_attempts,
            1,
            100,
        )?,
        webhook_backoff: backoff(
            "webhook_backoff_base_ms",
            file.webhook_backoff_base_ms,
            "webhook_backoff_max_ms",
            file.webhook_backoff_max_ms,
            d.webhook_backoff,
        )?,
        webhook_timeout: Duration::from_secs(range(
            "webhook_timeout_secs",
            file.webhook_timeout_secs,
            10,
            1,
            300,
        )?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml: &str) -> Result<ExecutionsConfig, SettingError> {
        let file: FileExecutions = toml::from_str(toml).map_err(|e| ("".into(), e.to_string()))?;
        let mut secrets = SecretsConfig::default();
        secrets.sources.insert(
            "HOOK".into(),
            super::super::secrets::SecretSource::Env("HOOK_ENV".into()),
        );
        resolve(file, &secrets)
    }

    #[test]
    fn defaults_and_values() {
        assert_eq!(parse("").expect("defaults"), ExecutionsConfig::default());
        let c = parse(
            "workers = 4\nmax_attempts = 5\nbackoff_base_ms = 10\nbackoff_max_ms = 100\n\
             on_restart = \"interrupt\"\nwebhook_secret = \"HOOK\"\nallow_private_webhooks = true",
        )
        .expect("valid");
        assert_eq!(c.workers, 4);
        assert_eq!(c.max_attempts, 5);
        assert_eq!(c.backoff.base, Duration::from_millis(10));
        assert_eq!(c.on_restart, RestartMode::Interrupt);
        assert_eq!(c.webhook_secret.as_deref(), Some("HOOK"));
        assert!(c.allow_private_webhooks);
    }

    #[test]
    fn bad_values_name_their_key() {
        for (toml, key) in [
            ("workers = 0", "workers"),
            ("max_attempts = 0", "max_attempts"),
            ("on_restart = \"resume\"", "on_restart"),
            ("webhook_secret = \"NOPE\"", "webhook_secret"),
            (
                "backoff_base_ms = 100\nbackoff_max_ms = 10",
                "backoff_max_ms",
            ),
            ("poll_interval_ms = 0", "poll_interval_ms"),
            ("webhook_timeout_secs = 0", "webhook_timeout_secs"),
        ] {
            let (k, _) = parse(toml).expect_err(toml);
            assert_eq!(k, key, "{toml}");
        }
        assert!(parse("surprise = 1").is_err());
    }
}
