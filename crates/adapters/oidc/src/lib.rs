//! OIDC sign-in for agentplane (ADR 0030): bearer tokens signed by an identity
//! provider, verified against its published keys. The engine's `TokenVerifier`
//! port; the runtime builds one from `[auth.oidc]`.

mod verifier;

use std::time::Duration;

pub use verifier::{MIN_REFETCH, OidcVerifier};

/// Which tokens are accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcConfig {
    /// The `iss` tokens must carry.
    pub issuer: String,
    /// An `aud` they must name.
    pub audience: String,
    /// Where the provider's signing keys are.
    pub jwks_url: String,
    /// The claim holding the client id (default `sub`).
    pub client_claim: String,
    /// The claim listing the roles (default `roles`).
    pub roles_claim: String,
    /// Clock skew allowed on `exp` and `nbf`.
    pub leeway: Duration,
}
