//! `GET /v1/agents`: every agent, the model its turns would use right now, and its
//! providers in failover order with their health.

use axum::Json;
use axum::extract::State;

use super::tags;
use crate::AppState;
use crate::auth::ClientId;
use crate::body::{AgentList, AgentView, ModelView, ProviderView};
use crate::model_probe::probe_models;

/// Lists the agents with their model status. The model server is asked for all agents
/// at once, each probe bounded in time, so a dead server makes this slow by at most
/// the probe timeout, never hang.
#[utoipa::path(
    get,
    path = "/v1/agents",
    operation_id = "listAgents",
    tag = tags::AGENTS,
    responses((status = 200, description = "The agents.", body = AgentList))
)]
pub(crate) async fn list(State(state): State<AppState>, _client: ClientId) -> Json<AgentList> {
    let models = probe_models(&state.hub, state.model_probe_timeout).await;
    let agents = state.hub.agents();
    Json(AgentList {
        agents: models
            .iter()
            .filter_map(|probe| {
                let agent = agents.get(&probe.agent)?;
                Some(AgentView {
                    id: agent.name.clone(),
                    name: agent.name.clone(),
                    description: agent.description.clone(),
                    ensembles: agent.ensembles.clone(),
                    model: ModelView::from(&probe.status),
                    providers: state
                        .hub
                        .provider_chain(agent)
                        .into_iter()
                        .map(ProviderView::from)
                        .collect(),
                })
            })
            .collect(),
    })
}
