//! The agent catalogue: built-in `engineering` and `research`, plus every agent defined
//! in the configuration. A configured agent with a built-in's name replaces it. An ACP
//! agent's client configuration, with its secrets filled in, is built here too, and so
//! is a remote A2A agent's.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agentplane_a2a::client::{A2aRemoteConfig, Credential};
use agentplane_acp_client::{AcpAgentConfig, builtin_profile};
use agentplane_core::{AgentLimits, AgentSpec, NetworkAccess, SandboxSpec, ToolCallMode};
use serde_json::{Value, json};

use crate::config::Config;
use crate::secrets::Secrets;
use crate::settings::agents::AgentConfig;
use crate::settings::secrets::{REFERENCE_OPEN, references};

/// Programs the built-in `engineering` agent may always run: none of them runs code
/// from an argument, from a file it is pointed at, or from a configuration file the
/// model can write (docs/security.md, "What the allowlist still decides"):
/// - `ls`, `cat`, `head`, `tail`, `wc`, `grep`, `diff`, `echo`: read and print; they
///   have no option that starts a program or writes a named file.
/// - `git`: hardened (the `shell` ensemble's git screen and environment: no `-c`, no
///   config writes, no hooks, fsmonitor, pagers, editors or `ext::`, no
///   `--upload-pack`/`--exec`, and `write_file` refuses `.git/`).
///
/// Left out on purpose: interpreters (`node`, `python`), `find` (`-exec`, `-fprint`),
/// `sort` (`-o`, `--compress-program`), `env`, `xargs`, shells.
const ENGINEERING_SHELL_ALLOW: &[&str] = &[
    "git", "ls", "cat", "head", "tail", "wc", "grep", "diff", "echo",
];

/// Programs added when the kernel sandbox is in force: each runs code the model can
/// write (`build.rs`, a Makefile, `package.json` scripts, test files, `-exec`), which
/// is acceptable only because the kernel confines whatever they run to the workspace
/// with no network.
const ENGINEERING_SANDBOXED_ALLOW: &[&str] = &[
    "cargo", "rustc", "make", "npm", "node", "go", "pytest", "find", "sort",
];

/// All agents by name.
pub fn catalogue(config: &Config) -> BTreeMap<String, AgentSpec> {
    // Before any `in_force` is said: what runs without namespaces is the operator's.
    agentplane_process::sandbox::set_fallback(config.sandbox_fallback);
    let mut agents: BTreeMap<String, AgentSpec> = [engineering(), research()]
        .into_iter()
        .map(|a| (a.name.clone(), a))
        .collect();
    for (name, agent) in &config.agents {
        agents.insert(name.clone(), from_config(name, agent));
    }
    for agent in agents.values_mut() {
        agent.sandbox.in_force = sandbox_of(agent).in_force();
    }
    agents
}

/// The external agents without `max_cost_usd` that a budget in `policies` selects (for
/// some client), each with the first such budget: their turns are refused
/// (`governance::ceiling` in the engine), which `serve` warns about at start.
pub fn unbounded_under_budget(
    config: &Config,
    policies: &agentplane_core::policy::PolicySet,
) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for (name, agent) in &config.agents {
        if !agent.is_external() || agent.max_cost_usd.is_some() {
            continue;
        }
        let budget = policies.policies().iter().find(|policy| {
            let targets = policy.targets();
            policy.kind() == agentplane_core::policy::PolicyKind::Budget
                && targets.tools.is_none()
                && agentplane_core::policy::Targets {
                    clients: None,
                    ..targets.clone()
                }
                .matches(name, &agent.tags, None, "")
        });
        if let Some(budget) = budget {
            found.push((name.clone(), budget.name().to_owned()));
        }
    }
    found
}

/// Warns, once at start, of each external agent a budget selects that has no
/// `max_cost_usd`: every turn of it will be refused until it has one.
pub fn warn_unbounded(config: &Config, policies: &agentplane_core::policy::PolicySet) {
    for (agent, budget) in unbounded_under_budget(config, policies) {
        tracing::warn!(
            %agent,
            %budget,
            "budget `{budget}` applies to external agent `{agent}`, which has no \
             max_cost_usd: its turns are refused until `[agents.{agent}] max_cost_usd` is set"
        );
    }
}

/// The kernel confinement of the processes `agent`'s tools start.
pub fn sandbox_of(agent: &AgentSpec) -> agentplane_process::Sandbox {
    agentplane_process::Sandbox {
        spec: agent.sandbox.clone(),
        network: agent.network.allowed,
        own_proc: false,
    }
}

