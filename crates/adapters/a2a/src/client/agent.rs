//! [`A2aAgent`]: a remote A2A agent behind the engine's `ExternalAgent` port, so its
//! turns are driven like an ACP agent's (`agentplane_engine::external_turn`): the same
//! events, admission, budgets, permission flow and audit around it.
//!
//! Per prompt: the card (cached), then one [`Exchange`]. What the remote streams
//! becomes text updates; its pause for input becomes a permission ask under the tool
//! name [`INPUT_TOOL`] (policies can deny or require approval of it; fail-closed); its
//! usage metadata becomes the turn's usage; every request becomes an `a2a_request`.

use std::sync::Arc;

use agentplane_core::EventPayload;
use agentplane_engine::ports::external::{
    Availability, ExternalAgent, ExternalEnd, ExternalError, ExternalPrompt, ExternalStop,
    ExternalUpdate, PermissionAsk, ToTurn,
};
use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::exchange::{self, Exchange, Finish, Question, Sink};
use super::remote::{A2aRemoteConfig, Connection};

/// The tool name of a remote agent's pause for input, as permissions and policies see
/// it.
pub const INPUT_TOOL: &str = "a2a_input";

/// A remote agent of `kind = "a2a"`.
#[derive(Clone)]
pub struct A2aAgent {
    connection: Arc<Connection>,
}

impl A2aAgent {
    pub fn new(config: A2aRemoteConfig) -> Self {
        Self {
            connection: Arc::new(Connection::new(config)),
        }
    }

    /// The connection its `a2a__NAME` tool shares (one card cache, one context map).
    pub fn connection(&self) -> Arc<Connection> {
        self.connection.clone()
    }
}

#[async_trait]
impl ExternalAgent for A2aAgent {
    fn label(&self) -> String {
        format!("a2a:{}", self.connection.config.name)
    }

    async fn availability(&self) -> Availability {
        match self.connection.card().await {
            Ok(_) => Availability::Available,
            Err(reason) => Availability::Unavailable(reason),
        }
    }

    async fn prompt(
        &self,
        prompt: ExternalPrompt,
        to_turn: mpsc::Sender<ToTurn>,
        cancel: CancellationToken,
    ) -> Result<ExternalEnd, ExternalError> {
        let mut sink = TurnSink {
            to_turn,
            agent: self.connection.config.name.clone(),
        };
        let remote = match self.connection.card().await {
            Ok((remote, fetched)) => {
                if fetched {
                    sink.record(exchange::card_record(remote.version.as_str(), "ok"))
                        .await;
                }
                remote
            }
            Err(reason) => {
                sink.record(exchange::card_record("", "unavailable")).await;
                return Err(ExternalError::Unavailable(reason));
            }
        };
        let mut exchange = Exchange::new(&self.connection, remote, prompt.thread.to_string());
        // A thread whose remote context we do not hold (its first turn, or after a
        // restart) sends its earlier conversation along.
        let text = match (&prompt.context, exchange.continues_context()) {
            (Some(context), false) => format!("{context}{}", prompt.input),
            _ => prompt.input.clone(),
        };
        let finish = exchange.run(text, &mut sink, &cancel).await?;
        let stop = match finish {
            Finish::Completed => ExternalStop::EndTurn,
            Finish::Cancelled | Finish::Declined => ExternalStop::Cancelled,
        };
        Ok(ExternalEnd {
            stop,
            usage: exchange.usage,
        })
    }
}

/// An agent turn's sink: text and records to the turn, a pause to the permission flow.
struct TurnSink {
    to_turn: mpsc::Sender<ToTurn>,
    agent: String,
}

#[async_trait]
impl Sink for TurnSink {
    async fn text(&mut self, text: String) {
        let _ = self
            .to_turn
            .send(ToTurn::Update(ExternalUpdate::Text(text)))
            .await;
    }

    async fn record(&mut self, payload: EventPayload) {
        let _ = self.to_turn.send(ToTurn::Record(payload)).await;
    }

    async fn ask(&mut self, question: Question) -> bool {
        let (answer, decided) = oneshot::channel();
        let arguments = exchange::question_arguments(&self.agent, &question);
        let ask = PermissionAsk {
            call_id: format!("a2a-{}", question.task),
            tool: INPUT_TOOL.to_owned(),
            title: Some(if question.text.is_empty() {
                format!("The remote agent `{}` asks to continue", self.agent)
            } else {
                question.text.clone()
            }),
            input: None,
            arguments,
        };
        if self
            .to_turn
            .send(ToTurn::Permission { ask, answer })
            .await
            .is_err()
        {
            return false;
        }
        // A dropped answer is a "no" (fail-closed).
        decided.await.unwrap_or(false)
    }
}
