//! One tool call of a turn: planned and recorded, run through the gate
//! (`tool_gate.rs`), its result or its error screened (`governance::outgoing`),
//! capped and recorded, and its answer given back to the model.

use std::collections::HashMap;
use std::time::Instant;

use agentplane_core::policy::Surface;
use agentplane_core::secret;
use agentplane_core::{EventPayload, ToolCall, ToolErrorKind, ToolStatus, args_preview_hash};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::active::*;
use super::progress::*;
use super::request::*;
use super::tool_gate::*;
use super::tools::*;
use crate::governance::ArgsRetention;
use crate::governance::Refusal;
use crate::governance::content::ContentGuard;
use crate::governance::outgoing::{self, Returned};
use crate::ports::{ToolContext, ToolError};

/// The `security_event` type tools give a refusal by a `data_scope` policy.
const DATA_SCOPE_DENIED: &str = "data_scope_denied";

impl ActiveTurn<'_> {
    /// Validates, runs and records one tool call, or suspends the turn on it.
    pub(super) async fn handle_call(
        &self,
        call: PlannedCall,
        tools: &HashMap<String, ToolEntry>,
        request: &TurnRequest,
        ctx: &ToolContext,
        cancel: &CancellationToken,
        progress: &Progress,
    ) -> Result<CallEnd, Stop> {
        let recovered = matches!(call, PlannedCall::Recovered(_));
        let (call, early_error) = match call {
            PlannedCall::Ready(call) | PlannedCall::Recovered(call) => (call, None),
            PlannedCall::Refused(call, error) => (call, Some(error)),
        };
        let parsed: Result<Value, String> = match &early_error {
            Some(error) => Err(error.message.clone()),
            None => serde_json::from_str(&call.arguments)
                .map_err(|e| format!("arguments are not valid JSON: {e}")),
        };
        let mut parsed = parsed;
        // Content policies on arguments, before anything records them: what `redact`
        // replaces is never stored, what `deny` finds is refused below.
        let (findings, content_denied) = match parsed.as_mut() {
            Ok(args) => self.check_arguments(&call, args, request),
            Err(_) => (Vec::new(), None),
        };
        let arguments = parsed.as_ref().cloned().unwrap_or(Value::Null);
        let hash = args_preview_hash(&arguments);
        self.record(EventPayload::ToolCallPlanned {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: self.retained(arguments),
            args_preview_hash: hash,
            title: None,
            recovered,
        })
        .await?;

        for finding in findings {
            self.record(finding).await?;
        }
        let started = Instant::now();
        if let Some(refusal) = content_denied {
            let Gated::Done(outcome) = self.refuse(&call, &refusal).await? else {
                unreachable!("a refusal is done");
            };
            return self
                .finish_call(call, outcome, started, ctx, request, &tracing::Span::none())
                .await;
        }
        let mut span = tracing::Span::none();
        let outcome = match (parsed, early_error) {
            (_, Some(error)) => Err(ToolError::new(error.kind, error.message)),
            (Err(message), None) => Err(ToolError::new(ToolErrorKind::InvalidArguments, message)),
            (Ok(args), None) => {
                let (gated, gated_span) = self
                    .execute(&call, args.clone(), tools, request, ctx, cancel, None)
                    .await?;
                span = gated_span;
                match gated {
                    Gated::Done(outcome) => outcome,
                    Gated::Suspend {
                        policy,
                        approvers,
                        separate,
                        schema,
                        explanation,
                    } => {
                        let id = self
                            .suspend(
                                &call,
                                args,
                                schema,
                                (policy, approvers, separate, explanation),
                                request,
                                progress,
                            )
                            .await?;
                        return Ok(CallEnd::Suspended(id));
                    }
                }
            }
        };
        self.finish_call(call, outcome, started, ctx, request, &span)
            .await
    }

    /// What events keep of arguments under `retention.tool_args`.
    pub(super) fn retained(&self, arguments: Value) -> Value {
        match self.deps.governance.retention {
            ArgsRetention::Full => arguments,
            ArgsRetention::Hash => Value::Null,
        }
    }

    /// The content policies watching a call's arguments: redacts them in place;
    /// returns the `content_finding` events and, when a `deny` policy found something,
    /// the refusal.
    fn check_arguments(
        &self,
        call: &ToolCall,
        args: &mut Value,
        request: &TurnRequest,
    ) -> (Vec<EventPayload>, Option<Refusal>) {
        let policies = self.deps.governance.policies.current();
        let ctx = self.policy_ctx(request, Some(&call.name));
        crate::governance::admission::screen_arguments(&policies, &ctx, args, Some(&call.id))
    }

    /// What a tool answered, its result or its error, screened
    /// (`governance::outgoing`: the secrets, the content policies watching tool
    /// results) before the stream, the log, the span or the model sees it: passed on
    /// redacted, or withheld when a `deny` policy found something (its refusal
    /// recorded). Findings are recorded.
    async fn screen_result(
        &self,
        call: &ToolCall,
        outcome: Result<String, String>,
        request: &TurnRequest,
    ) -> Result<Screened, Stop> {
        let policies = self.deps.governance.policies.current();
        let guard = ContentGuard::new(
            &policies,
            &self.policy_ctx(request, Some(&call.name)),
            Surface::ToolResults,
        );
        let screened = outgoing::screen(&guard, Returned::tool(outcome));
        for event in guard.events(&screened.found, Some(&call.id)) {
            self.record(event).await?;
        }
        if let Some(policy) = &screened.denied_by {
            let (held, what) = match screened.returned.text {
                Ok(_) => ("the output", format!("the output of `{}`", call.name)),
                Err(_) => ("the error", format!("the error of `{}`", call.name)),
            };
            let refusal = Refusal::content(&policies, policy, &screened.found, held);
            self.record(refusal.event(&what, Some(&call.name), Some(&call.id)))
                .await?;
            return Ok(Screened::Withheld(refusal.message(&what)));
        }
        Ok(Screened::Passed(screened.returned.text))
    }

    /// Records a call's result and turns it into what the model is told.
    /// `span` is the call's `execute_tool` span, which gets the result as the model is
    /// told it when contents are captured.
    pub(super) async fn finish_call(
        &self,
        call: ToolCall,
        outcome: Result<Executed, ToolError>,
        started: Instant,
        ctx: &ToolContext,
        request: &TurnRequest,
        span: &tracing::Span,
    ) -> Result<CallEnd, Stop> {
        let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let hash = args_preview_hash(
            &serde_json::from_str::<Value>(&call.arguments).unwrap_or(Value::Null),
        );
        // (status, error type, what the model is told, truncated, whether the turn ends)
        let (status, error_type, output, truncated, finished) = match outcome {
            Ok(Executed::Finished(result)) => (
                ToolStatus::Ok,
                None,
                "accepted".to_owned(),
                false,
                Some(result),
            ),
            Ok(Executed::Output {
                content,
                truncated,
                security,
                egress,
            }) => {
                for decided in egress {
                    self.record(EventPayload::Egress {
                        call_id: Some(call.id.clone()),
                        tool: call.name.clone(),
                        destination: secret::redact(&decided.destination).into_owned(),
                        allowed: decided.allowed,
                        detail: secret::redact(&decided.detail).into_owned(),
                    })
                    .await?;
                }
                for violation in security {
                    self.record(EventPayload::SecurityEvent {
                        event_type: violation.event_type,
                        tool: Some(call.name.clone()),
                        detail: secret::redact(&violation.detail).into_owned(),
                    })
                    .await?;
                }
                // A secret or a finding a tool printed reaches neither the model nor
                // the log.
                match self.screen_result(&call, Ok(content), request).await? {
                    // A result stays a result (`Ok`).
                    Screened::Passed(Ok(content) | Err(content)) => {
                        let (content, cut) = cap_output(content, ctx.output_cap);
                        (ToolStatus::Ok, None, content, truncated || cut, None)
                    }
                    Screened::Withheld(withheld) => withheld_output(withheld),
                }
            }
            Err(error) => {
                if let Some(violation) = &error.security {
                    self.record(EventPayload::SecurityEvent {
                        event_type: violation.event_type.clone(),
                        tool: Some(call.name.clone()),
                        detail: violation.detail.clone(),
                    })
                    .await?;
                    // A data scope is a policy: its refusal is also a `policy_denied`.
                    if violation.event_type == DATA_SCOPE_DENIED {
                        self.record(EventPayload::PolicyDenied {
                            policy: self.scope_policies.clone(),
                            policy_type: "data_scope".to_owned(),
                            tool: Some(call.name.clone()),
                            call_id: Some(call.id.clone()),
                            detail: violation.detail.clone(),
                            explanation: None,
                        })
                        .await?;
                    }
                }
                // An error is the tool's words as much as a result is: screened the
                // same, before the log, the span and the next model request.
                match self
                    .screen_result(&call, Err(error.message), request)
                    .await?
                {
                    Screened::Passed(Err(message) | Ok(message)) => {
                        let text = format!("error ({}): {message}", error.kind.as_str());
                        let (text, _) = cap_output(text, ctx.output_cap);
                        (ToolStatus::Error, Some(error.kind), text, false, None)
                    }
                    Screened::Withheld(withheld) => withheld_output(withheld),
                }
            }
        };
        match &finished {
            Some(result) => crate::ports::telemetry::record_tool_result(span, &result.to_string()),
            None => crate::ports::telemetry::record_tool_result(span, &output),
        }
        self.record(EventPayload::ToolCallResult {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            status,
            latency_ms,
            error_type,
            output: output.clone(),
            truncated,
            args_preview_hash: hash,
        })
        .await?;
        Ok(match finished {
            Some(result) => CallEnd::Finished(result),
            None => CallEnd::Answer {
                call_id: call.id,
                text: output,
            },
        })
    }
}

