//! Agent versions (ADR 0016): list, create, show and edit (drafts only) an agent's
//! versions, promote them (draft → staging → production), set the traffic split over
//! production versions and roll it back, set or clear the shadow version, and list a
//! thread's hidden shadow threads.
//!
//! Reading is open to every client; changing is for the clients `[versions] admins`
//! names (any authenticated client when it is not set) — the hub decides, and says
//! `403 FORBIDDEN`. Wire names live here; the rules (semver must increase, production
//! is immutable, weights sum to 100) are the hub's.

use std::collections::BTreeMap;

use agentplane_core::{SpecPatch, Stage, ThreadId, TrafficSplit, VersionSpec};
use agentplane_engine::services::versions::{AgentVersion, AgentVersions, CreateVersion};
use axum::Json;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::tags;
use crate::AppState;
use crate::auth::Identity;
use crate::body::{ThreadList, ThreadView};
use crate::error::{ApiError, ErrorEnvelope};
use crate::extract::{self, Guarded, IdPath};

// ----- requests ------------------------------------------------------------------------

/// Changes to a version's spec; every field optional, unknown fields refused.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SpecPatchBody {
    #[serde(default)]
    #[schema(max_length = 2000)]
    description: Option<String>,
    /// Not blank, at most 65,536 characters.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 65536)]
    system_prompt: Option<String>,
    /// A model id; `""` uses the configured default.
    #[serde(default)]
    #[schema(max_length = 200)]
    model: Option<String>,
    /// A subset of the agent's configured ensembles.
    #[serde(default)]
    ensembles: Option<Vec<String>>,
    /// A JSON Schema with `"type": "object"`; `null` removes it (the text answer is the
    /// result); left out, it is kept.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Object>)]
    output_schema: Option<Value>,
    #[serde(default)]
    #[schema(minimum = 1, maximum = 1000)]
    max_steps: Option<u32>,
    #[serde(default)]
    #[schema(minimum = 1, maximum = 3600000)]
    tool_timeout_ms: Option<u64>,
    #[serde(default)]
    #[schema(minimum = 256, maximum = 16777216)]
    tool_output_cap_bytes: Option<usize>,
}

/// A field that is present is `Some`, even when it is `null`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl From<SpecPatchBody> for SpecPatch {
    fn from(body: SpecPatchBody) -> Self {
        Self {
            description: body.description,
            system_prompt: body.system_prompt,
            model: body.model,
            ensembles: body.ensembles,
            output_schema: body.output_schema,
            max_steps: body.max_steps,
            tool_timeout_ms: body.tool_timeout_ms,
            tool_output_cap_bytes: body.tool_output_cap_bytes,
        }
    }
}

/// `POST /v1/agents/{agent}/versions`: a new draft.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateVersionBody {
    /// A semantic version above every version of the agent (`1.1.0`, `2.0.0-rc.1`);
    /// no build metadata.
    #[schema(
        min_length = 5,
        max_length = 64,
        pattern = r"^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$",
        example = "1.1.0"
    )]
    version: String,
    /// The version whose spec the new one starts from; default the highest one.
    #[serde(default)]
    #[schema(
        max_length = 64,
        pattern = r"^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$"
    )]
    from: Option<String>,
    /// Changes to that spec.
    #[serde(default)]
    spec: Option<SpecPatchBody>,
}

/// `POST /v1/agents/{agent}/versions/{version}/promote`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PromoteBody {
    /// The stage to promote to; it must be the next one. Default: the next one.
    #[serde(default)]
    to: Option<StageName>,
}

/// `PUT /v1/agents/{agent}/traffic`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TrafficBody {
    /// Percent of new threads per production version; the weights sum to 100.
    #[schema(example = json!({"1.0.0": 90, "1.1.0": 10}))]
    weights: BTreeMap<String, u32>,
}

/// `PUT /v1/agents/{agent}/shadow`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ShadowBody {
    /// A staging or production version that gets a shadow copy of every production
    /// turn of the agent; `null` stops shadowing.
    #[schema(max_length = 64)]
    version: Option<String>,
}

// ----- responses -----------------------------------------------------------------------

/// A version's stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StageName {
    Draft,
    Staging,
    Production,
}

impl From<Stage> for StageName {
    fn from(stage: Stage) -> Self {
        match stage {
            Stage::Draft => Self::Draft,
            Stage::Staging => Self::Staging,
            Stage::Production => Self::Production,
        }
    }
}

