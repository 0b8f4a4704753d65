//! The one configuration loader: `agentplane.toml`, then environment overrides.
//!
//! Where the file comes from, in order: `--config PATH`, `AGENTPLANE_CONFIG`, then
//! `agentplane.toml` in the current directory if present; with none, every setting has
//! its default, which targets a local Ollama. Unknown keys and bad values are load
//! errors naming the key and the file (or the variable), never silently ignored.
//! Secrets (the API key) are held here but never printed: `Debug` redacts them.
//!
//! Two steps: [`Config::load_from`] finds and reads the file and reads the overriding
//! variables once ([`Overrides::read`]); [`Config::parse`] is a pure function of the
//! file's text and those overrides. Each section is checked by its own file under
//! `settings/`; this file only puts them together and names a bad key in the file
//! ([`InFile`]). `Config::load`, which reads the process's own (sealed) environment,
//! is in `environment.rs`, so nothing here reads the process.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agentplane_engine::context::ContextBudget;
use agentplane_engine::gateway::GatewayConfig;
use agentplane_engine::governance::{ArgsRetention, PriceTable};
use serde::Deserialize;

use crate::settings::agents::{AgentConfig, check_agent};
use crate::settings::audit::{AuditConfig, FileAudit};
use crate::settings::auth::{FileAuth, OidcConfig};
use crate::settings::cluster::{ClusterConfig, FileCluster};
use crate::settings::context::FileContext;
use crate::settings::executions::{ExecutionsConfig, FileExecutions};
use crate::settings::gateway::FileGateway;
use crate::settings::governance::{FileApprovals, FileRetention};
use crate::settings::llm::{FileLlm, LlmConfig, check_base_url};
use crate::settings::mcp::{FileMcp, McpServerConfig, check_mcp_server};
use crate::settings::mcp_gateway::McpGatewaySettings;
use crate::settings::overrides::Overrides;
use crate::settings::policies::{FilePolicies, PoliciesConfig};
use crate::settings::prices::FilePrices;
use crate::settings::providers::{FileProvider, FileRouting, ProvidersConfig};
use crate::settings::rate_limits::{FileRateLimits, RateLimitsConfig};
use crate::settings::run::FileRun;
use crate::settings::secrets::{FileSecret, SecretsConfig};
use crate::settings::server::{FileServer, ServerConfig};
use crate::settings::store::{FileStore, StoreConfig};
use crate::settings::versions::FileVersions;
use crate::settings::{self, BadValue};

/// The file name looked for in the current directory.
pub const CONFIG_FILE_NAME: &str = "agentplane.toml";

/// A configuration that could not be loaded. The message names the source and the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}: {message}")]
pub struct ConfigError {
    /// The file path or environment variable the bad value came from.
    pub source_name: String,
    pub message: String,
}

impl ConfigError {
    pub(crate) fn new(source_name: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            source_name: source_name.into(),
            message: message.into(),
        }
    }
}

/// Names a bad value in the file: `` FILE: `section.key`: message ``, or the variable
/// that overrode it. The one place a key path is written.
struct InFile<'a> {
    /// The file's path as shown, or `defaults`.
    name: &'a str,
}

impl InFile<'_> {
    /// The error for `key`, a whole path (`llm.base_url`, `mcp.servers.NAME.env.KEY`).
    fn key(&self, key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::new(self.name, format!("`{key}`: {}", message.into()))
    }

    /// The error for a section's bad value: its key under `section`, or its variable.
    fn under(&self, section: &str, bad: impl Into<BadValue>) -> ConfigError {
        match bad.into() {
            BadValue::Key(key, message) => self.key(&format!("{section}.{key}"), message),
            BadValue::Variable(name, message) => ConfigError::new(name, message),
        }
    }
}

