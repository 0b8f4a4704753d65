//! `agentplane versions`: an agent's versions, promotion, traffic splits, rollback and
//! the shadow version, from a terminal (ADR 0016).
//!
//! An HTTP client of `/v1/agents/{agent}/…` on a running `agentplane serve` (see
//! `remote.rs`), never of the store: the server's rules (semver must increase,
//! production is immutable, who may change versions) hold for a terminal exactly as for
//! any other client. Agent names and version numbers are checked before they go into a
//! URL; everything printed comes from the server's answer, made safe for a terminal.

use std::collections::BTreeMap;

use agentplane_core::version::parse_version;
use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use super::remote::{Remote, RemoteError, ServerArgs};
use super::threads::one_line;
use crate::exit::{self, Exit};

#[derive(Args)]
pub struct VersionsArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// An agent's versions, their stages and weights, and the shadow.
    List(AgentArgs),
    /// Create a draft: the spec of --from (default the highest version) with changes.
    Create(CreateArgs),
    /// Change a draft (staging and production versions are immutable).
    Edit(EditArgs),
    /// Promote a version one stage: draft -> staging -> production.
    Promote(PromoteArgs),
    /// Set the traffic split over production versions: VERSION=PERCENT ..., summing to 100.
    Traffic(TrafficArgs),
    /// Restore the traffic split in force before the current one.
    Rollback(AgentArgs),
    /// Make a staging or production version the agent's shadow, or --clear it.
    Shadow(ShadowArgs),
}

#[derive(Args)]
struct AgentArgs {
    /// The agent's name.
    agent: String,
    #[command(flatten)]
    server: ServerArgs,
    /// Print the server's JSON answer.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct VersionArgs {
    #[command(flatten)]
    agent: AgentArgs,
    /// The version (`1.1.0`).
    version: String,
}

#[derive(Args)]
struct CreateArgs {
    #[command(flatten)]
    target: VersionArgs,
    /// The version to start from.
    #[arg(long, value_name = "VERSION")]
    from: Option<String>,
    #[command(flatten)]
    spec: SpecArgs,
}

#[derive(Args)]
struct EditArgs {
    #[command(flatten)]
    target: VersionArgs,
    #[command(flatten)]
    spec: SpecArgs,
}

#[derive(Args)]
struct SpecArgs {
    /// The new system prompt.
    #[arg(long, value_name = "TEXT")]
    system_prompt: Option<String>,
    /// The new model (`""`: the configured default).
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// Any spec changes as a JSON object (`{"max_steps": 8}`); flags win over it.
    #[arg(long, value_name = "JSON")]
    spec: Option<String>,
}

#[derive(Args)]
struct PromoteArgs {
    #[command(flatten)]
    target: VersionArgs,
    /// The stage to promote to (must be the next one).
    #[arg(long, value_parser = ["staging", "production"])]
    to: Option<String>,
}

#[derive(Args)]
struct TrafficArgs {
    #[command(flatten)]
    agent: AgentArgs,
    /// VERSION=PERCENT, one per production version that gets traffic.
    #[arg(required = true, value_name = "VERSION=PERCENT")]
    weights: Vec<String>,
}

#[derive(Args)]
struct ShadowArgs {
    #[command(flatten)]
    agent: AgentArgs,
    /// The version to shadow with.
    #[arg(required_unless_present = "clear", conflicts_with = "clear")]
    version: Option<String>,
    /// Stop shadowing.
    #[arg(long)]
    clear: bool,
}

pub async fn run(args: VersionsArgs) -> Exit {
    match request(args.action).await {
        Ok(()) => exit::SUCCESS,
        Err(e) => e.report(),
    }
}