/// What became of a tool's answer after the screen.
enum Screened {
    /// The result (`Ok`) or the error (`Err`), redacted.
    Passed(Result<String, String>),
    /// A `deny` policy found something: why it is withheld.
    Withheld(String),
}

/// What the model is told of an answer a `deny` policy withheld:
/// (status, error type, output, truncated, finished).
fn withheld_output(
    withheld: String,
) -> (
    ToolStatus,
    Option<ToolErrorKind>,
    String,
    bool,
    Option<Value>,
) {
    (
        ToolStatus::Error,
        Some(ToolErrorKind::PolicyDenied),
        format!("error (policy_denied): {withheld}"),
        false,
        None,
    )
}

/// Cuts `text` to at most `cap` bytes on a character boundary, with a note.
pub(crate) fn cap_output(mut text: String, cap: usize) -> (String, bool) {
    if text.len() <= cap {
        return (text, false);
    }
    let mut end = cap;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let total = text.len();
    text.truncate(end);
    text.push_str(&format!(
        "\n[output truncated: {end} of {total} bytes shown]"
    ));
    (text, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn output_is_capped_on_a_char_boundary() {
        let (text, cut) = cap_output("ééé".to_owned(), 3);
        assert!(cut);
        assert!(text.starts_with('é'));
        assert!(text.contains("2 of 6 bytes"));
        let (text, cut) = cap_output("short".to_owned(), 10);
        assert_eq!((text.as_str(), cut), ("short", false));
    }
}
