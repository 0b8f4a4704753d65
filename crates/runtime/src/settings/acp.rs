//! `[agents.NAME]` with `kind = "acp"`: an external agent driven over ACP, its
//! `profile` (`codex`, `gemini`, `opencode`, `claude`) and `[agents.NAME.acp]`
//! overrides (`command`, `args`, `env`, `auth_method`, `handshake_timeout_secs`).
//!
//! Checked at load; resolved against `[secrets]` when the runtime starts. A key the
//! agent needs and that no secret provides does not fail the start: the agent is listed
//! as unavailable with the reason. No secret value is kept here.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agentplane_acp_client::{AcpAgentConfig, builtin_profile, builtin_profiles};
use serde::Deserialize;

use crate::config::AgentConfig;
use crate::secrets::Secrets;
use crate::settings::secrets::{REFERENCE_OPEN, references};

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

/// Whether the agent is an external ACP one.
pub fn is_acp(agent: &AgentConfig) -> bool {
    agent.kind.as_deref() == Some(KIND_ACP)
}

/// Checks `kind`, `profile` and the overrides; on error, the key and the message.
pub fn check(agent: &AgentConfig) -> Result<(), (&'static str, String)> {
    match agent.kind.as_deref() {
        None | Some(KIND_LLM) => {
            if agent.profile.is_some() || agent.acp.is_some() {
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
                format!("unknown agent kind `{other}`; use `llm` or `acp`"),
            ));
        }
    }
    let Some(profile) = agent.profile.as_deref() else {
        return Err(("profile", profile_hint("is required for `kind = \"acp\"`")));
    };
    if builtin_profile(profile).is_none() {
        return Err((
            "profile",
            profile_hint(&format!("unknown profile `{profile}`")),
        ));
    }
    if !agent.ensembles.is_empty() {
        return Err((
            "ensembles",
            "an ACP agent brings its own tools; give it no ensembles".to_owned(),
        ));
    }
    if let Some(acp) = &agent.acp {
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

/// The agent's ACP configuration with secrets filled in. Variables that could not be
/// filled are listed in `missing_env` (the agent is then unavailable), never guessed.
pub fn resolve(agent: &AgentConfig, secrets: &Secrets) -> Option<AcpAgentConfig> {
    let profile = builtin_profile(agent.profile.as_deref()?)?;
    let overrides = agent.acp.clone().unwrap_or_default();
    let limits = agentplane_core::AgentLimits::default();
    let mut env = BTreeMap::new();
    let mut missing_env = Vec::new();
    for (name, value) in &overrides.env {
        let mut text = value.clone();
        let mut complete = true;
        for secret in references(value).unwrap_or_default() {
            match secrets.get(secret) {
                Some(v) => text = text.replacen(&format!("{REFERENCE_OPEN}{secret}}}"), v, 1),
                None => {
                    complete = false;
                    missing_env.push(format!("{name} (secret `{secret}` is not set)"));
                }
            }
        }
        if complete {
            env.insert(name.clone(), text);
        }
    }
    for name in profile.required_env {
        if env.contains_key(*name) || overrides.env.contains_key(*name) {
            continue;
        }
        match secrets.get(name) {
            Some(value) => {
                env.insert((*name).to_owned(), value.to_owned());
            }
            None => missing_env.push(format!(
                "{name} (no secret `{name}`: add `[secrets.{name}] env = \"{name}\"`, \
                 or set it in `[agents.NAME.acp.env]`)"
            )),
        }
    }
    let auth_method = match overrides.auth_method {
        Some(method) if method.is_empty() => None,
        Some(method) => Some(method),
        None => profile.auth_method.map(str::to_owned),
    };
    Some(AcpAgentConfig {
        profile: profile.name.to_owned(),
        command: overrides
            .command
            .unwrap_or_else(|| profile.command.to_owned()),
        legacy_args: match overrides.args {
            Some(_) => None,
            None => profile
                .legacy_args
                .map(|args| args.iter().map(|a| (*a).to_owned()).collect()),
        },
        args: overrides
            .args
            .unwrap_or_else(|| profile.args.iter().map(|a| (*a).to_owned()).collect()),
        env,
        missing_env,
        auth_method,
        handshake_timeout: Duration::from_secs(overrides.handshake_timeout_secs.unwrap_or(30)),
        terminal: (!agent.shell_allow.is_empty()).then(|| {
            Arc::new(agentplane_tools::ShellEnsemble::new(
                agent.shell_allow.clone(),
            )) as Arc<dyn agentplane_engine::ports::Ensemble>
        }),
        terminal_timeout: Duration::from_millis(
            agent.tool_timeout_ms.unwrap_or(limits.tool_timeout_ms),
        ),
        terminal_output_cap: agent
            .tool_output_cap_bytes
            .unwrap_or(limits.tool_output_cap_bytes),
        sandbox: (overrides.sandbox != Some(false)).then(|| agentplane_tools::Sandbox {
            spec: agent.sandbox.clone(),
            network: true,
            own_proc: true,
        }),
        state_dirs: profile
            .state_dirs
            .iter()
            .map(|d| (*d).to_owned())
            .chain(overrides.state_dirs.iter().cloned())
            .collect(),
    })
}
