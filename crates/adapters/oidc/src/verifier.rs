//! OIDC bearer tokens (`[auth.oidc]`, ADR 0030): the engine's `TokenVerifier` on the
//! `jsonwebtoken` crate, with the provider's keys fetched from its JWKS URL.
//!
//! Only RS256 and ES256 are accepted, each only with a key of its own family from the
//! JWKS: `alg: none`, HMAC (a public key used as a shared secret) and any other
//! algorithm are refused before a key is looked at. `iss`, `aud`, `exp` and `nbf` are
//! required and checked with the configured leeway. Keys are cached; a token naming an
//! unknown `kid` refetches the set (key rotation), at most once per [`MIN_REFETCH`], so
//! a flood of made-up `kid`s costs the provider one request a second. A token without
//! a `kid` is checked against the provider's only key when it publishes exactly one
//! (providers with a single key often name none); with several it is refused, since
//! trying each would let the token pick. Nothing here logs or returns a token.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use agentplane_engine::ports::{TokenVerifier, VerifiedToken};
use async_trait::async_trait;
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use serde_json::Value;

use crate::config::OidcConfig;

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
    set: Vec<SigningKey>,
    fetched: Option<Instant>,
}

/// One usable key of the provider's set.
#[derive(Clone)]
struct SigningKey {
    kid: Option<String>,
    alg: Algorithm,
    key: DecodingKey,
}

/// Which key of `set` a token's `kid` (or its absence) names.
fn select(set: &[SigningKey], kid: Option<&str>) -> Result<(Algorithm, DecodingKey), String> {
    let found = match kid {
        Some(kid) => set.iter().find(|k| k.kid.as_deref() == Some(kid)),
        None => match set {
            [only] => Some(only),
            [] => None,
            several => {
                return Err(format!(
                    "the token names no signing key (kid) and the provider publishes {}",
                    several.len()
                ));
            }
        },
    };
    found
        .map(|k| (k.alg, k.key.clone()))
        .ok_or_else(|| "the token's signing key is unknown".into())
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

    /// Fetches the key set, keeping its RS256 and ES256 keys.
    async fn fetch(&self) -> Result<Vec<SigningKey>, String> {
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
        let mut keys = Vec::new();
        for jwk in &set.keys {
            let alg = match &jwk.algorithm {
                AlgorithmParameters::RSA(_) => Algorithm::RS256,
                AlgorithmParameters::EllipticCurve(_) => Algorithm::ES256,
                // Shared secrets and other key types are never accepted.
                _ => continue,
            };
            if let Ok(key) = DecodingKey::from_jwk(jwk) {
                keys.push(SigningKey {
                    kid: jwk.common.key_id.clone(),
                    alg,
                    key,
                });
            }
        }
        Ok(keys)
    }

    /// The key a token's `kid` names ([`select`]), refetching the set once if it has
    /// none such and the last fetch is old enough.
    async fn key(&self, kid: Option<&str>) -> Result<(Algorithm, DecodingKey), String> {
        let mut keys = self.keys.lock().await;
        let cached = select(&keys.set, kid);
        if cached.is_ok() {
            return cached;
        }
        let due = keys.fetched.is_none_or(|at| at.elapsed() >= MIN_REFETCH);
        if !due {
            return cached;
        }
        keys.fetched = Some(Instant::now());
        keys.set = self.fetch().await?;
        select(&keys.set, kid)
    }

    /// How many times the key set was fetched.
    pub fn fetches(&self) -> u64 {
        self.fetches.lock().map(|n| *n).unwrap_or(0)
    }
}

#[async_trait]
impl TokenVerifier for OidcVerifier {
    fn issuer(&self) -> Option<&str> {
        Some(&self.config.issuer)
    }

    async fn verify(&self, token: &str) -> Result<VerifiedToken, String> {
        let header = decode_header(token).map_err(|_| "the token is malformed".to_owned())?;
        if !matches!(header.alg, Algorithm::RS256 | Algorithm::ES256) {
            return Err(format!("algorithm {:?} is not accepted", header.alg));
        }
        let (alg, key) = self.key(header.kid.as_deref()).await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn key(kid: Option<&str>, alg: Algorithm) -> SigningKey {
        SigningKey {
            kid: kid.map(str::to_owned),
            alg,
            key: DecodingKey::from_secret(b"only the selection is tested"),
        }
    }

    #[test]
    fn a_token_without_kid_uses_the_only_key_and_no_other() {
        let only = [key(None, Algorithm::RS256)];
        assert_eq!(select(&only, None).map(|(a, _)| a), Ok(Algorithm::RS256));
        let named = [key(Some("k1"), Algorithm::ES256)];
        assert_eq!(select(&named, None).map(|(a, _)| a), Ok(Algorithm::ES256));
        let several = [
            key(Some("k1"), Algorithm::RS256),
            key(None, Algorithm::ES256),
        ];
        let refused = select(&several, None).err().expect("ambiguous");
        assert!(refused.contains("publishes 2"), "{refused}");
        assert!(select(&[], None).is_err());
    }

    #[test]
    fn a_kid_names_exactly_its_key() {
        let set = [
            key(Some("k1"), Algorithm::RS256),
            key(Some("e1"), Algorithm::ES256),
        ];
        assert_eq!(
            select(&set, Some("e1")).map(|(a, _)| a),
            Ok(Algorithm::ES256)
        );
        assert!(select(&set, Some("k2")).is_err());
        // A key without a kid is never what a kid names.
        let unnamed = [key(None, Algorithm::RS256)];
        assert!(select(&unnamed, Some("k1")).is_err());
    }
}
