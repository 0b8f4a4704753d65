//! `[a2a]`: which agents `serve` publishes as Agent2Agent (A2A) agents, and where their
//! tasks run. Nothing is published until an agent is named here: every `/a2a` path is
//! then 404 and no Agent Card exists.
//!
//! ```toml
//! [a2a]
//! agents = ["reviewer"]           # agents to publish (default none); the first is
//!                                 # also the host's /.well-known/agent-card.json
//! workspace = "/srv/work/a2a"     # where tasks run (default: the directory `serve`
//!                                 # started in); inside the workspace roots
//! ```
//!
//! The workspace is checked against the workspace roots when `serve` starts (ADR 0031).

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::Deserialize;

use super::SettingError;
use super::agents::is_plain_name;

/// The most agents one server publishes.
const MAX_AGENTS: usize = 64;

/// `[a2a]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileA2a {
    #[serde(default)]
    agents: Vec<String>,
    workspace: Option<PathBuf>,
}

/// `[a2a]` as configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct A2aSettings {
    /// The published agents, in the order named; empty: A2A is off.
    pub agents: Vec<String>,
    /// Where tasks run (relative paths against the file's directory); `None`: the
    /// directory `serve` started in.
    pub workspace: Option<PathBuf>,
}

impl A2aSettings {
    /// Whether any agent is published.
    pub fn enabled(&self) -> bool {
        !self.agents.is_empty()
    }
}

/// Checks the section against the agents that exist (`known`: built-in and
/// configured); `relative` resolves a relative workspace against the file.
pub fn resolve(
    file: FileA2a,
    known: &BTreeSet<&str>,
    relative: &dyn Fn(PathBuf) -> PathBuf,
) -> Result<A2aSettings, SettingError> {
    if file.agents.len() > MAX_AGENTS {
        return Err(("agents".into(), format!("at most {MAX_AGENTS} agents")));
    }
    let mut seen = BTreeSet::new();
    for (i, agent) in file.agents.iter().enumerate() {
        if !is_plain_name(agent) {
            return Err((
                format!("agents[{i}]"),
                "use letters, digits, `-` and `_`".into(),
            ));
        }
        if !known.contains(agent.as_str()) {
            let known: Vec<&str> = known.iter().copied().collect();
            return Err((
                format!("agents[{i}]"),
                format!("unknown agent `{agent}` (agents: {})", known.join(", ")),
            ));
        }
        if !seen.insert(agent.as_str()) {
            return Err((format!("agents[{i}]"), format!("`{agent}` is named twice")));
        }
    }
    let workspace = match file.workspace {
        Some(path) if path.as_os_str().is_empty() => {
            return Err(("workspace".into(), "must not be empty".into()));
        }
        Some(path) => Some(relative(path)),
        None => None,
    };
    Ok(A2aSettings {
        agents: file.agents,
        workspace,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<A2aSettings, SettingError> {
        let file: FileA2a = toml::from_str(text).map_err(|e| ("".into(), e.to_string()))?;
        let known = BTreeSet::from(["engineering", "reviewer"]);
        resolve(file, &known, &|p| PathBuf::from("/etc/agentplane").join(p))
    }

    #[test]
    fn nothing_is_published_by_default() {
        let settings = parse("").expect("empty");
        assert!(!settings.enabled());
        assert_eq!(settings.workspace, None);
    }

    #[test]
    fn agents_must_exist_once_and_workspaces_are_relative_to_the_file() {
        let settings = parse("agents = [\"reviewer\"]\nworkspace = \"work\"").expect("ok");
        assert_eq!(settings.agents, ["reviewer"]);
        assert_eq!(
            settings.workspace,
            Some(PathBuf::from("/etc/agentplane/work"))
        );
        let (key, message) = parse("agents = [\"nobody\"]").expect_err("unknown");
        assert_eq!(key, "agents[0]");
        assert!(message.contains("unknown agent `nobody`"), "{message}");
        let (key, _) = parse("agents = [\"reviewer\", \"reviewer\"]").expect_err("twice");
        assert_eq!(key, "agents[1]");
        assert!(parse("agents = [\"../x\"]").is_err());
        assert!(parse("workspace = \"\"").is_err());
        assert!(
            parse("agent = [\"reviewer\"]").is_err(),
            "unknown keys are refused"
        );
    }
}
