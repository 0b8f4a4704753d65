//! The one log line of a refused access, `security_event` (target
//! `agentplane::security`), written by every service that refuses a caller. It names
//! the caller's client and principal, never a secret.

use crate::identity::Caller;

/// Records a refused access: one `security_event` log line, never a secret.
pub(crate) fn security_event(caller: &Caller, event_type: &str, detail: &str) {
    tracing::warn!(
        target: "agentplane::security",
        event_type,
        client = %caller.client(),
        principal = %caller.principal(),
        detail,
        "security_event"
    );
}
