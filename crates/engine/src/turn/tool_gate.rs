//! The gate every tool call passes: its schema, the policies (deny wins, also over
//! an approval), approvals and permissions, the rate limits; then the call itself
//! with its timeout — for a tool whose cost is known only after it ran, between the
//! reservation of its ceiling and its settlement (`spending.rs`).

use std::collections::HashMap;

use agentplane_core::{
    AgentSpec, ErrorCode, EventPayload, PermissionDecision, PermissionId, ToolCall, ToolErrorKind,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::active::*;
use super::progress::*;
use super::request::*;
use super::tools::*;
use crate::governance::rules::PolicyExplanation;
use crate::governance::{ArgsRetention, RateFacts};
use crate::governance::{Refusal, call};
use crate::permissions;
use crate::ports::RateError;
use crate::ports::{NewPermission, Spent, ToolContext, ToolError};

impl ActiveTurn<'_> {
    /// Waits for a person to allow a call (`permissions::ask`): a decision, the
    /// timeout, a disconnect or cancellation. Anything but an approval is a
    /// `PermissionDenied` tool error.
    pub(super) async fn ask_permission(
        &self,
        call: &ToolCall,
        args: &Value,
        runs: Option<String>,
        request: &TurnRequest,
        cancel: &CancellationToken,
    ) -> Result<Result<(), ToolError>, Stop> {
        crate::ports::telemetry::governance_event("permission_requested", "");
        // A person may take a while; `permission_required` follows what was held.
        self.flush().await?;
        let (decision, record) = permissions::ask(
            self.deps.store.as_ref(),
            request.permissions.as_ref(),
            NewPermission {
                id: PermissionId::new(),
                thread_id: self.thread.clone(),
                turn_id: self.turn.clone(),
                call_id: call.id.clone(),
                tool: call.name.clone(),
                arguments: self.retained(args.clone()),
                options: permissions::OPTIONS
                    .iter()
                    .map(|o| (*o).to_owned())
                    .collect(),
                // The preview repeats the arguments: only where they are retained.
                runs: match self.deps.governance.retention {
                    ArgsRetention::Full => runs,
                    ArgsRetention::Hash => None,
                },
                // A native agent's permission is the agent's setting, not a policy's.
                policy: None,
            },
            None,
            &|event| self.observer.on_event(event),
            cancel,
        )
        .await?;
        if cancel.is_cancelled() {
            return Err(Stop::Cancelled);
        }
        crate::ports::telemetry::governance_event(
            "permission_resolved",
            match decision {
                PermissionDecision::Approved => "approved",
                PermissionDecision::Declined => "declined",
            },
        );
        Ok(match decision {
            PermissionDecision::Approved => Ok(()),
            PermissionDecision::Declined => Err(ToolError::new(
                ToolErrorKind::PermissionDenied,
                format!(
                    "permission to run `{}` was declined: {}",
                    call.name,
                    record.reason.as_deref().unwrap_or("declined")
                ),
            )),
        })
    }

    /// Refuses a call by a policy: recorded as `policy_denied` and, being a call the
    /// agent was not allowed to make, as a `security_event` of the same type (as an
    /// external agent's refused ask is); answered as a tool error.
    pub(super) async fn refuse(&self, call: &ToolCall, refusal: &Refusal) -> Result<Gated, Stop> {
        crate::ports::telemetry::governance_event("policy_denied", refusal.policy());
        let what = format!("`{}`", call.name);
        self.record(refusal.event(&what, Some(&call.name), Some(&call.id)))
            .await?;
        self.record(EventPayload::SecurityEvent {
            event_type: "policy_denied".to_owned(),
            tool: Some(call.name.clone()),
            detail: refusal.message(&what),
        })
        .await?;
        Ok(Gated::Done(Err(ToolError::new(
            refusal.tool_error_kind(),
            refusal.message(&what),
        ))))
    }

    /// Checks a parsed call against its schema and the policies, then runs it with the
    /// timeout. `approved`: a person already approved this exact call (or wrote it, by
    /// an edit) under the policy set of this hash, so approval policies are satisfied;
    /// the call is still decided against the policies now in force, and a denial
    /// holds (deny wins, even after approval), saying when the policies changed.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn execute(
        &self,
        call: &ToolCall,
        args: Value,
        tools: &HashMap<String, ToolEntry>,
        request: &TurnRequest,
        ctx: &ToolContext,
        cancel: &CancellationToken,
        approved: Option<&str>,
    ) -> Result<(Gated, tracing::Span), Stop> {
        let span = crate::ports::telemetry::tool_call_span(&call.name, &call.id);
        crate::ports::telemetry::record_tool_arguments(&span, &args);
        let gated = self
            .gate(call, args, tools, request, ctx, cancel, approved)
            .instrument(span.clone())
            .await;
        if !span.is_disabled() {
            let status = match &gated {
                Ok(Gated::Done(Ok(_))) => "ok",
                Ok(Gated::Done(Err(e))) => e.kind.as_str(),
                Ok(Gated::Suspend { .. }) => "awaiting_approval",
                Err(_) => "stopped",
            };
            span.record("agentplane.status", status);
        }
        gated.map(|gated| (gated, span))
    }

    /// [`Self::execute`] without its span.
    #[allow(clippy::too_many_arguments)]
    async fn gate(
        &self,
        call: &ToolCall,
        args: Value,
        tools: &HashMap<String, ToolEntry>,
        request: &TurnRequest,
        ctx: &ToolContext,
        cancel: &CancellationToken,
        approved: Option<&str>,
    ) -> Result<Gated, Stop> {
        let done = |outcome| Ok(Gated::Done(outcome));
        let Some(entry) = tools.get(&call.name) else {
            let policies = self.deps.governance.policies.current();
            let mut known: Vec<&str> = tools
                .keys()
                .map(String::as_str)
                .filter(|name| self.offers(&policies, request, name))
                .collect();
            known.sort_unstable();
            // A tool that was not offered: a probe past the agent's tool list, so also
            // a `security_event` (recorded with the result, in `finish_call`).
            return done(Err(ToolError::violation(
                ToolErrorKind::UnknownTool,
                "unknown_tool",
                format!(
                    "there is no tool `{}`; the tools are: {}",
                    call.name,
                    known.join(", ")
                ),
            )));
        };
        if let Err(problems) = entry.schema.check(&args) {
            let what = match entry.source {
                ToolSource::Finish => "the result does not match the required output schema",
                ToolSource::Ensemble(_) => "the arguments do not match the tool's schema",
            };
            return done(Err(ToolError::new(
                ToolErrorKind::InvalidArguments,
                format!("{what}: {problems}"),
            )));
        }
        let index = match entry.source {
            ToolSource::Finish => return done(Ok(Executed::Finished(args))),
            ToolSource::Ensemble(index) => index,
        };
        let Some(ensemble) = request.ensembles.get(index) else {
            return Err(failed(ErrorCode::Internal, "tool table out of date"));
        };
        let shadow = request.shadow_of.is_some();
        if shadow && entry.side_effects {
            return done(Err(not_executed_in_shadow(
                &call.name,
                "it has side effects",
            )));
        }
        let governance = &self.deps.governance;
        let policies = governance.policies.current();
        let governed_as = agentplane_core::governed_as(&call.name);
        let policy_ctx = self.policy_ctx(request, Some(&call.name)).arguments(&args);
        let decided = call::decide(
            &policies,
            &call::Call {
                ctx: policy_ctx,
                tool: &call.name,
                also: governed_as,
                arguments: &[&args],
                call_id: Some(&call.id),
            },
            approved,
        );
        for event in decided.audited {
            self.record(event).await?;
        }
        let needs_permission = |agent: &AgentSpec| {
            agent.requires_permission.contains(&call.name)
                || governed_as
                    .is_some_and(|alias| agent.requires_permission.iter().any(|t| t == alias))
        };
        match decided.verdict {
            call::Verdict::Refused(refusal) => return self.refuse(call, &refusal).await,
            call::Verdict::Approval(_) if shadow => {
                return done(Err(not_executed_in_shadow(
                    &call.name,
                    "it needs a person's approval",
                )));
            }
            call::Verdict::Approval(approval) => {
                crate::ports::telemetry::governance_event("approval_requested", &approval.policy);
                let call::Approval {
                    policy,
                    approvers,
                    separate,
                    explanation,
                } = *approval;
                return Ok(Gated::Suspend {
                    policy,
                    approvers,
                    separate,
                    schema: entry.parameters.clone(),
                    explanation,
                });
            }
            call::Verdict::Allowed => {}
        }
        if shadow && needs_permission(&request.agent) {
            return done(Err(not_executed_in_shadow(
                &call.name,
                "it needs a person's permission",
            )));
        }
        if needs_permission(&request.agent)
            && let Err(denied) = self
                .ask_permission(
                    call,
                    &args,
                    ensemble.preview(&call.name, &args, ctx),
                    request,
                    cancel,
                )
                .await?
        {
            return done(Err(denied));
        }
        // A shadow run must never use up the rate limits of the turns it copies.
        if !shadow
            && let Err(refused) = governance
                .limiter
                .admit(
                    &decided.rate_limits,
                    RateFacts {
                        agent: &request.agent.name,
                        tool: Some(&call.name),
                        client: &request.client,
                    },
                )
                .await
        {
            return match refused {
                RateError::Limited(limited) => {
                    self.refuse(call, &Refusal::RateLimited(limited)).await
                }
                unavailable => done(Err(ToolError::new(
                    ToolErrorKind::RateLimited,
                    unavailable.to_string(),
                ))),
            };
        }
        // A tool whose cost is known only after it ran (a remote agent) reserves its
        // ceiling first (`spending.rs`); a shadow run never gets this far with one
        // (it has side effects).
        let held = match ensemble.spending(&call.name) {
            Some(spending) => match self.reserve_spending(call, spending, &policy_ctx).await? {
                Ok(held) => Some(held),
                Err(refused) => return Ok(refused),
            },
            None => None,
        };
        let run = async {
            match &held {
                Some(_) => ensemble.call_spending(&call.name, args, ctx).await,
                None => (ensemble.call(&call.name, args, ctx).await, Spent::default()),
            }
        };
        let run = tokio::time::timeout(ctx.timeout, run);
        // Cancelled, the held ceiling is dropped unsettled: charged in the background.
        let result = tokio::select! {
            _ = cancel.cancelled() => return Err(Stop::Cancelled),
            result = run => result,
        };
        let result = match result {
            Ok((outcome, spent)) => {
                if let Some(held) = held {
                    self.settle_spending(held, spent, request).await?;
                }
                Ok(outcome)
            }
            Err(elapsed) => {
                // Stopped at its timeout: the callee was asked and may have worked.
                if let Some(held) = held {
                    let spent = Spent {
                        usage: None,
                        worked: true,
                    };
                    self.settle_spending(held, spent, request).await?;
                }
                Err(elapsed)
            }
        };
        done(match result {
            Err(_) => Err(ToolError::new(
                ToolErrorKind::Timeout,
                format!(
                    "`{}` did not finish within {} ms and was stopped",
                    call.name,
                    ctx.timeout.as_millis()
                ),
            )),
            Ok(Err(error)) => Err(error),
            Ok(Ok(output)) => Ok(Executed::Output {
                content: output.content,
                truncated: output.truncated,
                security: output.security,
                egress: output.egress,
            }),
        })
    }
}

/// The answer to a call a shadow run records but does not execute.
pub(super) fn not_executed_in_shadow(tool: &str, why: &str) -> ToolError {
    ToolError::new(
        ToolErrorKind::NotExecutedInShadow,
        format!("`{tool}` was not executed in shadow mode: {why}"),
    )
}

/// What the policy gate made of a call.
pub(super) enum Gated {
    /// Handled here: ran, or refused.
    Done(Result<Executed, ToolError>),
    /// It waits for a person: the turn suspends on an approval.
    Suspend {
        policy: String,
        approvers: Vec<String>,
        /// Four eyes: the turn's own client may not decide.
        separate: bool,
        schema: Value,
        /// Why: recorded with the approval, its set's hash kept for the resume.
        explanation: PolicyExplanation,
    },
}
