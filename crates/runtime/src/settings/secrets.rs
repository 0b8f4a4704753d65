//! `[secrets.NAME]`: a secret read from an environment variable or a file.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::SettingError;

/// One `[secrets.NAME]` entry as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSecret {
    env: Option<String>,
    file: Option<PathBuf>,
}

/// Where each secret comes from (values are read at start-up, never kept in config).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretsConfig {
    pub sources: BTreeMap<String, SecretSource>,
}

/// Where one secret comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    Env(String),
    File(PathBuf),
}

/// Checks the section.
pub fn resolve(entries: BTreeMap<String, FileSecret>) -> Result<SecretsConfig, SettingError> {
    let mut sources = BTreeMap::new();
    for (name, secret) in entries {
        let source = match (secret.env, secret.file) {
            (Some(env), None) => SecretSource::Env(env),
            (None, Some(file)) => SecretSource::File(file),
            _ => return Err((name, "give exactly one of `env` or `file`".to_owned())),
        };
        sources.insert(name, source);
    }
    Ok(SecretsConfig { sources })
}
