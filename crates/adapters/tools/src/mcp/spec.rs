//! What an MCP server is, as configured: a name, how to reach it, and its timeouts.
//!
//! Plain data: nothing here connects or spawns. Values of `env` and `headers` are often
//! credentials, so they never appear in `Debug` output or in [`McpServerSpec::describe`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// One configured MCP server. Its tools are offered as `mcp__{name}__{tool}`.
#[derive(Clone, PartialEq, Eq)]
pub struct McpServerSpec {
    /// The server's name: the ensemble's name and the middle of its tools' names.
    pub name: String,
    /// How to reach it.
    pub transport: McpTransport,
    /// Bound on starting, initializing and listing tools; past it `open` fails.
    pub startup_timeout: Duration,
    /// Bound on one tool call; the turn's tool timeout applies too, the shorter wins.
    pub call_timeout: Option<Duration>,
    /// How long a healthy connection is kept for the same thread's next turn; zero ends
    /// it when the turn's ensemble closes.
    pub idle_timeout: Duration,
    /// Which of the server's tools are offered at all (by the server's own names).
    pub tools: ToolFilter,
    /// What a tool whose definition changed since it was approved becomes.
    pub pin: PinMode,
    /// What the description screen does with a finding.
    pub screen: ScreenMode,
}

/// `[mcp.servers.NAME] screen`: what the description screen (`super::pins`) does with a
/// tool whose definition holds hidden characters, text aimed at the model or an
/// overlong description.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ScreenMode {
    /// Reported (a `security_event`); the tool is offered as it is.
    #[default]
    Flag,
    /// Reported, and hidden characters removed before anyone sees the tool.
    Strip,
    /// Reported, and held back until an admin approves the definition as it is.
    Quarantine,
    /// Not screened.
    Off,
}

/// `[mcp.servers.NAME] pin`: what happens to a tool whose definition (name,
/// description, schemas, annotations) differs from the one first seen or last approved
/// (`super::pins`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PinMode {
    /// Quarantined: neither listed nor callable until an admin approves the change.
    #[default]
    Strict,
    /// Listed and callable; the change is reported all the same.
    Warn,
    /// Definitions are not pinned.
    Off,
}

/// `include` / `exclude` name patterns (`*` wildcards) on a server's own tool names: a
/// tool is offered when `include` is absent or one of its patterns matches, and none
/// of `exclude` does. A tool left out is neither listed nor callable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFilter {
    pub include: Option<Vec<agentplane_core::policy::Glob>>,
    pub exclude: Vec<agentplane_core::policy::Glob>,
}

impl ToolFilter {
    /// Whether the server's tool `name` is offered.
    pub fn offers(&self, name: &str) -> bool {
        let included = self
            .include
            .as_ref()
            .is_none_or(|include| include.iter().any(|g| g.matches(name)));
        included && !self.exclude.iter().any(|g| g.matches(name))
    }
}

/// How to reach a server.
#[derive(Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A program spoken to over its stdin/stdout, one JSON-RPC message per line.
    Stdio {
        /// The program; a bare name is looked up on `PATH`.
        command: String,
        args: Vec<String>,
        /// Added to the inherited environment (which never holds `AGENTPLANE_*`).
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    /// A streamable HTTP endpoint.
    Http {
        url: String,
        /// Sent with every request (an `Authorization` header, say). Never shown.
        headers: BTreeMap<String, String>,
        /// Access tokens from an OAuth client-credentials grant, sent as
        /// `Authorization: Bearer` with every request instead of a static header.
        oauth: Option<OAuthClient>,
    },
}

/// An OAuth 2.0 client-credentials grant (RFC 6749 §4.4) that gets the access tokens
/// for an HTTP server. The secret never appears in `Debug` output.
#[derive(Clone, PartialEq, Eq)]
pub struct OAuthClient {
    /// The authorization server's token endpoint.
    pub token_url: String,
    pub client_id: String,
    /// The client secret (a `${secret:NAME}` reference until the runtime resolves it).
    pub client_secret: String,
    /// Sent as `scope`, space-separated, when not empty.
    pub scopes: Vec<String>,
    /// Sent as `resource` (RFC 8707); the MCP server's URL when not set.
    pub resource: Option<String>,
    /// Sent as `audience`, for issuers that ask for one.
    pub audience: Option<String>,
    /// How the client authenticates to the token endpoint.
    pub client_auth: ClientAuth,
}

