//! `[sandbox]`: machine-wide confinement settings (per-agent ones live under
//! `[agents.NAME.sandbox]`).
//!
//! ```toml
//! [sandbox]
//! fallback = "refuse"   # or "landlock": where user namespaces are not available
//! ```
//!
//! Where the machine gives a confined process no namespaces of its own (a kernel or
//! container that forbids unprivileged user namespaces, Ubuntu's AppArmor restriction),
//! `"refuse"` (the default) refuses the programs of every agent with network — their
//! egress could not be forced through agentplane's proxy — and `"landlock"` runs them
//! with Landlock and seccomp alone, which leaves loopback services other than
//! agentplane's own ports reachable (`docs/security.md`).

use agentplane_process::sandbox::Fallback;
use serde::Deserialize;

use super::SettingError;

/// `[sandbox]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSandbox {
    fallback: Option<String>,
}

impl FileSandbox {
    /// Checks the section.
    pub fn resolve(self) -> Result<Fallback, SettingError> {
        match self.fallback.as_deref() {
            None | Some("refuse") => Ok(Fallback::Refuse),
            Some("landlock") => Ok(Fallback::Landlock),
            Some(other) => Err((
                "fallback".to_owned(),
                format!("must be \"refuse\" or \"landlock\", not {other:?}"),
            )),
        }
    }
}