/// The loaded configuration, after defaults and overrides.
#[derive(Clone, PartialEq)]
pub struct Config {
    /// The file it came from, if any.
    pub file: Option<PathBuf>,
    pub llm: LlmConfig,
    pub store: StoreConfig,
    pub server: ServerConfig,
    pub context: ContextBudget,
    pub default_agent: String,
    /// Agents defined in the file, by name (validated, not yet merged with built-ins).
    pub agents: BTreeMap<String, AgentConfig>,
    /// MCP servers by name (validated; `cwd` already relative to the file).
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
    /// `[mcp.gateway]`: the servers the MCP gateway offers, and its calls' prices.
    pub mcp_gateway: McpGatewaySettings,
    /// `[telemetry]`: where traces go.
    pub telemetry: crate::settings::telemetry::Telemetry,
    /// `[policies]`.
    pub policies: PoliciesConfig,
    /// `[audit]`: the anchors.
    pub audit: AuditConfig,
    /// `[prices]`, over the built-in defaults.
    pub prices: PriceTable,
    /// `[secrets]`: where each secret comes from.
    pub secrets: SecretsConfig,
    /// `[approvals] expire_after_secs`.
    pub approval_ttl: Duration,
    /// `[retention] tool_args`.
    pub tool_args: ArgsRetention,
    /// `[executions]`.
    pub executions: ExecutionsConfig,
    /// `[providers.NAME]` and `[routing]`; empty: `[llm]` is the one provider.
    pub providers: ProvidersConfig,
    /// `[versions] admins`: who may change agent versions; `None`: any client.
    pub version_admins: Option<Vec<String>>,
    /// `[gateway]`: who OpenAI-compatible gateway calls are.
    pub gateway: GatewayConfig,
    /// `[cluster]`: heartbeats and the timeout after which a replica is dead.
    pub cluster: ClusterConfig,
    /// `[auth.oidc]`: bearer tokens from an identity provider, when set.
    pub oidc: Option<OidcConfig>,
    /// `[rate_limits]`: in memory, or shared in Redis.
    pub rate_limits: RateLimitsConfig,
    /// `[a2a]`: the agents published over A2A, and their tasks' workspace.
    pub a2a: crate::settings::a2a::A2aSettings,
    /// `[sandbox] fallback`: what runs where the machine gives no namespaces.
    pub sandbox_fallback: agentplane_process::sandbox::Fallback,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("file", &self.file)
            .field("llm", &self.llm)
            .field("store", &self.store)
            .field("server", &self.server)
            .field("context", &self.context)
            .field("default_agent", &self.default_agent)
            .field("agents", &self.agents.keys().collect::<Vec<_>>())
            .field("mcp_servers", &self.mcp_servers)
            .field("mcp_gateway", &self.mcp_gateway)
            .field("telemetry", &self.telemetry)
            .field("policies", &self.policies)
            .field("audit", &self.audit)
            .field("secrets", &self.secrets.sources.keys().collect::<Vec<_>>())
            .field("approval_ttl", &self.approval_ttl)
            .field("tool_args", &self.tool_args)
            .field("executions", &self.executions)
            .field("providers", &self.providers)
            .field("version_admins", &self.version_admins)
            .field("gateway", &self.gateway)
            .field("cluster", &self.cluster)
            .field("oidc", &self.oidc)
            .field("rate_limits", &self.rate_limits)
            .field("a2a", &self.a2a)
            .field("sandbox_fallback", &self.sandbox_fallback)
            .finish()
    }
}