impl From<StageName> for Stage {
    fn from(stage: StageName) -> Self {
        match stage {
            StageName::Draft => Self::Draft,
            StageName::Staging => Self::Staging,
            StageName::Production => Self::Production,
        }
    }
}

/// What a version changes of its agent.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SpecView {
    description: String,
    system_prompt: String,
    /// `null`: the configured default model.
    model: Option<String>,
    ensembles: Vec<String>,
    #[schema(value_type = Option<Object>)]
    output_schema: Option<Value>,
    max_steps: u32,
    tool_timeout_ms: u64,
    tool_output_cap_bytes: usize,
}

impl From<VersionSpec> for SpecView {
    fn from(spec: VersionSpec) -> Self {
        Self {
            description: spec.description,
            system_prompt: spec.system_prompt,
            model: spec.model,
            ensembles: spec.ensembles,
            output_schema: spec.output_schema,
            max_steps: spec.max_steps,
            tool_timeout_ms: spec.tool_timeout_ms,
            tool_output_cap_bytes: spec.tool_output_cap_bytes,
        }
    }
}

/// One version of an agent.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct VersionView {
    #[schema(example = "1.1.0")]
    version: String,
    stage: StageName,
    /// The agent's configured definition (not created through the API).
    baseline: bool,
    /// Whether it gets a shadow copy of the agent's production turns.
    shadow: bool,
    /// Percent of new threads it gets now.
    weight: u32,
    spec: SpecView,
    created_by: Option<String>,
    created_at: Option<String>,
    updated_at: Option<String>,
}

impl From<AgentVersion> for VersionView {
    fn from(v: AgentVersion) -> Self {
        Self {
            version: v.version,
            stage: v.stage.into(),
            baseline: v.baseline,
            shadow: v.shadow,
            weight: v.weight,
            spec: v.spec.into(),
            created_by: v.created_by,
            created_at: v.created_at,
            updated_at: v.updated_at,
        }
    }
}

/// An agent's versions and traffic.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct AgentVersionsView {
    agent: String,
    /// By semver, lowest first.
    versions: Vec<VersionView>,
    /// The split in force: percent of new threads per version.
    traffic: BTreeMap<String, u32>,
    /// How many traffic changes were recorded.
    traffic_changes: u64,
    /// The split a rollback would restore; `null` when there is none.
    rollback_to: Option<BTreeMap<String, u32>>,
    /// The shadow version, if any.
    shadow: Option<String>,
}

impl From<AgentVersions> for AgentVersionsView {
    fn from(v: AgentVersions) -> Self {
        Self {
            agent: v.agent,
            versions: v.versions.into_iter().map(VersionView::from).collect(),
            traffic: v.traffic.0,
            traffic_changes: v.traffic_changes,
            rollback_to: v.rollback_to.map(|s| s.0),
            shadow: v.shadow,
        }
    }
}

// ----- paths ---------------------------------------------------------------------------

/// `{agent}` alone, or `{agent}` and `{version}`; a rejection is `404` in the envelope.
pub(crate) struct NamePath<T>(pub(crate) T);

impl<T, S> FromRequestParts<S> for NamePath<T>
where
    T: serde::de::DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(value)| Self(value))
            .map_err(|rejection| {
                ApiError::not_found(format!("no such resource: {}", rejection.body_text()))
            })
    }
}

/// A JSON body that must be an object: serde would also read a struct from an array
/// (`["1.2.0"]`), a shape nobody means.
pub(crate) struct ObjectJson<T>(T);

impl<T> axum::extract::FromRequest<AppState> for ObjectJson<T>
where
    T: serde::de::DeserializeOwned + Guarded,
{
    type Rejection = ApiError;

    async fn from_request(
        request: axum::extract::Request,
        state: &AppState,
    ) -> Result<Self, ApiError> {
        extract::authorize::<T>(&request, state)?;
        let value: Value = extract::json(request, state).await?;
        if !value.is_object() {
            return Err(ApiError::invalid("the request body must be a JSON object"));
        }
        serde_json::from_value(value)
            .map(Self)
            .map_err(|e| ApiError::invalid(e.to_string()))
    }
}

// ----- handlers ------------------------------------------------------------------------

