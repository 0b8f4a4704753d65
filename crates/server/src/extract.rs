//! Extractors that fail in the envelope: JSON bodies, query strings and ids in paths.
//!
//! axum's own extractors answer bad input with plain-text bodies and statuses such as
//! 422; these wrappers turn every rejection into an [`ApiError`] instead. They only
//! parse; whether a parsed value makes sense is the hub's call.
//!
//! Authorization comes before validation: a JSON body or a query string is read only
//! once the caller's roles allow what it is for ([`Guarded`], one table in
//! `guarded.rs`), so a caller who may not do a thing gets `403` whatever it sent, never
//! a `400` that describes its input. The bounds on [`ApiJson`] and [`ApiQuery`] make
//! every such route declare it.
//!
//! A malformed id in a path (`thr_../../etc`, a turn id where a thread id belongs) is
//! `404 NOT_FOUND`, like an id that does not exist or belongs to another client: a
//! client learns nothing from the difference, and there is one answer to handle.

use agentplane_engine::identity::Access;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::{Extensions, StatusCode};
use serde::de::DeserializeOwned;

use crate::AppState;
use crate::auth::Identity;
use crate::error::ApiError;

/// A request body or query and who may send it: the access the hub method it is for
/// requires, checked before it is read (implemented in `guarded.rs`).
pub(crate) trait Guarded {
    /// What the caller's roles must allow.
    const ACCESS: Access;
    /// What a refusal names ("starting a turn"), as the hub's own check does.
    const ACTION: &'static str;
}

/// A JSON body, read once the caller may send it; a rejection is `403` (its roles do
/// not allow what the body is for), `400`, `413` (too large) or `415` (not JSON).
#[derive(Debug, Clone)]
pub struct ApiJson<T>(pub T);

impl<T> FromRequest<AppState> for ApiJson<T>
where
    T: DeserializeOwned + Guarded,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, ApiError> {
        authorize::<T>(&request, state)?;
        json(request, state).await.map(Self)
    }
}

/// Refuses a caller whose roles do not allow what a `T` is for (`403` and a
/// `security_event`, from the hub).
pub(crate) fn authorize<T: Guarded>(request: &Request, state: &AppState) -> Result<(), ApiError> {
    check::<T>(request.extensions(), state)
}

/// [`authorize`], from the request's extensions.
fn check<T: Guarded>(extensions: &Extensions, state: &AppState) -> Result<(), ApiError> {
    let Identity(caller) = extensions
        .get::<Identity>()
        // Only reachable if a route were mounted without the middleware.
        .ok_or_else(|| ApiError::unauthorized("this route was mounted without auth"))?;
    Ok(state.identity.authorize(caller, T::ACCESS, T::ACTION)?)
}

/// Reads a JSON body as `T`, every rejection in the envelope. Call [`authorize`] first.
pub(crate) async fn json<T: DeserializeOwned>(
    request: Request,
    state: &AppState,
) -> Result<T, ApiError> {
    match axum::Json::<T>::from_request(request, state).await {
        Ok(axum::Json(value)) => Ok(value),
        Err(rejection) => Err(json_rejection(&rejection)),
    }
}

fn json_rejection(rejection: &JsonRejection) -> ApiError {
    let status = rejection.status();
    match status {
        StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::invalid("the request body is larger than the server accepts")
                .with_status(status)
        }
        StatusCode::UNSUPPORTED_MEDIA_TYPE => {
            ApiError::invalid("the request body must be JSON with `Content-Type: application/json`")
                .with_status(status)
        }
        s if s.is_server_error() => ApiError::internal(&rejection.body_text()),
        _ => ApiError::invalid(rejection.body_text()),
    }
}

/// A query string, read once the caller may send it (as [`ApiJson`]); a rejection is
/// `403` or `400`.
#[derive(Debug, Clone)]
pub struct ApiQuery<T>(pub T);

impl<T> FromRequestParts<AppState> for ApiQuery<T>
where
    T: DeserializeOwned + Guarded,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        check::<T>(&parts.extensions, state)?;
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(value)) => Ok(Self(value)),
            Err(rejection) => Err(query_rejection(&rejection)),
        }
    }
}

fn query_rejection(rejection: &QueryRejection) -> ApiError {
    ApiError::invalid(rejection.body_text())
}

/// The one id in a path (`ThreadId`, `TurnId`, `PermissionId`), parsed with its
/// prefix checked. Anything malformed is `404`.
#[derive(Debug, Clone)]
pub struct IdPath<T>(pub T);

impl<T, S> FromRequestParts<S> for IdPath<T>
where
    T: TryFrom<String, Error = String>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|rejection| {
                ApiError::not_found(format!("no such resource: {}", rejection.body_text()))
            })?;
        T::try_from(raw).map(Self).map_err(ApiError::not_found)
    }
}

/// A query flag: `1`/`true` or `0`/`false`; anything else is refused by serde.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
pub enum Flag {
    #[default]
    #[serde(rename = "0", alias = "false")]
    Off,
    #[serde(rename = "1", alias = "true")]
    On,
}

impl Flag {
    /// Whether the flag is set.
    pub fn is_on(self) -> bool {
        self == Self::On
    }
}
