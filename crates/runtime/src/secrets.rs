//! Secrets at run time: their values, read once at start-up from the environment or
//! files; the redactor that keeps them out of events, logs and errors; and the gate
//! that hands a secret to an MCP server only for agents whose `data_scope` grants it.
//!
//! MCP servers get secrets by reference: `${secret:NAME}` in an `env` or `headers`
//! value is replaced with the value when the runtime builds the server specs. Whether
//! an agent may start such a server is decided per turn ([`McpSecretGate`]), against
//! the policy set in force then, and fails closed: no policy granting every secret the
//! server needs, no server. Builtin tools never get secrets (their environment is
//! scrubbed by `process.rs`). What must not live here: the redaction algorithm (core's
//! `secret` module) and policy evaluation (the engine's `policy` module).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use agentplane_core::secret::Redactor;
use agentplane_core::{AgentSpec, ThreadId, ToolErrorKind, ToolSpec};
use agentplane_engine::governance::ActivePolicies;
use agentplane_engine::governance::rules::{RequestContext, data_scopes};
use agentplane_engine::ports::{Ensemble, ToolContext, ToolError, ToolOutput};
use agentplane_tools::mcp::{McpServerSpec, McpServers, McpTransport};
use async_trait::async_trait;

use crate::config::{Config, ConfigError};
use crate::settings::secrets::{self, REFERENCE_OPEN, SecretSource, SecretsConfig};

/// The values of the configured secrets, by name. Never printed: `Debug` shows names.
pub struct Secrets {
    values: BTreeMap<String, String>,
    redactor: Redactor,
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Secrets")
            .field("names", &self.values.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Secrets {
    /// Reads every configured secret from the process environment and the files
    /// (relative paths from the configuration file's directory). The redactor also
    /// covers the model API key and the server's auth token when set.
    pub fn load(config: &Config) -> Result<Self, ConfigError> {
        let env = crate::environment::var;
        let mut others = Vec::new();
        if let Some(key) = &config.llm.api_key {
            others.push(("llm.api_key", key.as_str()));
        }
        if let Some(token) = &config.server.auth_token {
            others.push(("server.auth_token", token.as_str()));
        }
        Self::load_from(
            &config.secrets,
            config.file.as_deref().and_then(Path::parent),
            &env,
            &others,
        )
    }

    /// Reads the secrets of `config` with `env` for variables and `base` for relative
    /// file paths. `others` are credentials held elsewhere (the model API key) that the
    /// redactor covers too, when long enough to redact. A missing, empty or unreadable
    /// source is an error naming the secret and the source, never a value.
    pub fn load_from(
        config: &SecretsConfig,
        base: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
        others: &[(&str, &str)],
    ) -> Result<Self, ConfigError> {
        let mut values = BTreeMap::new();
        for (name, source) in &config.sources {
            let error = |message: String| ConfigError {
                source_name: format!("secret `{name}`"),
                message,
            };
            let value = match source {
                SecretSource::Env(var) => match env(var) {
                    Some(value) if !value.is_empty() => value,
                    Some(_) => return Err(error(format!("environment variable {var} is empty"))),
                    None => return Err(error(format!("environment variable {var} is not set"))),
                },
                SecretSource::File(path) => {
                    let path = match base {
                        Some(dir) if path.is_relative() => dir.join(path),
                        _ => path.clone(),
                    };
                    read_secret_file(name, &path).map_err(error)?
                }
            };
            values.insert(name.clone(), value);
        }
        let redactor = Redactor::new(
            values
                .iter()
                .map(|(name, value)| (name.clone(), value.as_str()))
                .chain(
                    others
                        .iter()
                        .filter(|(_, value)| value.len() >= agentplane_core::secret::MIN_SECRET_LEN)
                        .map(|(name, value)| ((*name).to_owned(), *value)),
                ),
        )
        .map_err(|e| ConfigError {
            source_name: format!("secret `{}`", e.name),
            message: e.message,
        })?;
        Ok(Self { values, redactor })
    }

    /// A secret's value, if configured.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// The redactor covering every secret value (and the model API key).
    pub fn redactor(&self) -> Redactor {
        self.redactor.clone()
    }
}

/// A secret file's content without one trailing newline. Warns (by path, never
/// content) when the file can be read by group or others.
fn read_secret_file(name: &str, path: &Path) -> Result<String, String> {
    let content = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {}", path.display(), e.kind()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path)
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(
                secret = name,
                path = %path.display(),
                "the secret's file is readable by group or others; `chmod 600` it"
            );
        }
    }
    let value = content
        .strip_suffix("\r\n")
        .or_else(|| content.strip_suffix('\n'))
        .unwrap_or(&content);
    if value.is_empty() {
        return Err(format!("{} is empty", path.display()));
    }
    Ok(value.to_owned())
}

