//! Validation of one YAML document of a policy file as a tree, so that every error of
//! the document is found, not only the first: each field is checked on its own, an
//! error noted with the path of the field (`[1].rules.window`), and the checking goes
//! on with the next field and the next policy. `locate.rs` then finds each path's line
//! in the text.
//!
//! What lives here: which fields a policy and each policy type has, and the checks
//! between fields. The values themselves are checked by their types' `Deserialize`
//! (`Glob`, `Zone`, `Window`…), the same code whatever document holds them.

use serde::Deserialize;
use yaml_serde::{Mapping, Value};

use super::condition::Condition;
use super::raw::RawRules;
use super::rule::{Mode, Policy, PolicyKind, PolicyName, Rule};
use super::targets::Targets;

/// The most errors reported for one file; a file this broken needs no more.
pub(super) const MAX_ERRORS: usize = 100;

/// One step of a path into a document: a mapping key or a sequence index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

/// An error found in a document, before it has a line.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    /// The node whose line the error gets (the nearest existing ancestor if absent).
    pub(crate) at: Vec<Seg>,
    /// The field the error is about, shown as `rules.max` (may name a missing field).
    pub(crate) field: Vec<Seg>,
    pub(crate) message: String,
}

/// The top-level fields of every policy.
const POLICY_FIELDS: [&str; 7] = [
    "name",
    "type",
    "description",
    "targets",
    "when",
    "mode",
    "rules",
];

/// The rule fields each policy type has, in the order the docs list them.
pub(crate) fn rule_fields(kind: PolicyKind) -> &'static [&'static str] {
    match kind {
        PolicyKind::ApprovalRequired => &["tools", "approvers", "separate_approver"],
        PolicyKind::RateLimit => &["window", "max", "per"],
        PolicyKind::TimeWindow => &["timezone", "days", "hours"],
        PolicyKind::Budget => &["usd", "period", "timezone", "per"],
        PolicyKind::ToolAccess => &["allow", "deny"],
        PolicyKind::DataScope => &["paths", "hosts", "secrets"],
        PolicyKind::Content => &["detectors", "surfaces", "action"],
    }
}

/// `path` with `seg` added.
fn join(path: &[Seg], seg: Seg) -> Vec<Seg> {
    let mut path = path.to_vec();
    path.push(seg);
    path
}

fn key(path: &[Seg], name: &str) -> Vec<Seg> {
    join(path, Seg::Key(name.to_owned()))
}

/// The field path as shown: `[1].rules.max`.
pub(crate) fn show(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// The policies of one document (a policy, a list of them, or nothing), or every
/// error found in it.
pub(crate) fn document(value: Value) -> Result<Vec<Policy>, Vec<Found>> {
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Mapping(map) => policy(map, &[]).map(|p| vec![p]),
        Value::Sequence(items) => {
            let mut policies = Vec::new();
            let mut errors = Vec::new();
            for (i, item) in items.into_iter().enumerate() {
                // A file this broken needs no more; the rest is not checked.
                if errors.len() >= MAX_ERRORS {
                    break;
                }
                let at = vec![Seg::Index(i)];
                let checked = match item {
                    Value::Mapping(map) => policy(map, &at),
                    _ => Err(vec![Found {
                        at: at.clone(),
                        field: at,
                        message: "expected a policy mapping".into(),
                    }]),
                };
                match checked {
                    Ok(p) => policies.push(p),
                    Err(mut e) => errors.append(&mut e),
                }
            }
            if errors.is_empty() {
                Ok(policies)
            } else {
                Err(errors)
            }
        }
        _ => Err(vec![Found {
            at: Vec::new(),
            field: Vec::new(),
            message: "expected a policy (a mapping) or a list of policies".into(),
        }]),
    }
}

