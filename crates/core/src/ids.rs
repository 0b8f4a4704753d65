//! Identifiers. Each is a prefixed UUIDv7 (`thr_…`, `turn_…`) so an id says what it names
//! and sorts by creation time. Parsing checks the prefix, so a turn id can never be
//! passed where a thread id is expected, even as a string from outside.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! prefixed_id {
    ($name:ident, $prefix:literal, $what:literal) => {
        #[doc = concat!("Identifier of a ", $what, ", `", $prefix, "` followed by a UUIDv7.")]
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// A new, time-ordered id.
            pub fn new() -> Self {
                Self(format!("{}{}", $prefix, uuid::Uuid::now_v7().simple()))
            }

            /// Parses an id received from outside; the prefix must match.
            pub fn parse(s: &str) -> Result<Self, String> {
                let rest = s
                    .strip_prefix($prefix)
                    .ok_or_else(|| format!("{} id must start with `{}`: {s:?}", $what, $prefix))?;
                if rest.is_empty()
                    || rest.len() > 64
                    || !rest.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                {
                    return Err(format!("malformed {} id: {s:?}", $what));
                }
                Ok(Self(s.to_owned()))
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl TryFrom<String> for $name {
            type Error = String;
            fn try_from(s: String) -> Result<Self, String> {
                Self::parse(&s)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }
    };
}

prefixed_id!(ThreadId, "thr_", "thread");
prefixed_id!(TurnId, "turn_", "turn");
prefixed_id!(PermissionId, "perm_", "permission");
prefixed_id!(ApprovalId, "apr_", "approval");
prefixed_id!(ExecutionId, "exec_", "execution");
prefixed_id!(DeliveryId, "dlv_", "webhook delivery");
prefixed_id!(CompletionId, "chatcmpl-", "gateway completion");
prefixed_id!(ReplicaId, "rep_", "replica");
prefixed_id!(HoldId, "hold_", "budget hold");
prefixed_id!(KeyId, "key_", "API key");
prefixed_id!(McpCallId, "mcpc_", "MCP gateway call");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_check_their_prefix() {
        let t = ThreadId::new();
        assert_eq!(ThreadId::parse(t.as_str()), Ok(t.clone()));
        assert!(TurnId::parse(t.as_str()).is_err());
        assert!(ThreadId::parse("thr_").is_err());
        assert!(ThreadId::parse("thr_../../etc").is_err());
        assert!(ThreadId::parse("").is_err());
    }

    #[test]
    fn new_ids_sort_by_creation() {
        let a = TurnId::new();
        let b = TurnId::new();
        assert!(a < b);
    }
}
