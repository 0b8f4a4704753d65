//! The identity service (ADR 0030): the role check every service makes first, API
//! keys (create, list, revoke), OIDC tokens and the setup token, and turning a
//! presented credential into a [`Caller`]. Its one store port is [`KeyStore`]; every
//! other service holds an `Arc<Identity>` for its role checks.
//!
//! A refusal is `Forbidden` naming the missing role, and a `security_event` log line
//! (target `agentplane::security`) with the caller's client and principal — never a
//! secret. Key lookups go to the store on every request (no cache), so a revocation
//! holds at once on every replica sharing the database. Whether keys are required is
//! cached for good once true (keys are never deleted), and "not yet" for a second.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use agentplane_core::identity::{
    KeySecret, SetupToken, check_client_id, key_digest, looks_like_key,
};
use agentplane_core::policy::Timestamp;
use agentplane_core::{KeyId, RoleSet};

mod credentials;
mod security;
mod setup;

pub use credentials::Bootstrap;
pub(crate) use security::security_event;

use crate::error::HubError;
use crate::identity::{Access, AsCaller, Caller, Principal};
use crate::ports::TokenVerifier;
use crate::ports::{KeyRecord, KeyStore, NewKey};
use credentials::{Credentials, NO_KEYS_TTL};

/// Longest key description, in characters.
pub const MAX_KEY_DESCRIPTION_CHARS: usize = 500;

/// A key to create.
#[derive(Debug, Clone, Default)]
pub struct CreateKey {
    /// The client the key acts as.
    pub client: String,
    /// At least one role name.
    pub roles: Vec<String>,
    /// Seconds until it expires; `None`: never.
    pub expires_in_secs: Option<u64>,
    pub description: Option<String>,
    /// The setup token the caller presented (`X-Setup-Token`): what a caller who is
    /// only claimed needs to create the first key (`setup.rs`); others need none.
    pub setup_token: Option<SetupToken>,
}

/// Who callers are and what they may do: credentials in, a [`Caller`] out, and the
/// role check. Built once by the composition root ([`Identity::new`]).
pub struct Identity {
    credentials: Credentials,
}

impl Identity {
    /// Over the key store (none: a process without keys, tests), the OIDC token
    /// verifier (none: tokens refused) and the setup token of a server without keys.
    pub fn new(
        keys: Option<Arc<dyn KeyStore>>,
        tokens: Option<Arc<dyn TokenVerifier>>,
        setup: Option<Bootstrap>,
    ) -> Self {
        Self {
            credentials: Credentials::new(keys, tokens, setup),
        }
    }

