//! The OpenAI-compatible gateway's service: the caller's role, then one admitted call
//! (`crate::gateway`: validation, policies, content, rate limits, the budget
//! reservation), and the models it lists. The call itself is `crate::gateway` and
//! `crate::metered`'s; its record goes through [`CallRecords`] to the call port.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::identity::Identity;
use crate::call_records::CallRecords;
use crate::error::HubError;
use crate::gateway::GatewayConfig;
use crate::gateway::KeptResponses;
use crate::identity::{Access, AsCaller};
use crate::turn::TurnDeps;

/// Governed model calls for outside clients.
pub struct ModelGateway {
    identity: Arc<Identity>,
    /// The providers, the governance and the call port (budgets read spend from it).
    deps: TurnDeps,
    config: GatewayConfig,
    records: Arc<CallRecords>,
    /// Cleared when the process begins to shut down: no call starts after.
    accepting: Arc<AtomicBool>,
    /// Where Responses-API answers are kept for `previous_response_id`; `None` (a hub
    /// built for tests): none are.
    responses: Option<Arc<KeptResponses>>,
}

impl ModelGateway {
    pub(crate) fn new(
        identity: Arc<Identity>,
        deps: TurnDeps,
        config: GatewayConfig,
        records: Arc<CallRecords>,
        accepting: Arc<AtomicBool>,
        responses: Option<Arc<KeptResponses>>,
    ) -> Self {
        Self {
            identity,
            deps,
            config,
            records,
            accepting,
            responses,
        }
    }

    /// The conversation so far of the kept answer `id` of the caller, for a Responses
    /// call that names it as `previous_response_id` (`crate::gateway::previous`):
    /// `NotFound` for an id never kept, expired or another client's.
    pub async fn previous_response(
        &self,
        caller: &(impl AsCaller + ?Sized),
        id: &str,
    ) -> Result<Vec<agentplane_core::ChatMessage>, HubError> {
        let caller = self.identity.require(
            caller,
            Access::Operate,
            "calling a model through the gateway",
        )?;
        let Some(kept) = &self.responses else {
            return Err(HubError::NotFound(format!(
                "previous_response_id: no response `{id}` is kept (this server keeps none)"
            )));
        };
        kept.previous(caller.client(), id).await
    }

    /// `call`, kept once answered for `previous_response_id`, leaving out its first
    /// `skip` messages (the `instructions`). Unchanged when this server keeps none.
    pub fn keeping(
        &self,
        call: crate::gateway::AdmittedCall,
        skip: usize,
    ) -> crate::gateway::AdmittedCall {
        match &self.responses {
            Some(kept) => call.keeping(crate::gateway::Keep {
                kept: Arc::clone(kept),
                skip,
            }),
            None => call,
        }
    }

    /// Admits one gateway call of `client` that came in by `route` (see `crate::gateway`):
    /// validation, policies, rate limits and a budget reservation, before anything is
    /// sent to the client or the model.
    pub async fn call(
        &self,
        caller: &(impl AsCaller + ?Sized),
        route: crate::gateway::GatewayRoute,
        request: agentplane_core::ChatRequest,
    ) -> Result<crate::gateway::AdmittedCall, HubError> {
        let caller = self.identity.require(
            caller,
            Access::Operate,
            "calling a model through the gateway",
        )?;
        if !self.accepting.load(Ordering::SeqCst) {
            return Err(HubError::ShuttingDown);
        }
        crate::gateway::admit(
            &self.deps,
            &self.config,
            &self.records,
            (caller.client(), caller.roles().names()),
            route,
            request,
        )
        .await
    }

    /// About how many tokens `request`'s input is, for Anthropic's `count_tokens`: four
    /// bytes a token, as English text and code run (the budget's reservation counts a
    /// token per byte, the upper bound). Needs the role that may call the gateway.
    pub fn count_tokens(
        &self,
        caller: &(impl AsCaller + ?Sized),
        request: &agentplane_core::ChatRequest,
    ) -> Result<u64, HubError> {
        self.identity
            .require(caller, Access::Operate, "counting a gateway call's tokens")?;
        let (bytes, _) = crate::governance::budget::worst_case_tokens(request, 0);
        Ok(bytes.div_ceil(4))
    }

    /// The models the model server offers, for the gateway's model list, and the name
    /// of the provider that owns them (the first configured: which one of the chain
    /// answered is not reported back). Needs the role that may call the gateway.
    pub async fn models(
        &self,
        caller: &(impl AsCaller + ?Sized),
    ) -> Result<(Vec<crate::ports::ModelInfo>, String), HubError> {
        self.identity
            .require(caller, Access::Operate, "listing the gateway's models")?;
        let models = crate::gateway::models(&self.deps, &self.config).await?;
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
