//! Where the store lives and how replicas watch each other (ADR 0019).
//!
//! ```toml
//! [store]
//! path = "agentplane.db"          # the SQLite file (the default store), or…
//! url = "postgres://agentplane@db.internal/agentplane"   # …a database replicas share
//!
//! [cluster]
//! heartbeat_secs = 2              # how often a replica records that it is alive
//! replica_timeout_secs = 10       # silent this long: dead, its work is recovered
//! ```
//!
//! `--db` and `AGENTPLANE_DB` take either form: `postgres://…` (or `postgresql://…`)
//! selects PostgreSQL; a path, or `sqlite:PATH`, the SQLite file.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::SettingError;

/// A PostgreSQL connection URL. It may hold a password: `Debug` and `Display` show it
/// redacted; only [`DatabaseUrl::expose`] gives the URL to connect with.
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseUrl(String);

impl DatabaseUrl {
    /// The URL as written, password included: for connecting, never for logs.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The URL with its password (in the user info or a `password=` parameter) replaced
    /// by `***`.
    pub fn redacted(&self) -> String {
        redact_url(&self.0)
    }
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DatabaseUrl({})", self.redacted())
    }
}

impl fmt::Display for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

/// `url` with any password replaced by `***`.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_owned();
    };
    let rest_start = scheme_end + 3;
    let rest = &url[rest_start..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let mut out = url[..rest_start].to_owned();
    match authority.rfind('@') {
        Some(at) => {
            let userinfo = &authority[..at];
            match userinfo.find(':') {
                Some(colon) => {
                    out.push_str(&userinfo[..colon]);
                    out.push_str(":***");
                }
                None => out.push_str(userinfo),
            }
            out.push_str(&authority[at..]);
        }
        None => out.push_str(authority),
    }
    let tail = &rest[authority_end..];
    match tail.split_once('?') {
        None => out.push_str(tail),
        Some((path, query)) => {
            out.push_str(path);
            out.push('?');
            let params: Vec<String> = query
                .split('&')
                .map(|param| match param.split_once('=') {
                    Some((key, _)) if key.eq_ignore_ascii_case("password") => {
                        format!("{key}=***")
                    }
                    _ => param.to_owned(),
                })
                .collect();
            out.push_str(&params.join("&"));
        }
    }
    out
}

/// Which store a `--db` / `AGENTPLANE_DB` / `[store]` value names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Sqlite(PathBuf),
    Postgres(DatabaseUrl),
}

/// Reads a store location: `postgres://…`/`postgresql://…`, `sqlite:PATH`, or a path.
pub fn location(value: &str) -> Result<Location, String> {
    let value = value.trim();
    if value.is_empty() {
        return Err("must not be empty".into());
    }
    let lower = value.to_ascii_lowercase();
    if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
        return Ok(Location::Postgres(DatabaseUrl(value.to_owned())));
    }
    if let Some(path) = value.strip_prefix("sqlite:") {
        // `sqlite:///abs/path` and `sqlite://rel` as well as `sqlite:path`.
        let path = path.strip_prefix("//").unwrap_or(path);
        if path.is_empty() {
            return Err("`sqlite:` needs a file path after it".into());
        }
        return Ok(Location::Sqlite(PathBuf::from(path)));
    }
    if lower.contains("://") {
        return Err(format!(
            "{} is neither a file path nor a postgres:// URL",
            redact_url(value)
        ));
    }
    Ok(Location::Sqlite(PathBuf::from(value)))
}

/// `[cluster]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileCluster {
    heartbeat_secs: Option<u64>,
    replica_timeout_secs: Option<u64>,
}

/// `[cluster]`, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterConfig {
    /// How often this replica records that it is alive.
    pub heartbeat: Duration,
    /// A replica whose last heartbeat is older than this is dead.
    pub replica_timeout: Duration,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            heartbeat: Duration::from_secs(2),
            replica_timeout: Duration::from_secs(10),
        }
    }
}

/// Checks the section: a beat of 1 to 60 s, and a timeout of at least two beats (one
/// late beat must not get a live replica's work recovered).
pub fn resolve(file: FileCluster) -> Result<ClusterConfig, SettingError> {
    let defaults = ClusterConfig::default();
    let heartbeat = file.heartbeat_secs.unwrap_or(defaults.heartbeat.as_secs());
    if !(1..=60).contains(&heartbeat) {
        return Err((
            "heartbeat_secs".into(),
            format!("must be between 1 and 60, got {heartbeat}"),
        ));
    }
    let timeout = file
        .replica_timeout_secs
        .unwrap_or(defaults.replica_timeout.as_secs().max(heartbeat * 5));
    if timeout < heartbeat * 2 || timeout > 3600 {
        return Err((
            "replica_timeout_secs".into(),
            format!(
                "must be at least twice heartbeat_secs ({}) and at most 3600, got {timeout}",
                heartbeat * 2
            ),
        ));
    }
    Ok(ClusterConfig {
        heartbeat: Duration::from_secs(heartbeat),
        replica_timeout: Duration::from_secs(timeout),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        for (url, shown) in [
            (
                "postgres://app:s3cret@db:5432/ap",
                "postgres://app:***@db:5432/ap",
            ),
            ("postgres://app@db/ap", "postgres://app@db/ap"),
            (
                "postgresql://db/ap?user=app&password=s3cret&sslmode=require",
                "postgresql://db/ap?user=app&password=***&sslmode=require",
            ),
            ("postgres://a:b:c@h/d", "postgres://a:***@h/d"),
        ] {
            assert_eq!(redact_url(url), shown);
            let Ok(Location::Postgres(parsed)) = location(url) else {
                panic!("{url} is PostgreSQL");
            };
            assert!(!format!("{parsed:?} {parsed}").contains("s3cret"));
            assert_eq!(parsed.expose(), url);
        }
    }

    #[test]
    fn paths_and_sqlite_urls_select_the_file() {
        assert_eq!(
            location("data/events.db"),
            Ok(Location::Sqlite("data/events.db".into()))
        );
        assert_eq!(
            location("sqlite:///var/lib/ap.db"),
            Ok(Location::Sqlite("/var/lib/ap.db".into()))
        );
        assert_eq!(
            location("sqlite:ap.db"),
            Ok(Location::Sqlite("ap.db".into()))
        );
        assert!(location("").is_err());
        assert!(location("sqlite:").is_err());
        let err = location("mysql://u:pw@h/db").expect_err("not ours");
        assert!(!err.contains("pw@"), "{err}");
    }

    #[test]
    fn the_timeout_must_outlast_two_beats() {
        assert_eq!(
            resolve(FileCluster::default()),
            Ok(ClusterConfig::default())
        );
        let err = resolve(FileCluster {
            heartbeat_secs: Some(5),
            replica_timeout_secs: Some(6),
        })
        .expect_err("too short");
        assert_eq!(err.0, "replica_timeout_secs");
        assert!(
            resolve(FileCluster {
                heartbeat_secs: Some(0),
                replica_timeout_secs: None,
            })
            .is_err()
        );
    }
}