async fn request(action: Action) -> Result<(), RemoteError> {
    match action {
        Action::List(a) => {
            let path = agent_path(&a.agent)?;
            let body = Remote::new(&a.server)?
                .get(&format!("{path}/versions"), &[])
                .await?;
            print_versions(&body, a.json);
        }
        Action::Create(c) => {
            let path = agent_path(&c.target.agent.agent)?;
            let version = version_arg(&c.target.version)?;
            let mut body = json!({"version": version, "spec": spec_of(&c.spec)?});
            if let Some(from) = &c.from {
                body["from"] = Value::String(version_arg(from)?);
            }
            let answer = Remote::new(&c.target.agent.server)?
                .post(&format!("{path}/versions"), &body)
                .await?;
            print_version(&answer, c.target.agent.json);
        }
        Action::Edit(e) => {
            let path = agent_path(&e.target.agent.agent)?;
            let version = version_arg(&e.target.version)?;
            let answer = Remote::new(&e.target.agent.server)?
                .patch(&format!("{path}/versions/{version}"), &spec_of(&e.spec)?)
                .await?;
            print_version(&answer, e.target.agent.json);
        }
        Action::Promote(p) => {
            let path = agent_path(&p.target.agent.agent)?;
            let version = version_arg(&p.target.version)?;
            let body = match &p.to {
                Some(to) => json!({"to": to}),
                None => json!({}),
            };
            let answer = Remote::new(&p.target.agent.server)?
                .post(&format!("{path}/versions/{version}/promote"), &body)
                .await?;
            print_version(&answer, p.target.agent.json);
        }
        Action::Traffic(t) => {
            let path = agent_path(&t.agent.agent)?;
            let weights = weights_of(&t.weights)?;
            let answer = Remote::new(&t.agent.server)?
                .put(&format!("{path}/traffic"), &json!({"weights": weights}))
                .await?;
            print_versions(&answer, t.agent.json);
        }
        Action::Rollback(a) => {
            let path = agent_path(&a.agent)?;
            let answer = Remote::new(&a.server)?
                .post(&format!("{path}/traffic/rollback"), &json!({}))
                .await?;
            print_versions(&answer, a.json);
        }
        Action::Shadow(s) => {
            let path = agent_path(&s.agent.agent)?;
            let version = match &s.version {
                Some(v) if !s.clear => Value::String(version_arg(v)?),
                _ => Value::Null,
            };
            let answer = Remote::new(&s.agent.server)?
                .put(&format!("{path}/shadow"), &json!({"version": version}))
                .await?;
            print_versions(&answer, s.agent.json);
        }
    }
    Ok(())
}

/// `/v1/agents/{agent}` for a plain agent name; anything else is a usage error, so
/// nothing odd goes into a URL.
fn agent_path(agent: &str) -> Result<String, RemoteError> {
    let plain = !agent.is_empty()
        && agent.len() <= 64
        && agent
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if plain {
        Ok(format!("/v1/agents/{agent}"))
    } else {
        Err(RemoteError::Usage(format!(
            "`{}` is not an agent name (letters, digits, `-` and `_`)",
            one_line(agent)
        )))
    }
}

/// A semantic version, checked before it goes into a URL or a body.
fn version_arg(version: &str) -> Result<String, RemoteError> {
    parse_version(version)
        .map(|_| version.to_owned())
        .map_err(|e| RemoteError::Usage(one_line(&e)))
}

/// The spec changes of the flags, over `--spec`.
fn spec_of(args: &SpecArgs) -> Result<Value, RemoteError> {
    let mut spec = match &args.spec {
        None => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => map,
            Ok(_) => {
                return Err(RemoteError::Usage(
                    "--spec must be a JSON object, e.g. '{\"max_steps\": 8}'".to_owned(),
                ));
            }
            Err(e) => return Err(RemoteError::Usage(format!("--spec is not valid JSON: {e}"))),
        },
    };
    if let Some(prompt) = &args.system_prompt {
        spec.insert("system_prompt".into(), Value::String(prompt.clone()));
    }
    if let Some(model) = &args.model {
        spec.insert("model".into(), Value::String(model.clone()));
    }
    Ok(Value::Object(spec))
}