/// An agent's versions, the traffic split in force and the shadow.
#[utoipa::path(
    get,
    path = "/v1/agents/{agent}/versions",
    operation_id = "listAgentVersions",
    tag = tags::VERSIONS,
    params(("agent" = String, Path, description = "The agent's name.")),
    responses((status = 200, description = "The agent's versions and traffic.", body = AgentVersionsView))
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Identity,
    NamePath(agent): NamePath<String>,
) -> Result<Json<AgentVersionsView>, ApiError> {
    Ok(Json(
        state
            .versions
            .agent_versions(&caller.0, &agent)
            .await?
            .into(),
    ))
}

/// Creates a draft version: the spec of `from` (default the highest version) with the
/// changes in `spec`.
#[utoipa::path(
    post,
    path = "/v1/agents/{agent}/versions",
    operation_id = "createAgentVersion",
    tag = tags::VERSIONS,
    params(("agent" = String, Path, description = "The agent's name.")),
    request_body = CreateVersionBody,
    responses(
        (status = 201, description = "The new draft.", body = VersionView),
        (status = 403, description = "This client may not change versions.", body = ErrorEnvelope),
        (status = 409, description = "The version exists, or is not above the agent's highest.", body = ErrorEnvelope),
    )
)]
pub(crate) async fn create(
    State(state): State<AppState>,
    caller: Identity,
    NamePath(agent): NamePath<String>,
    ObjectJson(body): ObjectJson<CreateVersionBody>,
) -> Result<(StatusCode, Json<VersionView>), ApiError> {
    let version = state
        .versions
        .create_version(
            &caller.0,
            &agent,
            CreateVersion {
                version: body.version,
                from: body.from,
                spec: body.spec.map(SpecPatch::from).unwrap_or_default(),
            },
        )
        .await?;
    Ok((StatusCode::CREATED, Json(version.into())))
}

/// One version of an agent.
#[utoipa::path(
    get,
    path = "/v1/agents/{agent}/versions/{version}",
    operation_id = "getAgentVersion",
    tag = tags::VERSIONS,
    params(
        ("agent" = String, Path, description = "The agent's name."),
        ("version" = String, Path, description = "The version (`1.1.0`)."),
    ),
    responses((status = 200, description = "The version.", body = VersionView))
)]
pub(crate) async fn get(
    State(state): State<AppState>,
    caller: Identity,
    NamePath((agent, version)): NamePath<(String, String)>,
) -> Result<Json<VersionView>, ApiError> {
    Ok(Json(
        state
            .versions
            .agent_version(&caller.0, &agent, &version)
            .await?
            .into(),
    ))
}

/// Changes a draft. Staging and production versions are immutable: `409`.
#[utoipa::path(
    patch,
    path = "/v1/agents/{agent}/versions/{version}",
    operation_id = "editAgentVersion",
    tag = tags::VERSIONS,
    params(
        ("agent" = String, Path, description = "The agent's name."),
        ("version" = String, Path, description = "The version (`1.1.0`)."),
    ),
    request_body = SpecPatchBody,
    responses(
        (status = 200, description = "The changed draft.", body = VersionView),
        (status = 403, description = "This client may not change versions.", body = ErrorEnvelope),
        (status = 409, description = "The version is not a draft.", body = ErrorEnvelope),
    )
)]
pub(crate) async fn edit(
    State(state): State<AppState>,
    caller: Identity,
    NamePath((agent, version)): NamePath<(String, String)>,
    ObjectJson(body): ObjectJson<SpecPatchBody>,
) -> Result<Json<VersionView>, ApiError> {
    Ok(Json(
        state
            .versions
            .edit_version(&caller.0, &agent, &version, body.into())
            .await?
            .into(),
    ))
}

/// Promotes a version one stage: draft → staging → production. A new production
/// version takes no traffic until a split names it.
#[utoipa::path(
    post,
    path = "/v1/agents/{agent}/versions/{version}/promote",
    operation_id = "promoteAgentVersion",
    tag = tags::VERSIONS,
    params(
        ("agent" = String, Path, description = "The agent's name."),
        ("version" = String, Path, description = "The version (`1.1.0`)."),
    ),
    request_body = PromoteBody,
    responses(
        (status = 200, description = "The promoted version.", body = VersionView),
        (status = 403, description = "This client may not change versions.", body = ErrorEnvelope),
        (status = 409, description = "Already in production, or `to` is not the next stage.", body = ErrorEnvelope),
    )
)]
pub(crate) async fn promote(
    State(state): State<AppState>,
    caller: Identity,
    NamePath((agent, version)): NamePath<(String, String)>,
    ObjectJson(body): ObjectJson<PromoteBody>,
) -> Result<Json<VersionView>, ApiError> {
    Ok(Json(
        state
            .versions
            .promote_version(&caller.0, &agent, &version, body.to.map(Stage::from))
            .await?
            .into(),
    ))
}

