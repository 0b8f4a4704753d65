//! The one configuration loader: `agentplane.toml`, then environment overrides.
//!
//! Where the file comes from, in order: `--config PATH`, `AGENTPLANE_CONFIG`, then
//! `agentplane.toml` in the current directory if present; with none, every setting has
//! its default, which targets a local Ollama. Unknown keys and bad values are load
//! errors naming the key and the file (or the variable), never silently ignored.
//! Secrets (the API key) are held here but never printed: `Debug` redacts them.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agentplane_engine::context::ContextBudget;
use agentplane_engine::gateway::GatewayConfig;
use agentplane_engine::governance::{ArgsRetention, PriceTable};
use serde::Deserialize;

use crate::settings;

mod agent;

use crate::settings::cluster::{ClusterConfig, DatabaseUrl, FileCluster, Location};
use crate::settings::executions::{self, ExecutionsConfig, FileExecutions};
use crate::settings::gateway::FileGateway;
use crate::settings::governance::{self, FileApprovals, FileRetention};
use crate::settings::policies::{FilePolicies, PoliciesConfig};
use crate::settings::prices::{self, FilePrice};
use crate::settings::providers::{
    self as provider_settings, FileProvider, FileRouting, ProvidersConfig,
};
use crate::settings::rate_limits::{self, FileRateLimits, RateLimitsConfig};
use crate::settings::secrets::{self, FileSecret, SecretsConfig};
use crate::settings::server_limits::{FileServerLimits, ServerLimits};
use crate::settings::versions::{self as version_settings, FileVersions};
pub use agent::{AgentConfig, McpServerConfig, NetworkConfig};
use agent::{check_agent, check_mcp_server};

/// Whether a model server URL names this machine (`127.0.0.1`, `::1`, `localhost`):
/// the servers `[llm] ensure_available` starts by default.
fn is_loopback_url(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let host = rest.split(['/', '?']).next().unwrap_or_default();
    let host = host.rsplit_once('@').map_or(host, |(_, host)| host);
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.split(':').next().unwrap_or_default(),
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The file name looked for in the current directory.
pub const CONFIG_FILE_NAME: &str = "agentplane.toml";

/// Defaults: Ollama's OpenAI-compatible endpoint and a tool-capable model it offers.
pub const DEFAULT_LLM_BASE_URL: &str = "http://127.0.0.1:11434/v1";
pub const DEFAULT_LLM_MODEL: &str = "qwen2.5:7b";

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
    /// `[policies]`.
    pub policies: PoliciesConfig,
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
    pub oidc: Option<crate::settings::auth::OidcConfig>,
    /// `[rate_limits]`: in memory, or shared in Redis.
    pub rate_limits: RateLimitsConfig,
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
            .field("policies", &self.policies)
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
            .finish()
    }
}

/// The model server.
#[derive(Clone, PartialEq)]
pub struct LlmConfig {
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub stream: bool,
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    pub max_retries: u32,
    /// Start the model server when it does not answer (ADR 0033); default on for a
    /// loopback URL.
    pub ensure_available: bool,
    /// What to start: program and arguments (empty: `ollama serve` for Ollama's URL
    /// when `ollama` is on `PATH`, else nothing).
    pub start_command: Vec<String>,
    /// How long a started server has to answer.
    pub start_timeout: Duration,
}

impl fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("stream", &self.stream)
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("max_retries", &self.max_retries)
            .field("ensure_available", &self.ensure_available)
            .field("start_command", &self.start_command)
            .field("start_timeout", &self.start_timeout)
            .finish()
    }
}

