//! Agent versions (ADR 0016): semver numbers, the stages a version is promoted through,
//! the part of an agent definition a version may change, and traffic splits.
//!
//! What lives here: the vocabulary and the pure rules (parsing, ordering, patching,
//! weighted choice, the rollback stack). What must not: storage, the hub's routing, or
//! any rule that needs the clock or randomness — the caller brings the random draw.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use sha2::{Digest, Sha256};

use crate::agent::{AgentLimits, AgentSpec};

/// The longest version string accepted.
pub const MAX_VERSION_CHARS: usize = 64;

/// The version of an agent whose definition names none.
pub const DEFAULT_VERSION: &str = "1.0.0";

/// Parses a version number: `MAJOR.MINOR.PATCH` with an optional pre-release
/// (`2.0.0-rc.1`). Build metadata (`+abc`) is refused: it does not take part in
/// ordering, so `1.0.0+a` and `1.0.0+b` could not be told apart by "must increase".
pub fn parse_version(text: &str) -> Result<semver::Version, String> {
    if text.is_empty() || text.len() > MAX_VERSION_CHARS {
        return Err(format!(
            "a version is 1 to {MAX_VERSION_CHARS} characters, got {}",
            text.len()
        ));
    }
    let version = semver::Version::parse(text).map_err(|e| {
        format!(
            "`{}` is not a semantic version (MAJOR.MINOR.PATCH): {e}",
            text.escape_default()
        )
    })?;
    if !version.build.is_empty() {
        return Err(format!(
            "`{text}`: build metadata (`+…`) is not allowed in agent versions"
        ));
    }
    Ok(version)
}

/// Where a version stands. Versions move forward only: draft → staging → production.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Editable; never runs for normal traffic and cannot be pinned.
    Draft,
    /// Frozen; runs only on threads pinned to it explicitly, or as a shadow.
    Staging,
    /// Frozen; receives traffic by weight, and may be pinned or run as a shadow.
    Production,
}

impl Stage {
    /// The name used on the wire and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Draft => "draft",
            Self::Staging => "staging",
            Self::Production => "production",
        }
    }

    /// The stage named so, if any.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "draft" => Some(Self::Draft),
            "staging" => Some(Self::Staging),
            "production" => Some(Self::Production),
            _ => None,
        }
    }

    /// The stage a promotion leads to; `None` from production.
    pub fn next(self) -> Option<Self> {
        match self {
            Self::Draft => Some(Self::Staging),
            Self::Staging => Some(Self::Production),
            Self::Production => None,
        }
    }
}

/// The part of an agent definition a version may change: its behaviour. What an agent
/// is allowed to do — tags that select policies, shell allowlist, network access,
/// permission rules — stays with the operator's configuration, and a version's
/// ensembles must be among the configured ones (checked where versions are created).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VersionSpec {
    pub description: String,
    pub system_prompt: String,
    /// `None` uses the configured default model.
    pub model: Option<String>,
    pub ensembles: Vec<String>,
    /// `None`: no `finish_task`; the text answer is the result.
    pub output_schema: Option<serde_json::Value>,
    pub max_steps: u32,
    pub tool_timeout_ms: u64,
    pub tool_output_cap_bytes: usize,
}

impl VersionSpec {
    /// The behaviour of a configured (baseline) agent.
    pub fn of(agent: &AgentSpec) -> Self {
        Self {
            description: agent.description.clone(),
            system_prompt: agent.system_prompt.clone(),
            model: agent.model.clone(),
            ensembles: agent.ensembles.clone(),
            output_schema: agent.output_schema.clone(),
            max_steps: agent.limits.max_steps,
            tool_timeout_ms: agent.limits.tool_timeout_ms,
            tool_output_cap_bytes: agent.limits.tool_output_cap_bytes,
        }
    }

    /// The agent this version runs as: the baseline's name and permissions with this
    /// version's behaviour.
    pub fn apply_to(&self, baseline: &AgentSpec) -> AgentSpec {
        AgentSpec {
            description: self.description.clone(),
            system_prompt: self.system_prompt.clone(),
            model: self.model.clone(),
            ensembles: self.ensembles.clone(),
            output_schema: self.output_schema.clone(),
            limits: AgentLimits {
                max_steps: self.max_steps,
                tool_timeout_ms: self.tool_timeout_ms,
                tool_output_cap_bytes: self.tool_output_cap_bytes,
                // The output and cost caps are the operator's, like the budgets they bound.
                max_output_tokens: baseline.limits.max_output_tokens,
                max_nudges: baseline.limits.max_nudges,
                max_cost_micros: baseline.limits.max_cost_micros,
            },
            ..baseline.clone()
        }
    }
}

