//! Provider metrics: whether each provider is up, its calls by outcome, and failovers.
//!
//! Fed by the engine's `Providers` through [`ProviderTap`], not by events: a model call
//! made without a turn (the OpenAI-compatible gateway) counts too. Provider names come
//! from configuration and pass the same label cap as every other provider label.

use agentplane_engine::ports::CallOutcome;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::listed::Listed;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ProviderLabel {
    provider: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ProviderOutcomeLabels {
    provider: String,
    outcome: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct FailoverLabels {
    from: String,
    to: String,
}

/// The provider families, registered in the process registry.
pub(crate) struct ProviderMetrics {
    up: Family<ProviderLabel, Gauge>,
    requests: Family<ProviderOutcomeLabels, Counter>,
    failovers: Family<FailoverLabels, Counter>,
}

impl ProviderMetrics {
    /// Registers `provider_up`, `provider_requests_total` and
    /// `provider_failovers_total` in `registry`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let up = Family::default();
        registry.register(
            "provider_up",
            "Whether a model provider's circuit is closed (1) or open after consecutive \
             upstream failures (0), by provider",
            Listed(up.clone()),
        );
        let requests = Family::default();
        registry.register(
            "provider_requests",
            "Model calls, by provider and outcome (ok, upstream_error, error)",
            Listed(requests.clone()),
        );
        let failovers = Family::default();
        registry.register(
            "provider_failovers",
            "Model calls moved from one provider to the next after an upstream failure",
            Listed(failovers.clone()),
        );
        Self {
            up,
            requests,
            failovers,
        }
    }
}

impl ProviderMetrics {
    /// One call of `provider` (a label value that passed its cap) ended.
    pub(crate) fn call(&self, provider: String, outcome: CallOutcome) {
        self.requests
            .get_or_create(&ProviderOutcomeLabels {
                provider,
                outcome: outcome.as_str(),
            })
            .inc();
    }

    /// A failover from one provider to the next (label values that passed their cap).
    pub(crate) fn failover(&self, from: String, to: String) {
        self.failovers
            .get_or_create(&FailoverLabels { from, to })
            .inc();
    }

    /// A provider's circuit closed (`up`) or opened.
    pub(crate) fn health(&self, provider: String, up: bool) {
        self.up
            .get_or_create(&ProviderLabel { provider })
            .set(i64::from(up));
    }
}
