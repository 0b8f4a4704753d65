//! How agent versions are kept (ADR 0016): the store, the baselines' numbers and who
//! may change them, given when the services are built. Settings only; the rules on
//! versions are `versions.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::ports::VersionStore;

/// How versions are kept: the store, the baseline version number of each
/// configured agent, and who may change versions.
#[derive(Clone, Default)]
pub struct VersionSettings {
    /// `None`: only the baselines exist, and changing versions is refused.
    pub store: Option<Arc<dyn VersionStore>>,
    /// The version number of each configured agent's definition (default `1.0.0`).
    pub baselines: BTreeMap<String, String>,
    /// `[versions] admins`: the client ids that may change versions. `None`: any client
    /// that passes authentication may.
    pub admins: Option<Vec<String>>,
}
