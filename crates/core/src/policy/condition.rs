//! `when:` conditions: what a policy demands of a request's arguments and context
//! beyond its targets. A small matcher language, documented in `docs/policies.md` and
//! chosen over CEL and Cedar in ADR 0045: every operator is compiled at load (regular
//! expressions, globs, directories), evaluation allocates nothing, and an explanation
//! names the test that decided without repeating an argument's value.
//!
//! A condition is `all`/`any` of a list, `not` of one, or a test: one subject
//! (`arg: /json/pointer` or `context: client|roles|agent|version|tags|tool|time`) and
//! one operator (`equals`, `in`, `matches`, `glob`, `path_under`, `host_in`, `gt`,
//! `gte`, `lt`, `lte`, `exists`). On an array, a test holds when it holds for any
//! element, or for every element with `every: true`. A test on a missing argument does not hold (`exists: false` asks for the
//! absence); a test on an argument of another type does not hold either.

use std::path::{Component, Path, PathBuf};

use jiff::Timestamp;
use serde_json::Value as Json;

use super::glob::Glob;
use super::request::RequestContext;

/// Deepest nesting of `all`/`any`/`not` accepted.
const MAX_DEPTH: usize = 16;
/// Most tests and combinators in one policy's condition.
const MAX_NODES: usize = 256;
/// Most values in one `in`, `glob`, `path_under` or `host_in` list.
const MAX_LIST: usize = 1_000;
/// Longest JSON pointer.
const MAX_POINTER: usize = 512;
/// Longest regular expression, in bytes.
const MAX_REGEX: usize = 1_024;
/// Most memory one compiled regular expression may take.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Whether a condition holds for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truth {
    /// It holds.
    Yes,
    /// It does not.
    No,
    /// It depends on arguments the request does not carry (a tool being listed, not
    /// called). A policy whose condition is unknown does not apply: it decides at the
    /// call, where the arguments are known.
    Unknown,
}

impl Truth {
    fn not(self) -> Truth {
        match self {
            Truth::Yes => Truth::No,
            Truth::No => Truth::Yes,
            Truth::Unknown => Truth::Unknown,
        }
    }
}

/// A validated condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// Every one holds.
    All(Vec<Condition>),
    /// At least one holds.
    Any(Vec<Condition>),
    /// It does not hold.
    Not(Box<Condition>),
    /// One test of one subject.
    Test(Test),
}

/// One subject and one operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Test {
    subject: Subject,
    op: Op,
    /// On an array: the test must hold for every element (`every: true`), not any.
    every: bool,
}

/// A JSON pointer (RFC 6901) as written and split into unescaped tokens at load, so
/// following it allocates nothing (`serde_json::Value::pointer` unescapes every token
/// of every call).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pointer {
    written: String,
    tokens: Vec<String>,
}

impl Pointer {
    fn new(written: &str) -> Pointer {
        let tokens = written
            .split('/')
            .skip(1)
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect();
        Pointer {
            written: written.to_owned(),
            tokens,
        }
    }

    /// The value it points at in `root`, if any.
    fn find<'v>(&self, root: &'v Json) -> Option<&'v Json> {
        self.tokens
            .iter()
            .try_fold(root, |value, token| match value {
                Json::Object(map) => map.get(token.as_str()),
                Json::Array(items) => index(token).and_then(|i| items.get(i)),
                _ => None,
            })
    }
}

/// An array index token: digits without a leading zero (or `0`).
fn index(token: &str) -> Option<usize> {
    if token.is_empty()
        || !token.bytes().all(|b| b.is_ascii_digit())
        || (token.len() > 1 && token.starts_with('0'))
    {
        return None;
    }
    token.parse().ok()
}

/// What a test looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Subject {
    /// A JSON pointer into the tool call's arguments (`""`: all of them).
    Arg(Pointer),
    Client,
    Roles,
    Agent,
    Version,
    Tags,
    Tool,
    Time,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cmp {
    Gt,
    Gte,
    Lt,
    Lte,
}