/// Changes to a [`VersionSpec`]: every field optional, unknown fields refused. For
/// `output_schema`, `null` removes the schema (the text answer becomes the result);
/// leaving it out keeps it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpecPatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ensembles: Option<Vec<String>>,
    /// `Some(null)` removes the schema.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub output_schema: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_output_cap_bytes: Option<usize>,
}

/// A field that is present is `Some`, even when it is `null`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<serde_json::Value>, D::Error> {
    serde_json::Value::deserialize(d).map(Some)
}

impl SpecPatch {
    /// `base` with these changes.
    pub fn apply(self, base: &VersionSpec) -> VersionSpec {
        let mut spec = base.clone();
        if let Some(v) = self.description {
            spec.description = v;
        }
        if let Some(v) = self.system_prompt {
            spec.system_prompt = v;
        }
        if let Some(v) = self.model {
            spec.model = (!v.is_empty()).then_some(v);
        }
        if let Some(v) = self.ensembles {
            spec.ensembles = v;
        }
        if let Some(v) = self.output_schema {
            spec.output_schema = (!v.is_null()).then_some(v);
        }
        if let Some(v) = self.max_steps {
            spec.max_steps = v;
        }
        if let Some(v) = self.tool_timeout_ms {
            spec.tool_timeout_ms = v;
        }
        if let Some(v) = self.tool_output_cap_bytes {
            spec.tool_output_cap_bytes = v;
        }
        spec
    }
}

/// Weights over an agent's production versions, in percent: they sum to 100. A new
/// thread lands on a version with probability weight / 100.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TrafficSplit(pub BTreeMap<String, u32>);

impl TrafficSplit {
    /// All traffic on one version.
    pub fn all_on(version: &str) -> Self {
        Self(BTreeMap::from([(version.to_owned(), 100)]))
    }

    /// The weight of `version` (0 when absent).
    pub fn weight(&self, version: &str) -> u32 {
        self.0.get(version).copied().unwrap_or(0)
    }

    /// The version a uniformly random `draw` lands on: version `i` owns a slice of the
    /// `u64` range proportional to its weight. `None` when every weight is 0.
    pub fn pick(&self, draw: u64) -> Option<&str> {
        let total: u64 = self.0.values().map(|w| u64::from(*w)).sum();
        if total == 0 {
            return None;
        }
        // Scale the draw into [0, total) without the bias of a modulo.
        let point = ((u128::from(draw) * u128::from(total)) >> 64) as u64;
        let mut upto = 0u64;
        for (version, weight) in &self.0 {
            upto += u64::from(*weight);
            if point < upto {
                return Some(version);
            }
        }
        None
    }
}

/// A uniformly distributed draw derived from `key` (a fresh thread id: its random bits
/// make the draw random; the hash makes it the same each time it is asked).
pub fn draw_of(key: &str) -> u64 {
    let digest = Sha256::digest(key.as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(bytes)
}

/// What a traffic change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrafficAction {
    /// New weights were set.
    Set,
    /// The split before the current one was restored.
    Rollback,
}

impl TrafficAction {
    /// The name used on the wire and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Set => "set",
            Self::Rollback => "rollback",
        }
    }
}

