//! `[policies]`: where the policy files live and how often they are re-read.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::SettingError;

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
    /// How often the directory is checked for changes.
    pub reload_interval: Duration,
}

impl FilePolicies {
    /// Checks the section; `dir` is taken relative to the config file's directory.
    pub fn resolve(
        self,
        relative_to: &dyn Fn(PathBuf) -> PathBuf,
    ) -> Result<PoliciesConfig, SettingError> {
        Ok(PoliciesConfig {
            dir: self.dir.map(relative_to),
            reload_interval: Duration::from_millis(self.reload_interval_ms.unwrap_or(1000)),
        })
    }
}
