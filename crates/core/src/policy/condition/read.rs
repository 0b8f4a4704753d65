//! Reading a `when:` condition from YAML: every key, operator and value checked, each
//! problem with its path below `when`, regexes compiled under their limits.

use std::path::Path;

use jiff::Timestamp;
use serde_json::Value as Json;
use yaml_serde::Value;

use super::{
    Cmp, Condition, MAX_DEPTH, MAX_LIST, MAX_NODES, MAX_POINTER, MAX_REGEX, Op, Pattern, Pointer,
    Problem, REGEX_SIZE_LIMIT, Subject, Test, lexical,
};
use crate::policy::glob::Glob;

impl Condition {
    /// Reads a `when:` value: a condition, or a list of them (all must hold).
    pub(crate) fn parse(value: &Value) -> Result<Condition, Vec<Problem>> {
        let mut nodes = 0usize;
        let mut problems = Vec::new();
        let parsed = match value {
            Value::Sequence(items) => {
                list(items, &[], 0, &mut nodes, &mut problems).map(Condition::All)
            }
            other => node(other, &[], 0, &mut nodes, &mut problems),
        };
        match parsed {
            Some(condition) if problems.is_empty() => Ok(condition),
            _ => Err(problems),
        }
    }
}

const OPERATORS: [&str; 11] = [
    "equals",
    "in",
    "matches",
    "glob",
    "path_under",
    "host_in",
    "gt",
    "gte",
    "lt",
    "lte",
    "exists",
];

fn at(path: &[String], key: &str) -> Vec<String> {
    let mut p = path.to_vec();
    p.push(key.to_owned());
    p
}

pub(super) fn list(
    items: &[Value],
    path: &[String],
    depth: usize,
    nodes: &mut usize,
    problems: &mut Vec<Problem>,
) -> Option<Vec<Condition>> {
    if items.is_empty() {
        problems.push((path.to_vec(), "an empty list of conditions".into()));
        return None;
    }
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        if let Some(c) = node(item, &at(path, &format!("[{i}]")), depth, nodes, problems) {
            out.push(c);
        }
    }
    (out.len() == items.len()).then_some(out)
}

pub(super) fn node(
    value: &Value,
    path: &[String],
    depth: usize,
    nodes: &mut usize,
    problems: &mut Vec<Problem>,
) -> Option<Condition> {
    *nodes += 1;
    if *nodes > MAX_NODES {
        if *nodes == MAX_NODES + 1 {
            problems.push((path.to_vec(), format!("more than {MAX_NODES} conditions")));
        }
        return None;
    }
    if depth > MAX_DEPTH {
        problems.push((
            path.to_vec(),
            format!("nested deeper than {MAX_DEPTH} levels"),
        ));
        return None;
    }
    let Value::Mapping(map) = value else {
        problems.push((
            path.to_vec(),
            "expected a condition: `all`, `any`, `not`, or a test (`arg` or `context` with an operator)"
                .into(),
        ));
        return None;
    };
    let mut keys = Vec::new();
    for (k, _) in map {
        match k.as_str() {
            Some(k) => keys.push(k),
            None => {
                problems.push((path.to_vec(), "a condition's keys are strings".into()));
                return None;
            }
        }
    }
    for combinator in ["all", "any", "not"] {
        if keys.contains(&combinator) {
            if keys.len() != 1 {
                problems.push((
                    path.to_vec(),
                    format!(
                        "`{combinator}` stands alone in its mapping; put other tests inside it"
                    ),
                ));
                return None;
            }
            let inner = &map[combinator];
            let here = at(path, combinator);
            return match (combinator, inner) {
                ("not", inner) => node(inner, &here, depth + 1, nodes, problems)
                    .map(|c| Condition::Not(Box::new(c))),
                (_, Value::Sequence(items)) => {
                    let items = list(items, &here, depth + 1, nodes, problems)?;
                    Some(if combinator == "all" {
                        Condition::All(items)
                    } else {
                        Condition::Any(items)
                    })
                }
                _ => {
                    problems.push((here, format!("`{combinator}` takes a list of conditions")));
                    None
                }
            };
        }
    }
    parse_test(map, &keys, path, problems).map(Condition::Test)
}

