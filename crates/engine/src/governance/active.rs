//! The active policy set. Readers take a cheap `Arc` snapshot, so a reload never
//! changes the rules under a decision in progress; a reload that fails keeps the
//! previous set and records why.

use std::sync::{Arc, RwLock};

use agentplane_core::policy::{PolicyError, PolicySet};

/// The result of the latest load attempt.
#[derive(Debug, Clone, Default)]
pub struct PolicyStatus {
    /// Where the policies come from (a directory), if anywhere.
    pub source: Option<String>,
    /// When the active set was loaded (RFC 3339), if ever.
    pub loaded_at: Option<String>,
    /// Errors of the latest attempt when it failed; the previous set stays active.
    pub errors: Vec<PolicyError>,
    /// When the latest failed attempt happened (RFC 3339).
    pub failed_at: Option<String>,
}

/// The policy set in force, replaceable at run time.
#[derive(Default)]
pub struct ActivePolicies {
    set: RwLock<Arc<PolicySet>>,
    status: RwLock<PolicyStatus>,
}

impl ActivePolicies {
    /// A handle holding `set`, loaded from `source`.
    pub fn new(set: PolicySet, source: Option<String>, loaded_at: String) -> Self {
        Self {
            set: RwLock::new(Arc::new(set)),
            status: RwLock::new(PolicyStatus {
                source,
                loaded_at: Some(loaded_at),
                ..PolicyStatus::default()
            }),
        }
    }

    /// The set in force now.
    pub fn current(&self) -> Arc<PolicySet> {
        match self.set.read() {
            Ok(set) => set.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Replaces the set after a successful load and clears any earlier failure.
    pub fn replace(&self, set: PolicySet, loaded_at: String) {
        match self.set.write() {
            Ok(mut current) => *current = Arc::new(set),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(set),
        }
        self.update_status(|status| {
            status.loaded_at = Some(loaded_at);
            status.errors.clear();
            status.failed_at = None;
        });
    }

    /// Records a failed load; the set in force stays.
    pub fn reject(&self, errors: Vec<PolicyError>, failed_at: String) {
        self.update_status(|status| {
            status.errors = errors;
            status.failed_at = Some(failed_at);
        });
    }

    /// The latest load attempt's result.
    pub fn status(&self) -> PolicyStatus {
        match self.status.read() {
            Ok(status) => status.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn update_status(&self, change: impl FnOnce(&mut PolicyStatus)) {
        match self.status.write() {
            Ok(mut status) => change(&mut status),
            Err(poisoned) => change(&mut poisoned.into_inner()),
        }
    }
}
