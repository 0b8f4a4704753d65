//! Turn admission in the hub: the governance check before a turn of a thread begins
//! (`governance::admission`), and the record of a refusal. A refused turn is begun and
//! ended at once in the thread's log (`turn_started`, `policy_denied`, `error`,
//! `turn_completed{stop_reason:"error"}`), so every refusal is in the audit trail; the
//! caller still gets the refusal as its answer.

use agentplane_core::{AgentSpec, EventPayload, StopReason, ThreadId, TurnId};

use super::{Hub, HubError};
use crate::error::refused;
use crate::governance::content::ContentGuard;
use crate::governance::rules::{self, RequestContext};
use crate::governance::{AdmissionError, Refusal, admission};
use agentplane_core::policy::Surface;

impl Hub {
    /// Admits a turn of `agent` for `client` on `thread`, or records why not and says so.
    pub(super) async fn admit_turn(
        &self,
        client: &str,
        thread: &ThreadId,
        agent: &AgentSpec,
        input: &str,
        workspace: &str,
    ) -> Result<(), HubError> {
        let governance = &self.deps.governance;
        let ctx = RequestContext::new(&agent.name, &agent.tags, client);
        match admission::admit(governance, self.deps.store.as_ref(), &ctx, 0).await {
            Ok(reservation) => {
                governance.budgets.settle(reservation, 0).await;
                Ok(())
            }
            Err(AdmissionError::Refused(refusal)) => {
                let what = format!("a turn of agent `{}` now", agent.name);
                self.record_refused_turn(thread, agent, input, workspace, &refusal, &what)
                    .await;
                Err(refused(&refusal, &what))
            }
            Err(AdmissionError::RateLimitsUnavailable(e)) => Err(e.into()),
            Err(AdmissionError::Store(e)) => Err(e.into()),
        }
    }

    /// The content policies watching turn input: the input to run (redacted where a
    /// `redact` policy found something) and the events to record after `turn_started`
    /// (`content_finding`s, and `policy_audited` for audit-mode policies that selected
    /// the admission); a `deny` policy's finding refuses the turn, recorded with
    /// the input redacted (what was found is never stored).
    pub(super) async fn check_input(
        &self,
        (client, roles): (&str, &[String]),
        thread: &ThreadId,
        agent: &AgentSpec,
        version: &str,
        input: String,
        workspace: &str,
    ) -> Result<(String, Vec<EventPayload>), HubError> {
        let policies = self.deps.governance.policies.current();
        let ctx = RequestContext::new(&agent.name, &agent.tags, client)
            .version(version)
            .roles(roles);
        // What audit-mode policies would have made of the turn's admission.
        let mut notes =
            rules::audited_events(&policies, &rules::gate(&policies, &ctx).audited, None, None);
        let guard = ContentGuard::new(&policies, &ctx, Surface::TurnInput);
        if guard.is_empty() {
            return Ok((input, notes));
        }
        let checked = guard.check(&input);
        notes.extend(guard.events(&checked.found, None));
        if let Some(policy) = &checked.denied_by {
            let refusal = Refusal::content(&policies, policy, &checked.found, "the input");
            let what = format!("a turn of agent `{}`", agent.name);
            // What was found is never stored: the refused turn's input is withheld.
            let shown = format!("[input withheld by content policy `{policy}`]");
            self.record_refused_turn(thread, agent, &shown, workspace, &refusal, &what)
                .await;
            return Err(refused(&refusal, &what));
        }
        Ok((checked.text.into_owned(), notes))
    }

    /// Records a refused turn. Best effort: when another turn of the thread runs (the
    /// store allows one), or the store fails, the refusal is only logged.
    async fn record_refused_turn(
        &self,
        thread: &ThreadId,
        agent: &AgentSpec,
        input: &str,
        workspace: &str,
        refusal: &Refusal,
        what: &str,
    ) {
        let why = [
            refusal.event(what, None, None),
            EventPayload::Error {
                code: refused(refusal, what).code(),
                message: refusal.message(what),
            },
        ];
        if let Err(e) = self
            .record_refusal(thread, &agent.name, input, workspace, why)
            .await
        {
            tracing::warn!(
                %thread,
                policy = refusal.policy(),
                error = %e,
                "a refused turn could not be recorded"
            );
        }
    }

    /// Records a turn begun and ended at once with `why` (the refusal's events) between
    /// its `turn_started` and its `turn_completed{stop_reason:"error"}`.
    pub(super) async fn record_refusal(
        &self,
        thread: &ThreadId,
        agent: &str,
        input: &str,
        workspace: &str,
        why: impl IntoIterator<Item = EventPayload>,
    ) -> Result<(), crate::ports::StoreError> {
        let store = &self.deps.store;
        let turn = TurnId::new();
        let started = EventPayload::TurnStarted {
            agent: agent.to_owned(),
            input: input.to_owned(),
            model: String::new(),
            workspace: workspace.to_owned(),
            agent_version: None,
            shadow_of: None,
        };
        let (_, started) = store
            .start_turn(thread, &turn, input, false, started)
            .await?;
        self.deps.governance.tap(agent, &started);
        self.publish(&started);
        for payload in why {
            let event = store.append(thread, &turn, payload).await?;
            self.deps.governance.tap(agent, &event);
            self.publish(&event);
        }
        let event = store
            .complete_turn(thread, &turn, StopReason::Error, serde_json::Value::Null)
            .await?;
        self.deps.governance.tap(agent, &event);
        self.publish(&event);
        Ok(())
    }
}
