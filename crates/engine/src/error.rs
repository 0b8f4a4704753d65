//! The engine's error types: what a hub method (and the gateway) can fail with, and
//! why a turn could not be run at all, each mapping to one `ErrorCode` of the envelope
//! users see. They sit below the turn loop, so every room above it shares them.

use agentplane_core::ErrorCode;

use crate::governance::Refusal;
use crate::ports::{ModelError, RateError, StoreError};

/// Why a turn could not be run or recorded at all.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl EngineError {
    /// The user-facing code of this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Store(e) => e.code(),
        }
    }
}

/// Why a hub call failed. Each variant maps to one user-facing code.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("agentplane is shutting down and accepts no new turns")]
    ShuttingDown,
    /// A policy forbids it (a `time_window`, a `tool_access`), or the caller may not
    /// decide this approval.
    #[error("{0}")]
    Forbidden(String),
    /// No valid credential: a key unknown, revoked or expired.
    #[error("{0}")]
    Unauthorized(String),
    #[error("{message}")]
    RateLimited {
        message: String,
        retry_after_secs: u64,
    },
    /// The shared rate-limit counters could not be reached: refused (fail-closed).
    #[error("{0}")]
    RateLimitsUnavailable(String),
    #[error("{0}")]
    BudgetExceeded(String),
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for HubError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(what) => Self::NotFound(what),
            StoreError::Conflict(what) => Self::Conflict(what),
            other => Self::Store(other),
        }
    }
}

impl From<RateError> for HubError {
    fn from(e: RateError) -> Self {
        match e {
            RateError::Limited(limited) => Self::RateLimited {
                message: limited.message(),
                retry_after_secs: limited.retry_after.as_secs().max(1),
            },
            unavailable @ RateError::Unavailable(_) => {
                Self::RateLimitsUnavailable(unavailable.to_string())
            }
        }
    }
}

impl From<EngineError> for HubError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::Store(e) => e.into(),
        }
    }
}

impl HubError {
    /// For `RateLimited`: how long to wait, in whole seconds (at least 1).
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Self::RateLimited {
                retry_after_secs, ..
            } => Some(*retry_after_secs),
            _ => None,
        }
    }

    /// The user-facing code of this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::InvalidArgument(_) => ErrorCode::InvalidArgument,
            Self::NotFound(_) => ErrorCode::NotFound,
            Self::Conflict(_) | Self::ShuttingDown => ErrorCode::Conflict,
            Self::Forbidden(_) => ErrorCode::Forbidden,
            Self::Unauthorized(_) => ErrorCode::Unauthorized,
            Self::RateLimited { .. } => ErrorCode::RateLimited,
            Self::RateLimitsUnavailable(_) => ErrorCode::UpstreamUnavailable,
            Self::BudgetExceeded(_) => ErrorCode::BudgetExceeded,
            Self::Model(e) => e.code(),
            Self::Store(e) => e.code(),
        }
    }
}

/// The error a refused admission answers with: a denial is `FORBIDDEN`, a rate limit
/// `RATE_LIMITED` with its wait, a budget `BUDGET_EXCEEDED`.
pub(crate) fn refused(refusal: &Refusal, what: &str) -> HubError {
    match refusal {
        Refusal::Denied { .. } => HubError::Forbidden(refusal.message(what)),
        Refusal::RateLimited(limited) => HubError::RateLimited {
            message: limited.message(),
            retry_after_secs: limited.retry_after.as_secs().max(1),
        },
        Refusal::BudgetExceeded(exceeded) => HubError::BudgetExceeded(exceeded.message()),
    }
}
