//! The one error type of the HTTP layer and its envelope,
//! `{"error":{"code","message","details"}}`.
//!
//! Every failure a client can see leaves through [`ApiError`]'s `IntoResponse`: hub
//! errors, axum's own rejections (mapped in `extract.rs`), unknown routes and wrong
//! methods. Internal failures are logged here in full and answered with a short
//! message only, so database paths or driver errors never reach a client. Nothing in
//! this file decides *whether* something failed; it only says how a failure looks.

use agentplane_core::ErrorCode;
use agentplane_engine::hub::HubError;
use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// The `WWW-Authenticate` challenge sent with every 401.
pub const BEARER_CHALLENGE: &str = "Bearer realm=\"agentplane\"";

/// A failed request: a code from the design's list, an HTTP status, a message for
/// people and machine-readable details (always an object, possibly empty).
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    status: StatusCode,
    code: ErrorCode,
    message: String,
    details: Map<String, Value>,
}

impl ApiError {
    /// An error with the status its code stands for.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            status: status_of(code),
            code,
            message: message.into(),
            details: Map::new(),
        }
    }

    /// `INVALID_ARGUMENT` (400).
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArgument, message)
    }

    /// `NOT_FOUND` (404).
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    /// `UNAUTHORIZED` (401); the response carries a bearer challenge.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unauthorized, message)
    }

    /// `INTERNAL` (500). `cause` is logged, never sent.
    pub fn internal(cause: &dyn std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error while serving a request");
        Self::new(ErrorCode::Internal, "internal error; see the server log")
    }

    /// The same error with a transport-level status that differs from its code's usual
    /// one (413 for a body too large, 415 for a wrong content type, 405).
    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// Adds one detail.
    pub fn with_detail(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.details.insert(key.to_owned(), value.into());
        self
    }

    /// The code sent to the client.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The HTTP status sent to the client.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The message sent to the client.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The envelope as JSON: the body of an error response and the data of an SSE
    /// `error` event.
    pub fn envelope(&self) -> Value {
        // Details can quote input (a field's value), so they pass the redactor too.
        let mut details = Value::Object(self.details.clone());
        agentplane_core::secret::current().redact_json(&mut details);
        serde_json::json!({
            "error": {
                "code": self.code.as_str(),
                "message": agentplane_core::secret::redact(&self.message),
                "details": details,
            }
        })
    }
}

/// The status each code stands for.
pub fn status_of(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::InvalidArgument => StatusCode::BAD_REQUEST,
        ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
        ErrorCode::Forbidden => StatusCode::FORBIDDEN,
        ErrorCode::NotFound => StatusCode::NOT_FOUND,
        ErrorCode::Conflict => StatusCode::CONFLICT,
        ErrorCode::Timeout => StatusCode::GATEWAY_TIMEOUT,
        ErrorCode::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::BudgetExceeded => StatusCode::PAYMENT_REQUIRED,
        ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        ErrorCode::UpstreamUnavailable => StatusCode::BAD_GATEWAY,
    }
}

impl From<HubError> for ApiError {
    fn from(e: HubError) -> Self {
        let retry_after = e.retry_after_secs();
        let error = match e.code() {
            ErrorCode::Internal => Self::internal(&e),
            code => Self::new(code, e.to_string()),
        };
        match retry_after {
            Some(secs) => error.with_detail(RETRY_AFTER_DETAIL, secs),
            None => error,
        }
    }
}

/// The detail a `RATE_LIMITED` error carries its wait in; also sent as `Retry-After`.
pub const RETRY_AFTER_DETAIL: &str = "retry_after_secs";

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let unauthorized = self.code == ErrorCode::Unauthorized;
        let retry_after = self
            .details
            .get(RETRY_AFTER_DETAIL)
            .and_then(Value::as_u64)
            .filter(|_| self.code == ErrorCode::RateLimited);
        let mut response = (self.status, Json(self.envelope())).into_response();
        if let Some(secs) = retry_after
            && let Ok(value) = HeaderValue::from_str(&secs.to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        if unauthorized {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(BEARER_CHALLENGE),
            );
        }
        response
    }
}

/// The error envelope, as documented in the OpenAPI document (responses are built by
/// [`ApiError::envelope`]; this type only describes them).
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorEnvelope {
    pub error: ErrorBody,
}

/// The inside of the error envelope.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// One of the design's codes.
    pub code: ErrorCodeName,
    /// What went wrong, for people.
    pub message: String,
    /// Machine-readable details; an empty object when there are none.
    #[schema(value_type = Object)]
    pub details: Map<String, Value>,
}

/// The error codes, as their wire names (documentation only).
#[allow(dead_code)] // Only describes the wire for the OpenAPI document.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCodeName {
    InvalidArgument,
    Unauthorized,
    Forbidden,
    NotFound,
    Conflict,
    Timeout,
    RateLimited,
    BudgetExceeded,
    Internal,
    UpstreamUnavailable,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_errors_say_nothing_about_their_cause() {
        let cause = "disk I/O error at /var/lib/secret/agentplane.db";
        let error = ApiError::internal(&cause);
        assert_eq!(error.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!error.envelope().to_string().contains("secret"));
        let from_hub: ApiError = HubError::Store(agentplane_engine::ports::StoreError::Backend(
            cause.to_owned(),
        ))
        .into();
        assert_eq!(from_hub.code(), ErrorCode::Internal);
        assert!(!from_hub.envelope().to_string().contains("secret"));
    }

    #[test]
    fn every_code_has_its_status_and_details_are_an_object() {
        assert_eq!(
            status_of(ErrorCode::BudgetExceeded),
            StatusCode::PAYMENT_REQUIRED
        );
        assert_eq!(status_of(ErrorCode::Timeout), StatusCode::GATEWAY_TIMEOUT);
        let envelope = ApiError::not_found("thread thr_x").envelope();
        assert_eq!(envelope["error"]["code"], "NOT_FOUND");
        assert_eq!(envelope["error"]["details"], serde_json::json!({}));
        let conflict: ApiError = HubError::Conflict("busy".into()).into();
        assert_eq!(conflict.status(), StatusCode::CONFLICT);
    }

    #[test]
    fn the_documented_codes_are_exactly_the_core_codes() {
        let schema = serde_json::to_value(<ErrorCodeName as utoipa::PartialSchema>::schema())
            .expect("schema serializes");
        let names: Vec<String> = schema["enum"]
            .as_array()
            .expect("an enum of names")
            .iter()
            .filter_map(|n| n.as_str().map(str::to_owned))
            .collect();
        // Each documented name is a real code, spelled as the wire spells it…
        for name in &names {
            let code: ErrorCode =
                serde_json::from_value(serde_json::json!(name)).expect("a core error code");
            assert_eq!(code.as_str(), name);
        }
        // …and no core code is missing (the core has ten).
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 10, "{names:?}");
    }
}
