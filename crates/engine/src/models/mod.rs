//! Named model providers, the routing rules between them, failover and health: the
//! one way the engine reaches a model.
//!
//! [`Providers::chat`] is the single entry point for a model call, used by the turn
//! loop and by anything else that calls a model without a turn (it records nothing:
//! failovers go to a callback, the caller decides what to store). A call walks the
//! route's chain of providers: each attempt resolves the provider's model, calls it,
//! and on an upstream failure (unreachable, 5xx, 429 after retries, a stream that
//! broke, a timeout) moves to the next provider. A capability or request error (no
//! tool support, no model, a 4xx) never fails over: it is the clear error it is
//! (seed 000 ADR-008, ADR 0013). Providers whose circuit is open (`health.rs`) go to
//! the end of the chain, so they are tried only when nothing else answered.
//!
//! Model choice lives here too: which model a server offers fits an agent (`choice.rs`)
//! and the short-lived cache of those resolutions (`resolver.rs`).
//!
//! What must not live here: any wire format or HTTP (adapters), any storage.

pub mod choice;
mod health;
mod resolver;
mod routing;

use std::sync::Arc;
use std::time::Instant;

use agentplane_core::{ChatRequest, ChatResponse};

use crate::ports::model::TextSink;
use crate::ports::{Capabilities, ChatModel, EmbeddingRequest, Embeddings, ModelError, ModelInfo};

use health::said;
pub use health::{CircuitSettings, HealthReport};
pub use resolver::{ModelResolver, ModelStatus};
pub use routing::{
    MEDIUM_MAX_CHARS, RouteKey, RouteRule, Routing, RuleMatch, SMALL_MAX_CHARS, TaskSize,
};

/// The name of the one provider built from `[llm]` when no `[providers]` are configured.
pub const DEFAULT_PROVIDER: &str = "default";

/// A configured provider, as the composition root hands it over.
pub struct ProviderConfig {
    /// The name in `[providers.NAME]`: what events, metrics and routes call it.
    pub name: String,
    /// The API it speaks (`openai`, `anthropic`), for people.
    pub kind: String,
    /// The model this provider always uses; `None`: the agent's (or default) model,
    /// resolved against what the provider offers.
    pub model: Option<String>,
    pub client: Arc<dyn ChatModel>,
    /// Whether a gateway client's call this provider wrote as text is recovered
    /// (`tool_calls = "recover"`, or `"auto"` for a local provider: `crate::gateway`).
    pub recover_text_calls: bool,
}

use crate::ports::Telemetry;
pub use crate::ports::telemetry::CallOutcome;

/// A failover about to happen: `from` failed upstream with `error`, `to` is next.
#[derive(Debug)]
pub struct Failover<'a> {
    pub from: &'a str,
    pub to: &'a str,
    pub error: &'a ModelError,
}

/// A model call's answer and the provider that gave it.
#[derive(Debug, Clone, PartialEq)]
pub struct Routed {
    pub response: ChatResponse,
    pub provider: String,
}

/// A provider in a chain, as `GET /v1/agents` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderReport {
    pub name: String,
    pub kind: String,
    /// The configured model, if the provider has one.
    pub model: Option<String>,
    pub health: HealthReport,
}

/// Whether `error` is the server's failure (worth the next provider) rather than a
/// capability or request error (which another provider would not fix, or which must
/// stay visible: a bad key, a bad request, a model without tools).
pub fn is_upstream(error: &ModelError) -> bool {
    match error {
        ModelError::Unreachable { .. }
        | ModelError::RateLimited { .. }
        | ModelError::Protocol(_)
        | ModelError::Timeout { .. } => true,
        ModelError::Upstream { status, .. } => *status >= 500 || *status == 408,
        ModelError::NoToolSupport { .. } | ModelError::NoModel { .. } => false,
    }
}

struct Entry {
    config: ProviderConfig,
    health: health::Health,
    resolver: ModelResolver,
}

impl Entry {
    fn name(&self) -> &str {
        &self.config.name
    }

