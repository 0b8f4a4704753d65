//! `[mcp.servers.NAME]`: MCP servers agents attach by naming them in their `ensembles`,
//! as written; the checks that turn a bad value into a load error naming the key; and
//! the secrets their `env` and `headers` values refer to (`${secret:NAME}`), and their
//! `oauth.client_secret` names. The clients are the tools adapter's.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::Deserialize;

use super::SettingError;
use super::agents::{KNOWN_ENSEMBLES, is_plain_name};
use super::llm::check_base_url;
use super::secrets::{SecretsConfig, is_secret_name, references};

/// `[mcp]` as written: `servers` and `gateway`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileMcp {
    /// `[mcp.servers.NAME]`, by name.
    #[serde(default)]
    pub servers: BTreeMap<String, McpServerConfig>,
    /// `[mcp.gateway]`: which servers the MCP gateway offers.
    #[serde(default)]
    pub gateway: super::mcp_gateway::FileMcpGateway,
}

/// An MCP server (`[mcp.servers.NAME]`): a program spoken to over stdio (`command`,
/// `args`, `env`, `cwd`) or a streamable HTTP endpoint (`url`, `headers`). Agents attach
/// it by naming it in their `ensembles`.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// Added to the server's environment (which never holds `AGENTPLANE_*` variables).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The server's working directory; relative to the configuration file.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    #[serde(default)]
    pub url: Option<String>,
    /// Sent with every HTTP request (an `Authorization` header, say). Never logged.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// How long starting and initializing may take. Default 30 s (an `npx` cold start).
    #[serde(default)]
    pub startup_timeout_secs: Option<u64>,
    /// Longest tool call; the agent's tool timeout applies too, the shorter wins.
    #[serde(default)]
    pub call_timeout_secs: Option<u64>,
    /// Keep the connection for the thread's next turns this long; 0 (the default) ends
    /// it after every turn.
    #[serde(default)]
    pub idle_timeout_secs: Option<u64>,
    /// Offer only the server's tools matching one of these patterns (`*` wildcards, the
    /// server's own names); absent: all.
    #[serde(default)]
    pub include: Option<Vec<String>>,
    /// Never offer the server's tools matching one of these patterns.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// `[mcp.servers.NAME.oauth]`: access tokens from an OAuth client-credentials
    /// grant (HTTP servers only, instead of an `Authorization` header).
    #[serde(default)]
    pub oauth: Option<McpOAuthConfig>,
    /// What a tool whose definition changed since it was first seen or approved
    /// becomes: `strict` (the default: quarantined until an admin approves it),
    /// `warn` (listed, the change reported) or `off` (not pinned).
    #[serde(default)]
    pub pin: McpPin,
    /// What the description screen does with a tool whose definition holds hidden
    /// characters, text aimed at the model or an overlong description: `flag` (the
    /// default: a security event), `strip` (hidden characters removed too),
    /// `quarantine` (held back until an admin approves it) or `off`.
    #[serde(default)]
    pub screen: McpScreen,
}

/// `[mcp.servers.NAME] screen`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpScreen {
    #[default]
    Flag,
    Strip,
    Quarantine,
    Off,
}

/// `[mcp.servers.NAME] pin`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpPin {
    #[default]
    Strict,
    Warn,
    Off,
}

/// `[mcp.servers.NAME.oauth]`: an OAuth 2.0 client-credentials grant (RFC 6749 §4.4)
/// whose access tokens go to the server as `Authorization: Bearer`, fetched before
/// the first request and again before they expire.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpOAuthConfig {
    /// The authorization server's token endpoint (`http://` or `https://`).
    pub token_url: String,
    pub client_id: String,
    /// The name of the `[secrets]` entry holding the client secret (not the value).
    pub client_secret: String,
    /// Asked for as `scope`; none: the issuer's default.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Sent as `resource` (RFC 8707); default: the server's `url`, as MCP asks.
    #[serde(default)]
    pub resource: Option<String>,
    /// Sent as `audience`, for issuers that ask for one.
    #[serde(default)]
    pub audience: Option<String>,
    /// `client_secret_basic` (HTTP Basic, the default) or `client_secret_post`.
    #[serde(default)]
    pub client_auth: McpClientAuth,
}

/// How the client authenticates to the token endpoint (RFC 6749 §2.3.1), by the
/// names RFC 7591 gives them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpClientAuth {
    #[default]
    ClientSecretBasic,
    ClientSecretPost,
}

/// Values of `env` and `headers` often are credentials: only their names are shown.
impl std::fmt::Debug for McpServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServerConfig")
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .field("url", &self.url)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("startup_timeout_secs", &self.startup_timeout_secs)
            .field("call_timeout_secs", &self.call_timeout_secs)
            .field("idle_timeout_secs", &self.idle_timeout_secs)
            .field("include", &self.include)
            .field("exclude", &self.exclude)
            .field("oauth", &self.oauth)
            .field("pin", &self.pin)
            .field("screen", &self.screen)
            .finish()
    }
}