impl Cmp {
    fn holds(self, ordering: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            Cmp::Gt => ordering == Greater,
            Cmp::Gte => ordering != Less,
            Cmp::Lt => ordering == Less,
            Cmp::Lte => ordering != Greater,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Cmp::Gt => "gt",
            Cmp::Gte => "gte",
            Cmp::Lt => "lt",
            Cmp::Lte => "lte",
        }
    }
}

/// A compiled regular expression, compared by its pattern.
#[derive(Debug, Clone)]
struct Pattern(regex::Regex);

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}
impl Eq for Pattern {}

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Equals(Json),
    In(Vec<Json>),
    Matches(Pattern),
    Glob(Vec<Glob>),
    /// Normalized directories: relative to the workspace, or absolute.
    PathUnder(Vec<PathBuf>),
    /// Lower-case host patterns.
    HostIn(Vec<Glob>),
    Number(Cmp, f64),
    Time(Cmp, Timestamp),
    Exists(bool),
}

// The numbers are never NaN (refused at load), so equality is total.
impl Eq for Op {}

/// A problem found while reading a condition: the path below `when` and the message.
pub(crate) type Problem = (Vec<String>, String);

impl Condition {
    /// Whether it holds for `ctx` (unknown only for argument tests without arguments).
    pub fn eval(&self, ctx: &RequestContext<'_>) -> Truth {
        match self {
            Condition::All(items) => {
                let mut truth = Truth::Yes;
                for item in items {
                    match item.eval(ctx) {
                        Truth::No => return Truth::No,
                        Truth::Unknown => truth = Truth::Unknown,
                        Truth::Yes => {}
                    }
                }
                truth
            }
            Condition::Any(items) => {
                let mut truth = Truth::No;
                for item in items {
                    match item.eval(ctx) {
                        Truth::Yes => return Truth::Yes,
                        Truth::Unknown => truth = Truth::Unknown,
                        Truth::No => {}
                    }
                }
                truth
            }
            Condition::Not(inner) => inner.eval(ctx).not(),
            Condition::Test(test) => test.eval(ctx),
        }
    }

    /// Why it holds or not, in words: the test that decided, never an argument's value.
    pub fn explain(&self, ctx: &RequestContext<'_>) -> String {
        match self {
            Condition::All(items) => match items.iter().find(|c| c.eval(ctx) != Truth::Yes) {
                Some(failing) => failing.explain(ctx),
                None if items.len() == 1 => items[0].explain(ctx),
                None => format!("all {} conditions hold", items.len()),
            },
            Condition::Any(items) => match items.iter().find(|c| c.eval(ctx) == Truth::Yes) {
                Some(holding) => holding.explain(ctx),
                None => format!("none of {} conditions holds", items.len()),
            },
            Condition::Not(inner) => format!("not ({})", inner.explain(ctx)),
            Condition::Test(test) => {
                let verdict = match test.eval(ctx) {
                    Truth::Yes => "holds",
                    Truth::No => match (&test.subject, ctx.arguments) {
                        (Subject::Arg(p), Some(args)) if p.find(args).is_none() => {
                            "does not hold (no such argument)"
                        }
                        _ => "does not hold",
                    },
                    Truth::Unknown => "depends on the call's arguments",
                };
                format!("{} {verdict}", test.describe())
            }
        }
    }
}