fn parse_test(
    map: &yaml_serde::Mapping,
    keys: &[&str],
    path: &[String],
    problems: &mut Vec<Problem>,
) -> Option<Test> {
    let mut problem = |at: Vec<String>, message: String| {
        problems.push((at, message));
        None
    };
    for key in keys {
        if !matches!(*key, "arg" | "context" | "every") && !OPERATORS.contains(key) {
            return problem(
                at(path, key),
                format!(
                    "unknown key `{key}`: a test has `arg` or `context` and one of {}",
                    OPERATORS.join(", ")
                ),
            );
        }
    }
    let subject = match (map.get("arg"), map.get("context")) {
        (Some(_), Some(_)) => {
            return problem(
                path.to_vec(),
                "a test has `arg` or `context`, not both".into(),
            );
        }
        (None, None) => {
            return problem(
                path.to_vec(),
                "a test needs a subject: `arg: /json/pointer` or `context: client|roles|agent|version|tags|tool|time`"
                    .into(),
            );
        }
        (Some(pointer), None) => match pointer.as_str() {
            Some(p) if p.len() > MAX_POINTER => {
                return problem(
                    at(path, "arg"),
                    format!("a pointer is at most {MAX_POINTER} bytes"),
                );
            }
            Some(p) if p.is_empty() || p.starts_with('/') => Subject::Arg(Pointer::new(p)),
            _ => {
                return problem(
                    at(path, "arg"),
                    "a JSON pointer into the arguments, starting with `/` (`/to`, `/args/0`)"
                        .into(),
                );
            }
        },
        (None, Some(field)) => match field.as_str() {
            Some("client") => Subject::Client,
            Some("roles" | "role") => Subject::Roles,
            Some("agent") => Subject::Agent,
            Some("version") => Subject::Version,
            Some("tags" | "tag") => Subject::Tags,
            Some("tool") => Subject::Tool,
            Some("time") => Subject::Time,
            _ => {
                return problem(
                    at(path, "context"),
                    "one of client, roles, agent, version, tags, tool, time".into(),
                );
            }
        },
    };
    let ops: Vec<&str> = keys
        .iter()
        .copied()
        .filter(|k| OPERATORS.contains(k))
        .collect();
    let [name] = ops.as_slice() else {
        return problem(
            path.to_vec(),
            format!(
                "a test has exactly one operator, one of {}",
                OPERATORS.join(", ")
            ),
        );
    };
    let here = at(path, name);
    let value = &map[*name];
    let op = match read_op(name, value, &subject) {
        Ok(op) => op,
        Err(message) => return problem(here, message),
    };
    let every = match map.get("every") {
        None => false,
        Some(Value::Bool(b)) if matches!(subject, Subject::Arg(_)) => *b,
        Some(Value::Bool(_)) => {
            return problem(at(path, "every"), "`every` is for arguments".into());
        }
        Some(_) => return problem(at(path, "every"), "`every` is true or false".into()),
    };
    Some(Test { subject, op, every })
}

fn read_op(name: &str, value: &Value, subject: &Subject) -> Result<Op, String> {
    let texts = |value: &Value| -> Result<Vec<String>, String> {
        let items: Vec<&Value> = match value {
            Value::Sequence(items) => items.iter().collect(),
            one => vec![one],
        };
        if items.is_empty() {
            return Err("an empty list".into());
        }
        if items.len() > MAX_LIST {
            return Err(format!("at most {MAX_LIST} values"));
        }
        items
            .into_iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| "expected text".to_owned())
            })
            .collect()
    };
    let json = |value: &Value| -> Result<Json, String> {
        serde_json::to_value(value).map_err(|e| format!("not a plain value: {e}"))
    };
    let is_time = matches!(subject, Subject::Time);
    match name {
        "exists" => match value {
            Value::Bool(b) => Ok(Op::Exists(*b)),
            _ => Err("`exists` is true or false".into()),
        },
        "gt" | "gte" | "lt" | "lte" => {
            let cmp = match name {
                "gt" => Cmp::Gt,
                "gte" => Cmp::Gte,
                "lt" => Cmp::Lt,
                _ => Cmp::Lte,
            };
            if is_time {
                let t = value
                    .as_str()
                    .and_then(|s| s.parse::<Timestamp>().ok())
                    .ok_or("a time is an RFC 3339 instant (`2026-12-01T00:00:00Z`)")?;
                return Ok(Op::Time(cmp, t));
            }
            if !matches!(subject, Subject::Arg(_)) {
                return Err(format!("`{name}` compares numbers arguments or the time"));
            }
            match value.as_f64() {
                Some(n) if n.is_finite() => Ok(Op::Number(cmp, n)),
                _ => Err(format!("`{name}` takes a number")),
            }
        }
        _ if is_time => Err("the time is compared with gt, gte, lt or lte".into()),
        "equals" => Ok(Op::Equals(json(value)?)),
        "in" => match value {
            Value::Sequence(items) if items.is_empty() => Err("an empty list".into()),
            Value::Sequence(items) if items.len() > MAX_LIST => {
                Err(format!("at most {MAX_LIST} values"))
            }
            Value::Sequence(items) => items.iter().map(json).collect::<Result<_, _>>().map(Op::In),
            _ => Err("`in` takes a list".into()),
        },
        "matches" => {
            let pattern = value.as_str().ok_or("`matches` takes a regular expression")?;
            compile(pattern).map(|r| Op::Matches(Pattern(r)))
        }
        "glob" => texts(value)?
            .iter()
            .map(|g| Glob::new(g))
            .collect::<Result<_, _>>()
            .map(Op::Glob),
        "host_in" => texts(value)?
            .iter()
            .map(|g| Glob::new(&g.to_ascii_lowercase()))
            .collect::<Result<_, _>>()
            .map(Op::HostIn),
        "path_under" => texts(value)?
            .iter()
            .map(|d| {
                if d.contains('\0') {
                    return Err("a directory holds no NUL".to_owned());
                }
                lexical(Path::new(d)).ok_or_else(|| {
                    format!("`{d}` climbs out of the workspace; name a directory inside it or an absolute one")
                })
            })
            .collect::<Result<_, _>>()
            .map(Op::PathUnder),
        other => Err(format!("unknown operator `{other}`")),
    }
}