/// `spec` with every `${secret:NAME}` in its `env` and `headers` values and its OAuth
/// client secret replaced by the secret's value. An unknown name is an error naming it (config loading refuses those
/// already, so this is a second line).
pub fn resolve_mcp_spec(spec: &McpServerSpec, secrets: &Secrets) -> Result<McpServerSpec, String> {
    let mut resolved = spec.clone();
    let values: Vec<(String, &mut String)> = match &mut resolved.transport {
        McpTransport::Stdio { env, .. } => env.iter_mut().map(|(k, v)| (k.clone(), v)).collect(),
        McpTransport::Http { headers, oauth, .. } => headers
            .iter_mut()
            .map(|(k, v)| (k.clone(), v))
            .chain(
                oauth
                    .as_mut()
                    .map(|oauth| ("oauth.client_secret".to_owned(), &mut oauth.client_secret)),
            )
            .collect(),
    };
    for (key, value) in values {
        if !value.contains(REFERENCE_OPEN) {
            continue;
        }
        let mut text = value.clone();
        for name in secrets::references(value)
            .map_err(|m| format!("MCP server `{}`, `{key}`: {m}", spec.name))?
        {
            let secret = secrets.get(name).ok_or_else(|| {
                format!(
                    "MCP server `{}`, `{key}`: unknown secret `{name}`",
                    spec.name
                )
            })?;
            text = text.replacen(&format!("{REFERENCE_OPEN}{name}}}"), secret, 1);
        }
        *value = text;
    }
    Ok(resolved)
}

/// [`resolve_mcp_spec`] over every server: what the runtime hands to `McpServers`.
pub fn resolve_mcp_specs(
    specs: Vec<McpServerSpec>,
    secrets: &Secrets,
) -> Result<Vec<McpServerSpec>, ConfigError> {
    specs
        .iter()
        .map(|spec| resolve_mcp_spec(spec, secrets))
        .collect::<Result<_, _>>()
        .map_err(|message| ConfigError {
            source_name: "secrets".to_owned(),
            message,
        })
}

/// Decides per turn whether an agent may start an MCP server that needs secrets: every
/// secret the server refers to must be granted by a `data_scope` policy selecting the
/// agent (its `secrets` patterns). Fails closed: with no such policy, no server.
pub struct McpSecretGate {
    /// The secrets each server refers to; servers needing none are absent.
    needs: BTreeMap<String, BTreeSet<String>>,
    policies: Arc<ActivePolicies>,
}

impl McpSecretGate {
    /// The gate for the configured servers against the live policy set. A reference to
    /// an unknown secret is a configuration error naming the key.
    pub fn new(config: &Config, policies: Arc<ActivePolicies>) -> Result<Self, ConfigError> {
        let needs = crate::settings::mcp::secret_references(&config.mcp_servers, &config.secrets)
            .map_err(|(key, message)| ConfigError {
            source_name: config
                .file
                .as_ref()
                .map_or_else(|| "defaults".to_owned(), |f| f.display().to_string()),
            message: format!("`{key}`: {message}"),
        })?;
        Ok(Self { needs, policies })
    }

    /// Whether `agent` may start `server` now; the error says which secret is missing.
    pub fn check(&self, agent: &AgentSpec, client: &str, server: &str) -> Result<(), String> {
        self.check_scope(&agent.name, &agent.tags, client, server)
    }

    /// Whether calls under the agent name `agent` with `tags` (an agent's, or the MCP
    /// gateway's) for `client` may use `server` now.
    pub fn check_scope(
        &self,
        agent: &str,
        tags: &[String],
        client: &str,
        server: &str,
    ) -> Result<(), String> {
        let Some(needed) = self.needs.get(server) else {
            return Ok(());
        };
        let set = self.policies.current();
        let request = RequestContext::new(agent, tags, client);
        let scopes = data_scopes(&set, &request);
        for secret in needed {
            let granted = scopes
                .iter()
                .any(|(_, scope)| scope.secrets.iter().any(|glob| glob.matches(secret)));
            if !granted {
                return Err(format!(
                    "agent `{agent}` may not use secret `{secret}` needed by MCP server \
                     `{server}`: no data_scope policy grants it"
                ));
            }
        }
        Ok(())
    }

