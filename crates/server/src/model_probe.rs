//! Asking the model server about every agent's model at once, bounded in time.
//!
//! Used by `GET /v1/agents` and the startup summary. The probes run concurrently and
//! each is cut off after a short timeout, so a model server that accepts connections
//! but never answers cannot hang either of them; a probe cut off reports the model as
//! unavailable and says why.

use std::collections::BTreeMap;
use std::time::Duration;

use agentplane_core::AgentSpec;
use agentplane_engine::hub::Hub;
use agentplane_engine::models::ModelStatus;
use agentplane_engine::ports::Capabilities;

/// How long one probe may take by default.
pub const MODEL_PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// An agent and the status of its model.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentModel {
    /// The agent's name.
    pub agent: String,
    /// What the model server said, or why it said nothing in time.
    pub status: ModelStatus,
    /// What the server says the model can do (unknown when it said nothing in time).
    pub capabilities: Capabilities,
}

/// The model status of every agent, in the hub's (name) order.
pub async fn probe_models(
    hub: &Hub,
    agents: &BTreeMap<String, AgentSpec>,
    timeout: Duration,
) -> Vec<AgentModel> {
    let probes = agents.values().map(|agent| async move {
        let probe = async {
            let status = hub.model_status(agent).await;
            let capabilities = match status {
                ModelStatus::Unavailable { .. } => Capabilities::default(),
                _ => hub.model_capabilities(agent).await,
            };
            (status, capabilities)
        };
        let (status, capabilities) = match tokio::time::timeout(timeout, probe).await {
            Ok(probed) => probed,
            Err(_) => (
                ModelStatus::Unavailable {
                    wanted: hub.wanted_model(agent).to_owned(),
                    error: format!(
                        "the model server did not answer within {} ms",
                        timeout.as_millis()
                    ),
                },
                Capabilities::default(),
            ),
        };
        AgentModel {
            agent: agent.name.clone(),
            status,
            capabilities,
        }
    });
    futures_util::future::join_all(probes).await
}
