//! The error codes a user can see, shared by the CLI, the HTTP envelope
//! (`{"error":{"code","message","details"}}`) and `error` events.

use serde::{Deserialize, Serialize};

/// One code per kind of failure a caller can act on differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
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

impl ErrorCode {
    /// The code as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidArgument => "INVALID_ARGUMENT",
            Self::Unauthorized => "UNAUTHORIZED",
            Self::Forbidden => "FORBIDDEN",
            Self::NotFound => "NOT_FOUND",
            Self::Conflict => "CONFLICT",
            Self::Timeout => "TIMEOUT",
            Self::RateLimited => "RATE_LIMITED",
            Self::BudgetExceeded => "BUDGET_EXCEEDED",
            Self::Internal => "INTERNAL",
            Self::UpstreamUnavailable => "UPSTREAM_UNAVAILABLE",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
