//! Policy tests: the cases written beside the policies (`*.test.yaml` in the policies
//! directory), each a request and the decision expected of it, run against the set the
//! directory holds with the very evaluation the server uses. `agentplane policy test
//! DIR` prints the failures with their explanations; CI runs it.
//!
//! ```yaml
//! - name: git push waits for a person
//!   agent: engineer
//!   tool: run_command
//!   args: {program: git, args: [push, origin, main]}
//!   expect: approval          # allow | deny | approval
//!   decided_by: git-push      # optional: the deciding policy
//! ```
//! Optional facts: `tags`, `client` (default `test`), `roles`, `version`, `at` (RFC
//! 3339; default now). A case without `tool` is a turn-level request.

use std::path::{Path, PathBuf};

use agentplane_core::policy::{PolicySet, RequestContext, Timestamp};
use agentplane_engine::governance::explain::{Explained, explain};
use serde::Deserialize;

use crate::policy_dir::is_test_file;

/// The largest test file read.
const MAX_TEST_FILE: u64 = 1024 * 1024;

/// One case as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub name: String,
    pub agent: String,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default = "default_client")]
    pub client: String,
    #[serde(default)]
    pub roles: Vec<String>,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub tool: Option<String>,
    #[serde(default)]
    pub args: Option<serde_json::Value>,
    #[serde(default)]
    pub at: Option<String>,
    pub expect: Expected,
    #[serde(default)]
    pub decided_by: Option<String>,
}

fn default_client() -> String {
    "test".to_owned()
}

/// The decision a case expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expected {
    Allow,
    Deny,
    Approval,
}

impl Expected {
    fn as_str(self) -> &'static str {
        match self {
            Expected::Allow => "allow",
            Expected::Deny => "deny",
            Expected::Approval => "approval",
        }
    }
}

/// A case with the file it came from.
#[derive(Debug, Clone)]
pub struct Located {
    pub file: PathBuf,
    pub case: Case,
}

/// What one case came to.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub file: PathBuf,
    pub name: String,
    /// `None`: as expected; otherwise what was wrong.
    pub failure: Option<String>,
    pub explained: Explained,
}

/// Reads every `*.test.yaml` / `*.test.yml` of `dir`, sorted by name; every error of
/// every file (`file: message`).
pub fn load_cases(dir: &Path) -> Result<Vec<Located>, Vec<String>> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| vec![format!("{}: cannot read the directory: {e}", dir.display())])?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && is_test_file(p))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    let mut errors = Vec::new();
    for file in files {
        match read_cases(&file) {
            Ok(found) => cases.extend(found.into_iter().map(|case| Located {
                file: file.clone(),
                case,
            })),
            Err(e) => errors.push(format!("{}: {e}", file.display())),
        }
    }
    if errors.is_empty() {
        Ok(cases)
    } else {
        Err(errors)
    }
}

fn read_cases(file: &Path) -> Result<Vec<Case>, String> {
    let size = std::fs::metadata(file).map_err(|e| e.to_string())?.len();
    if size > MAX_TEST_FILE {
        return Err(format!("larger than {MAX_TEST_FILE} bytes"));
    }
    let text = std::fs::read_to_string(file).map_err(|e| e.to_string())?;
    let cases: Vec<Case> = yaml_serde::from_str(&text).map_err(|e| e.to_string())?;
    for case in &cases {
        if let Some(at) = &case.at {
            at.parse::<Timestamp>().map_err(|e| {
                format!("case `{}`: `at` is not an RFC 3339 instant: {e}", case.name)
            })?;
        }
    }
    Ok(cases)
}

/// Runs each case against `set`.
pub fn run_cases(set: &PolicySet, cases: &[Located]) -> Vec<Outcome> {
    cases
        .iter()
        .map(|located| {
            let case = &located.case;
            let explained = explain_case(set, case);
            let mut failure = None;
            if explained.decision != case.expect.as_str() {
                failure = Some(format!(
                    "expected {}, got {}",
                    case.expect.as_str(),
                    explained.decision
                ));
            } else if let Some(wanted) = &case.decided_by
                && explained.decided_by.as_deref() != Some(wanted.as_str())
            {
                failure = Some(format!(
                    "expected {} by `{wanted}`, decided by {}",
                    case.expect.as_str(),
                    explained
                        .decided_by
                        .as_deref()
                        .map_or("no policy".to_owned(), |p| format!("`{p}`"))
                ));
            }
            Outcome {
                file: located.file.clone(),
                name: case.name.clone(),
                failure,
                explained,
            }
        })
        .collect()
}

/// The decision of one case's request, explained.
pub fn explain_case(set: &PolicySet, case: &Case) -> Explained {
    let null = serde_json::Value::Null;
    let args = case.args.as_ref().unwrap_or(&null);
    let mut ctx = RequestContext::new(&case.agent, &case.tags, &case.client)
        .roles(&case.roles)
        .version(case.version.as_deref())
        .tool(case.tool.as_deref());
    if case.tool.is_some() {
        ctx = ctx.arguments(args);
    }
    if let Some(at) = case.at.as_deref().and_then(|a| a.parse().ok()) {
        ctx = ctx.at(at);
    }
    explain(set, &ctx)
}
