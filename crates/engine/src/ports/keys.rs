//! `KeyStore`: API keys, each bound to one client and its roles (ADR 0030). A port of
//! its own, like `VersionStore`, so the event-store decorators stay as they are.
//!
//! Invariants every implementation keeps:
//! - only a key's digest is stored (never its secret), and it is unique;
//! - a key is never deleted: revoking sets `revoked_at` once and it stays set, so a
//!   database that ever held a key keeps requiring keys;
//! - every read goes to the database (no cache), so a revocation written by one replica
//!   holds on the next request to any other.

use agentplane_core::KeyId;
use async_trait::async_trait;

use super::store::StoreError;

/// A key to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewKey {
    pub id: KeyId,
    /// SHA-256 of the secret, lowercase hex (`agentplane_core::identity::key_digest`).
    pub digest: String,
    pub client: String,
    /// Role names, access roles and others (`security`).
    pub roles: Vec<String>,
    pub description: Option<String>,
    /// RFC 3339; `None`: the key never expires.
    pub expires_at: Option<String>,
    /// Who created it (a client id, or `cli` for the local command).
    pub created_by: String,
}

/// A stored key, as anyone may see it: no secret, no digest.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRecord {
    pub id: KeyId,
    pub client: String,
    pub roles: Vec<String>,
    pub description: Option<String>,
    pub created_by: String,
    pub created_at: String,
    pub expires_at: Option<String>,
    pub revoked_at: Option<String>,
}

/// Durable API keys.
#[async_trait]
pub trait KeyStore: Send + Sync {
    /// `Conflict` when the id or the digest is already stored.
    async fn create_key(&self, key: NewKey) -> Result<KeyRecord, StoreError>;

    /// The key with this digest, revoked or not.
    async fn key_by_digest(&self, digest: &str) -> Result<Option<KeyRecord>, StoreError>;

    /// Every key, oldest first.
    async fn list_keys(&self) -> Result<Vec<KeyRecord>, StoreError>;

    /// Revokes a key (again: unchanged). `NotFound` without it.
    async fn revoke_key(&self, id: &KeyId) -> Result<KeyRecord, StoreError>;

    /// Whether any key was ever created (revoked ones count).
    async fn any_keys(&self) -> Result<bool, StoreError>;
}

/// What a verified bearer token (an OIDC ID or access token) says about its holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedToken {
    /// The token's subject (`sub`), recorded as the decider of approvals.
    pub subject: String,
    /// The client it acts as (`client_claim`, default `sub`).
    pub client: String,
    /// Role names (`roles_claim`, default `roles`).
    pub roles: Vec<String>,
}

/// Verifies bearer tokens signed by an identity provider (`[auth.oidc]`). Implemented
/// outside the engine, which opens no socket: the runtime fetches the provider's keys.
#[async_trait]
pub trait TokenVerifier: Send + Sync {
    /// The identity `token` proves; `Err` says why it proves none (never the token).
    async fn verify(&self, token: &str) -> Result<VerifiedToken, String>;

    /// The issuer whose tokens it accepts, for clients to find the authorization server
    /// (`/.well-known/oauth-protected-resource`).
    fn issuer(&self) -> Option<&str> {
        None
    }
}
