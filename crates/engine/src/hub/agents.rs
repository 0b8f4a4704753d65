//! The agents the hub serves and the models they use: listing them (and the policies in
//! force), one by name, the model an agent asks for and would get, what it can do and
//! the providers its turns go to. What must not live here: the turn (`turns.rs`,
//! `plan.rs`), model calls (`crate::models`).

use std::collections::BTreeMap;
use std::sync::Arc;

use agentplane_core::AgentSpec;

use super::state::Hub;
use crate::error::HubError;
use crate::identity::{Access, AsCaller};
use crate::models::{ModelStatus, ProviderReport, RouteKey, TaskSize};

/// The route of a model call of `agent` for a task of `size`.
fn route_of(agent: &AgentSpec, size: TaskSize) -> RouteKey<'_> {
    RouteKey {
        agent: &agent.name,
        tags: &agent.tags,
        size,
        pinned: &[],
    }
}

impl Hub {
    /// Every agent, by name, for `caller` (every access role may list them).
    pub fn agents(
        &self,
        caller: &(impl AsCaller + ?Sized),
    ) -> Result<&BTreeMap<String, AgentSpec>, HubError> {
        self.identity
            .require(caller, Access::List, "listing agents")?;
        Ok(&self.agents)
    }

    /// The policies in force and the latest reload's result, for `caller` (every
    /// access role may list them).
    pub fn policies(
        &self,
        caller: &(impl AsCaller + ?Sized),
    ) -> Result<&Arc<crate::governance::ActivePolicies>, HubError> {
        self.identity
            .require(caller, Access::List, "listing policies")?;
        Ok(&self.deps.governance.policies)
    }

    /// The model an agent asks for: its own, else the configured default.
    pub fn wanted_model<'a>(&'a self, agent: &'a AgentSpec) -> &'a str {
        agent.model.as_deref().unwrap_or(&self.config.default_model)
    }

    /// The model an agent would use right now (on the first provider of its default
    /// route that answers).
    pub async fn model_status(&self, agent: &AgentSpec) -> ModelStatus {
        // An external agent's "model" is the agent process itself.
        if let Some(status) = self.external_status(&agent.name).await {
            return status;
        }
        self.deps
            .providers
            .status(&route_of(agent, TaskSize::Small), self.wanted_model(agent))
            .await
    }

    /// What the model an agent would use can do, as its server says (ADR 0032);
    /// unknown for an external agent and when no provider answers.
    pub async fn model_capabilities(&self, agent: &AgentSpec) -> crate::ports::Capabilities {
        if self.external_status(&agent.name).await.is_some() {
            return crate::ports::Capabilities::default();
        }
        self.deps
            .providers
            .capabilities(&route_of(agent, TaskSize::Small), self.wanted_model(agent))
            .await
    }

    /// The providers an agent's turns go to (its route for a small task, the usual
    /// case), in failover order, each with its health.
    pub fn provider_chain(&self, agent: &AgentSpec) -> Vec<ProviderReport> {
        self.deps
            .providers
            .chain_report(&route_of(agent, TaskSize::Small))
    }

    /// The model a turn of `agent` of this size starts with, resolved on its route.
    pub(super) async fn resolve_model(
        &self,
        agent: &AgentSpec,
        size: TaskSize,
    ) -> Result<String, HubError> {
        Ok(self
            .deps
            .providers
            .resolve(&route_of(agent, size), self.wanted_model(agent))
            .await?)
    }

    /// An agent by name, or an error listing the known ones.
    pub fn agent(&self, name: &str) -> Result<&AgentSpec, HubError> {
        self.agents.get(name).ok_or_else(|| {
            HubError::InvalidArgument(format!(
                "unknown agent `{name}`; the agents are: {}",
                self.agents.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })
    }
}