/// Checks an MCP server's values; on error, the key within the server and the message.
pub fn check_mcp_server(
    name: &str,
    server: &McpServerConfig,
) -> Result<(), (&'static str, String)> {
    // Tools are named `mcp__NAME__TOOL` and tool names are at most 64 characters.
    if !is_plain_name(name) || name.contains("__") || name.len() > 32 {
        return Err((
            "",
            "MCP server names use letters, digits, `-` and single `_`, at most 32 characters"
                .into(),
        ));
    }
    if KNOWN_ENSEMBLES.contains(&name) {
        return Err(("", format!("`{name}` is a builtin ensemble's name")));
    }
    // The gateway lists a server's tools as `NAME__TOOL`: `a2a__…` and `mcp__…` are
    // the names of remote A2A agents and of MCP tools already (ADR 0061).
    if name == "a2a" || name == "mcp" {
        return Err((
            "",
            format!("`{name}` is reserved: `{name}__…` already names other tools"),
        ));
    }
    match (&server.command, &server.url) {
        (Some(_), Some(_)) => {
            return Err((
                "url",
                "give either `command` (stdio) or `url` (HTTP), not both".into(),
            ));
        }
        (None, None) => {
            return Err(("command", "give `command` (stdio) or `url` (HTTP)".into()));
        }
        (Some(command), None) => {
            if command.trim().is_empty() {
                return Err(("command", "must not be empty".into()));
            }
            if !server.headers.is_empty() {
                return Err(("headers", "only HTTP servers (`url`) take headers".into()));
            }
            if server.oauth.is_some() {
                return Err(("oauth", "only HTTP servers (`url`) take `oauth`".into()));
            }
        }
        (None, Some(url)) => {
            check_base_url(url).map_err(|m| ("url", m))?;
            if !server.args.is_empty() || !server.env.is_empty() || server.cwd.is_some() {
                return Err((
                    "url",
                    "`args`, `env` and `cwd` belong to stdio servers (`command`)".into(),
                ));
            }
            if let Some(oauth) = &server.oauth {
                check_oauth(oauth, &server.headers)?;
            }
        }
    }
    for (key, patterns) in [
        ("include", server.include.as_deref().unwrap_or_default()),
        ("exclude", server.exclude.as_slice()),
    ] {
        for pattern in patterns {
            agentplane_core::policy::Glob::new(pattern).map_err(|m| (key, m))?;
        }
    }
    for key in server.env.keys() {
        if key.is_empty() || key.contains('=') || key.contains('\0') {
            return Err(("env", format!("{key:?} is not a variable name")));
        }
    }
    for (key, timeout) in [
        ("startup_timeout_secs", server.startup_timeout_secs),
        ("call_timeout_secs", server.call_timeout_secs),
    ] {
        if timeout == Some(0) {
            return Err((key, "must be at least 1".into()));
        }
    }
    Ok(())
}

/// Checks `[mcp.servers.NAME.oauth]` of an HTTP server sending `headers`.
fn check_oauth(
    oauth: &McpOAuthConfig,
    headers: &BTreeMap<String, String>,
) -> Result<(), (&'static str, String)> {
    if headers
        .keys()
        .any(|name| name.eq_ignore_ascii_case("authorization"))
    {
        return Err((
            "oauth",
            "`oauth` sets the `Authorization` header itself: remove it from `headers`".into(),
        ));
    }
    check_base_url(&oauth.token_url).map_err(|m| ("oauth.token_url", m))?;
    if let Some(resource) = &oauth.resource {
        check_base_url(resource).map_err(|m| ("oauth.resource", m))?;
    }
    if oauth.client_id.trim().is_empty() {
        return Err(("oauth.client_id", "must not be empty".into()));
    }
    if !is_secret_name(&oauth.client_secret) {
        return Err((
            "oauth.client_secret",
            "must name a `[secrets]` entry (letters, digits and `_`), not hold the secret".into(),
        ));
    }
    // RFC 6749 §3.3: scope tokens are printable ASCII without space, `"` or `\`.
    for scope in &oauth.scopes {
        if scope.is_empty()
            || !scope
                .bytes()
                .all(|b| b > 0x20 && b < 0x7f && b != b'"' && b != b'\\')
        {
            return Err((
                "oauth.scopes",
                format!("{scope:?} is not a scope (printable ASCII, no space, `\"` or `\\`)"),
            ));
        }
    }
    Ok(())
}

