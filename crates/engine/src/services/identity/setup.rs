//! The bootstrap of a server without keys or token: the one-time setup token that alone
//! lets a caller who is only claimed (everyone, on such a server) create the first key.
//!
//! Without it, anything that reaches the loopback address (a sandboxed program, another
//! user's process) could mint the first admin key and lock the operator out. The
//! runtime writes the token to a 0600 file in the data directory and hands it here with
//! a way to remove that file; the identity service checks a presented token in constant time, takes
//! it while the first key is made (so two callers racing with it make one key), and
//! discards it once any key exists. Callers proven otherwise (the token holder, an
//! admin's key, an OIDC admin, the local command line) never need it. What must not
//! live here: files, HTTP headers — the runtime and the interfaces own those.

use agentplane_core::identity::SetupToken;

use super::Identity;
use super::credentials::Bootstrap;
use super::security::security_event;
use crate::error::HubError;
use crate::identity::{Caller, Principal};

/// What a caller needs to hear: where the token is and how to send it, never the token.
const NEEDED: &str = "creating the first key on a server without keys needs its one-time \
     setup token (the file `setup-token` in the data directory, named by serve's startup \
     summary), sent as the X-Setup-Token header; `agentplane keys create` sends it";

impl Identity {
    /// Whether a caller may go on to create a key as far as the setup token goes: a
    /// caller who is only claimed must present the token, others need nothing. Checked
    /// before a request's body is read; [`Identity::create_key`] checks again and takes the
    /// token. A refusal is `Unauthorized` and a `security_event`.
    pub fn check_setup_token(
        &self,
        caller: &Caller,
        presented: Option<&SetupToken>,
    ) -> Result<(), HubError> {
        if *caller.principal() != Principal::Claimed {
            return Ok(());
        }
        let held = self.credentials.held_setup();
        match (held.as_ref(), presented) {
            (Some(bootstrap), Some(presented)) if bootstrap.token.matches(presented) => Ok(()),
            (_, presented) => Err(refuse(caller, presented.is_some())),
        }
    }

    /// The bootstrap, taken out for a claimed caller whose token matches (put it back
    /// with [`Identity::restore_setup_token`] if the key could not be made); `Unauthorized`
    /// otherwise. A second caller with the same token finds none.
    pub(super) fn take_setup_token(
        &self,
        caller: &Caller,
        presented: Option<&SetupToken>,
    ) -> Result<Bootstrap, HubError> {
        let mut held = self.credentials.held_setup();
        match (held.take(), presented) {
            (Some(bootstrap), Some(presented)) if bootstrap.token.matches(presented) => {
                Ok(bootstrap)
            }
            (other, presented) => {
                *held = other;
                Err(refuse(caller, presented.is_some()))
            }
        }
    }

    /// Puts back a bootstrap taken for a key that was not made.
    pub(super) fn restore_setup_token(&self, bootstrap: Bootstrap) {
        *self.credentials.held_setup() = Some(bootstrap);
    }

    /// Forgets the setup token for good and removes its file: a key exists now.
    pub(super) fn discard_setup_token(&self, taken: Option<Bootstrap>) {
        let held = self.credentials.held_setup().take();
        for bootstrap in taken.into_iter().chain(held) {
            (bootstrap.discard)();
            tracing::info!("the setup token was consumed: a key exists");
        }
    }

    /// Whether this server holds a setup token (a server without keys, not yet used).
    pub fn awaits_setup_token(&self) -> bool {
        self.credentials.held_setup().is_some()
    }
}

fn refuse(caller: &Caller, presented: bool) -> HubError {
    let detail = if presented {
        "creating the first key with a wrong setup token"
    } else {
        "creating the first key without the setup token"
    };
    security_event(caller, "setup_token_refused", detail);
    HubError::Unauthorized(NEEDED.to_owned())
}
