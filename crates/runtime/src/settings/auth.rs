//! `[auth.oidc]`: sign-in with bearer tokens from an OpenID Connect provider (ADR 0030).
//!
//! ```toml
//! [auth.oidc]
//! issuer = "https://id.example.com"                  # the `iss` tokens must carry
//! audience = "agentplane"                            # an `aud` they must name
//! jwks_url = "https://id.example.com/.well-known/jwks.json"
//! client_claim = "sub"                               # which claim is the client id
//! roles_claim = "roles"                              # which claim lists the roles
//! leeway_secs = 30                                   # clock skew allowed on exp/nbf
//! ```

use std::time::Duration;

use serde::Deserialize;

use super::SettingError;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileAuth {
    #[serde(default)]
    oidc: Option<FileOidc>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileOidc {
    issuer: String,
    audience: String,
    jwks_url: String,
    client_claim: Option<String>,
    roles_claim: Option<String>,
    leeway_secs: Option<u64>,
}

pub use agentplane_oidc::OidcConfig;

/// The `[auth.oidc]` section, checked; `None` when absent.
pub fn resolve(file: FileAuth) -> Result<Option<OidcConfig>, SettingError> {
    let Some(oidc) = file.oidc else {
        return Ok(None);
    };
    for (key, value) in [
        ("oidc.issuer", &oidc.issuer),
        ("oidc.audience", &oidc.audience),
    ] {
        if value.trim().is_empty() {
            return Err((key.into(), "must not be empty".into()));
        }
    }
    let url = oidc.jwks_url.trim();
    let loopback = ["http://127.0.0.1", "http://[::1]", "http://localhost"]
        .iter()
        .any(|p| url.starts_with(p));
    if !url.starts_with("https://") && !loopback {
        return Err((
            "oidc.jwks_url".into(),
            format!("must be an https:// URL (http:// only on loopback), got {url:?}"),
        ));
    }
    let leeway = oidc.leeway_secs.unwrap_or(30);
    if leeway > 300 {
        return Err((
            "oidc.leeway_secs".into(),
            format!("must be at most 300, got {leeway}"),
        ));
    }
    Ok(Some(OidcConfig {
        issuer: oidc.issuer,
        audience: oidc.audience,
        jwks_url: url.to_owned(),
        client_claim: oidc.client_claim.unwrap_or_else(|| "sub".into()),
        roles_claim: oidc.roles_claim.unwrap_or_else(|| "roles".into()),
        leeway: Duration::from_secs(leeway),
    }))
}
