//! OIDC sign-in for agentplane (ADR 0030): bearer tokens signed by an identity
//! provider, verified against its published keys. The engine's `TokenVerifier`
//! port; the runtime builds one from `[auth.oidc]`.

mod config;
mod verifier;

pub use config::OidcConfig;
pub use verifier::{MIN_REFETCH, OidcVerifier};
