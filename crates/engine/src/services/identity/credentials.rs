//! How callers prove who they are: the key store, whether keys are required, the OIDC
//! token verifier, and the setup token of a server without keys (`Bootstrap`). State
//! only; the checks that read it are `mod.rs` and `setup.rs`, and nothing here names
//! them.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentplane_core::identity::SetupToken;

use crate::ports::{KeyStore, TokenVerifier};

/// How long "no key exists" is believed before the store is asked again (a key
/// created through another replica is required after at most this long).
pub(super) const NO_KEYS_TTL: Duration = Duration::from_secs(1);

/// How callers prove who they are: the key store, whether keys are required (cached:
/// for good once true, "not yet" for [`NO_KEYS_TTL`]), the OIDC token verifier.
pub(super) struct Credentials {
    /// API keys; none in a process built for tests.
    pub(super) keys: Option<Arc<dyn KeyStore>>,
    /// Set once a key is known to exist: keys are never deleted, so it stays set.
    pub(super) keys_seen: AtomicBool,
    /// When the store last said no key exists.
    pub(super) no_keys_at: Mutex<Option<Instant>>,
    /// Verifies OIDC bearer tokens, when `[auth.oidc]` is configured.
    pub(super) tokens: Option<Arc<dyn TokenVerifier>>,
    /// The setup token of a server without keys, until a key exists (`setup.rs`).
    pub(super) setup: Mutex<Option<Bootstrap>>,
}

impl Credentials {
    pub(super) fn new(
        keys: Option<Arc<dyn KeyStore>>,
        tokens: Option<Arc<dyn TokenVerifier>>,
        setup: Option<Bootstrap>,
    ) -> Self {
        Self {
            keys,
            keys_seen: AtomicBool::new(false),
            no_keys_at: Mutex::new(None),
            tokens,
            setup: Mutex::new(setup),
        }
    }

    /// The setup token's slot; a poisoned lock still holds a plain `Option`.
    pub(super) fn held_setup(&self) -> std::sync::MutexGuard<'_, Option<Bootstrap>> {
        self.setup
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The setup token of a server without keys, and how to discard where it is kept.
pub struct Bootstrap {
    pub(super) token: SetupToken,
    /// Removes the token's file; called once, when the token is used or a key exists.
    pub(super) discard: Box<dyn Fn() + Send + Sync>,
}

impl Bootstrap {
    /// `token`, kept where `discard` removes it from.
    pub fn new(token: SetupToken, discard: impl Fn() + Send + Sync + 'static) -> Self {
        Self {
            token,
            discard: Box::new(discard),
        }
    }
}

impl std::fmt::Debug for Bootstrap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bootstrap").finish_non_exhaustive()
    }
}
