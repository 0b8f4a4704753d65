//! `rate_limit`: at most `max` matching requests per sliding `window`. Only the rule
//! lives here; counting (in memory or shared) is a later part's job, which is why the
//! window is a plain `Duration` and the counting key is explicit (`per`).

use std::time::Duration;

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer};

/// Longest window accepted: 31 days. Longer limits are budgets, not rate limits.
const MAX_WINDOW: Duration = Duration::from_secs(31 * 24 * 3600);

/// A limit over a sliding window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimit {
    /// The window length, at least one second.
    pub window: Duration,
    /// How many requests the window admits, at least 1.
    pub max: u32,
    /// Which request facts separate counters; empty means one counter for the policy.
    pub per: Vec<CountKey>,
}

/// A request fact that keys a separate counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CountKey {
    /// One counter per agent.
    Agent,
    /// One counter per tool.
    Tool,
    /// One counter per client.
    Client,
}

/// A window length written as `<n><unit>` with unit `s`, `m`, `h` or `d` (`30s`, `1h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window(pub Duration);

impl Window {
    /// Parses `<n><unit>`; the message says what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let window = parse_duration(text, "window")?;
        if window > MAX_WINDOW {
            return Err("must be at most 31d".into());
        }
        Ok(Self(window))
    }
}

/// A length of time written as `<n><unit>` with unit `s`, `m`, `h` or `d` (`30s`, `7d`),
/// at least one second: the one way durations are written, in a rate limit's `window`
/// and in `policy replay --since`. `what` names it in the message (`window`).
pub fn parse_duration(text: &str, what: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "`{}` is not a {what} like 30s, 5m, 1h or 1d",
            text.escape_debug()
        )
    };
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let unit_secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    let secs = n.checked_mul(unit_secs).ok_or_else(bad)?;
    if secs == 0 {
        return Err("must be at least 1s".into());
    }
    Ok(Duration::from_secs(secs))
}

impl<'de> Deserialize<'de> for Window {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        super::scalar::parse_str(deserializer, Window::parse)
    }
}

/// A count of at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxCount(pub u32);

impl<'de> Deserialize<'de> for MaxCount {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CountVisitor;
        impl Visitor<'_> for CountVisitor {
            type Value = MaxCount;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a whole number")
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<MaxCount, E> {
                if n < 1 {
                    return Err(E::custom("must be at least 1"));
                }
                self.visit_u64(n.unsigned_abs())
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<MaxCount, E> {
                if n < 1 {
                    return Err(E::custom("must be at least 1"));
                }
                u32::try_from(n)
                    .map(MaxCount)
                    .map_err(|_| E::custom("must be at most 4294967295"))
            }
        }
        deserializer.deserialize_u64(CountVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_parse_with_units_and_refuse_nonsense() {
        assert_eq!(Window::parse("30s").unwrap().0, Duration::from_secs(30));
        assert_eq!(Window::parse("5m").unwrap().0, Duration::from_secs(300));
        assert_eq!(Window::parse("1h").unwrap().0, Duration::from_secs(3600));
        assert_eq!(Window::parse("2d").unwrap().0, Duration::from_secs(172_800));
        for bad in [
            "",
            "s",
            "10",
            "10x",
            "0s",
            "-1s",
            "32d",
            "99999999999999999999d",
        ] {
            assert!(Window::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_are_windows_without_the_cap() {
        assert_eq!(
            parse_duration("90d", "duration").unwrap(),
            Duration::from_secs(90 * 86_400)
        );
        let err = parse_duration("7 days", "duration").unwrap_err();
        assert_eq!(err, "`7 days` is not a duration like 30s, 5m, 1h or 1d");
        assert!(parse_duration("0m", "duration").is_err());
    }
}
