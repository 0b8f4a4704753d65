//! `[gateway]`: who calls through the OpenAI-compatible gateway (`/openai/v1`) are, for
//! policies, budgets, cost reports and metrics.
//!
//! ```toml
//! [gateway]
//! agent = "gateway"          # the agent name policies select (default "gateway")
//! tags = ["external"]        # tags policies may select by (default none)
//! max_output_tokens = 4096   # the output cap sent when a request gives no max_tokens
//!
//! [gateway.agents]           # a route's own agent name (default: `agent` above)
//! messages = "claude-code"   # /anthropic/v1/messages
//! responses = "codex"        # /openai/v1/responses
//! chat_completions = "sdk"   # /openai/v1/chat/completions
//! ```
//!
//! Names are checked here: 1 to 64 letters, digits, `-` or `_`, as agent names are.

use agentplane_engine::gateway::{GatewayConfig, GatewayRoute};
use serde::Deserialize;

use super::SettingError;

/// The longest agent name or tag accepted.
const MAX_NAME_LEN: usize = 64;
/// The most tags accepted.
const MAX_TAGS: usize = 32;

/// `[gateway]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileGateway {
    agent: Option<String>,
    tags: Option<Vec<String>>,
    max_output_tokens: Option<u32>,
    agents: Option<std::collections::BTreeMap<String, String>>,
}

impl FileGateway {
    /// Checks the section.
    pub fn resolve(self) -> Result<GatewayConfig, SettingError> {
        let mut config = GatewayConfig::default();
        if let Some(agent) = self.agent {
            check_name(&agent).map_err(|m| ("agent".to_owned(), m))?;
            config.agent = agent;
        }
        for (route, agent) in self.agents.unwrap_or_default() {
            let key = format!("agents.{route}");
            let Some(parsed) = GatewayRoute::parse(&route) else {
                let known: Vec<&str> = GatewayRoute::ALL.iter().map(|r| r.as_str()).collect();
                return Err((
                    key,
                    format!("is not a route; the routes are {}", known.join(", ")),
                ));
            };
            check_name(&agent).map_err(|m| (key, m))?;
            config.route_agents.insert(parsed, agent);
        }
        if let Some(tags) = self.tags {
            if tags.len() > MAX_TAGS {
                return Err(("tags".into(), format!("at most {MAX_TAGS} tags")));
            }
            for (i, tag) in tags.iter().enumerate() {
                check_name(tag).map_err(|m| (format!("tags[{i}]"), m))?;
            }
            config.tags = tags;
        }
        if let Some(cap) = self.max_output_tokens {
            if cap == 0 {
                return Err(("max_output_tokens".into(), "must be at least 1".into()));
            }
            config.max_output_tokens = cap;
        }
        Ok(config)
    }
}

fn check_name(name: &str) -> Result<(), String> {
    let plain = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if name.is_empty() || name.len() > MAX_NAME_LEN || !plain {
        return Err(format!(
            "must be 1 to {MAX_NAME_LEN} letters, digits, `-` or `_`: {name:?}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(text: &str) -> Result<GatewayConfig, SettingError> {
        let file: FileGateway = toml::from_str(text).map_err(|e| ("toml".into(), e.to_string()))?;
        file.resolve()
    }

    #[test]
    fn defaults_to_the_gateway_agent_without_tags() {
        assert_eq!(resolve("").expect("valid"), GatewayConfig::default());
        assert_eq!(GatewayConfig::default().agent, "gateway");
    }

    #[test]
    fn agent_and_tags_are_taken() {
        let config =
            resolve("agent = \"openai-proxy\"\ntags = [\"external\", \"team_a\"]").expect("valid");
        assert_eq!(config.agent, "openai-proxy");
        assert_eq!(config.tags, vec!["external", "team_a"]);
    }

    #[test]
    fn a_route_may_have_an_agent_of_its_own() {
        let config =
            resolve("agent = \"sdk\"\n[agents]\nmessages = \"claude-code\"").expect("valid");
        assert_eq!(config.agent_of(GatewayRoute::Messages), "claude-code");
        assert_eq!(config.agent_of(GatewayRoute::Responses), "sdk");
        assert_eq!(
            resolve("[agents]\nembeddingz = \"x\"")
                .expect_err("route")
                .0,
            "agents.embeddingz"
        );
        assert_eq!(
            resolve("[agents]\nmessages = \"a b\"").expect_err("name").0,
            "agents.messages"
        );
    }

    #[test]
    fn bad_names_and_unknown_keys_are_refused() {
        assert_eq!(resolve("agent = \"\"").expect_err("empty").0, "agent");
        assert_eq!(resolve("agent = \"a b\"").expect_err("space").0, "agent");
        assert_eq!(
            resolve(&format!("agent = \"{}\"", "x".repeat(65)))
                .expect_err("long")
                .0,
            "agent"
        );
        assert_eq!(
            resolve("tags = [\"ok\", \"no/\"]").expect_err("tag").0,
            "tags[1]"
        );
        let many: Vec<String> = (0..33).map(|i| format!("\"t{i}\"")).collect();
        assert_eq!(
            resolve(&format!("tags = [{}]", many.join(",")))
                .expect_err("many")
                .0,
            "tags"
        );
        assert_eq!(resolve("agnet = \"x\"").expect_err("typo").0, "toml");
    }
}
