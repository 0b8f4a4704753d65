//! The configured MCP servers as the adapter takes them (`mcp_specs`), and the probe
//! behind `agentplane mcp list`.

use std::time::Duration;

use agentplane_tools::mcp::ServerReport as McpServerReport;
use agentplane_tools::mcp::{McpServerSpec, McpServers, McpTransport};

use crate::config::Config;
use crate::secrets;
use crate::settings;

/// Connects to every configured MCP server at once, lists its tools and ends it again:
/// what `agentplane mcp list` shows. Starts no store and no model client.
pub async fn probe_mcp_servers(config: &Config) -> Vec<McpServerReport> {
    // The operator probes every server with its secrets, as a turn granted them would.
    let specs = match secrets::Secrets::load(config) {
        Ok(secrets) => {
            agentplane_core::secret::install(secrets.redactor());
            secrets::resolve_mcp_specs(mcp_specs(config), &secrets)
                .unwrap_or_else(|_| mcp_specs(config))
        }
        Err(e) => {
            tracing::warn!(error = %e, "secrets could not be loaded; servers get no secrets");
            mcp_specs(config)
        }
    };
    let servers = McpServers::new(specs);
    let reports = servers.list().await;
    servers.shutdown().await;
    reports
}

/// Default time to start and initialize an MCP server: enough for an `npx` cold start.
const MCP_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// The grant of `[mcp.servers.NAME.oauth]` for the server at `url`; its secret is a
/// `${secret:NAME}` reference, resolved with the others (`secrets::resolve_mcp_spec`).
fn oauth_client(oauth: &settings::mcp::McpOAuthConfig, url: &str) -> agentplane_tools::OAuthClient {
    agentplane_tools::OAuthClient {
        token_url: oauth.token_url.clone(),
        client_id: oauth.client_id.clone(),
        client_secret: format!(
            "{}{}}}",
            settings::secrets::REFERENCE_OPEN,
            oauth.client_secret
        ),
        scopes: oauth.scopes.clone(),
        resource: Some(oauth.resource.clone().unwrap_or_else(|| url.to_owned())),
        audience: oauth.audience.clone(),
        client_auth: match oauth.client_auth {
            settings::mcp::McpClientAuth::ClientSecretBasic => agentplane_tools::ClientAuth::Basic,
            settings::mcp::McpClientAuth::ClientSecretPost => agentplane_tools::ClientAuth::Post,
        },
    }
}

/// The MCP servers of the configuration, as the adapter takes them.
pub fn mcp_specs(config: &Config) -> Vec<McpServerSpec> {
    config
        .mcp_servers
        .iter()
        .map(|(name, server)| McpServerSpec {
            name: name.clone(),
            transport: match (&server.command, &server.url) {
                (_, Some(url)) => McpTransport::Http {
                    url: url.clone(),
                    headers: server.headers.clone(),
                    oauth: server.oauth.as_ref().map(|oauth| oauth_client(oauth, url)),
                },
                (command, None) => McpTransport::Stdio {
                    command: command.clone().unwrap_or_default(),
                    args: server.args.clone(),
                    env: server.env.clone(),
                    cwd: server.cwd.clone(),
                },
            },
            startup_timeout: server
                .startup_timeout_secs
                .map_or(MCP_STARTUP_TIMEOUT, Duration::from_secs),
            call_timeout: server.call_timeout_secs.map(Duration::from_secs),
            tools: agentplane_tools::ToolFilter {
                // Checked at load (`check_mcp_server`): every pattern is valid here.
                include: server.include.as_ref().map(|patterns| {
                    patterns
                        .iter()
                        .filter_map(|p| agentplane_core::policy::Glob::new(p).ok())
                        .collect()
                }),
                exclude: server
                    .exclude
                    .iter()
                    .filter_map(|p| agentplane_core::policy::Glob::new(p).ok())
                    .collect(),
            },
            idle_timeout: Duration::from_secs(server.idle_timeout_secs.unwrap_or(0)),
            pin: match server.pin {
                settings::mcp::McpPin::Strict => agentplane_tools::mcp::PinMode::Strict,
                settings::mcp::McpPin::Warn => agentplane_tools::mcp::PinMode::Warn,
                settings::mcp::McpPin::Off => agentplane_tools::mcp::PinMode::Off,
            },
            screen: match server.screen {
                settings::mcp::McpScreen::Flag => agentplane_tools::mcp::ScreenMode::Flag,
                settings::mcp::McpScreen::Strip => agentplane_tools::mcp::ScreenMode::Strip,
                settings::mcp::McpScreen::Quarantine => {
                    agentplane_tools::mcp::ScreenMode::Quarantine
                }
                settings::mcp::McpScreen::Off => agentplane_tools::mcp::ScreenMode::Off,
            },
        })
        .collect()
}
