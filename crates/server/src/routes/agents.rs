//! `GET /v1/agents`: every agent, the model its turns would use right now, and its
//! providers in failover order with their health.

use axum::Json;
use axum::extract::State;

use super::tags;
use crate::AppState;
use crate::auth::Identity;
use crate::body::{AgentList, AgentView, ModelView, ProviderView, SandboxView, VersionSummary};
use crate::error::ApiError;
use crate::model_probe::probe_models;

/// Lists the agents with their model status. The model server is asked for all agents
/// at once, each probe bounded in time, so a dead server makes this slow by at most
/// the probe timeout, never hang.
#[utoipa::path(
    get,
    path = "/v1/agents",
    operation_id = "listAgents",
    tag = tags::AGENTS,
    responses((status = 200, description = "The agents, with their versions and traffic.", body = AgentList))
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Identity,
) -> Result<Json<AgentList>, ApiError> {
    let agents = state.hub.agents(&caller.0)?;
    let models = probe_models(&state.hub, agents, state.model_probe_timeout).await;
    let mut versions = state.versions.all_agent_versions(&caller.0).await?;
    Ok(Json(AgentList {
        agents: models
            .iter()
            .filter_map(|probe| {
                let agent = agents.get(&probe.agent)?;
                let versions = versions.remove(&probe.agent);
                Some(AgentView {
                    id: agent.name.clone(),
                    name: agent.name.clone(),
                    description: agent.description.clone(),
                    ensembles: agent.ensembles.clone(),
                    model: ModelView {
                        // Omitted when the server said nothing (external agents too).
                        capabilities: (!probe.capabilities.source.is_empty())
                            .then(|| (&probe.capabilities).into()),
                        ..ModelView::from(&probe.status)
                    },
                    providers: state
                        .hub
                        .provider_chain(agent)
                        .into_iter()
                        .map(ProviderView::from)
                        .collect(),
                    shadow: versions.as_ref().and_then(|v| v.shadow.clone()),
                    sandbox: SandboxView {
                        required: agent.sandbox.required,
                        in_force: agent.sandbox.in_force.clone(),
                        read_only: agent.sandbox.read_only.clone(),
                        read_write: agent.sandbox.read_write.clone(),
                    },
                    traffic: versions
                        .as_ref()
                        .map(|v| v.traffic.0.clone())
                        .unwrap_or_default(),
                    versions: versions
                        .map(|v| {
                            v.versions
                                .into_iter()
                                .map(|v| VersionSummary {
                                    stage: v.stage.as_str().to_owned(),
                                    version: v.version,
                                    weight: v.weight,
                                    shadow: v.shadow,
                                    baseline: v.baseline,
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                })
            })
            .collect(),
    }))
}