/// `VERSION=PERCENT` arguments as the weights object.
fn weights_of(args: &[String]) -> Result<BTreeMap<String, u32>, RemoteError> {
    let mut weights = BTreeMap::new();
    for arg in args {
        let usage = || {
            RemoteError::Usage(format!(
                "`{}` is not VERSION=PERCENT (e.g. 1.1.0=10)",
                one_line(arg)
            ))
        };
        let (version, percent) = arg.split_once('=').ok_or_else(usage)?;
        let percent: u32 = percent.parse().map_err(|_| usage())?;
        if weights.insert(version_arg(version)?, percent).is_some() {
            return Err(RemoteError::Usage(format!(
                "version {version} is named twice"
            )));
        }
    }
    Ok(weights)
}

fn print_version(version: &Value, as_json: bool) {
    if as_json {
        println!("{version}");
    } else {
        println!("{}", row(version));
    }
}

fn print_versions(body: &Value, as_json: bool) {
    if as_json {
        println!("{body}");
        return;
    }
    for version in body
        .get("versions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        println!("{}", row(version));
    }
    let traffic = body
        .get("traffic")
        .and_then(Value::as_object)
        .map(|t| {
            t.iter()
                .map(|(v, w)| format!("{}={}", one_line(v), w))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    println!("traffic: {traffic}");
}

/// One line: version, stage, weight, marks (baseline, shadow), the prompt's start.
fn row(version: &Value) -> String {
    let field = |name: &str| one_line(version.get(name).and_then(Value::as_str).unwrap_or(""));
    let mut marks = Vec::new();
    if version.get("baseline").and_then(Value::as_bool) == Some(true) {
        marks.push("baseline");
    }
    if version.get("shadow").and_then(Value::as_bool) == Some(true) {
        marks.push("shadow");
    }
    let prompt: String = one_line(
        version
            .pointer("/spec/system_prompt")
            .and_then(Value::as_str)
            .unwrap_or(""),
    )
    .chars()
    .take(60)
    .collect();
    format!(
        "{:<16} {:<10} {:>4}% {:<16} {prompt}",
        field("version"),
        field("stage"),
        version.get("weight").and_then(Value::as_u64).unwrap_or(0),
        marks.join(","),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_versions_and_weights_are_checked_before_anything_is_sent() {
        assert_eq!(agent_path("chat").ok().as_deref(), Some("/v1/agents/chat"));
        for bad in ["", "../x", "a/b", "a b", "é"] {
            assert!(agent_path(bad).is_err(), "{bad:?}");
        }
        assert!(version_arg("1.2.3").is_ok());
        assert!(version_arg("1.2.3/../x").is_err());
        let weights = weights_of(&["1.0.0=90".into(), "1.1.0=10".into()]).unwrap_or_default();
        assert_eq!(weights.get("1.1.0"), Some(&10));
        for bad in [["1.0.0"], ["1.0.0=-1"], ["x=10"], ["1.0.0=ten"]] {
            let args: Vec<String> = bad.iter().map(|s| (*s).to_owned()).collect();
            assert!(weights_of(&args).is_err(), "{bad:?}");
        }
        assert!(weights_of(&["1.0.0=50".into(), "1.0.0=50".into()]).is_err());
    }

    #[test]
    fn spec_flags_win_over_the_json_and_rows_stay_on_one_line() {
        let spec = spec_of(&SpecArgs {
            system_prompt: Some("new".into()),
            model: None,
            spec: Some(r#"{"system_prompt": "old", "max_steps": 8}"#.into()),
        })
        .unwrap_or_default();
        assert_eq!(spec, json!({"system_prompt": "new", "max_steps": 8}));
        assert!(
            spec_of(&SpecArgs {
                system_prompt: None,
                model: None,
                spec: Some("[1]".into())
            })
            .is_err()
        );
        let line = row(
            &json!({"version": "1.0.0\n\u{1b}[2J", "stage": "production",
            "weight": 90, "baseline": true, "spec": {"system_prompt": "a\nb"}}),
        );
        assert!(!line.contains('\n') && !line.contains('\u{1b}'), "{line:?}");
        assert!(line.contains("baseline"), "{line}");
    }
}