/// The file's shape. Every section and key is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    llm: FileLlm,
    #[serde(default)]
    store: FileStore,
    #[serde(default)]
    run: FileRun,
    #[serde(default)]
    server: FileServer,
    #[serde(default)]
    context: FileContext,
    #[serde(default)]
    agents: BTreeMap<String, AgentConfig>,
    #[serde(default)]
    mcp: FileMcp,
    #[serde(default)]
    policies: FilePolicies,
    #[serde(default)]
    audit: FileAudit,
    #[serde(default)]
    prices: FilePrices,
    #[serde(default)]
    secrets: BTreeMap<String, FileSecret>,
    #[serde(default)]
    approvals: FileApprovals,
    #[serde(default)]
    retention: FileRetention,
    #[serde(default)]
    executions: FileExecutions,
    #[serde(default)]
    providers: BTreeMap<String, FileProvider>,
    #[serde(default)]
    routing: Option<FileRouting>,
    #[serde(default)]
    versions: FileVersions,
    #[serde(default)]
    gateway: FileGateway,
    #[serde(default)]
    cluster: FileCluster,
    #[serde(default)]
    rate_limits: FileRateLimits,
    #[serde(default)]
    auth: FileAuth,
    #[serde(default)]
    telemetry: crate::settings::telemetry::FileTelemetry,
    #[serde(default)]
    a2a: crate::settings::a2a::FileA2a,
    #[serde(default)]
    sandbox: crate::settings::sandbox::FileSandbox,
}

/// Where to look, and the environment to read. Passed in so tests need no global state.
pub struct ConfigSource<'a> {
    /// `--config PATH`.
    pub explicit: Option<&'a Path>,
    /// The directory searched for `agentplane.toml`.
    pub cwd: &'a Path,
    /// Reads an environment variable.
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

impl Config {
    /// Loads the configuration from the given sources: the file they point to, under
    /// the variables their environment sets.
    pub fn load_from(source: &ConfigSource<'_>) -> Result<Self, ConfigError> {
        let overrides = Overrides::read(source.env);
        let file = match (source.explicit, &overrides.config) {
            (Some(path), _) => Some(path.to_path_buf()),
            (None, Some(path)) => Some(path.clone()),
            (None, None) => {
                let local = source.cwd.join(CONFIG_FILE_NAME);
                local.is_file().then_some(local)
            }
        };
        let text = match &file {
            Some(path) => std::fs::read_to_string(path).map_err(|e| {
                ConfigError::new(
                    path.display().to_string(),
                    format!("cannot read the file: {e}"),
                )
            })?,
            None => String::new(),
        };
        Self::parse(&text, file.as_deref(), &overrides)
    }

