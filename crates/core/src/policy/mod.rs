//! Policies as code: the model of the YAML files in a policies directory, their
//! parsing and validation. Pure: text in (with a source name for errors), a validated
//! `PolicySet` or located errors out. Reading files, reloading them and enforcing the
//! rules live elsewhere (the CLI and runtime read; the engine evaluates).
//!
//! The format is documented in `docs/policies.md`. Validation happens while
//! deserializing, inside the validated field types, so every error carries the line of
//! the offending node and its field path (`rules.max`).

pub mod approval;
pub mod budget;
mod check;
pub mod condition;
pub mod content;
pub mod data_scope;
pub mod glob;
mod guard;
mod index;
mod locate;
pub mod rate_limit;
mod raw;
mod request;
mod rule;
mod scalar;
pub mod targets;
pub mod time_window;
pub mod tool_access;

use std::collections::HashMap;
use std::fmt;

use serde::de::Deserialize;

pub use approval::ApprovalRequired;
pub use budget::{Budget, BudgetKey, BudgetPeriod};
pub use condition::{Condition, Truth};
pub use content::{ContentAction, ContentRule, Surface};
pub use data_scope::DataScope;
pub use glob::Glob;
/// The instant type of policy evaluation, re-exported so callers need no time crate.
pub use jiff::{SignedDuration, Timestamp};
pub use rate_limit::{CountKey, RateLimit, parse_duration};
pub use request::RequestContext;
pub use targets::Targets;
pub use time_window::{Day, HourRange, TimeWindow, Zone};
pub use tool_access::ToolAccess;

pub use rule::{Mode, Policy, PolicyKind, Rule};

/// The largest policy file accepted. Policies are short; a bigger file is a mistake or
/// an attack, and refusing it before parsing bounds memory.
pub const MAX_SOURCE_BYTES: usize = 1024 * 1024;
/// How much text may be read again to find the lines of one file's errors (each error
/// reads its document once, `locate.rs`): every error of an ordinary file gets its
/// line, and a hostile 1 MiB file with 100 errors stays well under a second.
const MAX_LOCATE_BYTES: usize = 16 * 1024 * 1024;

/// A validated set of policies with unique names, in source order (sources in the
/// order given, documents in file order). Evaluation reports the first deciding policy
/// in this order, so it is deterministic.
#[derive(Debug, Clone)]
pub struct PolicySet {
    policies: Vec<Policy>,
    /// `sha256:` and the first 16 hex digits of the hash of the sources, in order: the
    /// set's version, recorded with every decision.
    hash: String,
    index: index::Index,
}

impl Default for PolicySet {
    fn default() -> Self {
        Self::from_policies(Vec::new(), &[])
    }
}

impl PartialEq for PolicySet {
    fn eq(&self, other: &Self) -> bool {
        self.policies == other.policies
    }
}
impl Eq for PolicySet {}

/// One policy file's text and the name errors should use for it (its path).
#[derive(Debug, Clone, Copy)]
pub struct PolicySource<'a> {
    /// Shown in errors, e.g. `policies/email.yaml`.
    pub name: &'a str,
    /// The whole file.
    pub text: &'a str,
}

impl PolicySet {
    /// Parses and validates every source; all errors of all files are returned, not
    /// only the first, so one `policy check` run shows everything to fix.
    pub fn parse(sources: &[PolicySource<'_>]) -> Result<Self, Vec<PolicyError>> {
        let mut errors = Vec::new();
        let mut policies = Vec::new();
        for source in sources {
            match parse_source(source.name, source.text) {
                Ok(mut parsed) => policies.append(&mut parsed),
                Err(mut e) => errors.append(&mut e),
            }
        }
        let mut first_seen: HashMap<&str, &Policy> = HashMap::new();
        let mut seen_in_source: HashMap<(&str, &str), usize> = HashMap::new();
        for policy in &policies {
            let nth = seen_in_source
                .entry((policy.source.as_str(), policy.name.as_str()))
                .or_insert(0);
            *nth += 1;
            if let Some(first) = first_seen.get(policy.name.as_str()) {
                let text = sources
                    .iter()
                    .find(|s| s.name == policy.source)
                    .map_or("", |s| s.text);
                errors.push(PolicyError {
                    source: policy.source.clone(),
                    line: name_line(text, &policy.name, *nth),
                    field: Some("name".into()),
                    message: format!(
                        "duplicate policy name `{}` (first in {})",
                        policy.name, first.source
                    ),
                });
            } else {
                first_seen.insert(&policy.name, policy);
            }
        }
        if errors.is_empty() {
            Ok(Self::from_policies(policies, sources))
        } else {
            Err(errors)
        }
    }

    fn from_policies(policies: Vec<Policy>, sources: &[PolicySource<'_>]) -> Self {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        for source in sources {
            hasher.update((source.name.len() as u64).to_le_bytes());
            hasher.update(source.name.as_bytes());
            hasher.update((source.text.len() as u64).to_le_bytes());
            hasher.update(source.text.as_bytes());
        }
        let digest = hasher.finalize();
        let mut hash = String::from("sha256:");
        for byte in &digest[..8] {
            hash.push_str(&format!("{byte:02x}"));
        }
        let index = index::Index::build(&policies);
        Self {
            policies,
            hash,
            index,
        }
    }

    /// The set's version: a hash of its files' names and text, in order
    /// (`sha256:` and 16 hex digits). Two sets with the same files have the same one.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// The policies that may select `ctx`, in set order: a superset of those that do,
    /// found through an index; each still has to be asked ([`Policy::selects`]).
    pub fn candidates(&self, ctx: &RequestContext<'_>) -> impl Iterator<Item = &Policy> {
        let mut positions = Vec::new();
        self.index.candidates(ctx, &mut positions);
        positions
            .into_iter()
            .filter_map(|i| self.policies.get(i as usize))
    }

    /// Every policy, in set order.
    pub fn policies(&self) -> &[Policy] {
        &self.policies
    }

    /// A policy by name.
    pub fn get(&self, name: &str) -> Option<&Policy> {
        self.policies.iter().find(|p| p.name == name)
    }

    /// How many policies there are.
    pub fn len(&self) -> usize {
        self.policies.len()
    }

    /// Whether there are none (then everything is allowed).
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }
}

