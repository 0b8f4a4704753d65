//! `[audit]`: the anchors of the audit chain (docs/audit.md). Each anchor is every
//! chain's head, signed with a key kept outside the database, appended to a file the
//! database's owner cannot rewrite.
//!
//! ```toml
//! [audit]
//! anchor_key = "/etc/agentplane/anchor.key"   # `agentplane audit keygen --out …`
//! anchor_file = "/var/log/agentplane/anchors.jsonl"
//! anchor_interval_s = 3600                     # `serve` anchors this often (off by default)
//! ```

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::SettingError;

/// The shortest interval between two anchors of a running server: one a minute is
/// already far more than a reviewer needs.
const MIN_INTERVAL_S: u64 = 60;

/// `[audit]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileAudit {
    anchor_key: Option<PathBuf>,
    anchor_file: Option<PathBuf>,
    anchor_interval_s: Option<u64>,
}

/// Where anchors are signed and written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditConfig {
    /// The signing key (an Ed25519 seed, hex), outside the database.
    pub anchor_key: Option<PathBuf>,
    /// The append-only file anchors go to; `None`: `audit anchor` prints them.
    pub anchor_file: Option<PathBuf>,
    /// How often `serve` anchors on its own; `None`: never.
    pub anchor_interval: Option<Duration>,
}

impl FileAudit {
    /// Checks the section; paths are taken relative to the config file's directory.
    pub fn resolve(
        self,
        relative_to: &dyn Fn(PathBuf) -> PathBuf,
    ) -> Result<AuditConfig, SettingError> {
        let anchor_interval = match self.anchor_interval_s {
            None => None,
            Some(s) if s >= MIN_INTERVAL_S => Some(Duration::from_secs(s)),
            Some(_) => {
                return Err((
                    "anchor_interval_s".into(),
                    format!("must be at least {MIN_INTERVAL_S}"),
                ));
            }
        };
        if anchor_interval.is_some() && (self.anchor_key.is_none() || self.anchor_file.is_none()) {
            return Err((
                "anchor_interval_s".into(),
                "needs anchor_key and anchor_file: a periodic anchor is signed and written \
                 somewhere"
                    .into(),
            ));
        }
        for (name, path) in [
            ("anchor_key", &self.anchor_key),
            ("anchor_file", &self.anchor_file),
        ] {
            if path.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
                return Err((name.into(), "must not be empty".into()));
            }
        }
        Ok(AuditConfig {
            anchor_key: self.anchor_key.map(relative_to),
            anchor_file: self.anchor_file.map(relative_to),
            anchor_interval,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(text: &str) -> Result<AuditConfig, SettingError> {
        let file: FileAudit = toml::from_str(text).expect("toml");
        file.resolve(&|p| PathBuf::from("/etc/agentplane").join(p))
    }

    #[test]
    fn paths_are_relative_to_the_config_and_the_interval_needs_both() {
        let config =
            resolve("anchor_key = \"k\"\nanchor_file = \"a.jsonl\"\nanchor_interval_s = 60")
                .expect("valid");
        assert_eq!(config.anchor_key, Some(PathBuf::from("/etc/agentplane/k")));
        assert_eq!(config.anchor_interval, Some(Duration::from_secs(60)));
        assert!(resolve("anchor_interval_s = 3600").is_err());
        assert!(resolve("anchor_key = \"k\"\nanchor_file = \"a\"\nanchor_interval_s = 1").is_err());
        assert!(resolve("anchor_key = \"\"").is_err());
        assert_eq!(resolve("").expect("empty"), AuditConfig::default());
    }
}
