//! `GET /v1/policies`: the policy set in force, where each policy comes from, and why
//! the latest reload failed if it did (the previous set then stays in force).
//!
//! Read-only: loading and reloading are the runtime's, the set and its status live in
//! the hub's governance (`ActivePolicies`). The wire shape of a policy is here and
//! nowhere else.

use agentplane_core::policy::{Glob, Policy, PolicyError, PolicyKind, Targets};
use agentplane_engine::governance::PolicyStatus;
use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::tags;
use crate::AppState;
use crate::auth::Identity;
use crate::error::ApiError;

/// `GET /v1/policies`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PolicyList {
    /// The policies directory; `null` when none is configured (everything allowed).
    source: Option<String>,
    /// When the set in force was loaded (RFC 3339, UTC).
    loaded_at: Option<String>,
    /// The set in force, in evaluation order (files by name, then file order).
    policies: Vec<PolicyView>,
    /// Why the latest reload failed; `null` when it succeeded.
    reload_error: Option<ReloadError>,
}

/// One policy of the set in force.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PolicyView {
    /// Unique across the set.
    name: String,
    #[serde(rename = "type")]
    kind: PolicyType,
    description: Option<String>,
    targets: TargetsView,
    /// One line: kind, targets and the rule's gist.
    summary: String,
    /// The file it was read from (`email.yaml`).
    source: String,
}

/// A policy's type.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PolicyType {
    ApprovalRequired,
    RateLimit,
    TimeWindow,
    Budget,
    ToolAccess,
    DataScope,
    Content,
}

impl From<PolicyKind> for PolicyType {
    fn from(kind: PolicyKind) -> Self {
        match kind {
            PolicyKind::ApprovalRequired => Self::ApprovalRequired,
            PolicyKind::RateLimit => Self::RateLimit,
            PolicyKind::TimeWindow => Self::TimeWindow,
            PolicyKind::Budget => Self::Budget,
            PolicyKind::ToolAccess => Self::ToolAccess,
            PolicyKind::DataScope => Self::DataScope,
            PolicyKind::Content => Self::Content,
        }
    }
}

/// What a policy applies to; each list is patterns (`*` matches any run), and `null`
/// means "all".
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TargetsView {
    agents: Option<Vec<String>>,
    tags: Option<Vec<String>>,
    tools: Option<Vec<String>>,
    clients: Option<Vec<String>>,
}

/// The latest failed reload.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ReloadError {
    /// When it failed (RFC 3339, UTC).
    failed_at: Option<String>,
    /// Every problem, located.
    errors: Vec<PolicyErrorView>,
}

/// One problem of a policy file: `source:line: field: message`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PolicyErrorView {
    /// The file (or the directory, when it could not be read).
    source: String,
    line: Option<usize>,
    /// The field path, e.g. `rules.max`.
    field: Option<String>,
    message: String,
}

fn patterns(list: &Option<Vec<Glob>>) -> Option<Vec<String>> {
    list.as_ref()
        .map(|globs| globs.iter().map(|g| g.as_str().to_owned()).collect())
}

impl From<&Targets> for TargetsView {
    fn from(t: &Targets) -> Self {
        Self {
            agents: patterns(&t.agents),
            tags: patterns(&t.tags),
            tools: patterns(&t.tools),
            clients: patterns(&t.clients),
        }
    }
}

impl From<&Policy> for PolicyView {
    fn from(p: &Policy) -> Self {
        Self {
            name: p.name().to_owned(),
            kind: p.kind().into(),
            description: p.description().map(str::to_owned),
            targets: p.targets().into(),
            summary: p.summary(),
            source: p.source().to_owned(),
        }
    }
}

impl From<&PolicyError> for PolicyErrorView {
    fn from(e: &PolicyError) -> Self {
        Self {
            source: e.source.clone(),
            line: e.line,
            field: e.field.clone(),
            message: e.message.clone(),
        }
    }
}

fn reload_error(status: &PolicyStatus) -> Option<ReloadError> {
    (!status.errors.is_empty() || status.failed_at.is_some()).then(|| ReloadError {
        failed_at: status.failed_at.clone(),
        errors: status.errors.iter().map(Into::into).collect(),
    })
}