/// The splits in force, oldest first, after replaying an agent's traffic history over
/// its baseline split: each `set` pushes, each `rollback` pops. The last one is in force;
/// a rollback restores the one before it, so repeated rollbacks walk back through
/// every split ever set, down to the baseline, and never past it.
pub fn traffic_stack<'a>(
    baseline: TrafficSplit,
    history: impl IntoIterator<Item = (TrafficAction, &'a TrafficSplit)>,
) -> Vec<TrafficSplit> {
    let mut stack = vec![baseline];
    for (action, split) in history {
        match action {
            TrafficAction::Set => stack.push(split.clone()),
            TrafficAction::Rollback => {
                if stack.len() > 1 {
                    stack.pop();
                }
            }
        }
    }
    stack
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_strictly_and_order_by_semver() {
        assert!(parse_version("1.2.3").is_ok());
        assert!(parse_version("2.0.0-rc.1").is_ok());
        for bad in [
            "",
            "1.2",
            "v1.2.3",
            "1.2.3+build",
            " 1.2.3",
            "01.2.3",
            "1.2.3.4",
        ] {
            assert!(parse_version(bad).is_err(), "{bad:?} must be refused");
        }
        assert!(parse_version(&"1".repeat(65)).is_err());
        let a = parse_version("1.10.0").unwrap_or_else(|e| panic!("{e}"));
        let b = parse_version("1.9.0").unwrap_or_else(|e| panic!("{e}"));
        assert!(a > b, "numeric, not lexical, ordering");
        let rc = parse_version("2.0.0-rc.1").unwrap_or_else(|e| panic!("{e}"));
        let two = parse_version("2.0.0").unwrap_or_else(|e| panic!("{e}"));
        assert!(rc < two);
    }

    #[test]
    fn stages_only_move_forward() {
        assert_eq!(Stage::Draft.next(), Some(Stage::Staging));
        assert_eq!(Stage::Staging.next(), Some(Stage::Production));
        assert_eq!(Stage::Production.next(), None);
        assert_eq!(Stage::parse("staging"), Some(Stage::Staging));
        assert_eq!(Stage::parse("Staging"), None);
    }

    #[test]
    fn a_patch_changes_only_what_it_names_and_null_removes_the_schema() {
        let base = VersionSpec {
            description: "d".into(),
            system_prompt: "p".into(),
            model: Some("m".into()),
            ensembles: vec!["fs".into()],
            output_schema: Some(serde_json::json!({"type": "object"})),
            max_steps: 3,
            tool_timeout_ms: 10,
            tool_output_cap_bytes: 100,
        };
        let patch: SpecPatch = serde_json::from_value(
            serde_json::json!({"system_prompt": "q", "output_schema": null}),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let spec = patch.apply(&base);
        assert_eq!(spec.system_prompt, "q");
        assert_eq!(spec.output_schema, None);
        assert_eq!(spec.model.as_deref(), Some("m"));
        let keep: SpecPatch = serde_json::from_value(serde_json::json!({"max_steps": 5}))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(keep.apply(&base).output_schema, base.output_schema);
        assert!(
            serde_json::from_value::<SpecPatch>(serde_json::json!({"shell_allow": ["sh"]}))
                .is_err()
        );
    }

    #[test]
    fn picks_follow_the_weights() {
        let split = TrafficSplit(BTreeMap::from([("1.0.0".into(), 90), ("1.1.0".into(), 10)]));
        let mut on_new = 0;
        for i in 0..10_000 {
            if split.pick(draw_of(&format!("thr_{i}"))) == Some("1.1.0") {
                on_new += 1;
            }
        }
        // 10% of 10,000 is 1,000; sigma = 30.
        assert!((850..=1150).contains(&on_new), "{on_new}");
        assert_eq!(split.pick(0), Some("1.0.0"));
        assert_eq!(split.pick(u64::MAX), Some("1.1.0"));
        assert_eq!(TrafficSplit::default().pick(7), None);
    }

    #[test]
    fn rollbacks_walk_back_to_the_baseline_and_stop_there() {
        let base = TrafficSplit::all_on("1.0.0");
        let canary = TrafficSplit(BTreeMap::from([("1.0.0".into(), 90), ("1.1.0".into(), 10)]));
        let half = TrafficSplit(BTreeMap::from([("1.0.0".into(), 50), ("1.1.0".into(), 50)]));
        let history = [
            (TrafficAction::Set, &canary),
            (TrafficAction::Set, &half),
            (TrafficAction::Rollback, &canary),
        ];
        let stack = traffic_stack(base.clone(), history);
        assert_eq!(stack.last(), Some(&canary));
        let more = [
            (TrafficAction::Set, &canary),
            (TrafficAction::Rollback, &base),
            (TrafficAction::Rollback, &base),
        ];
        assert_eq!(traffic_stack(base.clone(), more), vec![base]);
    }
}
