//! [`Metrics`] as a telemetry sink (`agentplane_engine::ports::telemetry`): what each
//! stored event changes in the metrics, and the signals outside turns; the provider and
//! execution signals are counted in `providers.rs` and `executions.rs`.
//!
//! Called on the turn's task for every stored event, so each arm is a few atomic
//! updates and at most one short lock; events that no metric counts cost a match.

use std::time::Instant;

use agentplane_core::policy::PolicyKind;
use agentplane_core::{Event, EventPayload, ToolStatus, TurnId, usd_of_micros};
use agentplane_engine::ports::{CallOutcome, ExecutionStatus, ModelCallRecord, TelemetrySink};

use crate::labels::{
    AgentDecisionLabels, AgentLabel, AgentProviderLabels, AgentStatusLabels, ContentLabels, OTHER,
    PolicyAgentKindLabels, PolicyAgentLabels, PolicyWouldLabels, ToolLabel, ToolStatusLabels,
};
use crate::metrics::Metrics;
use crate::timed::MAX_TIMED_TURNS;

impl TelemetrySink for Metrics {
    fn on_event(&self, agent: &str, event: &Event) {
        match &event.payload {
            EventPayload::TurnStarted { .. } => self.turn_started(&event.turn_id),
            EventPayload::TurnCompleted { stop_reason, .. } => {
                let agent = self.agents.admit(agent);
                if let Some(started) = self.turn_ended(&event.turn_id) {
                    self.execution_seconds
                        .get_or_create(&AgentLabel {
                            agent: agent.clone(),
                        })
                        .observe(started.elapsed().as_secs_f64());
                }
                self.executions
                    .get_or_create(&AgentStatusLabels {
                        agent,
                        status: stop_reason.as_str(),
                    })
                    .inc();
            }
            EventPayload::Cost {
                provider,
                usd_micros,
                ..
            } => {
                self.cost_usd
                    .get_or_create(&AgentProviderLabels {
                        agent: self.agents.admit(agent),
                        provider: self.providers.admit(provider),
                    })
                    .inc_by(usd_of_micros(*usd_micros));
            }
            EventPayload::PolicyViolation { policy, .. } => {
                self.violations
                    .get_or_create(&PolicyAgentLabels {
                        policy: self.policies.admit(policy),
                        agent: self.agents.admit(agent),
                    })
                    .inc();
            }
            EventPayload::PolicyDenied {
                policy,
                policy_type,
                ..
            } => self.count_denial(policy, agent, policy_type),
            EventPayload::PolicyAudited { policy, would, .. } => {
                self.count_audited(policy, agent, would);
            }
            EventPayload::ContentFinding {
                policy,
                surface,
                detector,
                action,
                ..
            } => self.count_content(policy, surface, detector, action),
            EventPayload::Egress { allowed, .. } => {
                self.egress
                    .get_or_create(&AgentDecisionLabels {
                        agent: self.agents.admit(agent),
                        decision: if *allowed { "allowed" } else { "refused" },
                    })
                    .inc();
            }
            EventPayload::ApprovalRequested { .. } => {
                self.approval_queue.inc();
            }
            EventPayload::ApprovalDecided { .. } => self.approval_left_queue(),
            EventPayload::ToolCallPlanned {
                tool,
                recovered: true,
                ..
            } => {
                self.recovered_calls
                    .get_or_create(&ToolLabel {
                        tool: self.tools.admit(tool),
                    })
                    .inc();
            }
            EventPayload::ToolCallResult {
                tool,
                status,
                latency_ms,
                ..
            } => self.tool_call(tool, *status, *latency_ms),
            // Deltas, other planned calls, permissions, usage, errors and security events
            // count in no metric (errors show as `status="error"` executions).
            _ => {}
        }
    }

    fn on_mcp_gateway_call(&self, tool: &str, status: ToolStatus, latency_ms: u64) {
        self.tool_call(tool, status, latency_ms);
    }

    /// A gateway call refused by a policy: counted like a `policy_denied` event.
    fn on_policy_denied(&self, agent: &str, policy: &str, policy_type: &str) {
        self.count_denial(policy, agent, policy_type);
    }

    /// A gateway call's would-be decision: counted like a `policy_audited` event.
    fn on_policy_audited(&self, agent: &str, policy: &str, would: &str) {
        self.count_audited(policy, agent, would);
    }

    fn on_content_finding(&self, policy: &str, surface: &str, detector: &str, action: &str) {
        self.count_content(policy, surface, detector, action);
    }

    /// A gateway call costs what a turn's model call does, under the gateway's agent.
    fn on_usage_over_reported(&self, agent: &str, provider: &str) {
        self.over_reported
            .get_or_create(&AgentProviderLabels {
                agent: self.agents.admit(agent),
                provider: self.providers.admit(provider),
            })
            .inc();
    }

