//! Who may send each request body and query string: the access of the hub method it
//! is for, so the role check runs before it is read (`extract.rs`, [`Guarded`]).
//!
//! One line per type, beside its twin in the hub (the hub method checks again, with
//! the same action). A new type does not compile into an `ApiJson`, `ObjectJson` or
//! `ApiQuery` until it has a line here. What must not live here: any other rule.

use agentplane_engine::identity::Access;

use crate::body::{CreateThreadBody, DecisionBody, StartTurnBody};
use crate::extract::Guarded;
use crate::routes::approvals::{ApprovalsQuery, DecisionRequest};
use crate::routes::costs::CostsQuery;
use crate::routes::events::EventsQuery;
use crate::routes::executions::{CreateExecutionBody, ExecutionsQuery};
use crate::routes::gateway::{
    CompletionRequest, EmbeddingsRequest, MessagesRequest, ResponsesRequest,
};
use crate::routes::keys::CreateKeyBody;
use crate::routes::mcp_calls::McpCallsQuery;
use crate::routes::mcp_tools::{ApproveToolBody, McpToolsQuery};
use crate::routes::policies::ExplainBody;
use crate::routes::threads::{HistoryQuery, ThreadsQuery};
use crate::routes::versions::{
    CreateVersionBody, PromoteBody, ShadowBody, SpecPatchBody, TrafficBody,
};

macro_rules! guarded {
    ($($body:ty => $access:ident, $action:literal;)*) => {
        $(impl Guarded for $body {
            const ACCESS: Access = Access::$access;
            const ACTION: &'static str = $action;
        })*
    };
}

guarded! {
    CreateThreadBody => Operate, "creating a thread";
    StartTurnBody => Operate, "starting a turn";
    DecisionBody => Operate, "answering a permission";
    CreateExecutionBody => Operate, "submitting an execution";
    CompletionRequest => Operate, "calling a model through the gateway";
    ResponsesRequest => Operate, "calling a model through the gateway";
    MessagesRequest => Operate, "calling a model through the gateway";
    EmbeddingsRequest => Operate, "calling a model through the gateway";
    DecisionRequest => Approve, "deciding an approval";
    CreateKeyBody => Administer, "creating a key";
    CreateVersionBody => Administer, "creating an agent version";
    SpecPatchBody => Administer, "editing an agent version";
    PromoteBody => Administer, "promoting an agent version";
    TrafficBody => Administer, "routing traffic to versions";
    ShadowBody => Administer, "setting a shadow version";
    ThreadsQuery => Read, "listing threads";
    HistoryQuery => Read, "reading history";
    EventsQuery => Read, "following a thread";
    CostsQuery => Read, "reading costs";
    McpCallsQuery => Read, "reading the MCP gateway's log";
    McpToolsQuery => Read, "reading pinned MCP tools";
    ApproveToolBody => Administer, "approving MCP tool definitions";
    ExecutionsQuery => Read, "listing executions";
    ApprovalsQuery => Approve, "listing approvals";
    ExplainBody => List, "explaining a policy decision";
}