    /// The configuration `text` (the file at `file`, if any; relative paths in it are
    /// relative to its directory) describes under `overrides`. Reads nothing: the same
    /// arguments give the same answer.
    pub fn parse(
        text: &str,
        file: Option<&Path>,
        overrides: &Overrides,
    ) -> Result<Self, ConfigError> {
        let name = file.map_or_else(|| "defaults".to_owned(), |p| p.display().to_string());
        let parsed: FileConfig = toml::from_str(text)
            .map_err(|e| ConfigError::new(name.clone(), e.to_string().trim_end().to_owned()))?;
        let in_file = InFile { name: &name };
        let relative = |path: PathBuf| relative_to_file(file, path);

        let llm_server = parsed.llm.server_keys();
        let llm =
            settings::llm::resolve(parsed.llm, overrides).map_err(|e| in_file.under("llm", e))?;
        let store = settings::store::resolve(parsed.store, &relative, overrides)
            .map_err(|e| in_file.under("store", e))?;
        let cluster =
            settings::cluster::resolve(parsed.cluster).map_err(|e| in_file.under("cluster", e))?;
        let oidc = settings::auth::resolve(parsed.auth).map_err(|e| in_file.under("auth", e))?;
        let server = settings::server::resolve(parsed.server, overrides)
            .map_err(|e| in_file.under("server", e))?;
        let context =
            settings::context::resolve(parsed.context).map_err(|e| in_file.under("context", e))?;

        let mut mcp_servers = parsed.mcp.servers;
        for (name, server) in &mut mcp_servers {
            check_mcp_server(name, server)
                .map_err(|e| in_file.under(&format!("mcp.servers.{name}"), e))?;
            if let Some(cwd) = server.cwd.take() {
                server.cwd = Some(relative(cwd));
            }
        }
        let mcp_names = mcp_servers.keys().map(String::as_str).collect();
        let a2a_names = parsed
            .agents
            .iter()
            .filter(|(_, agent)| agent.is_a2a())
            .map(|(name, _)| name.as_str())
            .collect();
        for (name, agent) in &parsed.agents {
            check_agent(name, agent, &mcp_names, &a2a_names)
                .map_err(|e| in_file.under(&format!("agents.{name}"), e))?;
        }
        let policies = parsed
            .policies
            .resolve(&relative)
            .map_err(|e| in_file.under("policies", e))?;
        let audit = parsed
            .audit
            .resolve(&relative)
            .map_err(|e| in_file.under("audit", e))?;
        let tool_prices = settings::prices::resolve_tools(&parsed.prices)
            .map_err(|e| in_file.under("prices", e))?;
        let prices =
            settings::prices::resolve(parsed.prices).map_err(|e| in_file.under("prices", e))?;
        let mcp_gateway = parsed
            .mcp
            .gateway
            .resolve(&mcp_names, tool_prices)
            .map_err(|e| in_file.under("mcp.gateway", e))?;
        let secrets =
            settings::secrets::resolve(parsed.secrets).map_err(|e| in_file.under("secrets", e))?;
        // Every `${secret:NAME}` in an MCP server's env or headers names a known secret.
        settings::mcp::secret_references(&mcp_servers, &secrets)
            .map_err(|(key, m)| in_file.key(&key, m))?;
        // Every secret a remote A2A agent names is configured.
        let remote = parsed
            .agents
            .iter()
            .filter_map(|(name, agent)| Some((name, agent.a2a.as_ref()?)));
        settings::a2a_agents::secret_references(remote, &secrets)
            .map_err(|(key, m)| in_file.key(&key, m))?;
        let approval_ttl = settings::governance::approval_ttl(&parsed.approvals)
            .map_err(|e| in_file.under("approvals", e))?;
        let tool_args = settings::governance::args_retention(&parsed.retention)
            .map_err(|e| in_file.under("retention", e))?;
        let executions = settings::executions::resolve(parsed.executions, &secrets)
            .map_err(|e| in_file.under("executions", e))?;
        let providers = settings::providers::resolve(
            parsed.providers,
            parsed.routing,
            &secrets,
            &check_base_url,
        )
        .map_err(|(key, m)| in_file.key(&key, m))?;
        if providers.is_configured() {
            // The file's `[llm]` server settings would be silently unused: refuse them.
            if let Some(key) = llm_server.first() {
                return Err(in_file.under(
                    "llm",
                    (
                        *key,
                        "is not used when [providers] are configured; set it on a provider"
                            .to_owned(),
                    ),
                ));
            }
        }
        let version_admins = settings::versions::admins(&parsed.versions)
            .map_err(|e| in_file.under("versions", e))?;
        let gateway = parsed
            .gateway
            .resolve()
            .map_err(|e| in_file.under("gateway", e))?;
        let provider_names: Vec<String> = if providers.is_configured() {
            providers.providers.keys().cloned().collect()
        } else {
            vec![agentplane_engine::models::DEFAULT_PROVIDER.to_owned()]
        };
        settings::gateway::check_alias_providers(&gateway, &provider_names)
            .map_err(|e| in_file.under("gateway", e))?;
        let telemetry = parsed
            .telemetry
            .resolve()
            .map_err(|e| in_file.under("telemetry", e))?;
        let sandbox_fallback = parsed
            .sandbox
            .resolve()
            .map_err(|e| in_file.under("sandbox", e))?;
        let rate_limits = settings::rate_limits::resolve(parsed.rate_limits, overrides)
            .map_err(|e| in_file.under("rate_limits", e))?;
        let agent_names = parsed
            .agents
            .keys()
            .map(String::as_str)
            .chain(settings::agents::BUILT_IN_AGENTS)
            .collect();
        let a2a = settings::a2a::resolve(parsed.a2a, &agent_names, &relative)
            .map_err(|e| in_file.under("a2a", e))?;

        Ok(Self {
            file: file.map(Path::to_path_buf),
            llm,
            store,
            server,
            context,
            default_agent: settings::run::default_agent(parsed.run),
            agents: parsed.agents,
            mcp_servers,
            mcp_gateway,
            telemetry,
            sandbox_fallback,
            policies,
            audit,
            prices,
            secrets,
            approval_ttl,
            tool_args,
            executions,
            providers,
            version_admins,
            gateway,
            cluster,
            rate_limits,
            oidc,
            a2a,
        })
    }
}