    /// The model this provider is asked for when the caller wants `wanted`.
    fn wanted<'a>(&'a self, wanted: &'a str) -> &'a str {
        self.config.model.as_deref().unwrap_or(wanted)
    }
}

/// The configured providers, their routing and their health. One per process.
pub struct Providers {
    entries: Vec<Entry>,
    routing: Routing,
    circuit: CircuitSettings,
    /// Where provider calls, failovers and circuit changes are reported.
    telemetry: Telemetry,
    /// Models seen answering a request with tools in text instead of native calls,
    /// for the life of the process (ADR 0037): `auto` constrains their turns at once.
    text_calls: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// Most models [`Providers::note_text_calls`] remembers.
const MAX_TEXT_CALL_MODELS: usize = 1024;

impl std::fmt::Debug for Providers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Providers")
            .field(
                "providers",
                &self.entries.iter().map(Entry::name).collect::<Vec<_>>(),
            )
            .field("routing", &self.routing)
            .field("circuit", &self.circuit)
            .finish_non_exhaustive()
    }
}

impl Providers {
    /// Providers with routing. Every name in `routing` must be a provider, every chain
    /// non-empty and the names unique; the error says which is not.
    pub fn new(
        providers: Vec<ProviderConfig>,
        routing: Routing,
        circuit: CircuitSettings,
        telemetry: Telemetry,
    ) -> Result<Self, String> {
        if providers.is_empty() {
            return Err("no provider is configured".to_owned());
        }
        let mut seen = std::collections::BTreeSet::new();
        for provider in &providers {
            if !seen.insert(provider.name.as_str()) {
                return Err(format!("provider `{}` is configured twice", provider.name));
            }
        }
        let chains =
            std::iter::once(&routing.default).chain(routing.rules.iter().map(|r| &r.providers));
        for chain in chains {
            if chain.is_empty() {
                return Err("a routing chain names no provider".to_owned());
            }
            if let Some(unknown) = chain.iter().find(|n| !seen.contains(n.as_str())) {
                return Err(format!("routing names an unknown provider `{unknown}`"));
            }
        }
        Ok(Self::unchecked(providers, routing, circuit, telemetry))
    }

    /// One provider named [`DEFAULT_PROVIDER`] that every route uses: what `[llm]`
    /// alone configures, and what tests with one model server need.
    pub fn single(client: Arc<dyn ChatModel>) -> Self {
        Self::single_reporting(client, Telemetry::default())
    }

    /// [`Providers::single`] reporting to `telemetry`.
    pub fn single_reporting(client: Arc<dyn ChatModel>, telemetry: Telemetry) -> Self {
        let kind = client.provider().to_owned();
        let provider = ProviderConfig {
            name: DEFAULT_PROVIDER.to_owned(),
            kind,
            model: None,
            client,
            // The one provider of `[llm]`, local by default (a llama.cpp server).
            recover_text_calls: true,
        };
        let routing = Routing {
            default: vec![DEFAULT_PROVIDER.to_owned()],
            rules: Vec::new(),
        };
        // One provider named in its own default chain: nothing to check.
        Self::unchecked(
            vec![provider],
            routing,
            CircuitSettings::default(),
            telemetry,
        )
    }

    fn unchecked(
        providers: Vec<ProviderConfig>,
        routing: Routing,
        circuit: CircuitSettings,
        telemetry: Telemetry,
    ) -> Self {
        for provider in &providers {
            telemetry.provider_health(&provider.name, true);
        }
        Self {
            entries: providers
                .into_iter()
                .map(|config| Entry {
                    config,
                    health: health::Health::default(),
                    resolver: ModelResolver::default(),
                })
                .collect(),
            routing,
            circuit,
            telemetry,
            text_calls: Default::default(),
        }
    }

