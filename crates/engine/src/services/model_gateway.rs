//! The OpenAI-compatible gateway as the hub offers it: the caller's role, then one
//! admitted call (`crate::gateway`), and the models it lists. The call itself is
//! `crate::gateway` and `crate::metered`'s.

use super::state::Hub;
use crate::error::HubError;
use crate::identity::{Access, AsCaller};

impl Hub {
    /// Admits one OpenAI-compatible gateway call of `client` (see `crate::gateway`):
    /// validation, policies, rate limits and a budget reservation, before anything is
    /// sent to the client or the model.
    pub async fn gateway(
        &self,
        caller: &(impl AsCaller + ?Sized),
        request: agentplane_core::ChatRequest,
    ) -> Result<crate::gateway::AdmittedCall, HubError> {
        let caller = self.require(
            caller,
            Access::Operate,
            "calling a model through the gateway",
        )?;
        let client = caller.client();
        self.accepting()?;
        crate::gateway::admit(
            &self.deps,
            &self.config.gateway,
            &self.call_records,
            (client, caller.roles().names()),
            request,
        )
        .await
    }

    /// The models the model server offers, for the gateway's model list, and the name
    /// of the provider that owns them (the first configured: which one of the chain
    /// answered is not reported back). Needs the role that may call the gateway.
    pub async fn gateway_models(
        &self,
        caller: &(impl AsCaller + ?Sized),
    ) -> Result<(Vec<crate::ports::ModelInfo>, String), HubError> {
        self.require(caller, Access::Operate, "listing the gateway's models")?;
        let models = crate::gateway::models(&self.deps, &self.config.gateway).await?;
        let owner = self
            .deps
            .providers
            .names()
            .next()
            .unwrap_or("agentplane")
            .to_owned();
        Ok((models, owner))
    }
}