/// Sets the traffic split over production versions. New threads draw their version by
/// it; existing threads keep theirs.
#[utoipa::path(
    put,
    path = "/v1/agents/{agent}/traffic",
    operation_id = "setAgentTraffic",
    tag = tags::VERSIONS,
    params(("agent" = String, Path, description = "The agent's name.")),
    request_body = TrafficBody,
    responses(
        (status = 200, description = "The agent's versions and the new traffic.", body = AgentVersionsView),
        (status = 403, description = "This client may not change versions.", body = ErrorEnvelope),
        (status = 409, description = "A version named is not in production, or the traffic changed meanwhile.", body = ErrorEnvelope),
    )
)]
pub(crate) async fn traffic(
    State(state): State<AppState>,
    caller: Identity,
    NamePath(agent): NamePath<String>,
    ObjectJson(body): ObjectJson<TrafficBody>,
) -> Result<Json<AgentVersionsView>, ApiError> {
    Ok(Json(
        state
            .versions
            .set_traffic(&caller.0, &agent, TrafficSplit(body.weights))
            .await?
            .into(),
    ))
}

/// Restores the traffic split in force before the current one (recorded as a
/// rollback); repeated, walks back to the configured baseline.
#[utoipa::path(
    post,
    path = "/v1/agents/{agent}/traffic/rollback",
    operation_id = "rollbackAgentTraffic",
    tag = tags::VERSIONS,
    params(("agent" = String, Path, description = "The agent's name.")),
    responses(
        (status = 200, description = "The agent's versions and the restored traffic.", body = AgentVersionsView),
        (status = 403, description = "This client may not change versions.", body = ErrorEnvelope),
        (status = 409, description = "There is no earlier split.", body = ErrorEnvelope),
    )
)]
pub(crate) async fn rollback(
    State(state): State<AppState>,
    caller: Identity,
    NamePath(agent): NamePath<String>,
) -> Result<Json<AgentVersionsView>, ApiError> {
    Ok(Json(
        state
            .versions
            .rollback_traffic(&caller.0, &agent)
            .await?
            .into(),
    ))
}

/// Sets or clears the agent's shadow version.
#[utoipa::path(
    put,
    path = "/v1/agents/{agent}/shadow",
    operation_id = "setAgentShadow",
    tag = tags::VERSIONS,
    params(("agent" = String, Path, description = "The agent's name.")),
    request_body = ShadowBody,
    responses(
        (status = 200, description = "The agent's versions and shadow.", body = AgentVersionsView),
        (status = 403, description = "This client may not change versions.", body = ErrorEnvelope),
        (status = 409, description = "The version is a draft or the configured baseline.", body = ErrorEnvelope),
    )
)]
pub(crate) async fn shadow(
    State(state): State<AppState>,
    caller: Identity,
    NamePath(agent): NamePath<String>,
    ObjectJson(body): ObjectJson<ShadowBody>,
) -> Result<Json<AgentVersionsView>, ApiError> {
    Ok(Json(
        state
            .versions
            .set_shadow(&caller.0, &agent, body.version.as_deref())
            .await?
            .into(),
    ))
}

/// The hidden threads the shadow versions ran this thread's turns on. Their history is
/// read like any thread's (`/v1/threads/{id}/history`).
#[utoipa::path(
    get,
    path = "/v1/threads/{id}/shadows",
    operation_id = "listShadowThreads",
    tag = tags::VERSIONS,
    params(("id" = String, Path, description = "The thread id (`thr_…`).")),
    responses((status = 200, description = "The thread's shadow threads, oldest first.", body = ThreadList))
)]
pub(crate) async fn shadows(
    State(state): State<AppState>,
    caller: Identity,
    IdPath(id): IdPath<ThreadId>,
) -> Result<Json<ThreadList>, ApiError> {
    let threads = state.hub.shadow_threads(&caller.0, &id).await?;
    Ok(Json(ThreadList {
        threads: threads.into_iter().map(ThreadView::from).collect(),
        next_cursor: None,
    }))
}