impl Test {
    fn eval(&self, ctx: &RequestContext<'_>) -> Truth {
        let yes = |b: bool| if b { Truth::Yes } else { Truth::No };
        match &self.subject {
            Subject::Arg(pointer) => {
                let Some(args) = ctx.arguments else {
                    return Truth::Unknown;
                };
                let value = pointer.find(args);
                if let Op::Exists(wanted) = self.op {
                    return yes(value.is_some() == wanted);
                }
                yes(value.is_some_and(|v| self.op.on_json(v, ctx.workspace, self.every)))
            }
            Subject::Time => match self.op {
                Op::Time(cmp, t) => yes(cmp.holds(ctx.at.cmp(&t))),
                Op::Exists(wanted) => yes(wanted),
                _ => Truth::No,
            },
            Subject::Client => yes(self.op.on_str(Some(ctx.client), ctx.workspace)),
            Subject::Agent => yes(self.op.on_str(Some(ctx.agent), ctx.workspace)),
            Subject::Version => yes(self.op.on_str(ctx.version, ctx.workspace)),
            Subject::Tool => yes(self.op.on_str(ctx.tool, ctx.workspace)),
            Subject::Roles => yes(self.op.on_strs(ctx.roles, ctx.workspace)),
            Subject::Tags => yes(self.op.on_strs(ctx.tags, ctx.workspace)),
        }
    }

    /// The test as written: `arg /program equals "git"`.
    fn describe(&self) -> String {
        let subject = match &self.subject {
            Subject::Arg(p) if p.written.is_empty() => "the arguments".to_owned(),
            Subject::Arg(p) => format!("arg {}", p.written),
            Subject::Client => "client".into(),
            Subject::Roles => "roles".into(),
            Subject::Agent => "agent".into(),
            Subject::Version => "version".into(),
            Subject::Tags => "tags".into(),
            Subject::Tool => "tool".into(),
            Subject::Time => "time".into(),
        };
        let list = |items: &mut dyn Iterator<Item = String>| {
            let items: Vec<String> = items.collect();
            if items.len() > 5 {
                format!("[{}, … {} in all]", items[..5].join(", "), items.len())
            } else {
                format!("[{}]", items.join(", "))
            }
        };
        let op = match &self.op {
            Op::Equals(v) => format!("equals {v}"),
            Op::In(vs) => format!("in {}", list(&mut vs.iter().map(Json::to_string))),
            Op::Matches(p) => format!("matches /{}/", p.0.as_str()),
            Op::Glob(gs) => format!("glob {}", list(&mut gs.iter().map(|g| g.as_str().into()))),
            Op::PathUnder(ds) => format!(
                "path_under {}",
                list(&mut ds.iter().map(|d| d.display().to_string()))
            ),
            Op::HostIn(gs) => format!(
                "host_in {}",
                list(&mut gs.iter().map(|g| g.as_str().into()))
            ),
            Op::Number(cmp, n) => format!("{} {n}", cmp.name()),
            Op::Time(cmp, t) => format!("{} {t}", cmp.name()),
            Op::Exists(true) => "exists".into(),
            Op::Exists(false) => "is absent".into(),
        };
        if self.every {
            format!("every {subject} {op}")
        } else {
            format!("{subject} {op}")
        }
    }
}

impl Op {
    /// On an argument's value: the value itself, or any element of an array (every
    /// element, with `every`).
    fn on_json(&self, value: &Json, root: Option<&Path>, every: bool) -> bool {
        if every && let Json::Array(items) = value {
            return items.iter().all(|item| self.on_one(item, root));
        }
        if self.on_one(value, root) {
            return true;
        }
        match value {
            Json::Array(items) => items.iter().any(|item| self.on_one(item, root)),
            _ => false,
        }
    }

    fn on_one(&self, value: &Json, root: Option<&Path>) -> bool {
        match self {
            Op::Equals(wanted) => json_eq(value, wanted),
            Op::In(wanted) => wanted.iter().any(|w| json_eq(value, w)),
            Op::Number(cmp, n) => value
                .as_f64()
                .and_then(|v| v.partial_cmp(n))
                .is_some_and(|o| cmp.holds(o)),
            Op::Time(..) | Op::Exists(_) => false,
            _ => value.as_str().is_some_and(|s| self.on_text(s, root)),
        }
    }

    fn on_str(&self, value: Option<&str>, root: Option<&Path>) -> bool {
        match (self, value) {
            (Op::Exists(wanted), v) => v.is_some() == *wanted,
            (_, None) => false,
            (Op::Equals(Json::String(w)), Some(v)) => w == v,
            (Op::In(ws), Some(v)) => ws.iter().any(|w| w.as_str() == Some(v)),
            (Op::Equals(_), _) | (Op::Number(..), _) | (Op::Time(..), _) => false,
            (_, Some(v)) => self.on_text(v, root),
        }
    }

