//! `[agents.NAME]` with `kind = "a2a"`: a remote agent spoken to over A2A, its `url`
//! (where its Agent Card is) and `[agents.NAME.a2a]` (`api_key`, `headers`,
//! `connect_timeout_secs`, `timeout_secs`); and the `a2a__NAME` tool by which a native
//! agent calls such an agent (named in that agent's `ensembles`).
//!
//! Checked at load; resolved against `[secrets]` when the runtime starts (the runtime's
//! `agents.rs`). No secret value is kept here: `api_key` names a secret, and a header
//! value refers to secrets as `${secret:NAME}`.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use super::SettingError;
use super::secrets::{SecretsConfig, references};

/// The agent kind of remote A2A agents.
pub const KIND_A2A: &str = "a2a";

/// The prefix of the tool by which a native agent calls a remote A2A agent
/// (`a2a__NAME`), named in its `ensembles`.
pub const TOOL_PREFIX: &str = "a2a__";

/// `[agents.NAME.a2a]`: how to reach and authenticate to the remote agent.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct A2aRemoteSettings {
    /// The name of the secret sent as the credential the card asks for (HTTP bearer,
    /// or an API key in the header, query or cookie the card names).
    pub api_key: Option<String>,
    /// More request headers; a value may refer to secrets as `${secret:NAME}`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Connecting and the card's fetch (default 10 s).
    pub connect_timeout_secs: Option<u64>,
    /// One whole task, from the message to its final state (default 600 s; a task
    /// waiting on our permission flow is bounded by the permission timeout instead).
    pub timeout_secs: Option<u64>,
}

/// Whether an agent of this `kind` is a remote A2A one.
pub fn is_a2a(kind: Option<&str>) -> bool {
    kind == Some(KIND_A2A)
}

/// An agent's keys that a remote A2A agent does not use, and whether each is set.
pub type Unused = [(&'static str, bool)];

/// Checks a `kind = "a2a"` agent's `url` and `[a2a]` (and that it sets none of
/// `unused`), or that an agent of another kind uses neither; on error, the key and the
/// message.
pub fn check(
    kind: Option<&str>,
    url: Option<&str>,
    a2a: Option<&A2aRemoteSettings>,
    unused: &Unused,
) -> Result<(), (&'static str, String)> {
    if !is_a2a(kind) {
        if url.is_some() || a2a.is_some() {
            return Err(("kind", "`url` and `[a2a]` need `kind = \"a2a\"`".to_owned()));
        }
        return Ok(());
    }
    let Some(url) = url else {
        return Err((
            "url",
            "is required for `kind = \"a2a\"`: the URL of the remote agent's Agent Card \
             (e.g. `https://host/.well-known/agent-card.json`)"
                .to_owned(),
        ));
    };
    check_url(url).map_err(|m| ("url", m))?;
    if let Some((key, _)) = unused.iter().find(|(_, set)| *set) {
        return Err((
            key,
            "is not used by a remote A2A agent (it runs its own model and tools)".to_owned(),
        ));
    }
    if let Some(settings) = a2a {
        if settings.connect_timeout_secs == Some(0) || settings.timeout_secs == Some(0) {
            return Err(("a2a", "timeouts must be at least 1 second".to_owned()));
        }
        if let Some(name) = &settings.api_key
            && !super::secrets::is_secret_name(name)
        {
            return Err((
                "a2a.api_key",
                "names a secret of `[secrets]` (letters, digits and `_`), not the key itself"
                    .to_owned(),
            ));
        }
        for (name, value) in &settings.headers {
            let valid = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
            if !valid {
                return Err(("a2a.headers", format!("`{name}` is not a header name")));
            }
            if value.contains(['\r', '\n', '\0']) {
                return Err(("a2a.headers", format!("`{name}`: no line breaks")));
            }
            references(value).map_err(|m| ("a2a.headers", format!("`{name}`: {m}")))?;
        }
    }
    Ok(())
}

/// An `http` or `https` URL with a host and no credentials in it (they would end up in
/// logs and events; the key goes in `api_key`). Loopback and private addresses are
/// allowed: the operator configured this agent.
fn check_url(url: &str) -> Result<(), String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err("must be an http or https URL".to_owned());
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err("must name a host".to_owned());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(
            "must not carry credentials; name a secret in `[agents.NAME.a2a] api_key`".into(),
        );
    }
    Ok(())
}

/// Checks an `a2a__NAME` ensemble: NAME must be an agent of kind `a2a`.
pub fn check_tool(ensemble: &str, a2a_agents: &BTreeSet<&str>) -> Option<Result<(), String>> {
    let name = ensemble.strip_prefix(TOOL_PREFIX)?;
    // Tool names are at most 64 characters.
    if ensemble.len() > 64 {
        return Some(Err(format!(
            "`{ensemble}` is longer than a tool name may be (64)"
        )));
    }
    Some(if a2a_agents.contains(name) {
        Ok(())
    } else {
        Err(format!(
            "`{ensemble}` names no agent of kind `a2a`; agents of kind a2a: {}",
            if a2a_agents.is_empty() {
                "none".to_owned()
            } else {
                a2a_agents.iter().copied().collect::<Vec<_>>().join(", ")
            }
        ))
    })
}

/// Every secret an A2A agent names (`api_key`, `${secret:NAME}` in headers) is
/// configured in `[secrets]`; `agents` are each agent's name and `[a2a]`.
pub fn secret_references<'a>(
    agents: impl IntoIterator<Item = (&'a String, &'a A2aRemoteSettings)>,
    secrets: &SecretsConfig,
) -> Result<(), SettingError> {
    for (agent, settings) in agents {
        let mut named: Vec<(String, String)> = settings
            .api_key
            .iter()
            .map(|name| (format!("agents.{agent}.a2a.api_key"), name.clone()))
            .collect();
        for (header, value) in &settings.headers {
            for name in references(value).unwrap_or_default() {
                named.push((
                    format!("agents.{agent}.a2a.headers.{header}"),
                    name.to_owned(),
                ));
            }
        }
        for (key, name) in named {
            if !secrets.sources.contains_key(&name) {
                let known: Vec<&str> = secrets.sources.keys().map(String::as_str).collect();
                return Err((
                    key,
                    format!(
                        "unknown secret `{name}` (configured: {})",
                        if known.is_empty() {
                            "none".to_owned()
                        } else {
                            known.join(", ")
                        }
                    ),
                ));
            }
        }
    }
    Ok(())
}