    /// The caller, if its roles grant `access`; else `Forbidden` naming the role it
    /// lacks, and a `security_event`. `action` says what was refused.
    pub(crate) fn require<'a, C: AsCaller + ?Sized>(
        &self,
        caller: &'a C,
        access: Access,
        action: &str,
    ) -> Result<std::borrow::Cow<'a, Caller>, HubError> {
        let caller = caller.as_caller();
        if access.allowed(caller.roles()) {
            return Ok(caller);
        }
        let role = access.granted_by()[0];
        security_event(
            &caller,
            "forbidden",
            &format!("{action} needs the `{role}` role"),
        );
        Err(HubError::Forbidden(format!(
            "{action} needs the `{role}` role, which this caller does not have"
        )))
    }

    /// The same check, for an interface that must decide before it looks at a
    /// request's input (the HTTP layer, before it reads a body): a caller whose roles
    /// may not do the thing learns nothing about what it sent. The service method it then
    /// calls checks again.
    pub fn authorize(&self, caller: &Caller, access: Access, action: &str) -> Result<(), HubError> {
        self.require(caller, access, action).map(|_| ())
    }

    /// Whether OIDC bearer tokens are accepted.
    pub fn verifies_tokens(&self) -> bool {
        self.credentials.tokens.as_ref().is_some()
    }

    /// The issuer of the tokens accepted, if it verifies tokens.
    pub fn token_issuer(&self) -> Option<&str> {
        self.credentials.tokens.as_ref().and_then(|t| t.issuer())
    }

    /// The caller a bearer token from the identity provider proves, acting as
    /// `claimed` when given (admins only, like keys). `Unauthorized` when it proves
    /// nothing: a bad signature, algorithm, issuer, audience or time, an unknown key.
    pub async fn authenticate_token(
        &self,
        token: &str,
        claimed: Option<&str>,
    ) -> Result<Caller, HubError> {
        let verifier = self
            .credentials
            .tokens
            .as_ref()
            .ok_or_else(|| HubError::Unauthorized("bearer tokens are not accepted".into()))?;
        let verified = verifier.verify(token).await.map_err(|why| {
            tracing::info!(target: "agentplane::security", reason = %why, "bearer token refused");
            HubError::Unauthorized(format!("the bearer token is not valid: {why}"))
        })?;
        check_client_id(&verified.client).map_err(|e| {
            HubError::Unauthorized(format!("the token's client claim is not a client id: {e}"))
        })?;
        let roles = RoleSet::from_names(verified.roles.iter().map(String::as_str))
            .map_err(|e| HubError::Unauthorized(format!("the token's roles: {e}")))?;
        let own = Caller::with(
            verified.client,
            roles,
            Principal::Oidc {
                subject: verified.subject,
            },
        );
        self.act_as(own, claimed)
    }

    /// Whether callers must present a credential: once any key was created in the
    /// store, or when OIDC tokens are accepted.
    pub async fn keys_required(&self) -> Result<bool, HubError> {
        if self.credentials.keys_seen.load(Ordering::Relaxed) || self.verifies_tokens() {
            return Ok(true);
        }
        let Some(store) = self.credentials.keys.as_ref() else {
            return Ok(false);
        };
        // "None yet" is believed for a second, so an open server does not read the
        // store on every request; a key created through this process counts at once.
        let fresh = |at: &Option<Instant>| at.is_some_and(|at| at.elapsed() < NO_KEYS_TTL);
        if self
            .credentials
            .no_keys_at
            .lock()
            .map(|at| fresh(&at))
            .unwrap_or(false)
        {
            return Ok(false);
        }
        let any = store.any_keys().await?;
        if any {
            self.credentials.keys_seen.store(true, Ordering::Relaxed);
            // Made elsewhere (another replica, the command line on PostgreSQL): the
            // setup token can no longer serve anyone.
            self.discard_setup_token(None);
        } else if let Ok(mut at) = self.credentials.no_keys_at.lock() {
            *at = Some(Instant::now());
        }
        Ok(any)
    }

    /// The caller a presented key proves, acting as `claimed` when given. `Unauthorized`
    /// for an unknown, revoked or expired key; `Forbidden` (and a `security_event`)
    /// when a key that is not an admin's names another client.
    pub async fn authenticate_key(
        &self,
        secret: &str,
        claimed: Option<&str>,
    ) -> Result<Caller, HubError> {
        let invalid = || HubError::Unauthorized("the API key is not valid".into());
        let store = self.credentials.keys.as_ref().ok_or_else(invalid)?;
        if !looks_like_key(secret) {
            return Err(invalid());
        }
        let key = store
            .key_by_digest(&key_digest(secret))
            .await?
            .ok_or_else(invalid)?;
        if key.revoked_at.is_some() {
            return Err(HubError::Unauthorized("the API key was revoked".into()));
        }
        if let Some(expires) = &key.expires_at {
            let expired = expires
                .parse::<Timestamp>()
                .map(|at| at <= Timestamp::now())
                // An unreadable expiry fails closed.
                .unwrap_or(true);
            if expired {
                return Err(HubError::Unauthorized("the API key has expired".into()));
            }
        }
        let roles =
            RoleSet::from_names(key.roles.iter().map(String::as_str)).map_err(|_| invalid())?;
        let own = Caller::with(key.client.clone(), roles, Principal::Key(key.id.clone()));
        self.act_as(own, claimed)
    }

    /// `caller`, acting as `claimed` if it names a client: allowed for an admin, else
    /// `Forbidden` with a `security_event`.
    pub fn act_as(&self, caller: Caller, claimed: Option<&str>) -> Result<Caller, HubError> {
        match claimed {
            None => Ok(caller),
            Some(client) if client == caller.client() => Ok(caller),
            Some(client) if Access::Administer.allowed(caller.roles()) => Ok(Caller::with(
                client,
                caller.roles().clone(),
                caller.principal().clone(),
            )),
            Some(_) => {
                security_event(
                    &caller,
                    "client_mismatch",
                    "X-Client-ID names another client than the credential's",
                );
                Err(HubError::Forbidden(
                    "this credential acts as its own client; X-Client-ID names another".into(),
                ))
            }
        }
    }

    /// Creates a key (admins only). The secret is returned once and stored nowhere.
    pub async fn create_key(
        &self,
        caller: &(impl AsCaller + ?Sized),
        request: CreateKey,
    ) -> Result<(KeyRecord, KeySecret), HubError> {
        let caller = self.require(caller, Access::Administer, "creating a key")?;
        let store = self.key_store()?;
        // A caller who is only claimed holds the setup token or makes nothing; the
        // token is taken while the key is made, so a second caller with it finds none.
        let bootstrap = match caller.principal() {
            Principal::Claimed => {
                Some(self.take_setup_token(&caller, request.setup_token.as_ref())?)
            }
            _ => None,
        };
        let made = self.make_key(&caller, store, request).await;
        match made {
            Ok(made) => {
                self.discard_setup_token(bootstrap);
                Ok(made)
            }
            Err(e) => {
                if let Some(bootstrap) = bootstrap {
                    self.restore_setup_token(bootstrap);
                }
                Err(e)
            }
        }
    }

    /// Checks a key's request and stores it, for [`Identity::create_key`].
    async fn make_key(
        &self,
        caller: &Caller,
        store: &Arc<dyn KeyStore>,
        request: CreateKey,
    ) -> Result<(KeyRecord, KeySecret), HubError> {
        check_client_id(&request.client).map_err(HubError::InvalidArgument)?;
        if request.roles.is_empty() {
            return Err(HubError::InvalidArgument(
                "a key needs at least one role (admin, operator, approver, viewer)".into(),
            ));
        }
        let roles = RoleSet::from_names(request.roles.iter().map(String::as_str))
            .map_err(HubError::InvalidArgument)?;
        if !agentplane_core::AccessRole::ALL
            .iter()
            .any(|r| roles.has(*r))
        {
            return Err(HubError::InvalidArgument(
                "a key needs one of the roles admin, operator, approver or viewer; other \
                 names (`security`) only add to them"
                    .into(),
            ));
        }
        if let Some(text) = &request.description
            && text.chars().count() > MAX_KEY_DESCRIPTION_CHARS
        {
            return Err(HubError::InvalidArgument(format!(
                "a key description is at most {MAX_KEY_DESCRIPTION_CHARS} characters"
            )));
        }
        let expires_at = match request.expires_in_secs {
            None => None,
            Some(secs) => {
                if secs == 0 || secs > agentplane_core::identity::MAX_KEY_LIFETIME_SECS {
                    return Err(HubError::InvalidArgument(
                        "a key lifetime is between 1 second and 3660 days".into(),
                    ));
                }
                let span = jiff_seconds(secs)?;
                Some(
                    Timestamp::now()
                        .checked_add(span)
                        .map_err(|e| HubError::InvalidArgument(format!("key lifetime: {e}")))?
                        .strftime("%Y-%m-%dT%H:%M:%S%.3fZ")
                        .to_string(),
                )
            }
        };
        let secret = KeySecret::generate().map_err(HubError::InvalidArgument)?;
        let record = store
            .create_key(NewKey {
                id: KeyId::new(),
                digest: secret.digest(),
                client: request.client,
                roles: roles.names(),
                description: request.description,
                expires_at,
                created_by: caller.client().to_owned(),
            })
            .await?;
        self.credentials.keys_seen.store(true, Ordering::Relaxed);
        tracing::info!(key = %record.id, client = %record.client, roles = ?record.roles, "API key created");
        Ok((record, secret))
    }

    /// Every key, without secrets (admins only).
    pub async fn list_keys(
        &self,
        caller: &(impl AsCaller + ?Sized),
    ) -> Result<Vec<KeyRecord>, HubError> {
        self.require(caller, Access::Administer, "listing keys")?;
        Ok(self.key_store()?.list_keys().await?)
    }

    /// Revokes a key at once, for every replica (admins only).
    pub async fn revoke_key(
        &self,
        caller: &(impl AsCaller + ?Sized),
        id: &KeyId,
    ) -> Result<KeyRecord, HubError> {
        self.require(caller, Access::Administer, "revoking a key")?;
        let record = self.key_store()?.revoke_key(id).await?;
        tracing::info!(key = %record.id, "API key revoked");
        Ok(record)
    }

    fn key_store(&self) -> Result<&Arc<dyn KeyStore>, HubError> {
        self.credentials
            .keys
            .as_ref()
            .ok_or_else(|| HubError::InvalidArgument("this server keeps no API keys".into()))
    }
}

fn jiff_seconds(secs: u64) -> Result<agentplane_core::policy::SignedDuration, HubError> {
    let secs = i64::try_from(secs)
        .map_err(|_| HubError::InvalidArgument("the key lifetime is too long".into()))?;
    Ok(agentplane_core::policy::SignedDuration::from_secs(secs))
}