    fn on_strs(&self, values: &[String], root: Option<&Path>) -> bool {
        match self {
            Op::Exists(wanted) => values.is_empty() != *wanted,
            _ => values.iter().any(|v| self.on_str(Some(v), root)),
        }
    }

    fn on_text(&self, text: &str, root: Option<&Path>) -> bool {
        match self {
            Op::Matches(p) => p.0.is_match(text),
            Op::Glob(globs) => globs.iter().any(|g| g.matches(text)),
            Op::PathUnder(dirs) => match normalize(text, root) {
                Some(path) => dirs.iter().any(|d| under(&path, d)),
                None => false,
            },
            Op::HostIn(globs) => host(text).is_some_and(|h| globs.iter().any(|g| g.matches(&h))),
            _ => false,
        }
    }
}

/// JSON equality with numbers compared by value (`5` equals `5.0`).
fn json_eq(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// `dir` or a path below it (`dir` `.` holds every path inside the workspace).
fn under(path: &Path, dir: &Path) -> bool {
    if dir.as_os_str() == "." {
        return path.is_relative();
    }
    path.starts_with(dir)
}

/// The path a tool would reach, as the workspace sees it: relative to the workspace
/// when it is inside it, `.`, `..` and repeated separators resolved, and, when the
/// workspace is known, symbolic links of its existing part resolved too (a link
/// `docs -> .github` is under `.github`). `None` for a path that leaves the workspace
/// by `..` (no relative directory holds it) or holds a NUL.
fn normalize(text: &str, root: Option<&Path>) -> Option<PathBuf> {
    if text.contains('\0') {
        return None;
    }
    let lexical = lexical(Path::new(text))?;
    let Some(root) = root else {
        return Some(lexical);
    };
    let relative = match lexical.strip_prefix(root) {
        Ok(inside) => inside.to_path_buf(),
        Err(_) if lexical.is_absolute() => return Some(lexical),
        Err(_) => lexical,
    };
    let Ok(canonical_root) = root.canonicalize() else {
        return Some(relative);
    };
    // The longest existing prefix, with its links resolved, then the rest as written.
    let parts: Vec<Component<'_>> = relative.components().collect();
    for keep in (0..=parts.len()).rev() {
        let prefix: PathBuf = parts[..keep].iter().collect();
        if let Ok(real) = canonical_root.join(&prefix).canonicalize() {
            let mut real = real;
            real.extend(&parts[keep..]);
            return Some(match real.strip_prefix(&canonical_root) {
                Ok(inside) if inside.as_os_str().is_empty() => PathBuf::from("."),
                Ok(inside) => inside.to_path_buf(),
                Err(_) => real,
            });
        }
    }
    Some(relative)
}

/// `.` and `..` resolved without the file system; `None` when `..` climbs above the
/// start of a relative path.
fn lexical(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    let mut depth = 0usize;
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir if depth == 0 => {
                // Above a relative start: outside. Above `/`: still `/`.
                if path.is_relative() {
                    return None;
                }
            }
            Component::ParentDir => {
                out.pop();
                depth -= 1;
            }
            Component::Normal(name) => {
                out.push(name);
                depth += 1;
            }
            other => out.push(other.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    Some(out)
}

/// The lower-case host of a URL (`https://api.github.com/x` → `api.github.com`), or of
/// a bare `host[:port][/path]`.
fn host(text: &str) -> Option<String> {
    let parsed = match url::Url::parse(text) {
        Ok(u) => u,
        Err(url::ParseError::RelativeUrlWithoutBase) => {
            url::Url::parse(&format!("https://{text}")).ok()?
        }
        Err(_) => return None,
    };
    let host = parsed.host_str()?;
    Some(host.trim_end_matches('.').to_ascii_lowercase())
}

mod read;

#[cfg(test)]
mod tests;