/// How a client authenticates to a token endpoint (RFC 6749 §2.3.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ClientAuth {
    /// HTTP Basic with the form-encoded id and secret (`client_secret_basic`), the
    /// method every authorization server must support.
    #[default]
    Basic,
    /// `client_id` and `client_secret` in the form body (`client_secret_post`).
    Post,
}

impl std::fmt::Debug for OAuthClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthClient")
            .field("token_url", &without_userinfo(&self.token_url))
            .field("client_id", &self.client_id)
            .field("client_secret", &"[redacted]")
            .field("scopes", &self.scopes)
            .field("resource", &self.resource)
            .field("audience", &self.audience)
            .field("client_auth", &self.client_auth)
            .finish()
    }
}

impl McpServerSpec {
    /// How the server is reached, for people: `stdio: node a b` or `http: URL`. Never
    /// holds header or environment values (nor a password written into the URL).
    pub fn describe(&self) -> String {
        match &self.transport {
            McpTransport::Stdio { command, args, .. } => {
                let mut text = format!("stdio: {command}");
                for arg in args {
                    text.push(' ');
                    text.push_str(arg);
                }
                text
            }
            McpTransport::Http { url, .. } => format!("http: {}", without_userinfo(url)),
        }
    }

    /// The prefix of this server's tool names, `mcp__{name}__`.
    pub(crate) fn tool_prefix(&self) -> String {
        format!("mcp__{}__", self.name)
    }
}

/// `scheme://user:pass@host/…` without `user:pass@`.
fn without_userinfo(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_owned();
    };
    let authority_start = scheme_end + 3;
    let authority_end = url[authority_start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| authority_start + i);
    match url[authority_start..authority_end].rfind('@') {
        Some(at) => format!(
            "{}{}",
            &url[..authority_start],
            &url[authority_start + at + 1..]
        ),
        None => url.to_owned(),
    }
}

impl std::fmt::Debug for McpServerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServerSpec")
            .field("name", &self.name)
            .field("transport", &self.transport)
            .field("startup_timeout", &self.startup_timeout)
            .field("call_timeout", &self.call_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("tools", &self.tools)
            .finish()
    }
}

/// Only the names of `env` and `headers`: their values are often credentials.
impl std::fmt::Debug for McpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Stdio {
                command,
                args,
                env,
                cwd,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &env.keys().collect::<Vec<_>>())
                .field("cwd", cwd)
                .finish(),
            Self::Http {
                url,
                headers,
                oauth,
            } => f
                .debug_struct("Http")
                .field("url", &without_userinfo(url))
                .field("headers", &headers.keys().collect::<Vec<_>>())
                .field("oauth", oauth)
                .finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(transport: McpTransport) -> McpServerSpec {
        McpServerSpec {
            name: "files".into(),
            transport,
            startup_timeout: Duration::from_secs(1),
            call_timeout: None,
            idle_timeout: Duration::ZERO,
            tools: Default::default(),
            pin: PinMode::Strict,
            screen: ScreenMode::Flag,
        }
    }

    #[test]
    fn descriptions_and_debug_never_show_secret_values() {
        let http = spec(McpTransport::Http {
            url: "https://bob:hunter2@example.com/mcp?x=1".into(),
            headers: BTreeMap::from([("Authorization".into(), "Bearer s3cret".into())]),
            oauth: None,
        });
        assert_eq!(http.describe(), "http: https://example.com/mcp?x=1");
        let debug = format!("{http:?}");
        assert!(debug.contains("Authorization"), "{debug}");
        assert!(
            !debug.contains("s3cret") && !debug.contains("hunter2"),
            "{debug}"
        );

        let stdio = spec(McpTransport::Stdio {
            command: "node".into(),
            args: vec!["a".into(), "b".into()],
            env: BTreeMap::from([("TOKEN".into(), "s3cret".into())]),
            cwd: None,
        });
        assert_eq!(stdio.describe(), "stdio: node a b");
        assert!(!format!("{stdio:?}").contains("s3cret"));
        assert_eq!(stdio.tool_prefix(), "mcp__files__");
        assert_eq!(without_userinfo("http://h/p@q"), "http://h/p@q");
    }
}