/// Compiles a `matches` pattern. The engine (the `regex` crate) runs in linear time, so
/// no pattern can backtrack catastrophically; patterns written the catastrophic way
/// anyway (`(a+)+`, a repetition of a repetition) are refused so a policy means the
/// same when copied to a backtracking engine, as are oversized ones (`a{1000}{1000}`).
pub(crate) fn compile(pattern: &str) -> Result<regex::Regex, String> {
    if pattern.len() > MAX_REGEX {
        return Err(format!("a regular expression is at most {MAX_REGEX} bytes"));
    }
    let hir = regex_syntax::ParserBuilder::new()
        .nest_limit(32)
        .build()
        .parse(pattern)
        .map_err(|e| format!("not a regular expression: {}", first_line(&e.to_string())))?;
    if nested_repetition(&hir) {
        return Err(format!(
            "`{pattern}` repeats a repetition (like `(a+)+`), the shape of catastrophic \
             backtracking; write it with one repetition"
        ));
    }
    regex::RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| format!("regular expression refused: {}", first_line(&e.to_string())))
}

fn first_line(text: &str) -> String {
    text.lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or(text)
        .trim()
        .to_owned()
}

/// Whether an unbounded repetition's body is itself a repetition, up to parts that
/// may match nothing (`(a+)+`, `(\w+\s?)*`): the ambiguous shape that makes a
/// backtracking engine take exponential time. `([a-z]+\.)*` is fine: the `.` must be
/// there, so each round is one way.
fn nested_repetition(hir: &regex_syntax::hir::Hir) -> bool {
    use regex_syntax::hir::HirKind;
    match hir.kind() {
        HirKind::Repetition(rep) => {
            (rep.max.is_none() && body_repeats(&rep.sub)) || nested_repetition(&rep.sub)
        }
        HirKind::Capture(c) => nested_repetition(&c.sub),
        HirKind::Concat(items) | HirKind::Alternation(items) => items.iter().any(nested_repetition),
        _ => false,
    }
}

fn body_repeats(hir: &regex_syntax::hir::Hir) -> bool {
    use regex_syntax::hir::HirKind;
    match hir.kind() {
        HirKind::Repetition(rep) => rep.max.is_none_or(|m| m > 1),
        HirKind::Capture(c) => body_repeats(&c.sub),
        HirKind::Alternation(items) => items.iter().any(body_repeats),
        // Two repetitions side by side (`x+x+`) split a run in many ways.
        HirKind::Concat(items) if items.iter().filter(|h| body_repeats(h)).count() > 1 => true,
        HirKind::Concat(items) => items.iter().enumerate().any(|(i, item)| {
            body_repeats(item)
                && items
                    .iter()
                    .enumerate()
                    .all(|(j, other)| i == j || other.properties().minimum_len() == Some(0))
        }),
        _ => false,
    }
}