    /// The provider names, in configuration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(Entry::name)
    }

    /// These providers with recovery of calls written as text switched `on` for all.
    pub fn recovering_text_calls(mut self, on: bool) -> Self {
        for entry in &mut self.entries {
            entry.config.recover_text_calls = on;
        }
        self
    }

    /// Whether calls `provider` wrote as text are recovered for gateway clients.
    pub fn recovers_text_calls(&self, provider: &str) -> bool {
        self.entries
            .iter()
            .any(|e| e.name() == provider && e.config.recover_text_calls)
    }

    /// Whether any provider's calls written as text are recovered: a streamed gateway
    /// answer that may be one is held back until it is known.
    pub fn any_recovers_text_calls(&self) -> bool {
        self.entries.iter().any(|e| e.config.recover_text_calls)
    }

    /// The routing rules in force.
    pub fn routing(&self) -> &Routing {
        &self.routing
    }

    /// The chain for `key` as it will be tried now: the configured order, providers
    /// with an open circuit moved to the end.
    fn ordered(&self, key: &RouteKey<'_>) -> Vec<&Entry> {
        let now = Instant::now();
        let chain: Vec<&Entry> = self
            .routing
            .chain(key)
            .iter()
            .filter_map(|name| self.entries.iter().find(|e| e.name() == name))
            .collect();
        let (open, closed): (Vec<&Entry>, Vec<&Entry>) =
            chain.into_iter().partition(|e| e.health.is_open(now));
        closed.into_iter().chain(open).collect()
    }

    /// The chain for `key` in configured order, each provider with its health.
    pub fn chain_report(&self, key: &RouteKey<'_>) -> Vec<ProviderReport> {
        let now = Instant::now();
        self.routing
            .chain(key)
            .iter()
            .filter_map(|name| self.entries.iter().find(|e| e.name() == name))
            .map(|e| ProviderReport {
                name: e.config.name.clone(),
                kind: e.config.kind.clone(),
                model: e.config.model.clone(),
                health: e.health.report(now),
            })
            .collect()
    }

    /// Every provider with its health, in configuration order.
    pub fn report(&self) -> Vec<ProviderReport> {
        let now = Instant::now();
        self.entries
            .iter()
            .map(|e| ProviderReport {
                name: e.config.name.clone(),
                kind: e.config.kind.clone(),
                model: e.config.model.clone(),
                health: e.health.report(now),
            })
            .collect()
    }

    fn succeeded(&self, entry: &Entry) {
        if entry.health.succeeded() {
            self.telemetry.provider_health(entry.name(), true);
        }
    }

    /// Notes a failure; returns whether it is an upstream one.
    fn failed(&self, entry: &Entry, error: &ModelError) -> bool {
        let upstream = is_upstream(error);
        if upstream {
            if entry
                .health
                .failed_upstream(said(error), &self.circuit, Instant::now())
            {
                tracing::warn!(provider = entry.name(), %error, "provider circuit opened");
                self.telemetry.provider_health(entry.name(), false);
            }
        } else {
            entry.health.failed_otherwise(said(error));
        }
        upstream
    }

    /// The model one provider would be called with for `wanted`.
    async fn resolve_on(&self, entry: &Entry, wanted: &str) -> Result<String, ModelError> {
        let resolved = entry
            .resolver
            .resolve(entry.config.client.as_ref(), entry.wanted(wanted))
            .await;
        match &resolved {
            Ok(_) => self.succeeded(entry),
            Err(error) => {
                self.failed(entry, error);
            }
        }
        resolved
    }

    /// What the first provider of `key`'s chain that answers offers (the gateway's
    /// model list); an upstream failure moves to the next provider.
    pub async fn list_models(&self, key: &RouteKey<'_>) -> Result<Vec<ModelInfo>, ModelError> {
        let mut last = None;
        for entry in self.ordered(key) {
            match entry.config.client.list_models().await {
                Ok(models) => {
                    self.succeeded(entry);
                    return Ok(models);
                }
                Err(error) => {
                    self.failed(entry, &error);
                    if !is_upstream(&error) {
                        return Err(error);
                    }
                    last = Some(error);
                }
            }
        }
        Err(last.unwrap_or_else(|| ModelError::NoModel {
            reason: "no provider is configured".to_owned(),
            available: Vec::new(),
        }))
    }

    /// The model a call routed by `key` would use for `wanted`, on the first provider
    /// of the chain that answers: an upstream failure moves to the next provider, a
    /// capability error (`NoModel`) is returned at once.
    pub async fn resolve(&self, key: &RouteKey<'_>, wanted: &str) -> Result<String, ModelError> {
        self.resolve_with_provider(key, wanted)
            .await
            .map(|(model, _)| model)
    }

    async fn resolve_with_provider<'s>(
        &'s self,
        key: &RouteKey<'_>,
        wanted: &str,
    ) -> Result<(String, &'s Entry), ModelError> {
        let chain = self.ordered(key);
        let mut last = None;
        for entry in chain {
            match self.resolve_on(entry, wanted).await {
                Ok(model) => return Ok((model, entry)),
                Err(error) if is_upstream(&error) => last = Some(error),
                Err(error) => return Err(error),
            }
        }
        Err(last.unwrap_or_else(|| ModelError::NoModel {
            reason: "no provider is routed to".to_owned(),
            available: Vec::new(),
        }))
    }

    /// What the model a call routed by `key` would use for `wanted` can do, as its
    /// server says (ADR 0032); unknown when no provider answers.
    pub async fn capabilities(&self, key: &RouteKey<'_>, wanted: &str) -> Capabilities {
        // A probe, not a call: it leaves the providers' health and metrics alone, and
        // asks only the first provider the call would go to.
        let Some(entry) = self.ordered(key).into_iter().next() else {
            return Capabilities::default();
        };
        let client = entry.config.client.as_ref();
        match entry.resolver.resolve(client, entry.wanted(wanted)).await {
            Ok(model) => entry.resolver.capabilities(client, &model).await,
            Err(_) => Capabilities::default(),
        }
    }

    /// Remembers that `model` answered a request with tools in text: it makes no
    /// native calls, whatever its server says.
    pub fn note_text_calls(&self, model: &str) {
        if let Ok(mut seen) = self.text_calls.lock()
            && seen.len() < MAX_TEXT_CALL_MODELS
        {
            seen.insert(model.to_owned());
        }
    }

    /// Whether `model` was seen answering with tools in text ([`Self::note_text_calls`]).
    pub fn text_calls_seen(&self, model: &str) -> bool {
        self.text_calls
            .lock()
            .is_ok_and(|seen| seen.contains(model))
    }

    /// What `wanted` looks like for a call routed by `key`, right now.
    pub async fn status(&self, key: &RouteKey<'_>, wanted: &str) -> ModelStatus {
        match self.resolve_with_provider(key, wanted).await {
            Ok((model, entry)) if model == entry.wanted(wanted) => ModelStatus::Ready { model },
            Ok((model, entry)) => ModelStatus::Substitute {
                wanted: entry.wanted(wanted).to_owned(),
                model,
            },
            Err(e) => ModelStatus::Unavailable {
                wanted: wanted.to_owned(),
                error: said(&e),
            },
        }
    }

    /// Embeddings routed by `key`, with failover: to the next provider on an upstream
    /// failure or when one serves no embeddings. The model is the request's as named
    /// (an embedding model is not a chat model to resolve against).
    pub async fn embed(
        &self,
        key: &RouteKey<'_>,
        request: &EmbeddingRequest,
    ) -> Result<(Embeddings, String), ModelError> {
        let mut last = None;
        for entry in self.ordered(key) {
            match entry.config.client.embed(request).await {
                Ok(embeddings) => {
                    self.succeeded(entry);
                    self.telemetry.provider_call(entry.name(), CallOutcome::Ok);
                    return Ok((embeddings, entry.config.name.clone()));
                }
                Err(error @ ModelError::NoModel { .. }) => last = Some(error),
                Err(error) => {
                    let upstream = self.failed(entry, &error);
                    let outcome = if upstream {
                        CallOutcome::UpstreamError
                    } else {
                        CallOutcome::Error
                    };
                    self.telemetry.provider_call(entry.name(), outcome);
                    if !upstream {
                        return Err(error);
                    }
                    tracing::warn!(from = entry.name(), %error, "embeddings failed over");
                    last = Some(error);
                }
            }
        }
        Err(last.unwrap_or(ModelError::NoModel {
            reason: "no provider is routed to".to_owned(),
            available: Vec::new(),
        }))
    }

    /// One model call routed by `key`, with failover.
    ///
    /// `request.model` is the wanted model: each provider is called with its own
    /// configured model, or with `request.model` resolved against what it offers.
    /// Text deltas of every attempt go to `on_text`; before the next provider is
    /// tried, `on_failover` is told why, so a reader knows the following text restarts
    /// the answer. The error returned is the last provider's, or the first error that
    /// is not an upstream failure.
    pub async fn chat(
        &self,
        key: &RouteKey<'_>,
        request: &ChatRequest,
        on_text: &mut TextSink<'_>,
        on_failover: &mut (dyn FnMut(Failover<'_>) + Send),
    ) -> Result<Routed, ModelError> {
        let chain = self.ordered(key);
        let mut attempts = chain.iter().peekable();
        while let Some(entry) = attempts.next() {
            // `resolve_on` notes a resolution failure's health itself.
            let mut noted = false;
            let answered = match self.resolve_on(entry, &request.model).await {
                Ok(model) if model == request.model => {
                    entry.config.client.chat(request, &mut *on_text).await
                }
                Ok(model) => {
                    let request = ChatRequest {
                        model,
                        ..request.clone()
                    };
                    entry.config.client.chat(&request, &mut *on_text).await
                }
                Err(error) => {
                    noted = true;
                    Err(error)
                }
            };
            let error = match answered {
                Ok(response) => {
                    self.succeeded(entry);
                    self.telemetry.provider_call(entry.name(), CallOutcome::Ok);
                    return Ok(Routed {
                        response,
                        provider: entry.config.name.clone(),
                    });
                }
                Err(error) => error,
            };
            let upstream = if noted {
                is_upstream(&error)
            } else {
                self.failed(entry, &error)
            };
            let outcome = if upstream {
                CallOutcome::UpstreamError
            } else {
                CallOutcome::Error
            };
            self.telemetry.provider_call(entry.name(), outcome);
            match attempts.peek() {
                Some(next) if upstream => {
                    tracing::warn!(from = entry.name(), to = next.name(), %error, "provider failover");
                    self.telemetry.failover(entry.name(), next.name());
                    on_failover(Failover {
                        from: entry.name(),
                        to: next.name(),
                        error: &error,
                    });
                }
                _ => return Err(error),
            }
        }
        Err(ModelError::NoModel {
            reason: "no provider is routed to".to_owned(),
            available: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_upstream_failures_fail_over() {
        let upstream = [
            ModelError::Unreachable {
                url: "u".into(),
                detail: "refused".into(),
            },
            ModelError::RateLimited { body: "b".into() },
            ModelError::Protocol("cut".into()),
            ModelError::Timeout { seconds: 1 },
            ModelError::Upstream {
                status: 500,
                body: "b".into(),
            },
            ModelError::Upstream {
                status: 529,
                body: "b".into(),
            },
            ModelError::Upstream {
                status: 408,
                body: "b".into(),
            },
        ];
        for error in &upstream {
            assert!(is_upstream(error), "{error:?}");
        }
        let kept = [
            ModelError::NoToolSupport { model: "m".into() },
            ModelError::NoModel {
                reason: "r".into(),
                available: vec![],
            },
            ModelError::Upstream {
                status: 400,
                body: "b".into(),
            },
            ModelError::Upstream {
                status: 401,
                body: "b".into(),
            },
            ModelError::Upstream {
                status: 404,
                body: "b".into(),
            },
        ];
        for error in &kept {
            assert!(!is_upstream(error), "{error:?}");
        }
    }
}