/// `agentplane serve`.
#[derive(Clone, PartialEq)]
pub struct ServerConfig {
    /// The address to listen on; loopback unless `allow_public`.
    pub listen: String,
    /// Bearer token required on `/v1/*` (`AGENTPLANE_AUTH_TOKEN`).
    pub auth_token: Option<String>,
    pub allow_public: bool,
    /// How long a turn waits for a permission decision before declining.
    pub permission_timeout: Duration,
    /// How long shutdown lets running turns finish before cancelling them.
    pub shutdown_grace: Duration,
    /// Browser origins `/mcp` accepts besides loopback ones, as written (the server
    /// parses them when it starts).
    pub allowed_origins: Vec<String>,
    /// Connection timeouts and caps, event stream caps.
    pub limits: ServerLimits,
    /// Absolute directories that outside callers' workspaces must lie in (ADR 0031);
    /// `None`: `serve` on loopback uses the directory it started in.
    pub workspace_roots: Option<Vec<PathBuf>>,
}

impl fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerConfig")
            .field("listen", &self.listen)
            .field(
                "auth_token",
                &self.auth_token.as_ref().map(|_| "<redacted>"),
            )
            .field("allow_public", &self.allow_public)
            .field("permission_timeout", &self.permission_timeout)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("allowed_origins", &self.allowed_origins)
            .field("limits", &self.limits)
            .field("workspace_roots", &self.workspace_roots)
            .finish()
    }
}

/// The default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8686";

/// Where events are stored: the SQLite file (the default), or a PostgreSQL database
/// several replicas share.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreConfig {
    /// The SQLite file; with PostgreSQL, still where executions' working directories
    /// go (beside it).
    pub path: PathBuf,
    /// `Some`: the store is this PostgreSQL database, not the file.
    pub postgres: Option<DatabaseUrl>,
}

impl StoreConfig {
    /// Selects the store a `--db` value names (a path, `sqlite:PATH` or `postgres://…`).
    pub fn select(&mut self, value: &str) -> Result<(), String> {
        match crate::settings::cluster::location(value)? {
            Location::Sqlite(path) => {
                self.path = path;
                self.postgres = None;
            }
            Location::Postgres(url) => self.postgres = Some(url),
        }
        Ok(())
    }

