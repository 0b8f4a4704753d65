//! Exit codes. Scripts branch on them, so they never change meaning:
//! 0 success, 1 the agent failed, 2 configuration or usage error, 3 internal error,
//! 130 cancelled (the shell convention for Ctrl-C).

use agentplane_core::ErrorCode;
use agentplane_runtime::RuntimeError;

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Success = 0,
    AgentFailed = 1,
    Config = 2,
    Internal = 3,
    Cancelled = 130,
}

pub const SUCCESS: Exit = Exit::Success;
pub const AGENT_FAILED: Exit = Exit::AgentFailed;
pub const CONFIG: Exit = Exit::Config;
pub const INTERNAL: Exit = Exit::Internal;
pub const CANCELLED: Exit = Exit::Cancelled;

impl From<Exit> for std::process::ExitCode {
    fn from(exit: Exit) -> Self {
        Self::from(exit as u8)
    }
}

/// The exit code of an error that kept a command from running.
pub fn of_error(error: &RuntimeError) -> Exit {
    of_code(error.code())
}

/// The exit code of a turn that ended with an error of this code.
pub fn of_code(code: ErrorCode) -> Exit {
    match code {
        ErrorCode::InvalidArgument | ErrorCode::NotFound => CONFIG,
        ErrorCode::Internal => INTERNAL,
        _ => AGENT_FAILED,
    }
}