/// The secrets each MCP server's `env` and `headers` values refer to, by server.
/// A reference to a secret not in `[secrets]` is an error naming the key.
pub fn secret_references(
    servers: &BTreeMap<String, McpServerConfig>,
    secrets: &SecretsConfig,
) -> Result<BTreeMap<String, BTreeSet<String>>, SettingError> {
    let mut needs = BTreeMap::new();
    for (server, config) in servers {
        let values = config
            .env
            .iter()
            .map(|(k, v)| (format!("mcp.servers.{server}.env.{k}"), v))
            .chain(
                config
                    .headers
                    .iter()
                    .map(|(k, v)| (format!("mcp.servers.{server}.headers.{k}"), v)),
            );
        let mut names = BTreeSet::new();
        // `oauth.client_secret` is a bare name; as a reference it is checked alike.
        let client_secret = config
            .oauth
            .as_ref()
            .map(|oauth| format!("${{secret:{}}}", oauth.client_secret));
        let values = values.chain(
            client_secret
                .as_ref()
                .map(|value| (format!("mcp.servers.{server}.oauth.client_secret"), value)),
        );
        for (key, value) in values {
            for name in references(value).map_err(|m| (key.clone(), m))? {
                if !secrets.sources.contains_key(name) {
                    let known: Vec<&str> = secrets.sources.keys().map(String::as_str).collect();
                    return Err((
                        key,
                        format!(
                            "unknown secret `{name}` (configured: {})",
                            if known.is_empty() {
                                "none".to_owned()
                            } else {
                                known.join(", ")
                            }
                        ),
                    ));
                }
                names.insert(name.to_owned());
            }
        }
        if !names.is_empty() {
            needs.insert(server.clone(), names);
        }
    }
    Ok(needs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(toml_text: &str) -> McpServerConfig {
        toml::from_str(toml_text).expect("parses")
    }

    const OAUTH: &str = "[oauth]\ntoken_url = \"https://id.example/token\"\n\
                         client_id = \"agentplane\"\nclient_secret = \"upstream_secret\"\n";

    #[test]
    fn names_that_would_make_one_tool_name_two_are_refused() {
        let ok = server("command = \"x\"");
        assert_eq!(check_mcp_server("github", &ok), Ok(()));
        for reserved in ["a2a", "mcp", "a__b", "fs"] {
            assert!(check_mcp_server(reserved, &ok).is_err(), "{reserved}");
        }
    }

    #[test]
    fn oauth_is_checked_and_named_by_its_key() {
        let ok = server(&format!("url = \"https://mcp.example/mcp\"\n{OAUTH}"));
        assert_eq!(check_mcp_server("up", &ok), Ok(()));
        let oauth = ok.oauth.as_ref().expect("oauth");
        assert_eq!(oauth.client_auth, McpClientAuth::ClientSecretBasic);
        assert!(oauth.scopes.is_empty() && oauth.resource.is_none());

        let cases = [
            (format!("command = \"x\"\n{OAUTH}"), "oauth"),
            (
                format!(
                    "url = \"https://m/mcp\"\nheaders = {{ authorization = \"Bearer x\" }}\n{OAUTH}"
                ),
                "oauth",
            ),
            (
                format!(
                    "url = \"https://m/mcp\"\n{}",
                    OAUTH.replace("https://id.example/token", "ftp://id")
                ),
                "oauth.token_url",
            ),
            (
                format!(
                    "url = \"https://m/mcp\"\n{}",
                    OAUTH.replace("agentplane", " ")
                ),
                "oauth.client_id",
            ),
            (
                format!(
                    "url = \"https://m/mcp\"\n{}",
                    OAUTH.replace("upstream_secret", "hunter2 literal")
                ),
                "oauth.client_secret",
            ),
            (
                format!("url = \"https://m/mcp\"\n{OAUTH}scopes = [\"read write\"]\n"),
                "oauth.scopes",
            ),
            (
                format!("url = \"https://m/mcp\"\n{OAUTH}resource = \"urn:x\"\n"),
                "oauth.resource",
            ),
        ];
        for (text, key) in cases {
            let err = check_mcp_server("up", &server(&text)).expect_err(&text);
            assert_eq!(err.0, key, "{text}: {}", err.1);
            assert!(!err.1.contains("hunter2"), "{}", err.1);
        }
        assert!(
            toml::from_str::<McpServerConfig>(&format!(
                "url = \"https://m\"\n{OAUTH}grant = \"x\"\n"
            ))
            .is_err(),
            "unknown keys are refused"
        );
        assert!(
            toml::from_str::<McpServerConfig>(&format!(
                "url = \"https://m\"\n{OAUTH}client_auth = \"private_key_jwt\"\n"
            ))
            .is_err(),
            "only the two secret methods"
        );
    }

    #[test]
    fn the_client_secret_is_a_secret_reference() {
        let servers = BTreeMap::from([(
            "up".to_owned(),
            server(&format!("url = \"https://m/mcp\"\n{OAUTH}")),
        )]);
        let err = secret_references(&servers, &SecretsConfig::default()).expect_err("unknown");
        assert_eq!(err.0, "mcp.servers.up.oauth.client_secret");
        let secrets = SecretsConfig {
            sources: BTreeMap::from([(
                "upstream_secret".to_owned(),
                super::super::secrets::SecretSource::Env("X".into()),
            )]),
        };
        let needs = secret_references(&servers, &secrets).expect("known");
        assert_eq!(needs["up"], BTreeSet::from(["upstream_secret".to_owned()]));
    }
}
