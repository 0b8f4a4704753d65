//! `[store]`: where events are stored, the SQLite file (the default) or a PostgreSQL
//! database several replicas share; `AGENTPLANE_DB` and `--db` select one over the
//! file (the forms are `cluster.rs`'s `location`).
//!
//! ```toml
//! [store]
//! path = "agentplane.db"   # relative to the configuration file
//! url = "postgres://agentplane@db.internal/agentplane"
//! ```

use std::path::PathBuf;

use serde::Deserialize;

use super::BadValue;
use super::cluster::{DatabaseUrl, Location, location};
use super::overrides::Overrides;

/// `[store]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileStore {
    path: Option<PathBuf>,
    url: Option<String>,
}

/// Where events are stored: the SQLite file (the default), or a PostgreSQL database
/// several replicas share.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreConfig {
    /// The SQLite file; with PostgreSQL, still where executions' working directories
    /// go (beside it).
    pub path: PathBuf,
    /// `Some`: the store is this PostgreSQL database, not the file.
    pub postgres: Option<DatabaseUrl>,
}

impl StoreConfig {
    /// Selects the store a `--db` value names (a path, `sqlite:PATH` or `postgres://…`).
    pub fn select(&mut self, value: &str) -> Result<(), String> {
        match location(value)? {
            Location::Sqlite(path) => {
                self.path = path;
                self.postgres = None;
            }
            Location::Postgres(url) => self.postgres = Some(url),
        }
        Ok(())
    }

    /// The store for people: the file's path, or the URL without its password.
    pub fn describe(&self) -> String {
        match &self.postgres {
            Some(url) => url.redacted(),
            None => self.path.display().to_string(),
        }
    }
}

/// Checks `[store]`, then applies `AGENTPLANE_DB`. `relative` resolves a path written
/// in the file against the file's directory; without `path`, the file goes in the
/// user's data directory (`$XDG_DATA_HOME`, else `$HOME/.local/share`).
pub fn resolve(
    file: FileStore,
    relative: &dyn Fn(PathBuf) -> PathBuf,
    env: &Overrides,
) -> Result<StoreConfig, BadValue> {
    let path = match file.path {
        Some(path) if path.as_os_str().is_empty() => {
            return Err(("path", "must not be empty".into()).into());
        }
        Some(path) => relative(path),
        None => default_db_path(env),
    };
    let mut store = StoreConfig {
        path,
        postgres: None,
    };
    if let Some(url) = &file.url {
        match location(url).map_err(|m| BadValue::Key("url".into(), m))? {
            Location::Sqlite(path) => store.path = relative(path),
            Location::Postgres(url) => store.postgres = Some(url),
        }
    }
    if let Some(db) = &env.db {
        store
            .select(db)
            .map_err(|m| BadValue::Variable("AGENTPLANE_DB", m))?;
    }
    Ok(store)
}

/// `$XDG_DATA_HOME/agentplane/agentplane.db`, else `~/.local/share/…`, else `./`.
fn default_db_path(env: &Overrides) -> PathBuf {
    let data = env
        .data_home
        .clone()
        .or_else(|| env.home.as_ref().map(|h| h.join(".local").join("share")));
    match data {
        Some(dir) => dir.join("agentplane").join("agentplane.db"),
        None => PathBuf::from("agentplane.db"),
    }
}
