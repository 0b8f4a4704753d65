//! OIDC bearer tokens (`[auth.oidc]`, ADR 0030): the engine's `TokenVerifier` on the
//! `jsonwebtoken` crate, with the provider's keys fetched from its JWKS URL.
//!
//! Only RS256 and ES256 are accepted, each only with a key of its own family from the
//! JWKS: `alg: none`, HMAC (a public key used as a shared secret) and any other
//! algorithm are refused before a key is looked at. `iss`, `aud`, `exp` and `nbf` are
//! required and checked with the configured leeway. Keys are cached; a token naming an
//! unknown `kid` refetches the set (key rotation), at most once per [`MIN_REFETCH`], so
//! a flood of made-up `kid`s costs the provider one request a second. Nothing here
//! logs or returns a token.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use agentplane_engine::ports::{TokenVerifier, VerifiedToken};
use async_trait::async_trait;
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use serde_json::Value;

use crate::OidcConfig;

/// The shortest time between two fetches of the key set.
pub const MIN_REFETCH: Duration = Duration::from_secs(1);
/// How long a fetch of the key set may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest key set read, in bytes.
const MAX_JWKS_BYTES: usize = 256 * 1024;
/// Longest subject or client accepted, in characters.
const MAX_SUBJECT_CHARS: usize = 256;

/// Verifies tokens of one provider.
pub struct OidcVerifier {
    config: OidcConfig,
    http: reqwest::Client,
    keys: tokio::sync::Mutex<Keys>,
    /// How many times the key set was fetched (for the tests' figures).
    fetches: Mutex<u64>,
}

#[derive(Default)]
struct Keys {
    by_kid: HashMap<String, (Algorithm, DecodingKey)>,
    fetched: Option<Instant>,
}

impl OidcVerifier {
    /// A verifier for `config`; the key set is fetched on first use.
    pub fn new(config: OidcConfig) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot build the JWKS client: {e}"))?;
        Ok(Self {
            config,
            http,
            keys: tokio::sync::Mutex::new(Keys::default()),
            fetches: Mutex::new(0),
        })
    }

    /// Fetches the key set, keeping RS256 and ES256 keys that have a `kid`.
    async fn fetch(&self) -> Result<HashMap<String, (Algorithm, DecodingKey)>, String> {
        if let Ok(mut n) = self.fetches.lock() {
            *n += 1;
        }
        let response = self
            .http
            .get(&self.config.jwks_url)
            .send()
            .await
            .map_err(|e| format!("the provider's keys could not be fetched: {e}"))?;
        if !response.status().is_success() {
            return Err(format!(
                "the provider's keys answered {}",
                response.status()
            ));
        }
        let body = response
            .bytes()
            .await
            .map_err(|e| format!("the provider's keys could not be read: {e}"))?;
        if body.len() > MAX_JWKS_BYTES {
            return Err("the provider's key set is too large".into());
        }
        let set: JwkSet = serde_json::from_slice(&body)
            .map_err(|e| format!("the provider's key set is not a JWKS: {e}"))?;
        let mut keys = HashMap::new();
        for jwk in &set.keys {
            let Some(kid) = &jwk.common.key_id else {
                continue;
            };
            let alg = match &jwk.algorithm {
                AlgorithmParameters::RSA(_) => Algorithm::RS256,
                AlgorithmParameters::EllipticCurve(_) => Algorithm::ES256,
                // Shared secrets and other key types are never accepted.
                _ => continue,
            };
            if let Ok(key) = DecodingKey::from_jwk(jwk) {
                keys.insert(kid.clone(), (alg, key));
            }
        }
        Ok(keys)
    }

    /// The key named `kid`, refetching the set once if it is unknown and the last
    /// fetch is old enough.
    async fn key(&self, kid: &str) -> Result<(Algorithm, DecodingKey), String> {
        let mut keys = self.keys.lock().await;
        if let Some(found) = keys.by_kid.get(kid) {
            return Ok(found.clone());
        }
        let due = keys.fetched.is_none_or(|at| at.elapsed() >= MIN_REFETCH);
        if !due {
            return Err("the token's signing key is unknown".into());
        }
        keys.fetched = Some(Instant::now());
        keys.by_kid = self.fetch().await?;
        keys.by_kid
            .get(kid)
            .cloned()
            .ok_or_else(|| "the token's signing key is unknown".into())
    }

    /// How many times the key set was fetched.
    pub fn fetches(&self) -> u64 {
        self.fetches.lock().map(|n| *n).unwrap_or(0)
    }
}

#[async_trait]
impl TokenVerifier for OidcVerifier {
    async fn verify(&self, token: &str) -> Result<VerifiedToken, String> {
        let header = decode_header(token).map_err(|_| "the token is malformed".to_owned())?;
        if !matches!(header.alg, Algorithm::RS256 | Algorithm::ES256) {
            return Err(format!("algorithm {:?} is not accepted", header.alg));
        }
        let kid = header.kid.ok_or("the token names no signing key (kid)")?;
        let (alg, key) = self.key(&kid).await?;
        if alg != header.alg {
            return Err("the token's algorithm does not match its key".into());
        }
        let mut validation = Validation::new(alg);
        validation.leeway = self.config.leeway.as_secs();
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let claims = decode::<Value>(token, &key, &validation)
            .map_err(|e| reason(&e).to_owned())?
            .claims;
        let text = |name: &str| {
            claims
                .get(name)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty() && s.chars().count() <= MAX_SUBJECT_CHARS)
                .map(str::to_owned)
        };
        let subject = text("sub").ok_or("the token's subject is missing or too long")?;
        let client = text(&self.config.client_claim)
            .ok_or_else(|| format!("the token has no `{}` claim", self.config.client_claim))?;
        let roles = match claims.get(&self.config.roles_claim) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|r| r.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or("the token's roles are not all strings")?,
            Some(Value::String(list)) => list.split_whitespace().map(str::to_owned).collect(),
            Some(_) => return Err("the token's roles are not a list".into()),
        };
        Ok(VerifiedToken {
            subject,
            client,
            roles,
        })
    }
}

/// A short reason for a rejected token, without its content.
fn reason(e: &jsonwebtoken::errors::Error) -> &'static str {
    use jsonwebtoken::errors::ErrorKind;
    match e.kind() {
        ErrorKind::InvalidSignature => "the signature does not verify",
        ErrorKind::ExpiredSignature => "the token has expired",
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)",
        ErrorKind::InvalidIssuer => "the issuer is not the configured one",
        ErrorKind::InvalidAudience => "the audience is not the configured one",
        ErrorKind::MissingRequiredClaim(_) => "a required claim is missing",
        ErrorKind::InvalidAlgorithm => "the algorithm does not match the key",
        _ => "the token is malformed",
    }
}