/// The line of the `nth` `name:` (or `policy_name:`) key with this value, for errors
/// found after parsing. Falls back to `None` when the text is written unusually.
fn name_line(text: &str, name: &str, nth: usize) -> Option<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            let line = line.trim_start().trim_start_matches("- ").trim_start();
            let value = line
                .strip_prefix("name:")
                .or_else(|| line.strip_prefix("policy_name:"));
            value.is_some_and(|v| {
                let v = v.split(" #").next().unwrap_or("").trim();
                v.trim_matches(|c| c == '"' || c == '\'') == name
            })
        })
        .nth(nth.saturating_sub(1))
        .map(|(i, _)| i + 1)
}

/// Parses one file: a single policy, a YAML list of policies, or several `---`
/// documents of either. An empty file holds no policies.
pub fn parse_source(source: &str, text: &str) -> Result<Vec<Policy>, Vec<PolicyError>> {
    if text.len() > MAX_SOURCE_BYTES {
        return Err(vec![PolicyError {
            source: source.to_owned(),
            line: None,
            field: None,
            message: format!("file is larger than {} bytes", MAX_SOURCE_BYTES),
        }]);
    }
    if let Some((line, message)) = guard::refusal(text) {
        return Err(vec![PolicyError {
            source: source.to_owned(),
            line: Some(line),
            field: None,
            message,
        }]);
    }
    if text
        .lines()
        .all(|line| line.trim().is_empty() || line.trim_start().starts_with('#'))
    {
        return Err(vec![PolicyError {
            source: source.to_owned(),
            line: None,
            field: None,
            message: "no policy in the file: it is empty or holds only comments (a \
                      truncated file?); a file meant to hold none says `[]`"
                .into(),
        }]);
    }
    let mut policies = Vec::new();
    let mut errors = Vec::new();
    let mut located_bytes = 0usize;
    for (index, document) in yaml_serde::Deserializer::from_str(text).enumerate() {
        match yaml_serde::Value::deserialize(document) {
            // Every error of the document, each at the line of its field.
            Ok(value) => match check::document(value) {
                Ok(mut found) => policies.append(&mut found),
                Err(found) => {
                    for found in found.into_iter().take(check::MAX_ERRORS - errors.len()) {
                        // Each line costs a read of the text; past the budget (only a
                        // huge file with many errors gets there) errors have no line.
                        let line = (located_bytes + text.len() <= MAX_LOCATE_BYTES)
                            .then(|| {
                                located_bytes += text.len();
                                locate::line(text, index, &found.at)
                            })
                            .flatten();
                        errors.push(PolicyError {
                            source: source.to_owned(),
                            line,
                            field: (!found.field.is_empty()).then(|| check::show(&found.field)),
                            message: found.message,
                        });
                    }
                }
            },
            Err(e) => {
                let error = PolicyError::from_yaml(source, &e);
                // The parser can hand the same error back for ever (a syntax error it
                // does not advance past); the first one is the news.
                if errors.last() != Some(&error) {
                    errors.push(error);
                }
                // Any error ends the stream: the parser does not skip the rest of a
                // document it gave up on, so the next one would start inside it (it
                // panicked there, "unexpected end of mapping": found by the fuzzer).
                break;
            }
        }
        if errors.len() >= check::MAX_ERRORS {
            break;
        }
    }
    for policy in &mut policies {
        policy.source = source.to_owned();
        policy.tools_in_one_form();
    }
    if errors.is_empty() {
        Ok(policies)
    } else {
        Err(errors)
    }
}

/// A located validation error: `file:line: field: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    /// The source (file) name.
    pub source: String,
    /// The 1-based line, when known.
    pub line: Option<usize>,
    /// The field path (`rules.max`, `[1].targets.tools`), when known.
    pub field: Option<String>,
    /// What is wrong, in words.
    pub message: String,
}

impl PolicyError {
    fn from_yaml(source: &str, error: &yaml_serde::Error) -> Self {
        let line = error.location().map(|l| l.line());
        let text = error.to_string();
        // Location is reported separately; yaml_serde appends it as " at line L column C".
        let text = match text.find(" at line ") {
            Some(i) => &text[..i],
            None => text.as_str(),
        };
        let mut rest = text;
        let mut field = String::new();
        while let Some((head, tail)) = rest.split_once(": ") {
            if head.is_empty() || head.contains(char::is_whitespace) {
                break;
            }
            let head = head.trim_start_matches('.');
            if !field.is_empty() && !head.starts_with('[') {
                field.push('.');
            }
            field.push_str(head);
            rest = tail;
        }
        if let Some(after) = rest.strip_prefix("unknown field `")
            && let Some((name, _)) = after.split_once('`')
        {
            if !field.is_empty() {
                field.push('.');
            }
            field.push_str(name);
        }
        Self {
            source: source.to_owned(),
            line,
            field: (!field.is_empty()).then_some(field),
            message: rest.to_owned(),
        }
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for PolicyError {}
