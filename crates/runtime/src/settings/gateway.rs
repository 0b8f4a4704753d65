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
//!
//! [gateway.models]           # model names clients send, mapped (exact, or `prefix*`)
//! "claude-*" = { provider = "local", model = "qwen2.5-coder:1.5b" }
//! "gpt-4o" = "qwen2.5:7b"    # a model name alone: routed by [routing] as usual
//! ```
//!
//! Names are checked here: 1 to 64 letters, digits, `-` or `_`, as agent names are.
//! An alias's providers are checked against `[providers]` by [`check_alias_providers`].

use agentplane_engine::gateway::{GatewayConfig, GatewayRoute, ModelAlias};
use serde::Deserialize;

use super::SettingError;

/// The longest agent name or tag accepted.
const MAX_NAME_LEN: usize = 64;
/// The most tags accepted.
const MAX_TAGS: usize = 32;
/// The most model aliases accepted.
const MAX_ALIASES: usize = 256;
/// The longest model name or alias pattern accepted.
const MAX_MODEL_LEN: usize = 256;

/// `[gateway]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileGateway {
    agent: Option<String>,
    tags: Option<Vec<String>>,
    max_output_tokens: Option<u32>,
    agents: Option<std::collections::BTreeMap<String, String>>,
    /// Read by hand, not as an untagged enum: a mistyped key is named in the error.
    models: Option<std::collections::BTreeMap<String, toml::Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AliasTable {
    model: Option<String>,
    provider: Option<String>,
    providers: Option<Vec<String>>,
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
        let models = self.models.unwrap_or_default();
        if models.len() > MAX_ALIASES {
            return Err(("models".into(), format!("at most {MAX_ALIASES} aliases")));
        }
        for (pattern, alias) in models {
            let key = format!("models.{pattern:?}");
            config
                .models
                .push(resolve_alias(pattern, alias).map_err(|m| (key, m))?);
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

/// One `[gateway.models]` entry as written: a model name, or a table.
fn resolve_alias(pattern: String, alias: toml::Value) -> Result<ModelAlias, String> {
    let prefix = pattern.strip_suffix('*').unwrap_or(&pattern);
    if pattern.is_empty() || pattern.len() > MAX_MODEL_LEN {
        return Err(format!("a model name is 1 to {MAX_MODEL_LEN} bytes"));
    }
    if prefix.contains('*') || prefix.chars().any(char::is_control) {
        return Err(
            "a model name holds no control characters and `*` only at its end (a prefix)".into(),
        );
    }
    let (model, providers) = match alias {
        toml::Value::String(model) => (Some(model), Vec::new()),
        table @ toml::Value::Table(_) => {
            let table: AliasTable = table.try_into().map_err(|e| e.to_string())?;
            let providers = match (table.provider, table.providers) {
                (Some(_), Some(_)) => {
                    return Err("takes `provider` or `providers`, not both".into());
                }
                (Some(one), None) => vec![one],
                (None, Some(list)) if list.is_empty() => {
                    return Err("`providers` must name at least one provider".into());
                }
                (None, list) => list.unwrap_or_default(),
            };
            if table.model.is_none() && providers.is_empty() {
                return Err("needs a `model`, a `provider` or both".into());
            }
            (table.model, providers)
        }
        _ => return Err("is a model name, or a table of `model` and `provider`".into()),
    };
    if let Some(model) = &model
        && (model.trim().is_empty() || model.len() > MAX_MODEL_LEN)
    {
        return Err(format!("`model` is 1 to {MAX_MODEL_LEN} bytes, not blank"));
    }
    Ok(ModelAlias {
        pattern,
        model,
        providers,
    })
}

/// Checks that every provider an alias names is configured (`known`: the provider
/// names), and names none twice.
pub fn check_alias_providers(config: &GatewayConfig, known: &[String]) -> Result<(), SettingError> {
    for alias in &config.models {
        for (n, name) in alias.providers.iter().enumerate() {
            let key = format!("models.{:?}", alias.pattern);
            if !known.contains(name) {
                return Err((
                    key,
                    format!(
                        "names `{name}`, which is not a provider; the providers are: {}",
                        known.join(", ")
                    ),
                ));
            }
            if alias.providers[..n].contains(name) {
                return Err((key, format!("names `{name}` twice")));
            }
        }
    }
    Ok(())
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
    fn model_aliases_are_taken_and_checked() {
        let config = resolve(
            "[models]\n\"claude-*\" = { provider = \"local\", model = \"qwen\" }\n\
             \"gpt-4o\" = \"llama\"\n\"o3\" = { providers = [\"a\", \"b\"] }",
        )
        .expect("valid");
        let claude = config.models.iter().find(|a| a.pattern == "claude-*");
        assert_eq!(
            claude,
            Some(&ModelAlias {
                pattern: "claude-*".into(),
                model: Some("qwen".into()),
                providers: vec!["local".into()],
            })
        );
        let gpt = config.models.iter().find(|a| a.pattern == "gpt-4o");
        assert_eq!(gpt.map(|a| a.providers.len()), Some(0));
        let known = ["a".to_owned(), "b".to_owned()];
        let unknown = check_alias_providers(&config, &known).expect_err("local");
        assert_eq!(unknown.0, "models.\"claude-*\"");
        assert!(unknown.1.contains("`local`"), "{}", unknown.1);
        let twice = resolve("[models]\nx = { providers = [\"a\", \"a\"] }").expect("parses");
        assert!(check_alias_providers(&twice, &known).is_err());
        for bad in [
            "\"a*b\" = \"m\"",
            "\"\" = \"m\"",
            "x = \" \"",
            "x = {}",
            "x = { provider = \"a\", providers = [\"a\"] }",
            "x = { providers = [] }",
            "x = { modle = \"m\" }",
            "x = 3",
        ] {
            assert!(resolve(&format!("[models]\n{bad}")).is_err(), "{bad}");
        }
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