    /// The ensemble of `server` for a turn of `thread`, or one that refuses to open
    /// when the agent may not have the server's secrets; `None` for an unknown server.
    pub fn ensemble(
        &self,
        mcp: &McpServers,
        agent: &AgentSpec,
        client: &str,
        server: &str,
        thread: &ThreadId,
    ) -> Option<Arc<dyn Ensemble>> {
        let ensemble = mcp.ensemble(server, thread)?;
        match self.check(agent, client, server) {
            Ok(()) => Some(ensemble),
            Err(reason) => Some(Arc::new(RefusedEnsemble {
                name: server.to_owned(),
                reason,
            })),
        }
    }
}

/// An MCP server the agent may not start: opening it fails with the reason, which
/// fails the turn before any tool runs.
struct RefusedEnsemble {
    name: String,
    reason: String,
}

#[async_trait]
impl Ensemble for RefusedEnsemble {
    fn name(&self) -> &str {
        &self.name
    }

    async fn open(&self) -> Result<(), ToolError> {
        Err(ToolError::violation(
            ToolErrorKind::PolicyDenied,
            "data_scope_denied",
            self.reason.clone(),
        ))
    }

    fn tools(&self) -> Vec<ToolSpec> {
        Vec::new()
    }

    async fn call(
        &self,
        _tool: &str,
        _args: serde_json::Value,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        Err(ToolError::new(
            ToolErrorKind::PolicyDenied,
            self.reason.clone(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use agentplane_core::policy::{PolicySet, PolicySource};

    use super::*;
    use crate::config::ConfigSource;

    fn config_dir(config: &Config) -> Option<PathBuf> {
        config
            .file
            .as_deref()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
    }

    const VALUE: &str = "tok-Zq81-distinctive";

    fn load_config(dir: &Path, text: &str) -> Result<Config, ConfigError> {
        let path = dir.join("agentplane.toml");
        std::fs::write(&path, text).expect("write config");
        let env = |_: &str| None;
        Config::load_from(&ConfigSource {
            explicit: Some(&path),
            cwd: dir,
            env: &env,
        })
    }

    fn env_with(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn environment_secrets_load_and_debug_shows_names_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config =
            load_config(dir.path(), "[secrets.api_token]\nenv = \"TOKEN_VAR\"\n").expect("config");
        let secrets = Secrets::load_from(
            &config.secrets,
            None,
            &env_with(&[("TOKEN_VAR", VALUE)]),
            &[],
        )
        .expect("loads");
        assert_eq!(secrets.get("api_token"), Some(VALUE));
        assert_eq!(secrets.get("other"), None);
        let shown = format!("{secrets:?}");
        assert!(shown.contains("api_token") && !shown.contains(VALUE));
        assert_eq!(
            secrets.redactor().redact(&format!("x{VALUE}x")),
            "x[REDACTED:api_token]x"
        );
    }

    #[test]
    fn missing_or_empty_sources_name_the_secret() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config =
            load_config(dir.path(), "[secrets.api_token]\nenv = \"TOKEN_VAR\"\n").expect("config");
        for vars in [&[][..], &[("TOKEN_VAR", "")][..]] {
            let vars: Vec<(String, String)> = vars
                .iter()
                .map(|(k, v): &(&str, &str)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            let env =
                move |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
            let err = Secrets::load_from(&config.secrets, None, &env, &[]).expect_err("missing");
            assert!(err.to_string().contains("secret `api_token`"), "{err}");
            assert!(err.to_string().contains("TOKEN_VAR"), "{err}");
        }
        let err = Secrets::load_from(
            &config.secrets,
            None,
            &env_with(&[("TOKEN_VAR", "abc")]),
            &[],
        )
        .expect_err("too short");
        assert!(err.to_string().contains("api_token") && !err.to_string().contains("abc"));
    }

    #[test]
    fn file_secrets_lose_one_newline_and_resolve_relative_to_the_config() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("tok.txt"), format!("{VALUE}\n\n")).expect("write");
        std::fs::write(dir.path().join("crlf.txt"), format!("{VALUE}\r\n")).expect("write");
        std::fs::write(dir.path().join("empty.txt"), "\n").expect("write");
        let config = load_config(
            dir.path(),
            "[secrets.a]\nfile = \"tok.txt\"\n[secrets.b]\nfile = \"crlf.txt\"\n",
        )
        .expect("config");
        let secrets = Secrets::load_from(
            &config.secrets,
            config_dir(&config).as_deref(),
            &|_| None,
            &[],
        )
        .expect("loads");
        assert_eq!(secrets.get("a"), Some(format!("{VALUE}\n").as_str()));
        assert_eq!(secrets.get("b"), Some(VALUE));

        for (file, wanted) in [("empty.txt", "is empty"), ("absent.txt", "cannot read")] {
            let config = load_config(dir.path(), &format!("[secrets.c]\nfile = \"{file}\"\n"))
                .expect("config");
            let err = Secrets::load_from(
                &config.secrets,
                config_dir(&config).as_deref(),
                &|_| None,
                &[],
            )
            .expect_err(file);
            assert!(
                err.to_string().contains("secret `c`") && err.to_string().contains(wanted),
                "{err}"
            );
        }
    }

    #[test]
    fn other_credentials_are_redacted_when_long_enough() {
        let secrets = Secrets::load_from(
            &SecretsConfig::default(),
            None,
            &|_| None,
            &[("llm.api_key", "sk-live-123"), ("server.auth_token", "ab")],
        )
        .expect("loads");
        assert_eq!(
            secrets.redactor().redact("sk-live-123 ab"),
            "[REDACTED:llm.api_key] ab"
        );
    }

    fn mcp_config(dir: &Path, policies: &str) -> (Config, Arc<ActivePolicies>) {
        let config = load_config(dir,
            "[secrets.api_token]\nenv = \"TOKEN_VAR\"\n\
             [mcp.servers.tools]\ncommand = \"node\"\nenv = { TOKEN = \"Bearer ${secret:api_token}\", PLAIN = \"p\" }\n\
             [mcp.servers.free]\ncommand = \"node\"\n\
             [agents.a]\nsystem_prompt = \"x\"\nensembles = [\"tools\", \"free\"]\ntags = [\"trusted\"]\n\
             [agents.b]\nsystem_prompt = \"x\"\nensembles = [\"tools\"]\n",
        )
        .expect("config");
        let set = PolicySet::parse(&[PolicySource {
            name: "p.yaml",
            text: policies,
        }]);
        let policies = Arc::new(ActivePolicies::new(
            set.expect("policies"),
            None,
            "now".into(),
        ));
        (config, policies)
    }

    fn agent(config: &Config, name: &str) -> AgentSpec {
        crate::agents::catalogue(config)
            .remove(name)
            .expect("configured agent")
    }

    #[test]
    fn the_gate_grants_only_what_a_data_scope_names() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (config, policies) = mcp_config(
            dir.path(),
            "name: trusted-secrets\ntype: data_scope\ntargets: {tags: [trusted]}\nrules: {secrets: [api_*]}\n",
        );
        let gate = McpSecretGate::new(&config, policies).expect("gate");
        assert_eq!(gate.check(&agent(&config, "a"), "c1", "tools"), Ok(()));
        assert_eq!(gate.check(&agent(&config, "a"), "c1", "free"), Ok(()));
        let err = gate
            .check(&agent(&config, "b"), "c1", "tools")
            .expect_err("no grant");
        assert_eq!(
            err,
            "agent `b` may not use secret `api_token` needed by MCP server `tools`: no \
             data_scope policy grants it"
        );
    }

    #[test]
    fn a_scope_without_the_secret_does_not_grant_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (config, policies) = mcp_config(
            dir.path(),
            "name: paths-only\ntype: data_scope\nrules: {paths: ['/tmp/*'], secrets: [other]}\n",
        );
        let gate = McpSecretGate::new(&config, policies).expect("gate");
        assert!(gate.check(&agent(&config, "a"), "c1", "tools").is_err());
    }

