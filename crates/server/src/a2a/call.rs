//! One JSON-RPC call being served ([`Call`]: who, which agent, which generation), and
//! the lookups every method shares: its params parsed, the caller's task found, a
//! task written in the caller's generation.
//!
//! What must not live here: the methods themselves (`super::rpc`, `super::push`,
//! `super::stream`).

use std::net::SocketAddr;

use agentplane_a2a::v0_3;
use agentplane_a2a::wire::{JsonRpcResponse, Task, codes};
use agentplane_core::TurnId;
use agentplane_engine::hub::HistoryTurn;
use agentplane_engine::identity::Caller;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::protocol::{Failure, Generation, rpc_error};
use super::state::A2aState;

/// One call being served.
pub(crate) struct Call {
    pub(crate) state: A2aState,
    pub(crate) caller: Caller,
    pub(crate) agent: String,
    pub(crate) generation: Generation,
    /// The 1.0 name of the method.
    pub(crate) method: &'static str,
    pub(crate) id: Value,
    /// The remote address, for the per-address stream cap (unknown only for a router
    /// served without the accept loop).
    pub(crate) peer: Option<SocketAddr>,
}

impl Call {
    /// A successful answer.
    pub(crate) fn ok(&self, result: Value) -> Response {
        axum::Json(JsonRpcResponse::ok(self.id.clone(), result)).into_response()
    }

    /// A failed answer, recorded where it names a task the caller may see.
    pub(crate) fn fail(&self, failure: Failure) -> Response {
        match failure {
            Failure::Rpc(code, message) => rpc_error(&self.id, self.generation, code, message),
            Failure::Http(e) => e.into_response(),
        }
    }

    /// Records the request in the running turn it names (an `a2a_request` event,
    /// never the message); a turn that has ended cannot take events, so the request is
    /// then only in the access log and the metrics.
    pub(crate) async fn record(&self, task: &str, context: Option<&str>, outcome: &str) {
        tracing::info!(
            target: "agentplane::a2a",
            agent = %self.agent,
            method = self.method,
            version = self.generation.version(),
            task,
            outcome,
            "a2a request"
        );
        let Ok(turn) = agentplane_core::TurnId::parse(task) else {
            return;
        };
        let payload = agentplane_core::EventPayload::A2aRequest {
            direction: "in".into(),
            method: self.wire_method().to_owned(),
            task: Some(task.to_owned()),
            context: context.map(str::to_owned),
            protocol_version: self.generation.version().to_owned(),
            outcome: outcome.to_owned(),
        };
        match self
            .state
            .hub
            .record_request(&self.caller, &turn, payload)
            .await
        {
            Ok(true) => {}
            Ok(false) => tracing::debug!(%turn, "the task has ended: its request is logged only"),
            Err(e) => tracing::debug!(%turn, error = %e, "an a2a request could not be recorded"),
        }
    }

    /// The method as the client named it.
    pub(crate) fn wire_method(&self) -> &'static str {
        match self.generation {
            Generation::V1 => self.method,
            Generation::V0_3 => v0_3::method_from_v1(self.method).unwrap_or(self.method),
        }
    }

    /// Logs a request that names no task.
    pub(crate) fn log(&self, outcome: &str) {
        tracing::info!(
            target: "agentplane::a2a",
            agent = %self.agent,
            method = self.wire_method(),
            version = self.generation.version(),
            outcome,
            "a2a request"
        );
    }
}

/// The params as `T`, or `InvalidParams`.
pub(crate) fn parse<T: DeserializeOwned>(params: Value) -> Result<T, Failure> {
    serde_json::from_value(params)
        .map_err(|e| Failure::rpc(codes::INVALID_PARAMS, format!("Invalid params: {e}")))
}

/// A task id as a turn id; anything else names no task.
pub(crate) fn turn_id(id: &str) -> Result<TurnId, Failure> {
    TurnId::parse(id).map_err(|_| Failure::rpc(codes::TASK_NOT_FOUND, "Task not found"))
}

/// A task as the caller's generation writes it.
pub(crate) fn task_json(generation: Generation, task: &Task) -> Value {
    let value = match generation {
        Generation::V1 => serde_json::to_value(task),
        Generation::V0_3 => serde_json::to_value(v0_3::task_from_v1(task)),
    };
    value.unwrap_or(Value::Null)
}

/// The caller's turn `id` with its stored events; another client's is not found.
pub(crate) async fn find(call: &Call, id: &str) -> Result<HistoryTurn, Failure> {
    let turn = turn_id(id)?;
    call.state
        .hub
        .turn_with_events(&call.caller, &turn)
        .await
        .map_err(Failure::from)
}