    fn on_model_call(&self, call: &ModelCallRecord) {
        self.cost_usd
            .get_or_create(&AgentProviderLabels {
                agent: self.agents.admit(&call.agent),
                provider: self.providers.admit(&call.provider),
            })
            .inc_by(usd_of_micros(call.usd_micros));
    }

    fn on_provider_call(&self, provider: &str, outcome: CallOutcome) {
        self.provider_metrics
            .call(self.providers.admit(provider), outcome);
    }

    fn on_failover(&self, from: &str, to: &str) {
        let from = self.providers.admit(from);
        self.provider_metrics
            .failover(from, self.providers.admit(to));
    }

    fn on_provider_health(&self, provider: &str, up: bool) {
        self.provider_metrics
            .health(self.providers.admit(provider), up);
    }

    fn on_execution_queue(&self, queued: u64) {
        self.async_executions.queue_depth(queued);
    }

    fn on_execution_finished(&self, agent: &str, status: ExecutionStatus) {
        self.async_executions
            .finished(self.agents.admit(agent), status);
    }
}

impl Metrics {
    /// Notes when a turn started. When the map is full (turns whose end this process
    /// will never see), the earliest started entry goes: a scan, but only at the bound.
    fn turn_started(&self, turn: &TurnId) {
        let mut timed = self.started.lock().unwrap_or_else(|p| p.into_inner());
        if timed.started.len() >= MAX_TIMED_TURNS
            && let Some(oldest) = timed
                .started
                .iter()
                .min_by_key(|(_, (order, _))| *order)
                .map(|(id, _)| id.clone())
        {
            timed.started.remove(&oldest);
        }
        let order = timed.next;
        timed.next += 1;
        timed.started.insert(turn.clone(), (order, Instant::now()));
    }

    /// When the turn started, if this process saw it start.
    fn turn_ended(&self, turn: &TurnId) -> Option<Instant> {
        self.started
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .started
            .remove(turn)
            .map(|(_, at)| at)
    }
}

impl Metrics {
    /// One tool call in `tool_calls_total` and `tool_call_latency_seconds`: a turn's
    /// (its `tool_call_result` event) or the MCP gateway's.
    fn tool_call(&self, tool: &str, status: ToolStatus, latency_ms: u64) {
        let tool = self.tools.admit(tool);
        self.tool_seconds
            .get_or_create(&ToolLabel { tool: tool.clone() })
            .observe(latency_ms as f64 / 1000.0);
        self.tool_calls
            .get_or_create(&ToolStatusLabels {
                tool,
                status: status.as_str(),
            })
            .inc();
    }

    /// One finding in `content_findings_total`. Surfaces and actions are closed sets
    /// (anything else is `other`); detector names are the policies' own, admitted like
    /// policy names, so every label stays bounded.
    fn count_content(&self, policy: &str, surface: &str, detector: &str, action: &str) {
        let surface = agentplane_core::policy::Surface::ALL
            .iter()
            .find(|s| s.as_str() == surface)
            .map_or(OTHER, |s| s.as_str());
        let action = match action {
            "redact" | "deny" | "flag" => action,
            _ => OTHER,
        };
        self.content_findings
            .get_or_create(&ContentLabels {
                policy: self.policies.admit(policy),
                surface: surface.to_owned(),
                detector: self.policies.admit(detector),
                action: action.to_owned(),
            })
            .inc();
    }

    /// One refusal in `policy_denials_total`; a policy type we do not know is `other`,
    /// so the label stays bounded.
    fn count_denial(&self, policy: &str, agent: &str, policy_type: &str) {
        // The policy types are the values of the `kind` label (`PolicyKind::ALL`); any
        // other value is `other`, so the label stays bounded.
        let kind = PolicyKind::parse(policy_type).map_or(OTHER, PolicyKind::as_str);
        self.denials
            .get_or_create(&PolicyAgentKindLabels {
                policy: self.policies.admit(policy),
                agent: self.agents.admit(agent),
                kind,
            })
            .inc();
    }

    /// One would-be decision in `policy_audited_total`; a verdict we do not know is
    /// `other`, so the label stays bounded.
    fn count_audited(&self, policy: &str, agent: &str, would: &str) {
        let would = match would {
            "allow" | "deny" | "approval" => would.to_owned(),
            _ => "other".to_owned(),
        };
        self.audited
            .get_or_create(&PolicyWouldLabels {
                policy: self.policies.admit(policy),
                agent: self.agents.admit(agent),
                would,
            })
            .inc();
    }
}