/// Checks one policy mapping at `base`, every field.
fn policy(map: Mapping, base: &[Seg]) -> Result<Policy, Vec<Found>> {
    let mut errors = Vec::new();
    let mut error = |at: Vec<Seg>, message: String| {
        errors.push(Found {
            field: at.clone(),
            at,
            message,
        })
    };
    let mut seen: Vec<&'static str> = Vec::new();
    let mut name = None;
    let mut kind = None;
    let mut description = None;
    let mut targets: Option<(Vec<Seg>, Value)> = None;
    let mut when = None;
    let mut mode = Mode::Enforce;
    let mut mode_at = None;
    let mut rules: Option<(Vec<Seg>, Value)> = None;
    for (k, v) in map {
        let Some(written) = k.as_str().map(str::to_owned) else {
            error(base.to_vec(), "a field name must be a string".into());
            continue;
        };
        let at = key(base, &written);
        let field = match written.as_str() {
            "name" | "policy_name" => "name",
            "type" | "policy_type" => "type",
            other => match POLICY_FIELDS.iter().find(|f| **f == other) {
                Some(f) => *f,
                None => {
                    error(
                        at,
                        format!(
                            "unknown field `{written}`, expected one of {}",
                            quoted(&POLICY_FIELDS)
                        ),
                    );
                    continue;
                }
            },
        };
        if seen.contains(&field) {
            error(at, format!("duplicate field `{field}`"));
            continue;
        }
        seen.push(field);
        match field {
            "name" => match PolicyName::deserialize(v) {
                Ok(n) => name = Some(n),
                Err(e) => error(at, e.to_string()),
            },
            "type" => match PolicyKind::deserialize(v) {
                Ok(k) => kind = Some(k),
                Err(e) => error(at, e.to_string()),
            },
            "description" => match Option::<String>::deserialize(v) {
                Ok(d) => description = d,
                Err(e) => error(at, e.to_string()),
            },
            "targets" => targets = Some((at, v)),
            "when" => match Condition::parse(&v) {
                Ok(c) => when = Some(c),
                Err(problems) => {
                    for (below, message) in problems {
                        let mut field = at.clone();
                        field.extend(below.into_iter().map(|s| {
                            match s.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
                                Some(i) => i.parse().map_or(Seg::Key(s.clone()), Seg::Index),
                                None => Seg::Key(s),
                            }
                        }));
                        error(field, message);
                    }
                }
            },
            "mode" => match Mode::deserialize(v) {
                Ok(m) => {
                    mode = m;
                    mode_at = Some(at);
                }
                Err(e) => error(at, e.to_string()),
            },
            _ => rules = Some((at, v)),
        }
    }
    for required in ["name", "type"] {
        if !seen.contains(&required) {
            errors.push(Found {
                at: base.to_vec(),
                field: key(base, required),
                message: format!("missing field `{required}`"),
            });
        }
    }
    let targets = match targets {
        Some((at, v)) => check_targets(&at, v, &mut errors),
        None => Some(Targets::default()),
    };
    if let (Mode::Audit, Some(kind), Some(at)) = (mode, kind, mode_at)
        && !kind.decides()
    {
        errors.push(Found {
            field: at.clone(),
            at,
            message: format!(
                "audit mode is for policies that decide a request ({}); a {} policy counts or \
                 grants and is always enforced",
                PolicyKind::ALL
                    .iter()
                    .filter(|k| k.decides())
                    .map(|k| k.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                kind.as_str()
            ),
        });
    }
    let rule = match (kind, rules) {
        (Some(kind), rules) => check_rules(kind, base, rules, &mut errors),
        // Without a type the rules cannot be judged; the type's error says why.
        (None, _) => None,
    };
    match (name, targets, rule) {
        (Some(name), Some(targets), Some(rule)) if errors.is_empty() => Ok(Policy {
            name: name.0,
            description,
            targets,
            when,
            mode,
            rule,
            source: String::new(),
        }),
        _ => Err(errors),
    }
}

/// `a`, `b` as a message lists field names.
fn quoted(fields: &[&str]) -> String {
    fields
        .iter()
        .map(|f| format!("`{f}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks `targets` field by field; the targets when all are valid.
fn check_targets(at: &[Seg], value: Value, errors: &mut Vec<Found>) -> Option<Targets> {
    let Value::Mapping(map) = value else {
        return match Targets::deserialize(value) {
            Ok(t) => Some(t),
            Err(e) => {
                errors.push(Found {
                    at: at.to_vec(),
                    field: at.to_vec(),
                    message: e.to_string(),
                });
                None
            }
        };
    };
    let before = errors.len();
    for (k, v) in &map {
        let mut one = Mapping::new();
        one.insert(k.clone(), v.clone());
        if let Err(e) = Targets::deserialize(Value::Mapping(one)) {
            let field = key(at, k.as_str().unwrap_or("?"));
            errors.push(Found {
                at: field.clone(),
                field,
                message: e.to_string(),
            });
        }
    }
    if errors.len() > before {
        return None;
    }
    Targets::deserialize(Value::Mapping(map)).ok()
}

/// Checks the rules of a policy of `kind`: each field on its own (is it one of this
/// type's, is its value valid), then the checks between fields.
fn check_rules(
    kind: PolicyKind,
    base: &[Seg],
    rules: Option<(Vec<Seg>, Value)>,
    errors: &mut Vec<Found>,
) -> Option<Rule> {
    let (at, value) = rules.unwrap_or_else(|| (key(base, "rules"), Value::Null));
    let raw = match value {
        Value::Null => RawRules::default(),
        Value::Mapping(map) => {
            let before = errors.len();
            let allowed = rule_fields(kind);
            for (k, v) in &map {
                let written = k.as_str().unwrap_or("?");
                let field = key(&at, written);
                let canonical = if written == "require_approval_for" {
                    "tools"
                } else {
                    written
                };
                if !allowed.contains(&canonical) {
                    errors.push(Found {
                        at: field.clone(),
                        field,
                        message: format!(
                            "unknown field `{written}` for {} policies, expected one of {}",
                            kind.as_str(),
                            quoted(allowed)
                        ),
                    });
                    continue;
                }
                let mut one = Mapping::new();
                one.insert(k.clone(), v.clone());
                if let Err(e) = RawRules::deserialize(Value::Mapping(one)) {
                    errors.push(Found {
                        at: field.clone(),
                        field,
                        message: e.to_string(),
                    });
                }
            }
            if errors.len() > before {
                return None;
            }
            match RawRules::deserialize(Value::Mapping(map)) {
                Ok(raw) => raw,
                Err(e) => {
                    errors.push(Found {
                        at: at.clone(),
                        field: at,
                        message: e.to_string(),
                    });
                    return None;
                }
            }
        }
        _ => {
            errors.push(Found {
                at: at.clone(),
                field: at,
                message: format!(
                    "expected the rules of a {} policy (a mapping)",
                    kind.as_str()
                ),
            });
            return None;
        }
    };
    match raw.into_rule(kind) {
        Ok(rule) => Some(rule),
        Err(problems) => {
            for (field, message) in problems {
                let field = match field {
                    Some(f) => key(&at, f),
                    None => at.clone(),
                };
                errors.push(Found {
                    at: field.clone(),
                    field,
                    message,
                });
            }
            None
        }
    }
}
