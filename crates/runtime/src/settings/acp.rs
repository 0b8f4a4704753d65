//! `[agents.NAME]` with `kind = "acp"`: an external agent driven over ACP, its
//! `profile` (`codex`, `gemini`, `opencode`, `claude`) and `[agents.NAME.acp]`
//! overrides (`command`, `args`, `env`, `auth_method`, `handshake_timeout_secs`).
//!
//! Checked at load; resolved against `[secrets]` when the runtime starts (the runtime's
//! `agents.rs`). A key the agent needs and that no secret provides does not fail the
//! start: the agent is listed as unavailable with the reason. No secret value is kept
//! here.

use std::collections::BTreeMap;

use agentplane_acp_client::{builtin_profile, builtin_profiles};
use serde::Deserialize;

use super::secrets::references;

/// The agent kind of external ACP agents.
pub const KIND_ACP: &str = "acp";
/// The agent kind of our own model-and-tools loop (the default).
pub const KIND_LLM: &str = "llm";

/// `[agents.NAME.acp]`: overrides of the profile.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcpOverrides {
    pub command: Option<String>,
    pub args: Option<Vec<String>>,
    /// Variables for the agent; a value may refer to secrets as `${secret:NAME}`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The `authenticate` method; `""` turns the profile's off.
    pub auth_method: Option<String>,
    pub handshake_timeout_secs: Option<u64>,
    /// More state directories under `$HOME` the agent may write (besides its
    /// profile's), e.g. `.config/myagent`.
    #[serde(default)]
    pub state_dirs: Vec<String>,
    /// `false` runs the agent without the kernel sandbox (only a Landlock domain of
    /// its own); the default confines its process tree like a tool's (ADR 0034).
    pub sandbox: Option<bool>,
}

/// Whether an agent of this `kind` is an external ACP one.
pub fn is_acp(kind: Option<&str>) -> bool {
    kind == Some(KIND_ACP)
}

/// Checks an agent's `kind`, `profile` and `[acp]` overrides, and that an ACP agent
/// names no `ensembles`; on error, the key and the message.
pub fn check(
    kind: Option<&str>,
    profile: Option<&str>,
    acp: Option<&AcpOverrides>,
    ensembles: &[String],
) -> Result<(), (&'static str, String)> {
    match kind {
        None | Some(KIND_LLM) => {
            if profile.is_some() || acp.is_some() {
                return Err((
                    "kind",
                    "`profile` and `[acp]` need `kind = \"acp\"`".to_owned(),
                ));
            }
            return Ok(());
        }
        Some(KIND_ACP) => {}
        Some(other) => {
            return Err((
                "kind",
                format!("unknown agent kind `{other}`; use `llm`, `acp` or `a2a`"),
            ));
        }
    }
    let Some(profile) = profile else {
        return Err(("profile", profile_hint("is required for `kind = \"acp\"`")));
    };
    if builtin_profile(profile).is_none() {
        return Err((
            "profile",
            profile_hint(&format!("unknown profile `{profile}`")),
        ));
    }
    if !ensembles.is_empty() {
        return Err((
            "ensembles",
            "an ACP agent brings its own tools; give it no ensembles".to_owned(),
        ));
    }
    if let Some(acp) = acp {
        if acp.command.as_deref().is_some_and(|c| c.trim().is_empty()) {
            return Err(("acp.command", "must not be empty".to_owned()));
        }
        if acp.handshake_timeout_secs == Some(0) {
            return Err((
                "acp.handshake_timeout_secs",
                "must be at least 1".to_owned(),
            ));
        }
        for (name, value) in &acp.env {
            references(value).map_err(|m| ("acp.env", format!("`{name}`: {m}")))?;
        }
        for dir in &acp.state_dirs {
            let path = std::path::Path::new(dir);
            let inside_home = path.is_relative()
                && path
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)));
            if !inside_home {
                return Err((
                    "acp.state_dirs",
                    format!("`{dir}` must be a path relative to $HOME, without `..`"),
                ));
            }
        }
    }
    Ok(())
}

fn profile_hint(problem: &str) -> String {
    let names: Vec<&str> = builtin_profiles().iter().map(|p| p.name).collect();
    format!("{problem}; profiles: {}", names.join(", "))
}
