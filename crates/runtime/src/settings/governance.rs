//! `[approvals]` and `[retention]`.

use std::time::Duration;

use agentplane_engine::governance::{ArgsRetention, DEFAULT_APPROVAL_TTL};
use serde::Deserialize;

use super::SettingError;

/// `[approvals]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileApprovals {
    expire_after_secs: Option<u64>,
}

/// `[retention]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileRetention {
    tool_args: Option<String>,
}

/// How long an approval waits before it expires (a rejection).
pub fn approval_ttl(file: &FileApprovals) -> Result<Duration, SettingError> {
    match file.expire_after_secs {
        None => Ok(DEFAULT_APPROVAL_TTL),
        Some(0) => Err(("expire_after_secs".into(), "must be at least 1".into())),
        Some(secs) if secs > 366 * 86_400 => {
            Err(("expire_after_secs".into(), "must be at most a year".into()))
        }
        Some(secs) => Ok(Duration::from_secs(secs)),
    }
}

/// What events keep of tool arguments.
pub fn args_retention(file: &FileRetention) -> Result<ArgsRetention, SettingError> {
    match file.tool_args.as_deref() {
        None | Some("full") => Ok(ArgsRetention::Full),
        Some("hash") => Ok(ArgsRetention::Hash),
        Some(other) => Err((
            "tool_args".into(),
            format!("must be \"full\" or \"hash\", got {other:?}"),
        )),
    }
}
