//! `/v1/keys`: API keys for admins (ADR 0030) — create (the secret is in this answer
//! and nowhere else, ever), list (never a secret) and revoke (at once, on every
//! replica). The hub checks the admin role and every rule; this file only maps the
//! wire shape. On a server without keys or token, creating the first key needs the
//! one-time setup token in `X-Setup-Token` (the hub's `setup.rs`), checked before the
//! body is read.

use agentplane_core::KeyId;
use agentplane_core::identity::{SETUP_TOKEN_HEADER, SetupToken, parse_lifetime};
use agentplane_engine::ports::KeyRecord;
use agentplane_engine::services::identity::CreateKey;
use axum::Json;
use axum::extract::{FromRequestParts, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::tags;
use crate::AppState;
use crate::auth::Identity;
use crate::error::{ApiError, ErrorEnvelope};
use crate::extract::{ApiJson, IdPath};

/// The setup token a request presents in `X-Setup-Token`, if any. Extracting it asks
/// the hub whether the caller may go on (a caller who is only claimed must present
/// the right one), so a refused caller is `401` before its body is read.
pub(crate) struct PresentedSetupToken(Option<SetupToken>);

impl FromRequestParts<AppState> for PresentedSetupToken {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let Identity(caller) = Identity::from_request_parts(parts, state).await?;
        // Any bytes: a value that is not UTF-8 becomes text that matches no token.
        let presented = parts
            .headers
            .get(SETUP_TOKEN_HEADER)
            .map(|value| SetupToken::presented(String::from_utf8_lossy(value.as_bytes())));
        state
            .identity
            .check_setup_token(&caller, presented.as_ref())?;
        Ok(Self(presented))
    }
}

/// `POST /v1/keys`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateKeyBody {
    /// The client the key acts as.
    #[schema(pattern = "^[A-Za-z0-9._:@-]{1,128}$")]
    client: String,
    /// At least one: `admin`, `operator`, `approver`, `viewer`, or another role name
    /// that policies address as `role:NAME`.
    roles: Vec<String>,
    /// How long until it expires: a number and `s`, `m`, `h` or `d` (`90d`). Absent:
    /// never.
    #[serde(default)]
    expires: Option<String>,
    #[serde(default)]
    #[schema(max_length = 500)]
    description: Option<String>,
}

/// A key as anyone may see it: no secret.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct KeyView {
    id: String,
    client: String,
    roles: Vec<String>,
    description: Option<String>,
    created_by: String,
    created_at: String,
    expires_at: Option<String>,
    revoked_at: Option<String>,
}

impl From<KeyRecord> for KeyView {
    fn from(record: KeyRecord) -> Self {
        Self {
            id: record.id.to_string(),
            client: record.client,
            roles: record.roles,
            description: record.description,
            created_by: record.created_by,
            created_at: record.created_at,
            expires_at: record.expires_at,
            revoked_at: record.revoked_at,
        }
    }
}

/// A new key: its record, and its secret, shown this once.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CreatedKey {
    key: KeyView,
    /// `ap_` and 64 hex digits. Stored nowhere: keep it now.
    secret: String,
}

/// `GET /v1/keys`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct KeyList {
    keys: Vec<KeyView>,
}

/// Creates a key (admins only); its secret is in this answer only.
#[utoipa::path(
    post,
    path = "/v1/keys",
    operation_id = "createKey",
    tag = tags::KEYS,
    request_body = CreateKeyBody,
    params(
        ("X-Setup-Token" = Option<String>, Header, description = "On a server without keys \
         or token, the one-time setup token `serve` wrote to `setup-token` in its data \
         directory (0600): needed to create the first key, consumed by it.")
    ),
    responses(
        (status = 201, description = "The new key and its secret.", body = CreatedKey),
        (status = 401, description = "No valid credential; on a server without keys \
         or token, no or a wrong setup token.", body = ErrorEnvelope),
        (status = 403, description = "The caller is not an admin.", body = ErrorEnvelope),
    )
)]
pub(crate) async fn create(
    State(state): State<AppState>,
    caller: Identity,
    PresentedSetupToken(setup_token): PresentedSetupToken,
    ApiJson(body): ApiJson<CreateKeyBody>,
) -> Result<(StatusCode, Json<CreatedKey>), ApiError> {
    let expires_in_secs = body
        .expires
        .as_deref()
        .map(parse_lifetime)
        .transpose()
        .map_err(ApiError::invalid)?;
    let (record, secret) = state
        .identity
        .create_key(
            &caller.0,
            CreateKey {
                client: body.client,
                roles: body.roles,
                expires_in_secs,
                description: body.description,
                setup_token,
            },
        )
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(CreatedKey {
            key: record.into(),
            secret: secret.expose().to_owned(),
        }),
    ))
}

/// Every key, revoked ones included, without secrets (admins only).
#[utoipa::path(
    get,
    path = "/v1/keys",
    operation_id = "listKeys",
    tag = tags::KEYS,
    responses(
        (status = 200, description = "The keys.", body = KeyList),
        (status = 403, description = "The caller is not an admin.", body = ErrorEnvelope),
    )
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Identity,
) -> Result<Json<KeyList>, ApiError> {
    let keys = state.identity.list_keys(&caller.0).await?;
    Ok(Json(KeyList {
        keys: keys.into_iter().map(KeyView::from).collect(),
    }))
}

/// Revokes a key: refused from the next request on, on every replica (admins only).
#[utoipa::path(
    post,
    path = "/v1/keys/{id}/revoke",
    operation_id = "revokeKey",
    tag = tags::KEYS,
    params(("id" = String, Path, description = "The key id (`key_…`).")),
    responses(
        (status = 200, description = "The revoked key.", body = KeyView),
        (status = 404, description = "No such key.", body = ErrorEnvelope),
    )
)]
pub(crate) async fn revoke(
    State(state): State<AppState>,
    caller: Identity,
    IdPath(id): IdPath<KeyId>,
) -> Result<Json<KeyView>, ApiError> {
    Ok(Json(
        state.identity.revoke_key(&caller.0, &id).await?.into(),
    ))
}
