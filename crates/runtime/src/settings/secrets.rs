//! `[secrets.NAME]`: a secret read from an environment variable or a file, and the
//! `${secret:NAME}` references MCP servers' `env` and `headers` values make to them.
//!
//! Only where each value comes from is configuration; the values themselves are read
//! at start-up by `crate::secrets` and never kept here.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::SettingError;

/// The longest secret name: names appear in `[REDACTED:NAME]` markers and policies.
const MAX_NAME_LEN: usize = 64;

/// What opens a reference to a secret in an MCP server's `env` or `headers` value.
pub const REFERENCE_OPEN: &str = "${secret:";

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
    /// An environment variable of the agentplane process.
    Env(String),
    /// A file; a relative path is taken relative to the configuration file's directory
    /// when the value is read.
    File(PathBuf),
}

/// Whether `name` reads like an environment variable name: a letter or `_`, then
/// letters, digits and `_`. Such names fit policies, references and redaction markers
/// without quoting.
pub fn is_secret_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= MAX_NAME_LEN
}

/// Checks the section.
pub fn resolve(entries: BTreeMap<String, FileSecret>) -> Result<SecretsConfig, SettingError> {
    let mut sources = BTreeMap::new();
    for (name, secret) in entries {
        if !is_secret_name(&name) {
            return Err((
                name,
                format!(
                    "secret names use letters, digits and `_`, start with a letter or `_`, \
                     at most {MAX_NAME_LEN} characters"
                ),
            ));
        }
        let source = match (secret.env, secret.file) {
            (Some(env), None) => {
                if env.is_empty() || env.contains(['=', '\0']) {
                    return Err((
                        format!("{name}.env"),
                        "must name an environment variable (non-empty, no `=`)".into(),
                    ));
                }
                SecretSource::Env(env)
            }
            (None, Some(file)) => {
                if file.as_os_str().is_empty() {
                    return Err((format!("{name}.file"), "must not be empty".into()));
                }
                SecretSource::File(file)
            }
            _ => return Err((name, "give exactly one of `env` or `file`".to_owned())),
        };
        sources.insert(name, source);
    }
    Ok(SecretsConfig { sources })
}

/// The secret names `value` refers to with `${secret:NAME}`, in order. An unclosed
/// reference or a malformed name is an error (said without the value, which may hold
/// a credential next to the reference).
pub fn references(value: &str) -> Result<Vec<&str>, String> {
    let mut names = Vec::new();
    let mut rest = value;
    while let Some(open) = rest.find(REFERENCE_OPEN) {
        let after = &rest[open + REFERENCE_OPEN.len()..];
        let Some(close) = after.find('}') else {
            return Err("a `${secret:` reference is not closed with `}`".into());
        };
        let name = &after[..close];
        if !is_secret_name(name) {
            return Err(format!(
                "`${{secret:{}}}` does not name a secret (letters, digits and `_`)",
                name.escape_debug()
            ));
        }
        names.push(name);
        rest = &after[close + 1..];
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(env: Option<&str>, file: Option<&str>) -> FileSecret {
        FileSecret {
            env: env.map(str::to_owned),
            file: file.map(PathBuf::from),
        }
    }

    #[test]
    fn names_read_like_environment_variables() {
        for good in ["api_token", "GITHUB_TOKEN", "_x", "a1"] {
            assert!(is_secret_name(good), "{good}");
        }
        for bad in ["", "1a", "a-b", "a b", "a.b", "ключ", "a}", &"a".repeat(65)] {
            assert!(!is_secret_name(bad), "{bad}");
        }
    }

    #[test]
    fn bad_entries_name_the_key() {
        let cases = [
            ("bad-name", entry(Some("X"), None), "bad-name"),
            ("a", entry(None, None), "a"),
            ("a", entry(Some("X"), Some("f")), "a"),
            ("a", entry(Some(""), None), "a.env"),
            ("a", entry(Some("A=B"), None), "a.env"),
            ("a", entry(None, Some("")), "a.file"),
        ];
        for (name, secret, key) in cases {
            let err = resolve(BTreeMap::from([(name.to_owned(), secret)])).expect_err(name);
            assert_eq!(err.0, key);
        }
        let ok = resolve(BTreeMap::from([
            ("a".to_owned(), entry(Some("A"), None)),
            ("b".to_owned(), entry(None, Some("b.txt"))),
        ]))
        .expect("valid");
        assert_eq!(ok.sources["a"], SecretSource::Env("A".into()));
        assert_eq!(ok.sources["b"], SecretSource::File("b.txt".into()));
    }

    #[test]
    fn references_are_found_and_checked() {
        assert_eq!(
            references("Bearer ${secret:tok} and ${secret:_b}!").expect("valid"),
            ["tok", "_b"]
        );
        assert!(
            references("plain $HOME ${other}")
                .expect("valid")
                .is_empty()
        );
        assert!(references("${secret:tok").is_err());
        assert!(references("${secret:}").is_err());
        assert!(references("${secret:a b}").is_err());
        let err = references("hunter2-literal ${secret:").expect_err("unclosed");
        assert!(!err.contains("hunter2"));
    }
}
