//! `data_scope`: the paths, hosts and secret names an agent may reach. Evaluation only
//! collects the scopes that apply; enforcing them (handing secrets to tools, checking
//! paths and hosts) belongs to the secrets and tools parts.

use super::glob::Glob;

/// What data a selected agent may reach. Empty lists grant nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DataScope {
    /// Filesystem path patterns (`*` wildcards, matched against the whole path).
    pub paths: Vec<Glob>,
    /// Host patterns, e.g. `*.github.com`.
    pub hosts: Vec<Glob>,
    /// Secret names (exact or patterns).
    pub secrets: Vec<Glob>,
}
