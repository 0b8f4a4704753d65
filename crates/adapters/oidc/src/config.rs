//! Which tokens the verifier accepts ([`OidcConfig`]), as the runtime reads it from
//! `[auth.oidc]`.

use std::time::Duration;

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
