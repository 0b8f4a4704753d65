//! A thread's history (its turns, with their events when asked) and compaction (a
//! summary written by an internal turn, which later context uses instead).

use std::sync::Arc;

use agentplane_core::{AgentLimits, AgentSpec, Event, NetworkAccess, StopReason, ThreadId, TurnId};

use super::feeds::FeedObserver;
use super::{Hub, HubError};
use crate::context;
use crate::identity::{Access, AsCaller};
use crate::models::TaskSize;
use crate::ports::{ThreadRecord, TurnRecord};
use crate::turn::{TurnRequest, run_turn, start_turn};

/// What history returns.
#[derive(Debug, Clone)]
pub struct History {
    pub thread: ThreadRecord,
    pub turns: Vec<HistoryTurn>,
}

/// One turn in a history.
#[derive(Debug, Clone)]
pub struct HistoryTurn {
    pub turn: TurnRecord,
    pub events: Option<Vec<Event>>,
}

/// A finished compaction.
#[derive(Debug, Clone)]
pub struct Compaction {
    pub turn: TurnId,
    pub summary: String,
}

impl Hub {
    /// A thread's turns, optionally with their events and internal turns.
    pub async fn history(
        &self,
        caller: &(impl AsCaller + ?Sized),
        thread: &ThreadId,
        include_events: bool,
        include_internal: bool,
    ) -> Result<History, HubError> {
        let caller = self
            .identity
            .require(caller, Access::Read, "reading history")?;
        let client = caller.client();
        let record = self.thread(client, thread).await?;
        let mut turns = Vec::new();
        for turn in self.deps.store.list_turns(thread).await? {
            if turn.internal && !include_internal {
                continue;
            }
            let events = if include_events {
                Some(self.deps.store.turn_events(&turn.id).await?)
            } else {
                None
            };
            turns.push(HistoryTurn { turn, events });
        }
        Ok(History {
            thread: record,
            turns,
        })
    }

    /// Summarizes the thread's turns into its summary with an internal turn.
    pub async fn compact(
        self: &Arc<Self>,
        caller: &(impl AsCaller + ?Sized),
        thread: &ThreadId,
    ) -> Result<Compaction, HubError> {
        let caller = self
            .identity
            .require(caller, Access::Operate, "compacting a thread")?;
        let client = caller.client();
        self.accepting()?;
        let record = self.thread(client, thread).await?;
        // The whole conversation: the summary replaces all of it.
        let past = self.past_turns(thread, usize::MAX).await?;
        let mut transcript = String::new();
        if let Some(summary) = &record.summary {
            transcript.push_str("Earlier summary:\n");
            transcript.push_str(summary);
            transcript.push_str("\n\n");
        }
        for turn in &past {
            transcript.push_str(&format!(
                "User: {}\nAssistant: {}\n\n",
                turn.input, turn.answer
            ));
        }
        let limit = self.config.summary_max_chars;
        let input = format!(
            "Summarize this conversation for the assistant's future reference in at most \
             {limit} characters. Keep decisions, facts, names, files and open questions.\n\n\
             {transcript}"
        );
        let agent = self.agent(&record.agent)?.clone();
        let compactor = AgentSpec {
            name: format!("{}:compact", agent.name),
            tags: Vec::new(),
            description: "Summarizes a thread.".to_owned(),
            system_prompt: "You write faithful, compact summaries of conversations.".to_owned(),
            model: agent.model.clone(),
            ensembles: Vec::new(),
            shell_allow: Vec::new(),
            network: NetworkAccess::default(),
            sandbox: agent.sandbox.clone(),
            requires_permission: Vec::new(),
            output_schema: None,
            limits: AgentLimits {
                max_steps: 1,
                ..AgentLimits::default()
            },
            tool_calls: agentplane_core::ToolCallMode::Native,
            temperature: agent.temperature,
        };
        let size = TaskSize::of_chars(input.chars().count());
        let model = self.resolve_model(&compactor, size).await?;
        let request = TurnRequest {
            size: Some(size),
            agent: compactor,
            client: client.to_owned(),
            model,
            input: input.clone(),
            history: Vec::new(),
            permissions: None,
            workspace: record.cwd.clone().into(),
            ensembles: Vec::new(),
            agent_version: None,
            shadow_of: None,
            native_tools: None,
            notes: Vec::new(),
            roles: Vec::new(),
        };
        let begun = start_turn(&self.deps, thread, &input, true, &request).await?;
        let turn = begun.turn().clone();
        let cancel = self.register(&begun, client);
        let agent = request.agent.name.clone();
        let observer = FeedObserver {
            hub: self,
            agent: &agent,
        };
        let outcome = run_turn(&self.deps, begun, request, &observer, cancel).await;
        self.unregister(&turn);
        let outcome = outcome?;
        if outcome.stop_reason != StopReason::TextAnswer {
            let why = outcome
                .error
                .map(|e| e.message)
                .unwrap_or_else(|| outcome.stop_reason.as_str().to_owned());
            return Err(HubError::Conflict(format!(
                "compaction did not finish: {why}"
            )));
        }
        let mut summary = context::answer_text(&outcome.result);
        if summary.chars().count() > limit {
            summary = summary.chars().take(limit).collect();
        }
        self.deps.store.set_summary(thread, &summary).await?;
        Ok(Compaction { turn, summary })
    }
}