/// `path` against the directory of `file` when it is relative and there is a file.
fn relative_to_file(file: Option<&Path>, path: PathBuf) -> PathBuf {
    match file.and_then(Path::parent) {
        Some(dir) if path.is_relative() => dir.join(path),
        _ => path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(dir: &Path, file: Option<&str>, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let path = dir.join(CONFIG_FILE_NAME);
        match file {
            Some(text) => std::fs::write(&path, text).expect("write config"),
            None => {
                let _ = std::fs::remove_file(&path);
            }
        }
        let vars: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let env = move |name: &str| vars.get(name).cloned();
        Config::load_from(&ConfigSource {
            explicit: None,
            cwd: dir,
            env: &env,
        })
    }

    #[test]
    fn defaults_need_no_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = load(dir.path(), None, &[("HOME", "/home/u")]).expect("loads");
        assert_eq!(config.llm.base_url, settings::llm::DEFAULT_LLM_BASE_URL);
        assert_eq!(config.llm.model, settings::llm::DEFAULT_LLM_MODEL);
        assert_eq!(config.file, None);
        assert_eq!(
            config.store.path,
            PathBuf::from("/home/u/.local/share/agentplane/agentplane.db")
        );
        assert_eq!(config.default_agent, "engineering");
    }

    #[test]
    fn environment_overrides_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = load(
            dir.path(),
            Some("[llm]\nbase_url = \"http://a:1/v1\"\nmodel = \"m1\"\napi_key = \"k1\"\n"),
            &[
                ("AGENTPLANE_LLM_BASE_URL", "http://b:2/v1/"),
                ("AGENTPLANE_LLM_MODEL", "m2"),
                ("AGENTPLANE_LLM_API_KEY", "secret-key"),
            ],
        )
        .expect("loads");
        assert_eq!(config.llm.base_url, "http://b:2/v1");
        assert_eq!(config.llm.model, "m2");
        assert_eq!(config.llm.api_key.as_deref(), Some("secret-key"));
        assert!(!format!("{config:?}").contains("secret-key"));
    }

    #[test]
    fn mcp_servers_load_and_attach_to_agents() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = load(
            dir.path(),
            Some(concat!(
                "[mcp.servers.files]\ncommand = \"node\"\nargs = [\"server.js\"]\n",
                "env = { TOKEN = \"env-secret\" }\ncwd = \"peers\"\nidle_timeout_secs = 60\n",
                "[mcp.servers.remote]\nurl = \"http://127.0.0.1:3001/mcp\"\n",
                "headers = { Authorization = \"Bearer header-secret\" }\n",
                "[agents.x]\nsystem_prompt = \"p\"\nensembles = [\"fs\", \"files\", \"remote\"]\n",
            )),
            &[],
        )
        .expect("loads");
        let files = &config.mcp_servers["files"];
        assert_eq!(files.command.as_deref(), Some("node"));
        assert_eq!(
            files.cwd.as_deref(),
            Some(dir.path().join("peers").as_path())
        );
        assert_eq!(files.idle_timeout_secs, Some(60));
        assert_eq!(
            config.mcp_servers["remote"].url.as_deref(),
            Some("http://127.0.0.1:3001/mcp")
        );
        assert_eq!(config.agents["x"].ensembles, ["fs", "files", "remote"]);
        let shown = format!("{config:?}");
        assert!(
            !shown.contains("env-secret") && !shown.contains("header-secret"),
            "{shown}"
        );
        assert!(
            shown.contains("TOKEN") && shown.contains("Authorization"),
            "{shown}"
        );
    }

    #[test]
    fn bad_mcp_servers_name_the_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cases = [
            ("[mcp.servers.a]\n", "mcp.servers.a.command"),
            (
                "[mcp.servers.a]\ncommand = \"x\"\nurl = \"http://h/mcp\"\n",
                "mcp.servers.a.url",
            ),
            (
                "[mcp.servers.a]\ncommand = \" \"\n",
                "mcp.servers.a.command",
            ),
            (
                "[mcp.servers.a]\nurl = \"file:///etc\"\n",
                "mcp.servers.a.url",
            ),
            (
                "[mcp.servers.a]\nurl = \"http://h/mcp\"\nargs = [\"x\"]\n",
                "mcp.servers.a.url",
            ),
            (
                "[mcp.servers.a]\ncommand = \"x\"\nheaders = { A = \"b\" }\n",
                "mcp.servers.a.headers",
            ),
            (
                "[mcp.servers.a]\ncommand = \"x\"\nenv = { \"A=B\" = \"c\" }\n",
                "mcp.servers.a.env",
            ),
            (
                "[mcp.servers.a]\ncommand = \"x\"\ncall_timeout_secs = 0\n",
                "mcp.servers.a.call_timeout_secs",
            ),
            ("[mcp.servers.a]\ncommand = \"x\"\nport = 1\n", "port"),
            (
                "[mcp.servers.shell]\ncommand = \"x\"\n",
                "mcp.servers.shell",
            ),
            ("[mcp.servers.a__b]\ncommand = \"x\"\n", "mcp.servers.a__b"),
            (
                "[mcp.servers.\"a b\"]\ncommand = \"x\"\n",
                "mcp.servers.a b",
            ),
            (
                "[agents.x]\nsystem_prompt = \"p\"\nensembles = [\"nowhere\"]\n",
                "agents.x.ensembles",
            ),
        ];
        for (text, key) in cases {
            let err = load(dir.path(), Some(text), &[]).expect_err(text);
            assert!(err.to_string().contains(key), "{text}: {err}");
        }
    }

    #[test]
    fn unknown_keys_name_the_key_and_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err =
            load(dir.path(), Some("[llm]\nbase_ulr = \"x\"\n"), &[]).expect_err("unknown key");
        let text = err.to_string();
        assert!(text.contains("base_ulr"), "{text}");
        assert!(text.contains(CONFIG_FILE_NAME), "{text}");

        let err = load(dir.path(), Some("[agentz]\n"), &[]).expect_err("unknown section");
        assert!(err.to_string().contains("agentz"), "{err}");
    }

    #[test]
    fn bad_values_name_the_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cases = [
            ("[llm]\nbase_url = \"ftp://x\"\n", "llm.base_url"),
            ("[llm]\nmax_retries = -1\n", "max_retries"),
            ("[llm]\nmax_retries = 99\n", "llm.max_retries"),
            (
                "[llm]\nrequest_timeout_secs = 0\n",
                "llm.request_timeout_secs",
            ),
            (
                "[agents.x]\nsystem_prompt = \"p\"\nensembles = [\"fs\", \"rocket\"]\n",
                "agents.x.ensembles",
            ),
            (
                "[agents.x]\nsystem_prompt = \"p\"\nmax_steps = 0\n",
                "agents.x.max_steps",
            ),
            (
                "[agents.x]\nsystem_prompt = \"p\"\ntemperature = 2.5\n",
                "agents.x.temperature",
            ),
            (
                "[agents.x]\nsystem_prompt = \"p\"\ntemperature = -0.1\n",
                "agents.x.temperature",
            ),
            (
                "[agents.x]\nsystem_prompt = \"p\"\ntemperature = nan\n",
                "agents.x.temperature",
            ),
            (
                "[agents.x]\nsystem_prompt = \"p\"\nensembles = [\"shell\"]\nshell_allow = [\"/bin/sh\"]\n",
                "agents.x.shell_allow",
            ),
            (
                "[agents.x]\nsystem_prompt = \"p\"\n[agents.x.output_schema]\ntype = 5\n",
                "agents.x.output_schema",
            ),
            (
                "[agents.x]\nsystem_prompt = \"p\"\n[agents.x.sandbox]\nread_only = [\"opt\"]\n",
                "agents.x.sandbox",
            ),
            (
                "[agents.x]\nsystem_prompt = \"p\"\n[agents.x.sandbox]\ncpu_secs = 0\n",
                "agents.x.sandbox",
            ),
            (
                "[agents.x]\nsystem_prompt = \"p\"\n[agents.x.sandbox]\nin_force = \"all\"\n",
                "in_force",
            ),
            ("[agents.x]\ndescription = \"no prompt\"\n", "system_prompt"),
            ("[store]\npath = \"\"\n", "store.path"),
            ("not toml at all [", "agentplane.toml"),
        ];
        for (text, key) in cases {
            let err = load(dir.path(), Some(text), &[]).expect_err(text);
            assert!(err.to_string().contains(key), "{text}: {err}");
        }
        let err = load(
            dir.path(),
            None,
            &[("AGENTPLANE_LLM_BASE_URL", "localhost:11434")],
        )
        .expect_err("env");
        assert!(err.to_string().contains("AGENTPLANE_LLM_BASE_URL"), "{err}");
    }

    #[test]
    fn the_environment_is_read_in_one_step_and_parsing_is_pure() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(CONFIG_FILE_NAME);
        let text = "[llm]\nmodel = \"file-model\"\n[server]\nlisten = \"127.0.0.1:1\"\n";
        std::fs::write(&path, text).expect("write config");
        let vars: BTreeMap<&str, &str> = [
            ("AGENTPLANE_LLM_MODEL", "env-model"),
            ("AGENTPLANE_DB", "postgres://u:pw@db/agentplane"),
            ("HOME", "/home/u"),
        ]
        .into();
        let reads = std::cell::RefCell::new(Vec::new());
        let env = |name: &str| {
            reads.borrow_mut().push(name.to_owned());
            vars.get(name).map(|v| (*v).to_owned())
        };
        let loaded = Config::load_from(&ConfigSource {
            explicit: None,
            cwd: dir.path(),
            env: &env,
        })
        .expect("loads");
        // Each variable was asked for once: the one read of `Overrides::read`.
        let mut asked = reads.take();
        let count = asked.len();
        asked.sort();
        asked.dedup();
        assert_eq!(asked.len(), count, "{asked:?}");
        assert!(
            asked.iter().any(|v| v == "AGENTPLANE_LLM_MODEL"),
            "{asked:?}"
        );

        // The same text under the same overrides is the same configuration, read again
        // with no environment at all; without overrides, the file's own values.
        let overrides = Overrides::read(&|name: &str| vars.get(name).map(|v| (*v).to_owned()));
        let parsed = Config::parse(text, Some(&path), &overrides).expect("parses");
        assert_eq!(parsed, loaded);
        assert_eq!(loaded.llm.model, "env-model");
        assert!(loaded.store.postgres.is_some());
        let plain = Config::parse(text, Some(&path), &Overrides::default()).expect("parses");
        assert_eq!(plain.llm.model, "file-model");
        assert_eq!(plain.store.postgres, None);
        assert_eq!(plain.store.path, PathBuf::from("agentplane.db"));
        assert_eq!(plain.server.listen, "127.0.0.1:1");
    }

    #[test]
    fn an_explicit_file_must_exist() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("nope.toml");
        let env = |_: &str| None;
        let err = Config::load_from(&ConfigSource {
            explicit: Some(&missing),
            cwd: dir.path(),
            env: &env,
        })
        .expect_err("missing file");
        assert!(err.to_string().contains("nope.toml"), "{err}");
    }

    #[test]
    fn agents_and_relative_store_paths_come_from_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = load(
            dir.path(),
            Some(
                "[store]\npath = \"data/events.db\"\n[run]\ndefault_agent = \"reviewer\"\n\
                 [agents.reviewer]\nsystem_prompt = \"Review.\"\nensembles = [\"fs\"]\n\
                 [agents.reviewer.output_schema]\ntype = \"object\"\nrequired = [\"verdict\"]\n\
                 [agents.reviewer.output_schema.properties.verdict]\ntype = \"string\"\n",
            ),
            &[],
        )
        .expect("loads");
        assert_eq!(config.store.path, dir.path().join("data/events.db"));
        assert_eq!(config.default_agent, "reviewer");
        assert!(config.agents.contains_key("reviewer"));
    }

    #[test]
    fn rate_limits_are_in_memory_unless_a_redis_is_named() {
        use agentplane_redis::OnUnavailable;

        let dir = tempfile::tempdir().expect("tempdir");
        let config = load(dir.path(), None, &[]).expect("loads");
        assert_eq!(config.rate_limits.redis, None);

        let config = load(
            dir.path(),
            Some(
                "[rate_limits]\nredis = \"redis://:file-pw@127.0.0.1:6379/2\"\n\
                 on_unavailable = \"local\"\ntimeout_ms = 250\n",
            ),
            &[],
        )
        .expect("loads");
        let redis = config.rate_limits.redis.clone().expect("redis");
        assert_eq!(redis.url, "redis://:file-pw@127.0.0.1:6379/2");
        assert_eq!(redis.on_unavailable, OnUnavailable::Local);
        assert_eq!(redis.timeout, Duration::from_millis(250));
        // The password never shows in the configuration's debug form (logs, errors).
        assert!(!format!("{config:?}").contains("file-pw"));

        // The variable wins over the file, and fail-closed is the default.
        let config = load(
            dir.path(),
            Some("[rate_limits]\nredis = \"redis://127.0.0.1:1/\"\n"),
            &[("AGENTPLANE_REDIS_URL", "redis://127.0.0.1:8694/")],
        )
        .expect("loads");
        let redis = config.rate_limits.redis.expect("redis");
        assert_eq!(redis.url, "redis://127.0.0.1:8694/");
        assert_eq!(redis.on_unavailable, OnUnavailable::Refuse);
    }

    #[test]
    fn bad_rate_limit_settings_are_refused_without_echoing_the_url() {
        let dir = tempfile::tempdir().expect("tempdir");
        for (text, vars, expected) in [
            (
                "[rate_limits]\nredis = \"http://:pw-in-url@127.0.0.1/\"\n",
                &[][..],
                "`rate_limits.redis`",
            ),
            (
                "",
                &[("AGENTPLANE_REDIS_URL", "rediss://:pw-in-url@h/")][..],
                "AGENTPLANE_REDIS_URL",
            ),
            (
                "[rate_limits]\nredis = \"redis://h/\"\non_unavailable = \"allow\"\n",
                &[][..],
                "`rate_limits.on_unavailable`",
            ),
            (
                "[rate_limits]\nredis = \"redis://h/\"\ntimeout_ms = 0\n",
                &[][..],
                "`rate_limits.timeout_ms`",
            ),
            (
                "[rate_limits]\non_unavailable = \"local\"\n",
                &[][..],
                "`rate_limits.redis`",
            ),
            (
                "[rate_limits]\nredis_url = \"redis://h/\"\n",
                &[][..],
                "redis_url",
            ),
        ] {
            let err = load(dir.path(), Some(text), vars).expect_err(text);
            let shown = err.to_string();
            assert!(shown.contains(expected), "{text}: {shown}");
            assert!(!shown.contains("pw-in-url"), "{shown}");
        }
    }
}
