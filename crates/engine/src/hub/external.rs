//! External agents (kind `acp`) inside the hub: whether each could run now (`GET
//! /v1/agents`) and its label. Which driver runs a turn is decided in `plan.rs`; the
//! driver is `crate::external_turn`, the protocol is in the adapter behind
//! `ExternalAgent`.

use std::time::Duration;

use super::Hub;
use crate::models::ModelStatus;
use crate::ports::Availability;

/// The longest an availability check may take before it counts as unavailable.
const AVAILABILITY_LIMIT: Duration = Duration::from_secs(3);

impl Hub {
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