/// Whether the kernel enforces the default sandbox (what the built-in agents get).
fn sandbox_in_force() -> bool {
    agentplane_process::sandbox::Kernel::get()
        .missing()
        .is_none()
}

fn from_config(name: &str, agent: &AgentConfig) -> AgentSpec {
    let defaults = AgentLimits::default();
    AgentSpec {
        name: name.to_owned(),
        description: agent.description.clone(),
        tags: agent.tags.clone(),
        system_prompt: agent.system_prompt.clone(),
        model: agent.model.clone(),
        ensembles: agent.ensembles.clone(),
        shell_allow: agent.shell_allow.clone(),
        network: NetworkAccess {
            allowed: agent.network.allowed,
            allow_private: agent.network.allow_private,
        },
        sandbox: agent.sandbox.clone(),
        requires_permission: agent.requires_permission.clone(),
        // Without tools and without a schema, the agent is a plain chat agent: its text
        // answer is the result and no tool is offered to the model at all.
        output_schema: match &agent.output_schema {
            Some(schema) => serde_json::to_value(schema).ok(),
            None if agent.ensembles.is_empty() => None,
            None => Some(summary_schema()),
        },
        limits: AgentLimits {
            max_steps: agent.max_steps.unwrap_or(defaults.max_steps),
            tool_timeout_ms: agent.tool_timeout_ms.unwrap_or(defaults.tool_timeout_ms),
            tool_output_cap_bytes: agent
                .tool_output_cap_bytes
                .unwrap_or(defaults.tool_output_cap_bytes),
            max_output_tokens: agent
                .max_output_tokens
                .unwrap_or(defaults.max_output_tokens),
            max_nudges: agent.max_nudges.unwrap_or(defaults.max_nudges),
            // Checked when the configuration was loaded.
            max_cost_micros: agent
                .max_cost_usd
                .and_then(|usd| crate::settings::agents::max_cost_micros(usd).ok()),
        },
        // Checked when the configuration was loaded.
        tool_calls: agent
            .tool_calls
            .as_deref()
            .and_then(ToolCallMode::parse)
            .unwrap_or_default(),
        temperature: agent.temperature,
    }
}

/// The default result shape of configured agents.
fn summary_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "summary": {"type": "string", "description": "What was done, in a few sentences."}
        },
        "required": ["summary"]
    })
}

fn engineering() -> AgentSpec {
    AgentSpec {
        name: "engineering".to_owned(),
        tags: Vec::new(),
        description: "Changes code in the workspace: reads, edits, runs builds and tests."
            .to_owned(),
        system_prompt: "You are a careful software engineer working in a sandboxed workspace. \
            Use the tools to inspect files before changing them, make the smallest change \
            that does the task, and check your work by running the relevant commands. Paths \
            are relative to the workspace. When the task is done, call finish_task with a \
            summary, the files you changed as artifacts, and any next steps."
            .to_owned(),
        model: None,
        ensembles: vec!["fs".to_owned(), "shell".to_owned()],
        shell_allow: ENGINEERING_SHELL_ALLOW
            .iter()
            .chain(if sandbox_in_force() {
                ENGINEERING_SANDBOXED_ALLOW
            } else {
                &[]
            })
            .map(|s| (*s).to_owned())
            .collect(),
        network: NetworkAccess::default(),
        sandbox: SandboxSpec::default(),
        requires_permission: Vec::new(),
        output_schema: Some(json!({
            "type": "object",
            "properties": {
                "summary": {"type": "string", "description": "What was done and why."},
                "artifacts": {"type": "array", "items": {"type": "string"}, "description": "Files created or changed."},
                "next_steps": {"type": "array", "items": {"type": "string"}},
                "notes": {"type": "string"}
            },
            "required": ["summary"]
        })),
        limits: AgentLimits::default(),
        tool_calls: ToolCallMode::Auto,
        temperature: None,
    }
}

