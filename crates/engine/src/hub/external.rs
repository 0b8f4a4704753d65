//! Turns of external agents (kind `acp`) inside the hub: which driver runs a turn, and
//! whether each external agent could run now (`GET /v1/agents`).
//!
//! Only the choice lives here; the driver is `crate::external_turn`, the protocol is in
//! the adapter behind `ExternalAgent`.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Hub;
use crate::external_turn::run_external_turn;
use crate::models::ModelStatus;
use crate::ports::Availability;
use crate::turn::{BegunTurn, EngineError, TurnObserver, TurnOutcome, TurnRequest, run_turn};

/// The longest an availability check may take before it counts as unavailable.
const AVAILABILITY_LIMIT: Duration = Duration::from_secs(3);

impl Hub {
    /// Runs a begun turn with the driver of its agent's kind.
    pub(super) async fn drive(
        &self,
        begun: BegunTurn,
        request: TurnRequest,
        observer: &dyn TurnObserver,
        cancel: CancellationToken,
    ) -> Result<TurnOutcome, EngineError> {
        match self.external.get(&request.agent.name).cloned() {
            Some(agent) => {
                run_external_turn(&self.deps, begun, request, agent.as_ref(), observer, cancel)
                    .await
            }
            None => run_turn(&self.deps, begun, request, observer, cancel).await,
        }
    }

    /// Whether `agent` is an external one, and if so whether it could run now (bounded
    /// in time: a check that hangs is reported as unavailable).
    pub async fn external_availability(&self, agent: &str) -> Option<Availability> {
        let external = self.external.get(agent)?;
        Some(
            match tokio::time::timeout(AVAILABILITY_LIMIT, external.availability()).await {
                Ok(availability) => availability,
                Err(_) => Availability::Unavailable(format!(
                    "the availability check did not finish within {} s",
                    AVAILABILITY_LIMIT.as_secs()
                )),
            },
        )
    }

    /// An external agent's availability as a model status: `Ready` with its label, or
    /// `Unavailable` with the reason. `None` for our own agents.
    pub(super) async fn external_status(&self, agent: &str) -> Option<ModelStatus> {
        let label = self.external_label(agent)?;
        Some(match self.external_availability(agent).await? {
            Availability::Available => ModelStatus::Ready { model: label },
            Availability::Unavailable(error) => ModelStatus::Unavailable {
                wanted: label,
                error,
            },
        })
    }

    /// The protocol and profile of an external agent (`acp:codex`).
    pub fn external_label(&self, agent: &str) -> Option<String> {
        self.external.get(agent).map(|a| a.label())
    }
}
