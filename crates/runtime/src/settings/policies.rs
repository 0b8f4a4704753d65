//! `[policies]`: where the policy files live and how often they are re-read.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::SettingError;

/// The reload interval when the file sets none.
pub const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_millis(1000);
/// The shortest reload interval, in milliseconds: polling faster would only burn CPU.
const MIN_RELOAD_INTERVAL_MS: u64 = 100;
/// The longest, in milliseconds: an edit should show within a minute.
const MAX_RELOAD_INTERVAL_MS: u64 = 60_000;

/// `[policies]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilePolicies {
    dir: Option<PathBuf>,
    reload_interval_ms: Option<u64>,
}

/// Where policies come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoliciesConfig {
    /// The policies directory; `None`: no policies (everything allowed).
    pub dir: Option<PathBuf>,
    /// How often the directory is checked for changes (100 ms ..= 60 s).
    pub reload_interval: Duration,
}

impl Default for PoliciesConfig {
    fn default() -> Self {
        Self {
            dir: None,
            reload_interval: DEFAULT_RELOAD_INTERVAL,
        }
    }
}

impl FilePolicies {
    /// Checks the section; `dir` is taken relative to the config file's directory.
    pub fn resolve(
        self,
        relative_to: &dyn Fn(PathBuf) -> PathBuf,
    ) -> Result<PoliciesConfig, SettingError> {
        let reload_interval = match self.reload_interval_ms {
            None => DEFAULT_RELOAD_INTERVAL,
            Some(ms) if (MIN_RELOAD_INTERVAL_MS..=MAX_RELOAD_INTERVAL_MS).contains(&ms) => {
                Duration::from_millis(ms)
            }
            Some(_) => {
                return Err((
                    "reload_interval_ms".into(),
                    format!(
                        "must be between {MIN_RELOAD_INTERVAL_MS} and {MAX_RELOAD_INTERVAL_MS}"
                    ),
                ));
            }
        };
        if self.dir.as_ref().is_some_and(|d| d.as_os_str().is_empty()) {
            return Err(("dir".into(), "must not be empty".into()));
        }
        Ok(PoliciesConfig {
            dir: self.dir.map(relative_to),
            reload_interval,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(text: &str) -> Result<PoliciesConfig, SettingError> {
        let file: FilePolicies = toml::from_str(text).expect("toml");
        file.resolve(&|p| PathBuf::from("/etc/agentplane").join(p))
    }

    #[test]
    fn defaults_to_no_directory_and_one_second() {
        assert_eq!(resolve("").expect("valid"), PoliciesConfig::default());
    }

    #[test]
    fn the_directory_is_relative_to_the_config_file() {
        let config = resolve("dir = \"policies\"\nreload_interval_ms = 250\n").expect("valid");
        assert_eq!(config.dir, Some(PathBuf::from("/etc/agentplane/policies")));
        assert_eq!(config.reload_interval, Duration::from_millis(250));
    }

    #[test]
    fn the_reload_interval_is_bounded() {
        for ok in [100, 60_000] {
            assert!(resolve(&format!("reload_interval_ms = {ok}")).is_ok());
        }
        for bad in [0, 99, 60_001, u64::MAX / 2] {
            let (key, message) =
                resolve(&format!("reload_interval_ms = {bad}")).expect_err("out of range");
            assert_eq!(key, "reload_interval_ms");
            assert!(message.contains("between 100 and 60000"), "{message}");
        }
    }

    #[test]
    fn an_empty_directory_name_is_refused() {
        let (key, _) = resolve("dir = \"\"").expect_err("empty");
        assert_eq!(key, "dir");
    }
}
