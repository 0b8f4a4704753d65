//! `GET /v1/costs`: what the calling client's model calls cost, grouped by agent,
//! model, client, day, provider, thread or turn.
//!
//! The hub forces the client filter, so a client sees only its own spend; a
//! `thread_id` of another client (or a malformed one) is 404, like a thread path.
//! The wire names live here; the grouping and every check are the hub's.

use agentplane_core::ThreadId;
use agentplane_engine::services::reports::{CostGroup, CostLine, CostReport, CostRequest, CostSum};
use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::tags;
use crate::AppState;
use crate::auth::Identity;
use crate::error::ApiError;
use crate::extract::ApiQuery;

/// What to report. Unknown parameters are refused.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct CostsQuery {
    /// How rows are grouped (default `agent`). `turn` needs `thread_id`.
    #[param(value_type = Option<CostGroupName>, nullable = false)]
    group_by: Option<String>,
    /// Only calls at or after this RFC 3339 time (with an offset).
    #[param(nullable = false, example = "2026-01-01T00:00:00Z")]
    since: Option<String>,
    /// Only calls before this RFC 3339 time (with an offset).
    #[param(nullable = false, example = "2026-02-01T00:00:00Z")]
    until: Option<String>,
    /// Only this agent's threads.
    #[param(nullable = false)]
    agent: Option<String>,
    /// Only this thread of the client (`thr_…`).
    #[param(nullable = false)]
    thread_id: Option<String>,
}

/// A grouping's wire name.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CostGroupName {
    Agent,
    Model,
    Client,
    Day,
    Provider,
    Thread,
    Turn,
}

impl From<CostGroup> for CostGroupName {
    fn from(group: CostGroup) -> Self {
        match group {
            CostGroup::Agent => Self::Agent,
            CostGroup::Model => Self::Model,
            CostGroup::Client => Self::Client,
            CostGroup::Day => Self::Day,
            CostGroup::Provider => Self::Provider,
            CostGroup::Thread => Self::Thread,
            CostGroup::Turn => Self::Turn,
        }
    }
}

/// Model calls summed.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CostTotalView {
    /// How many model calls.
    calls: u64,
    input_tokens: u64,
    output_tokens: u64,
    /// The exact amount, in micro-dollars (saturates at 2^64 − 1).
    usd_micros: u64,
    /// The same amount in dollars, for people.
    usd: f64,
}

impl From<CostSum> for CostTotalView {
    fn from(sum: CostSum) -> Self {
        Self {
            calls: sum.calls,
            input_tokens: sum.input_tokens,
            output_tokens: sum.output_tokens,
            usd_micros: sum.usd_micros,
            usd: sum.usd(),
        }
    }
}

/// One group of a report.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CostRowView {
    /// The group: an agent, model, client or provider name, a UTC day (`YYYY-MM-DD`),
    /// a thread id or a turn id.
    key: String,
    calls: u64,
    input_tokens: u64,
    output_tokens: u64,
    /// The exact amount, in micro-dollars.
    usd_micros: u64,
    /// The same amount in dollars.
    usd: f64,
}

impl From<CostLine> for CostRowView {
    fn from(line: CostLine) -> Self {
        Self {
            key: line.key,
            calls: line.sum.calls,
            input_tokens: line.sum.input_tokens,
            output_tokens: line.sum.output_tokens,
            usd_micros: line.sum.usd_micros,
            usd: line.sum.usd(),
        }
    }
}

/// A cost report: rows ordered by key (days and ids in time order) and their total.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CostReportView {
    group_by: CostGroupName,
    rows: Vec<CostRowView>,
    total: CostTotalView,
}

impl From<CostReport> for CostReportView {
    fn from(report: CostReport) -> Self {
        Self {
            group_by: report.group_by.into(),
            rows: report.rows.into_iter().map(CostRowView::from).collect(),
            total: report.total.into(),
        }
    }
}

/// The calling client's costs, grouped as asked. Deleted threads' costs still count.
#[utoipa::path(
    get,
    path = "/v1/costs",
    operation_id = "listCosts",
    tag = tags::COSTS,
    params(CostsQuery),
    responses(
        (status = 200, description = "The client's costs, grouped.", body = CostReportView),
        (status = 404, description = "`thread_id` is not a thread of this client.", body = crate::error::ErrorEnvelope),
    )
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Identity,
    ApiQuery(query): ApiQuery<CostsQuery>,
) -> Result<Json<CostReportView>, ApiError> {
    let group_by = match query.group_by.as_deref() {
        None => CostGroup::Agent,
        Some(name) => CostGroup::parse(name)?,
    };
    let thread = query
        .thread_id
        .map(|id| ThreadId::parse(&id).map_err(|_| ApiError::not_found("thread not found")))
        .transpose()?;
    let report = state
        .reports
        .costs(
            &caller.0,
            CostRequest {
                group_by,
                since: query.since,
                until: query.until,
                agent: query.agent,
                thread,
            },
        )
        .await?;
    Ok(Json(report.into()))
}
