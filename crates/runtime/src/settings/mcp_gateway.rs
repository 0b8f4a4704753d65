//! `[mcp.gateway]`: which configured MCP servers the MCP gateway (`/mcp/gateway`,
//! `agentplane mcp gateway`) offers, and who its calls are for policies, budgets and
//! costs. Nothing is offered until a server is named here.
//!
//! ```toml
//! [mcp.gateway]
//! servers = ["everything"]    # names of [mcp.servers.NAME] entries (default none)
//! agent = "mcp-gateway"       # the agent name policies select (default "mcp-gateway")
//! tags = ["external"]         # tags policies may select by (default none)
//! call_timeout_secs = 60      # longest tool call (default 60)
//! ```
//!
//! Prices per call are `[prices.tools]` (`settings/prices.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use agentplane_engine::services::mcp_gateway::McpGatewayConfig;
use serde::Deserialize;

use super::SettingError;
use super::agents::is_plain_name;

/// The most tags accepted.
const MAX_TAGS: usize = 32;
/// The longest call timeout accepted: a day.
const MAX_CALL_TIMEOUT_SECS: u64 = 86_400;

/// `[mcp.gateway]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileMcpGateway {
    #[serde(default)]
    servers: Vec<String>,
    agent: Option<String>,
    tags: Option<Vec<String>>,
    call_timeout_secs: Option<u64>,
}

/// The gateway as configured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct McpGatewaySettings {
    /// The offered servers, in the order named; empty: the gateway offers nothing.
    pub servers: Vec<String>,
    pub config: McpGatewayConfig,
}

impl FileMcpGateway {
    /// Checks the section against the configured servers (`known`) and attaches the
    /// per-call prices of `[prices.tools]`.
    pub fn resolve(
        self,
        known: &BTreeSet<&str>,
        tool_prices: BTreeMap<String, u64>,
    ) -> Result<McpGatewaySettings, SettingError> {
        let mut config = McpGatewayConfig {
            tool_prices,
            ..McpGatewayConfig::default()
        };
        let mut seen = BTreeSet::new();
        for (i, server) in self.servers.iter().enumerate() {
            if !known.contains(server.as_str()) {
                let known: Vec<&str> = known.iter().copied().collect();
                return Err((
                    format!("servers[{i}]"),
                    format!(
                        "unknown MCP server `{server}` (configured: {})",
                        if known.is_empty() {
                            "none".to_owned()
                        } else {
                            known.join(", ")
                        }
                    ),
                ));
            }
            if !seen.insert(server.as_str()) {
                return Err((
                    format!("servers[{i}]"),
                    format!("`{server}` is named twice"),
                ));
            }
        }
        if let Some(agent) = self.agent {
            if !is_plain_name(&agent) || agent.len() > 64 {
                return Err((
                    "agent".into(),
                    "use letters, digits, `-` and `_` (at most 64)".into(),
                ));
            }
            config.agent = agent;
        }
        if let Some(tags) = self.tags {
            if tags.len() > MAX_TAGS {
                return Err(("tags".into(), format!("at most {MAX_TAGS} tags")));
            }
            for (i, tag) in tags.iter().enumerate() {
                if !is_plain_name(tag) || tag.len() > 64 {
                    return Err((
                        format!("tags[{i}]"),
                        "use letters, digits, `-` and `_` (at most 64)".into(),
                    ));
                }
            }
            config.tags = tags;
        }
        if let Some(secs) = self.call_timeout_secs {
            if !(1..=MAX_CALL_TIMEOUT_SECS).contains(&secs) {
                return Err((
                    "call_timeout_secs".into(),
                    format!("must be 1 to {MAX_CALL_TIMEOUT_SECS}"),
                ));
            }
            config.call_timeout = Duration::from_secs(secs);
        }
        Ok(McpGatewaySettings {
            servers: self.servers,
            config,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(text: &str) -> Result<McpGatewaySettings, SettingError> {
        let file: FileMcpGateway =
            toml::from_str(text).map_err(|e| (String::new(), e.to_string()))?;
        file.resolve(&BTreeSet::from(["everything", "files"]), BTreeMap::new())
    }

    #[test]
    fn nothing_is_offered_by_default_and_named_servers_are() {
        let empty = resolve("").expect("valid");
        assert!(empty.servers.is_empty());
        assert_eq!(empty.config.agent, "mcp-gateway");
        let named =
            resolve("servers = [\"files\", \"everything\"]\nagent = \"ide\"\n").expect("valid");
        assert_eq!(named.servers, ["files", "everything"]);
        assert_eq!(named.config.agent, "ide");
    }

    #[test]
    fn hostile_values_name_their_key() {
        for (text, key) in [
            ("servers = [\"nope\"]", "servers[0]"),
            ("servers = [\"files\", \"files\"]", "servers[1]"),
            ("agent = \"a b\"", "agent"),
            ("agent = \"\"", "agent"),
            ("tags = [\"../x\"]", "tags[0]"),
            ("call_timeout_secs = 0", "call_timeout_secs"),
            ("call_timeout_secs = 99999999", "call_timeout_secs"),
        ] {
            let err = resolve(text).expect_err(text);
            assert_eq!(err.0, key, "{text}: {err:?}");
        }
        assert!(resolve("unknown = 1").is_err());
    }
}