    /// The store for people: the file's path, or the URL without its password.
    pub fn describe(&self) -> String {
        match &self.postgres {
            Some(url) => url.redacted(),
            None => self.path.display().to_string(),
        }
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
    prices: BTreeMap<String, FilePrice>,
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
    auth: crate::settings::auth::FileAuth,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileMcp {
    #[serde(default)]
    servers: BTreeMap<String, McpServerConfig>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileServer {
    listen: Option<String>,
    auth_token: Option<String>,
    allow_public: Option<bool>,
    permission_timeout_secs: Option<u64>,
    shutdown_grace_secs: Option<u64>,
    allowed_origins: Option<Vec<String>>,
    header_read_timeout_secs: Option<u64>,
    idle_timeout_secs: Option<u64>,
    max_connections: Option<usize>,
    max_connections_per_address: Option<usize>,
    max_sse_followers: Option<usize>,
    max_sse_followers_per_client: Option<usize>,
    max_sse_followers_per_address: Option<usize>,
    workspace_roots: Option<Vec<PathBuf>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileContext {
    max_chars: Option<usize>,
    recent_turns: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLlm {
    base_url: Option<String>,
    model: Option<String>,
    api_key: Option<String>,
    stream: Option<bool>,
    request_timeout_secs: Option<u64>,
    connect_timeout_secs: Option<u64>,
    max_retries: Option<u32>,
    ensure_available: Option<bool>,
    start_command: Option<Vec<String>>,
    start_timeout_secs: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileStore {
    path: Option<PathBuf>,
    url: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRun {
    default_agent: Option<String>,
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
    /// Loads the configuration from the process environment and current directory.
    pub fn load(explicit: Option<&Path>) -> Result<Self, ConfigError> {
        let cwd = std::env::current_dir()
            .map_err(|e| ConfigError::new("current directory", e.to_string()))?;
        let env = crate::environment::var;
        Self::load_from(&ConfigSource {
            explicit,
            cwd: &cwd,
            env: &env,
        })
    }

    /// Loads the configuration from the given sources.
    pub fn load_from(source: &ConfigSource<'_>) -> Result<Self, ConfigError> {
        let env = |name: &str| (source.env)(name).filter(|v| !v.is_empty());
        let file = match (source.explicit, env("AGENTPLANE_CONFIG")) {
            (Some(path), _) => Some(path.to_path_buf()),
            (None, Some(path)) => Some(PathBuf::from(path)),
            (None, None) => {
                let local = source.cwd.join(CONFIG_FILE_NAME);
                local.is_file().then_some(local)
            }
        };
        let parsed = match &file {
            Some(path) => read_file(path)?,
            None => FileConfig::default(),
        };
        let file_name = file
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "defaults".to_owned());
        let in_file = |key: &str, message: String| {
            ConfigError::new(file_name.clone(), format!("`{key}`: {message}"))
        };

        let llm_server = (parsed.llm.base_url.is_some(), parsed.llm.api_key.is_some());
        let base_url = match env("AGENTPLANE_LLM_BASE_URL") {
            Some(url) => {
                check_base_url(&url).map_err(|m| ConfigError::new("AGENTPLANE_LLM_BASE_URL", m))?
            }
            None => match parsed.llm.base_url {
                Some(url) => check_base_url(&url).map_err(|m| in_file("llm.base_url", m))?,
                None => DEFAULT_LLM_BASE_URL.to_owned(),
            },
        };
        let model = env("AGENTPLANE_LLM_MODEL")
            .or(parsed.llm.model)
            .unwrap_or_else(|| DEFAULT_LLM_MODEL.to_owned());
        let api_key =
            env("AGENTPLANE_LLM_API_KEY").or(parsed.llm.api_key.filter(|k| !k.is_empty()));
        let request_timeout_secs = parsed.llm.request_timeout_secs.unwrap_or(300);
        if request_timeout_secs == 0 {
            return Err(in_file(
                "llm.request_timeout_secs",
                "must be at least 1".into(),
            ));
        }
        let connect_timeout_secs = parsed.llm.connect_timeout_secs.unwrap_or(5);
        if connect_timeout_secs == 0 {
            return Err(in_file(
                "llm.connect_timeout_secs",
                "must be at least 1".into(),
            ));
        }
        let max_retries = parsed.llm.max_retries.unwrap_or(3);
        if max_retries > 10 {
            return Err(in_file("llm.max_retries", "must be at most 10".into()));
        }
        let start_command = parsed.llm.start_command.unwrap_or_default();
        if start_command.first().is_some_and(|p| p.trim().is_empty()) {
            return Err(in_file(
                "llm.start_command",
                "the program (first item) must not be empty".into(),
            ));
        }
        let start_timeout_secs = parsed.llm.start_timeout_secs.unwrap_or(300);
        if start_timeout_secs == 0 {
            return Err(in_file(
                "llm.start_timeout_secs",
                "must be at least 1".into(),
            ));
        }
        let ensure_available = parsed
            .llm
            .ensure_available
            .unwrap_or_else(|| is_loopback_url(&base_url));

        let store_path = match parsed.store.path {
            Some(path) if path.as_os_str().is_empty() => {
                return Err(in_file("store.path", "must not be empty".into()));
            }
            Some(path) => relative_to_file(file.as_deref(), path),
            None => default_db_path(source.env),
        };
        let mut store = StoreConfig {
            path: store_path,
            postgres: None,
        };
        if let Some(url) = &parsed.store.url {
            match settings::cluster::location(url).map_err(|m| in_file("store.url", m))? {
                Location::Sqlite(path) => store.path = relative_to_file(file.as_deref(), path),
                Location::Postgres(url) => store.postgres = Some(url),
            }
        }
        if let Some(db) = env("AGENTPLANE_DB") {
            store.select(&db).map_err(|m| ConfigError {
                source_name: "AGENTPLANE_DB".into(),
                message: m,
            })?;
        }
        let cluster = settings::cluster::resolve(parsed.cluster)
            .map_err(|(key, m)| in_file(&format!("cluster.{key}"), m))?;
        let oidc = settings::auth::resolve(parsed.auth)
            .map_err(|(key, m)| in_file(&format!("auth.{key}"), m))?;

        let server = &parsed.server;
        let listen = env("AGENTPLANE_LISTEN")
            .or(server.listen.clone())
            .unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
        if listen.parse::<std::net::SocketAddr>().is_err() {
            return Err(in_file(
                "server.listen",
                format!("must be an address such as 127.0.0.1:8686, got {listen:?}"),
            ));
        }
        let workspace_roots = server.workspace_roots.clone();
        if let Some(root) = workspace_roots
            .iter()
            .flatten()
            .find(|root| !root.is_absolute())
        {
            return Err(in_file(
                "server.workspace_roots",
                format!(
                    "every root must be an absolute directory, got {}",
                    root.display()
                ),
            ));
        }
        let permission_timeout_secs = server.permission_timeout_secs.unwrap_or(300);
        if permission_timeout_secs == 0 {
            return Err(in_file(
                "server.permission_timeout_secs",
                "must be at least 1".into(),
            ));
        }
        let limits = FileServerLimits {
            header_read_timeout_secs: server.header_read_timeout_secs,
            idle_timeout_secs: server.idle_timeout_secs,
            max_connections: server.max_connections,
            max_connections_per_address: server.max_connections_per_address,
            max_sse_followers: server.max_sse_followers,
            max_sse_followers_per_client: server.max_sse_followers_per_client,
            max_sse_followers_per_address: server.max_sse_followers_per_address,
        }
        .resolve()
        .map_err(|(key, m)| in_file(&format!("server.{key}"), m))?;
        let defaults = ContextBudget::default();
        let context = ContextBudget {
            max_chars: parsed.context.max_chars.unwrap_or(defaults.max_chars),
            recent_turns: parsed.context.recent_turns.unwrap_or(defaults.recent_turns),
        };
        if context.max_chars < 1_000 {
            return Err(in_file("context.max_chars", "must be at least 1000".into()));
        }

        let mut mcp_servers = parsed.mcp.servers;
        for (name, server) in &mut mcp_servers {
            check_mcp_server(name, server)
                .map_err(|(key, m)| in_file(&format!("mcp.servers.{name}.{key}"), m))?;
            if let Some(cwd) = server.cwd.take() {
                server.cwd = Some(relative_to_file(file.as_deref(), cwd));
            }
        }
        for (name, agent) in &parsed.agents {
            check_agent(name, agent, &mcp_servers)
                .map_err(|(key, m)| in_file(&format!("agents.{name}.{key}"), m))?;
        }
        let relative = |path: PathBuf| relative_to_file(file.as_deref(), path);
        let policies = parsed
            .policies
            .resolve(&relative)
            .map_err(|(key, m)| in_file(&format!("policies.{key}"), m))?;
        let prices = prices::resolve(parsed.prices)
            .map_err(|(key, m)| in_file(&format!("prices.{key}"), m))?;
        let secrets = secrets::resolve(parsed.secrets)
            .map_err(|(key, m)| in_file(&format!("secrets.{key}"), m))?;
        // Every `${secret:NAME}` in an MCP server's env or headers names a known secret.
        secrets::mcp_references(&mcp_servers, &secrets).map_err(|(key, m)| in_file(&key, m))?;
        let approval_ttl = governance::approval_ttl(&parsed.approvals)
            .map_err(|(key, m)| in_file(&format!("approvals.{key}"), m))?;
        let tool_args = governance::args_retention(&parsed.retention)
            .map_err(|(key, m)| in_file(&format!("retention.{key}"), m))?;
        let executions = executions::resolve(parsed.executions, &secrets)
            .map_err(|(key, m)| in_file(&format!("executions.{key}"), m))?;
        let providers =
            provider_settings::resolve(parsed.providers, parsed.routing, &secrets, &check_base_url)
                .map_err(|(key, m)| in_file(&key, m))?;
        if providers.is_configured() {
            // The file's `[llm]` server settings would be silently unused: refuse them.
            for (key, set) in [
                ("llm.base_url", llm_server.0),
                ("llm.api_key", llm_server.1),
            ] {
                if set {
                    return Err(in_file(
                        key,
                        "is not used when [providers] are configured; set it on a provider".into(),
                    ));
                }
            }
        }
        let version_admins = version_settings::admins(&parsed.versions)
            .map_err(|(key, m)| in_file(&format!("versions.{key}"), m))?;
        let gateway = parsed
            .gateway
            .resolve()
            .map_err(|(key, m)| in_file(&format!("gateway.{key}"), m))?;
        let rate_limits = rate_limits::resolve(parsed.rate_limits, env("AGENTPLANE_REDIS_URL"))
            .map_err(|(key, m)| match key.as_str() {
                "AGENTPLANE_REDIS_URL" => ConfigError::new(key, m),
                _ => in_file(&format!("rate_limits.{key}"), m),
            })?;
        let default_agent = parsed
            .run
            .default_agent
            .unwrap_or_else(|| "engineering".to_owned());

        Ok(Self {
            file,
            llm: LlmConfig {
                base_url,
                model,
                api_key,
                stream: parsed.llm.stream.unwrap_or(true),
                request_timeout: Duration::from_secs(request_timeout_secs),
                connect_timeout: Duration::from_secs(connect_timeout_secs),
                max_retries,
                ensure_available,
                start_command,
                start_timeout: Duration::from_secs(start_timeout_secs),
            },
            store,
            server: ServerConfig {
                listen,
                auth_token: env("AGENTPLANE_AUTH_TOKEN")
                    .or(server.auth_token.clone().filter(|t| !t.is_empty())),
                allow_public: server.allow_public.unwrap_or(false),
                permission_timeout: Duration::from_secs(permission_timeout_secs),
                shutdown_grace: Duration::from_secs(server.shutdown_grace_secs.unwrap_or(30)),
                allowed_origins: server.allowed_origins.clone().unwrap_or_default(),
                limits,
                workspace_roots,
            },
            context,
            default_agent,
            agents: parsed.agents,
            mcp_servers,
            policies,
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
        })
    }
}

fn read_file(path: &Path) -> Result<FileConfig, ConfigError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new(name.clone(), format!("cannot read the file: {e}")))?;
    toml::from_str(&text).map_err(|e| ConfigError::new(name, e.to_string().trim_end().to_owned()))
}

pub(crate) fn check_base_url(url: &str) -> Result<String, String> {
    let trimmed = url.trim().trim_end_matches('/');
    let rest = trimmed
        .strip_prefix("http://")
        .or_else(|| trimmed.strip_prefix("https://"))
        .ok_or_else(|| format!("must be an http:// or https:// URL, got {url:?}"))?;
    if rest.is_empty() || rest.starts_with('/') || rest.chars().any(char::is_whitespace) {
        return Err(format!("must name a host, got {url:?}"));
    }
    Ok(trimmed.to_owned())
}

fn relative_to_file(file: Option<&Path>, path: PathBuf) -> PathBuf {
    match file.and_then(Path::parent) {
        Some(dir) if path.is_relative() => dir.join(path),
        _ => path,
    }
}

/// `$XDG_DATA_HOME/agentplane/agentplane.db`, else `~/.local/share/…`, else `./`.
fn default_db_path(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    let data = env("XDG_DATA_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            env("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".local").join("share"))
        });
    match data {
        Some(dir) => dir.join("agentplane").join("agentplane.db"),
        None => PathBuf::from("agentplane.db"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ensure_available_defaults_to_loopback_urls_only() {
        for url in [
            "http://127.0.0.1:11434/v1",
            "http://localhost:8080/v1",
            "http://[::1]:1/v1",
            "http://user:pw@127.0.0.2/v1",
        ] {
            assert!(is_loopback_url(url), "{url}");
        }
        for url in [
            "https://api.openai.com/v1",
            "http://10.0.0.1:11434/v1",
            "http://localhost.example.com/v1",
            "http://127.0.0.1.nip.io/v1",
        ] {
            assert!(!is_loopback_url(url), "{url}");
        }
    }

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
        assert_eq!(config.llm.base_url, DEFAULT_LLM_BASE_URL);
        assert_eq!(config.llm.model, DEFAULT_LLM_MODEL);
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
