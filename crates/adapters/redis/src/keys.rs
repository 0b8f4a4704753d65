//! The Redis keys of counters. A key holds whatever agent, tool and client names the
//! request carries, so each part is written with its length in front: no name, however
//! odd (`:`, NUL, braces, newlines), can make two counters share a key. Keys travel as
//! `KEYS` of the script, never inside its code.

use agentplane_core::policy::RateLimit;
use agentplane_engine::ports::RateFacts;
use agentplane_engine::ports::rate::counter_parts;

/// Every key starts with it; the version changes if the layout ever does.
pub const PREFIX: &str = "agentplane:rate:v1:";

/// The sorted set counting the admissions of `policy` under `limit` for these facts.
pub fn counter_key(policy: &str, limit: &RateLimit, facts: RateFacts<'_>) -> Vec<u8> {
    let mut key = PREFIX.as_bytes().to_vec();
    for part in counter_parts(policy, limit, facts) {
        key.extend_from_slice(part.len().to_string().as_bytes());
        key.push(b':');
        key.extend_from_slice(part.as_bytes());
    }
    key
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use agentplane_core::policy::CountKey;

    use super::*;

    fn facts<'a>(agent: &'a str, client: &'a str) -> RateFacts<'a> {
        RateFacts {
            agent,
            tool: None,
            client,
        }
    }

    #[test]
    fn names_cannot_run_into_each_other() {
        let limit = RateLimit {
            window: Duration::from_secs(1),
            max: 1,
            per: vec![CountKey::Agent, CountKey::Client],
        };
        let a = counter_key("p", &limit, facts("a:1", "b"));
        let b = counter_key("p", &limit, facts("a", "1:b"));
        let c = counter_key("p", &limit, facts("a\u{0}", "b"));
        let d = counter_key("p", &limit, facts("a", "\u{0}b"));
        assert_ne!(a, b);
        assert_ne!(c, d);
        assert_eq!(a, b"agentplane:rate:v1:1:p3:a:11:b".to_vec());
    }
}