fn research() -> AgentSpec {
    AgentSpec {
        name: "research".to_owned(),
        tags: Vec::new(),
        description: "Answers questions from the workspace's files and, when allowed, the web."
            .to_owned(),
        system_prompt: "You are a meticulous researcher. Gather evidence with the tools, \
            cite the files or URLs each finding comes from, and say what remains uncertain. \
            When done, call finish_task with an answer, the findings with their sources, \
            and your confidence."
            .to_owned(),
        model: None,
        ensembles: vec!["fs".to_owned(), "web".to_owned()],
        shell_allow: Vec::new(),
        // The web ensemble is attached but refuses until a configuration allows network.
        network: NetworkAccess::default(),
        sandbox: SandboxSpec::default(),
        requires_permission: Vec::new(),
        output_schema: Some(json!({
            "type": "object",
            "properties": {
                "answer": {"type": "string"},
                "findings": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "claim": {"type": "string"},
                            "source": {"type": "string"}
                        },
                        "required": ["claim"]
                    }
                },
                "confidence": {"type": "string", "enum": ["low", "medium", "high"]}
            },
            "required": ["answer"]
        })),
        limits: AgentLimits::default(),
        tool_calls: ToolCallMode::Auto,
        temperature: None,
    }
}

/// An ACP agent's (`kind = "acp"`, settings/acp.rs) configuration with secrets filled in. Variables that could not be
/// filled are listed in `missing_env` (the agent is then unavailable), never guessed.
pub fn acp_config(agent: &AgentConfig, secrets: &Secrets) -> Option<AcpAgentConfig> {
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
        sandbox: (overrides.sandbox != Some(false)).then(|| agentplane_process::Sandbox {
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

/// A remote A2A agent's (`kind = "a2a"`, settings/a2a_agents.rs) configuration with
/// its secrets filled in. A secret that is not set is listed in `missing` (the agent
/// is then unavailable, saying which), never guessed.
pub fn a2a_config(name: &str, agent: &AgentConfig, secrets: &Secrets) -> Option<A2aRemoteConfig> {
    let url = agent.url.clone()?;
    let settings = agent.a2a.clone().unwrap_or_default();
    let mut missing = Vec::new();
    let api_key = settings.api_key.as_ref().and_then(|secret| {
        let value = secrets.get(secret).map(Credential::new);
        if value.is_none() {
            missing.push(format!(
                "the secret `{secret}` (`api_key`), which is not set"
            ));
        }
        value
    });
    let mut headers = Vec::new();
    for (header, value) in &settings.headers {
        let mut text = value.clone();
        for secret in references(value).unwrap_or_default() {
            match secrets.get(secret) {
                Some(v) => text = text.replacen(&format!("{REFERENCE_OPEN}{secret}}}"), v, 1),
                None => missing.push(format!(
                    "the secret `{secret}` (header `{header}`), which is not set"
                )),
            }
        }
        headers.push((header.clone(), Credential::new(text)));
    }
    Some(A2aRemoteConfig {
        name: name.to_owned(),
        card_url: url,
        api_key,
        headers,
        missing,
        connect_timeout: Duration::from_secs(settings.connect_timeout_secs.unwrap_or(10)),
        task_timeout: Duration::from_secs(settings.timeout_secs.unwrap_or(600)),
        // Checked when the configuration was loaded.
        max_cost_micros: agent
            .max_cost_usd
            .and_then(|usd| crate::settings::agents::max_cost_micros(usd).ok()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentplane_engine::schema::Schema;

    #[test]
    fn built_in_schemas_compile_and_shells_are_not_allowed() {
        for agent in [engineering(), research()] {
            let schema = agent
                .output_schema
                .as_ref()
                .expect("built-ins have a schema");
            Schema::compile(schema).expect("schema compiles");
            for shell in ["sh", "bash", "zsh", "python", "python3", "perl"] {
                assert!(!agent.shell_allow.iter().any(|p| p == shell), "{shell}");
            }
        }
    }

    #[test]
    fn external_agents_without_a_max_cost_under_a_budget_are_named() {
        let config = Config::parse(
            "[agents.remote]\nkind = \"a2a\"\nurl = \"http://h/card\"\ntags = [\"paid\"]\n\
             [agents.capped]\nkind = \"a2a\"\nurl = \"http://h/card\"\ntags = [\"paid\"]\n\
             max_cost_usd = 0.1\n[agents.free]\nkind = \"a2a\"\nurl = \"http://h/card\"\n",
            None,
            &crate::settings::overrides::Overrides::default(),
        )
        .expect("config");
        let text = "name: paid\ntype: budget\ntargets: {tags: [paid], clients: [ci]}\n\
                    rules: {usd: 1, period: month}\n";
        let policies =
            agentplane_core::policy::PolicySet::parse(&[agentplane_core::policy::PolicySource {
                name: "paid.yaml",
                text,
            }])
            .expect("policies");
        assert_eq!(
            unbounded_under_budget(&config, &policies),
            vec![("remote".to_owned(), "paid".to_owned())]
        );
    }
}
