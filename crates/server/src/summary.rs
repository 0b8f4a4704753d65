//! The startup summary `agentplane serve` prints: where to reach the server, where the
//! events are stored, which agents can run on which model, and how to begin.
//!
//! Plain text for people, one fact per line; logs stay structured elsewhere. It
//! names whether a token is required, and where a server without keys keeps its
//! setup token, but never prints either token.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;

use agentplane_engine::models::ModelStatus;

use crate::model_probe::AgentModel;

/// What the summary reports.
#[derive(Debug, Clone, Copy)]
pub struct StartupSummary<'a> {
    /// The address actually listened on (after binding port 0, the real port).
    pub addr: SocketAddr,
    /// The store: the SQLite file, or the PostgreSQL URL without its password.
    pub db: &'a str,
    /// Whether `/v1/*` requires a bearer token.
    pub auth_required: bool,
    /// Every agent and its model, from [`crate::probe_models`].
    pub agents: &'a [AgentModel],
    /// Per agent that runs programs: what confines them (ADR 0023), as
    /// `(agent, in force)`.
    pub sandbox: &'a [(String, String)],
    /// The file holding the one-time setup token for the first key, on a server
    /// without keys or token.
    pub setup_token: Option<&'a Path>,
}

/// The summary as lines of text, ending with a newline.
pub fn startup_summary(summary: &StartupSummary<'_>) -> String {
    let url = format!("http://{}", summary.addr);
    let mut out = String::new();
    let auth = if summary.auth_required {
        "bearer token required on /v1/*"
    } else {
        "no token; loopback only"
    };
    let _ = writeln!(out, "agentplane is serving");
    let _ = writeln!(out, "  HTTP    {url}  ({auth})");
    let _ = writeln!(out, "  DB      {}", summary.db);
    if let Some(file) = summary.setup_token {
        let _ = writeln!(
            out,
            "  Setup   no keys yet: the first key needs the one-time setup token in {} \
             (`agentplane keys create` reads it)",
            file.display()
        );
    }
    let width = summary
        .agents
        .iter()
        .map(|a| a.agent.chars().count())
        .max()
        .unwrap_or(0);
    for (index, agent) in summary.agents.iter().enumerate() {
        let label = if index == 0 { "Agents" } else { "" };
        let _ = writeln!(
            out,
            "  {label:<6}  {:<width$}  {}",
            agent.agent,
            describe(&agent.status)
        );
    }
    if summary.agents.is_empty() {
        let _ = writeln!(out, "  Agents  none configured");
    }
    // Agents usually share one model server: say each distinct problem once.
    let mut problems: Vec<&str> = Vec::new();
    for agent in summary.agents {
        if let ModelStatus::Unavailable { error, .. } = &agent.status
            && !problems.contains(&error.as_str())
        {
            problems.push(error);
        }
    }
    for problem in problems {
        let _ = writeln!(out, "  Model   {problem}");
    }
    for (index, (agent, in_force)) in summary.sandbox.iter().enumerate() {
        let label = if index == 0 { "Sandbox" } else { "" };
        let _ = writeln!(out, "  {label:<7} {agent}: {in_force}");
    }
    let _ = writeln!(out, "  Web     {url}/");
    let _ = writeln!(out, "  API     {url}/openapi.json");
    let token = if summary.auth_required {
        " -H 'Authorization: Bearer $AGENTPLANE_AUTH_TOKEN'"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "  Help    curl -H 'X-Client-ID: me'{token} {url}/v1/agents"
    );
    out
}

fn describe(status: &ModelStatus) -> String {
    match status {
        ModelStatus::Ready { model } => format!("{model} (ready)"),
        ModelStatus::Substitute { wanted, model } => {
            format!("{model} (substitute: {wanted} is not on the model server)")
        }
        ModelStatus::Unavailable { wanted, .. } => format!("{wanted} (unavailable, see Model)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_every_fact() {
        let agents = [
            AgentModel {
                agent: "engineering".into(),
                status: ModelStatus::Ready {
                    model: "qwen2.5:7b".into(),
                },
                capabilities: Default::default(),
            },
            AgentModel {
                agent: "research".into(),
                status: ModelStatus::Unavailable {
                    wanted: "big".into(),
                    error: "connection refused".into(),
                },
                capabilities: Default::default(),
            },
        ];
        let text = startup_summary(&StartupSummary {
            addr: "127.0.0.1:8686".parse().expect("addr"),
            db: "/data/agentplane.db",
            auth_required: true,
            agents: &agents,
            sandbox: &[("engineering".into(), "landlock ABI 7: files".into())],
            setup_token: Some(Path::new("/data/setup-token")),
        });
        for needle in [
            "http://127.0.0.1:8686",
            "/data/agentplane.db",
            "engineering  qwen2.5:7b (ready)",
            "research     big (unavailable, see Model)",
            "Model   connection refused",
            "Sandbox engineering: landlock ABI 7: files",
            "Web     http://127.0.0.1:8686/\n",
            "/openapi.json",
            "Authorization: Bearer $AGENTPLANE_AUTH_TOKEN",
            "Setup   no keys yet: the first key needs the one-time setup token in \
             /data/setup-token (`agentplane keys create` reads it)\n",
        ] {
            assert!(text.contains(needle), "{needle:?} missing in:\n{text}");
        }
    }
}
