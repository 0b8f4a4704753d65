//! Agent Cards: what a client reads before calling. Public (a card holds no secret),
//! built per request from the agent's definition so it names the host the client
//! reached. One document serves both generations, as the SDK's server writes it: 1.0's
//! fields with 0.3's merged in (`url`, `preferredTransport`, `protocolVersion`,
//! `security`, and 0.3's `type`-tagged scheme fields).

use std::collections::BTreeMap;

use agentplane_a2a::v0_3;
use agentplane_a2a::wire::{
    self, AgentCapabilities, AgentCard, AgentInterface, AgentSkill, HttpAuthSecurityScheme,
    OpenIdConnectSecurityScheme, SecurityRequirement, SecurityScheme, StringList,
};
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::state::A2aState;
use crate::error::ApiError;

/// The name of the bearer scheme (API keys and the server's token).
const BEARER_SCHEME: &str = "bearer";
/// The name of the OIDC scheme.
const OIDC_SCHEME: &str = "oidc";
/// Longest output schema quoted in a skill's description, in characters.
const MAX_SCHEMA_CHARS: usize = 2_000;

/// `GET /a2a/{agent}/.well-known/agent-card.json`.
pub(crate) async fn agent_card(
    State(state): State<A2aState>,
    Path(agent): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !state.options.agents.iter().any(|a| a == &agent) {
        return ApiError::not_found(format!("no A2A agent `{agent}` is published here"))
            .into_response();
    }
    respond(&state, &agent, &headers).await
}

/// `GET /.well-known/agent-card.json`: the first published agent's card.
pub(crate) async fn host_card(State(state): State<A2aState>, headers: HeaderMap) -> Response {
    let Some(agent) = state.options.agents.first().cloned() else {
        return ApiError::not_found("no A2A agent is published here").into_response();
    };
    respond(&state, &agent, &headers).await
}

async fn respond(state: &A2aState, agent: &str, headers: &HeaderMap) -> Response {
    match card(state, agent, headers).await {
        Ok(card) => (
            [(header::CACHE_CONTROL, "no-cache")],
            axum::Json(v0_3::dual_card(&card)),
        )
            .into_response(),
        Err(e) => e.into_response(),
    }
}

/// Where the client reached us: `X-Forwarded-Proto` (`https` behind a proxy that
/// terminates TLS) and `Host`.
fn base_url(headers: &HeaderMap) -> String {
    let scheme = match headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
    {
        Some("https") => "https",
        _ => "http",
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .filter(|h| {
            !h.is_empty()
                && h.bytes().all(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']')
                })
        })
        .unwrap_or("127.0.0.1");
    format!("{scheme}://{host}")
}

/// The card of a published agent.
pub(crate) async fn card(
    state: &A2aState,
    agent: &str,
    headers: &HeaderMap,
) -> Result<AgentCard, ApiError> {
    let spec = state.hub.agent(agent).map_err(ApiError::from)?;
    let url = format!("{}/a2a/{agent}", base_url(headers));
    // The version most traffic goes to; without versions, the binary's.
    let version = state
        .hub
        .versions()
        .agent_versions("a2a-card", agent)
        .await
        .ok()
        .and_then(|versions| {
            versions
                .traffic
                .0
                .iter()
                .max_by_key(|(_, weight)| **weight)
                .map(|(version, _)| version.clone())
        })
        .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_owned());
    let description = if spec.description.trim().is_empty() {
        format!("The agentplane agent `{agent}`.")
    } else {
        spec.description.clone()
    };
    let mut skill_description = description.clone();
    let mut output_modes = vec!["text/plain".to_owned()];
    if let Some(schema) = &spec.output_schema {
        let schema: String = schema.to_string().chars().take(MAX_SCHEMA_CHARS).collect();
        skill_description.push_str(&format!(
            " Its result (a data part of the task's artifact) follows this JSON Schema: {schema}"
        ));
        output_modes.insert(0, "application/json".to_owned());
    }
    let mut tags = vec!["agentplane".to_owned()];
    tags.extend(spec.tags.iter().cloned());
    let mut schemes = BTreeMap::from([(
        BEARER_SCHEME.to_owned(),
        SecurityScheme {
            http_auth_security_scheme: Some(HttpAuthSecurityScheme {
                description: Some(
                    "An agentplane API key (or the server's token) as a bearer token".into(),
                ),
                scheme: "bearer".into(),
                bearer_format: None,
            }),
            ..SecurityScheme::default()
        },
    )]);
    let mut requirements = vec![requirement(BEARER_SCHEME)];
    if let Some(discovery) = &state.options.oidc_discovery {
        schemes.insert(
            OIDC_SCHEME.to_owned(),
            SecurityScheme {
                open_id_connect_security_scheme: Some(OpenIdConnectSecurityScheme {
                    description: Some("A bearer token from the identity provider".into()),
                    open_id_connect_url: discovery.clone(),
                }),
                ..SecurityScheme::default()
            },
        );
        requirements.push(requirement(OIDC_SCHEME));
    }
    let interface = |version: &str| AgentInterface {
        url: url.clone(),
        protocol_binding: wire::BINDING_JSONRPC.into(),
        tenant: None,
        protocol_version: version.into(),
    };
    Ok(AgentCard {
        name: agent.to_owned(),
        description: description.clone(),
        supported_interfaces: vec![
            interface(wire::PROTOCOL_VERSION),
            interface(v0_3::PROTOCOL_VERSION),
        ],
        provider: None,
        version,
        documentation_url: None,
        capabilities: AgentCapabilities {
            streaming: Some(true),
            // Offered when webhooks are signed (`[executions] webhook_secret`).
            push_notifications: Some(state.webhooks.is_some()),
            extensions: Vec::new(),
            extended_agent_card: None,
        },
        security_schemes: schemes,
        security_requirements: requirements,
        default_input_modes: vec!["text/plain".into(), "application/json".into()],
        default_output_modes: output_modes.clone(),
        skills: vec![AgentSkill {
            id: agent.to_owned(),
            name: agent.to_owned(),
            description: skill_description,
            tags,
            examples: Vec::new(),
            input_modes: vec!["text/plain".into(), "application/json".into()],
            output_modes,
            security_requirements: Vec::new(),
        }],
        icon_url: None,
    })
}

fn requirement(scheme: &str) -> SecurityRequirement {
    SecurityRequirement {
        schemes: BTreeMap::from([(scheme.to_owned(), StringList::default())]),
    }
}