/// Lists the policy set in force with the file of each policy. Policies are global
/// (not per client), so every client sees the same list.
#[utoipa::path(
    get,
    path = "/v1/policies",
    operation_id = "listPolicies",
    tag = tags::POLICIES,
    responses((status = 200, description = "The policies in force and the latest reload's result.", body = PolicyList))
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Identity,
) -> Result<Json<PolicyList>, ApiError> {
    let active = state.hub.policies(&caller.0)?;
    let status = active.status();
    let set = active.current();
    Ok(Json(PolicyList {
        source: status.source.clone(),
        loaded_at: status.loaded_at.clone(),
        policies: set.policies().iter().map(Into::into).collect(),
        reload_error: reload_error(&status),
    }))
}

/// `POST /v1/policies/explain`: one request to decide.
#[derive(Debug, serde::Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExplainBody {
    /// The agent the request goes to; its tags are the configured agent's unless
    /// `tags` is given.
    agent: String,
    /// The tool called; absent: a turn-level request.
    #[serde(default)]
    tool: Option<String>,
    /// The call's arguments (with `tool`).
    #[serde(default)]
    #[schema(value_type = Object)]
    args: Option<serde_json::Value>,
    /// The client asking; default: the caller.
    #[serde(default)]
    client: Option<String>,
    /// The caller's roles; default: none.
    #[serde(default)]
    roles: Vec<String>,
    #[serde(default)]
    tags: Option<Vec<String>>,
    #[serde(default)]
    version: Option<String>,
    /// RFC 3339; default: now.
    #[serde(default)]
    at: Option<String>,
}

/// Explains how the policies in force decide one request: the decision (`allow`,
/// `deny`, `approval`), the deciding policy, the set's hash, and each policy with
/// whether it matched and why. Nothing is run or recorded.
#[utoipa::path(
    post,
    path = "/v1/policies/explain",
    operation_id = "explainPolicies",
    tag = tags::POLICIES,
    request_body = ExplainBody,
    responses(
        (status = 200, description = "The decision, explained.", body = Object),
        (status = 400, description = "A malformed request.", body = crate::error::ErrorEnvelope),
    )
)]
pub(crate) async fn explain(
    State(state): State<AppState>,
    caller: Identity,
    crate::extract::ApiJson(body): crate::extract::ApiJson<ExplainBody>,
) -> Result<Json<serde_json::Value>, ApiError> {
    use agentplane_core::policy::{RequestContext, Timestamp};
    let active = state.hub.policies(&caller.0)?;
    let set = active.current();
    let at = match body.at.as_deref().map(str::parse::<Timestamp>) {
        None => Timestamp::now(),
        Some(Ok(at)) => at,
        Some(Err(e)) => {
            return Err(ApiError::invalid(format!(
                "`at` is not an RFC 3339 instant: {e}"
            )));
        }
    };
    if body.args.is_some() && body.tool.is_none() {
        return Err(ApiError::invalid("`args` are the arguments of a `tool`"));
    }
    let tags = match body.tags {
        Some(tags) => tags,
        None => state
            .hub
            .agents(&caller.0)?
            .get(&body.agent)
            .map(|a| a.tags.clone())
            .unwrap_or_default(),
    };
    let client = body.client.unwrap_or_else(|| caller.0.client().to_owned());
    let null = serde_json::Value::Null;
    let mut ctx = RequestContext::new(&body.agent, &tags, &client)
        .roles(&body.roles)
        .version(body.version.as_deref())
        .tool(body.tool.as_deref())
        .at(at);
    if body.tool.is_some() {
        ctx = ctx.arguments(body.args.as_ref().unwrap_or(&null));
    }
    let explained = agentplane_engine::governance::explain::explain(&set, &ctx);
    serde_json::to_value(&explained)
        .map(Json)
        .map_err(|e| ApiError::internal(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_kind_is_listed_under_its_file_name() {
        for kind in PolicyKind::ALL {
            let listed = serde_json::to_value(PolicyType::from(*kind)).expect("serializes");
            assert_eq!(listed, kind.as_str());
        }
    }
}