    #[test]
    fn specs_get_values_in_place_of_references() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (config, _) = mcp_config(dir.path(), "[]\n");
        let secrets = Secrets::load_from(
            &config.secrets,
            None,
            &env_with(&[("TOKEN_VAR", VALUE)]),
            &[],
        )
        .expect("loads");
        let specs = resolve_mcp_specs(crate::mcp_specs(&config), &secrets).expect("resolves");
        let tools = specs.iter().find(|s| s.name == "tools").expect("tools");
        let McpTransport::Stdio { env, .. } = &tools.transport else {
            panic!("stdio expected");
        };
        assert_eq!(env["TOKEN"], format!("Bearer {VALUE}"));
        assert_eq!(env["PLAIN"], "p");
    }

    #[test]
    fn unknown_or_broken_references_are_config_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        for (value, wanted) in [
            ("${secret:nope}", "unknown secret `nope`"),
            ("${secret:api_token", "not closed"),
        ] {
            let err = load_config(dir.path(),
                &format!(
                    "[secrets.api_token]\nenv = \"V\"\n[mcp.servers.s]\nurl = \"http://127.0.0.1:1/mcp\"\nheaders = {{ Authorization = \"{value}\" }}\n"
                ),
            )
            // Refused while the configuration loads, before anything starts.
            .expect_err("refused");
            assert!(
                err.to_string()
                    .contains("mcp.servers.s.headers.Authorization"),
                "{err}"
            );
            assert!(err.to_string().contains(wanted), "{err}");
        }
    }
}
