//! Who a caller is allowed to be: access roles, and API key secrets (ADR 0030).
//!
//! A key's secret is `ap_` followed by 64 hex digits: 256 bits from the operating
//! system's generator. Only its SHA-256 digest is ever stored or compared; with that
//! much entropy a plain digest cannot be reversed or guessed, so no password-grade
//! (slow, salted) hash is needed, and every replica can find a key by its digest with
//! one indexed lookup. Nothing here prints a secret: [`KeySecret`]'s `Debug` hides it.

use std::collections::BTreeSet;
use std::fmt;

use sha2::{Digest, Sha256};

/// The prefix every key secret starts with, so a leaked one is recognisable.
pub const KEY_PREFIX: &str = "ap_";
/// Random bytes in a secret (256 bits).
const SECRET_BYTES: usize = 32;

/// What a caller may do, beside which client it is. Enforced by the hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AccessRole {
    /// Keys, policies, agent versions; may act as any client.
    Admin,
    /// Threads, turns, executions, cancels: its own client's.
    Operator,
    /// Sees and decides the approvals addressed to it (by client or by role).
    Approver,
    /// Reads its own client's history, costs and metrics.
    Viewer,
}

impl AccessRole {
    /// Every role, in the order of the documentation's table.
    pub const ALL: [AccessRole; 4] = [Self::Admin, Self::Operator, Self::Approver, Self::Viewer];

    /// The role's name, as in `--role` and `roles` claims.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::Operator => "operator",
            Self::Approver => "approver",
            Self::Viewer => "viewer",
        }
    }

    /// Parses a role name; the error names the valid ones.
    pub fn parse(name: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|r| r.as_str() == name)
            .ok_or_else(|| {
                format!("unknown role {name:?}: use admin, operator, approver or viewer")
            })
    }
}

impl fmt::Display for AccessRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of roles; also any other role names an identity carries (an OIDC token's
/// `roles` claim may name `security`), which policies can address as `role:NAME`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoleSet {
    roles: BTreeSet<AccessRole>,
    /// Role names that are not access roles, kept for `approvers: [role:NAME]`.
    others: BTreeSet<String>,
}

impl RoleSet {
    /// Every access role: the in-process caller, the single `--auth-token`, and any
    /// caller of a server with no keys configured.
    pub fn all() -> Self {
        Self {
            roles: AccessRole::ALL.into_iter().collect(),
            others: BTreeSet::new(),
        }
    }

    /// The roles named in `names`: access roles are recognised, other names are kept
    /// as plain role names. Names must be 1 to 64 characters of `[A-Za-z0-9._-]`.
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        let mut set = Self::default();
        for name in names {
            if name.is_empty()
                || name.len() > 64
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
            {
                return Err(format!(
                    "role names are 1 to 64 letters, digits, `.`, `_` or `-`: {name:?}"
                ));
            }
            match AccessRole::parse(name) {
                Ok(role) => {
                    set.roles.insert(role);
                }
                Err(_) => {
                    set.others.insert(name.to_owned());
                }
            }
        }
        Ok(set)
    }

    /// Whether the set holds `role`.
    pub fn has(&self, role: AccessRole) -> bool {
        self.roles.contains(&role)
    }

    /// Whether the set holds a role of this name (an access role or another one).
    pub fn has_named(&self, name: &str) -> bool {
        AccessRole::parse(name).map_or_else(|_| self.others.contains(name), |r| self.has(r))
    }

    /// Every name in the set, access roles first.
    pub fn names(&self) -> Vec<String> {
        self.roles
            .iter()
            .map(|r| r.as_str().to_owned())
            .chain(self.others.iter().cloned())
            .collect()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.roles.is_empty() && self.others.is_empty()
    }
}

/// Checks a client id: 1 to 128 characters of `[A-Za-z0-9._:@-]` (the `X-Client-ID`
/// rule).
pub fn check_client_id(raw: &str) -> Result<(), String> {
    if raw.is_empty() || raw.len() > 128 {
        return Err("a client id is 1 to 128 characters long".to_owned());
    }
    if !raw
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '@' | '-'))
    {
        return Err(
            "a client id may use only letters, digits and `.`, `_`, `:`, `@`, `-`".to_owned(),
        );
    }
    Ok(())
}

/// Longest key lifetime `--expires` accepts: ten years.
pub const MAX_KEY_LIFETIME_SECS: u64 = 10 * 366 * 24 * 3600;

/// Parses a key lifetime: a whole number and a unit, `s`, `m`, `h` or `d` (`90d`,
/// `12h`), from one second to ten years.
pub fn parse_lifetime(text: &str) -> Result<u64, String> {
    let bad = || format!("a lifetime is a number and s, m, h or d (like 90d), not {text:?}");
    let text = text.trim();
    // The unit is the last character, whatever its width (`90ï` is refused, not split
    // inside a character).
    let (split, _) = text.char_indices().last().ok_or_else(bad)?;
    let (number, unit) = text.split_at(split);
    let unit_secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    let number: u64 = number.parse().map_err(|_| bad())?;
    let secs = number.checked_mul(unit_secs).ok_or_else(bad)?;
    if secs == 0 || secs > MAX_KEY_LIFETIME_SECS {
        return Err(format!(
            "a key lifetime is between 1s and 3660d, not {text:?}"
        ));
    }
    Ok(secs)
}

/// A freshly generated key secret. Shown once to whoever created it; never stored.
pub struct KeySecret(String);

impl KeySecret {
    /// A new secret: `ap_` and 64 hex digits of the OS's randomness. `Err` only if the
    /// operating system has no random source.
    pub fn generate() -> Result<Self, String> {
        let mut bytes = [0u8; SECRET_BYTES];
        getrandom::fill(&mut bytes).map_err(|e| format!("no randomness for a key: {e}"))?;
        Ok(Self(format!("{KEY_PREFIX}{}", hex(&bytes))))
    }

    /// The secret itself, to show once.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The digest stored in its place.
    pub fn digest(&self) -> String {
        key_digest(&self.0)
    }
}

impl fmt::Debug for KeySecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeySecret(<redacted>)")
    }
}

/// The prefix of a setup token, told apart from a key (`ap_`) at a glance.
pub const SETUP_TOKEN_PREFIX: &str = "apsetup_";

/// The HTTP header a setup token travels in (`POST /v1/keys`).
pub const SETUP_TOKEN_HEADER: &str = "x-setup-token";

/// The one-time setup token of a server without keys or token (docs/identity.md):
/// whoever can read the 0600 file `serve` writes it to may create the first key over
/// HTTP, and nobody else on the strength of being on loopback. The same type holds a
/// generated token and one a caller presents; its `Debug` never shows either.
#[derive(Clone)]
pub struct SetupToken(String);

impl SetupToken {
    /// A new token: [`SETUP_TOKEN_PREFIX`] and 64 hex digits of the OS's randomness.
    /// `Err` only if the operating system has no random source.
    pub fn generate() -> Result<Self, String> {
        let mut bytes = [0u8; SECRET_BYTES];
        getrandom::fill(&mut bytes).map_err(|e| format!("no randomness for a token: {e}"))?;
        Ok(Self(format!("{SETUP_TOKEN_PREFIX}{}", hex(&bytes))))
    }

    /// A token as a caller presented it, unchecked: any text, hostile included.
    pub fn presented(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// The token itself, to write to its file or send.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `other` is this token. Both are hashed and the digests compared without
    /// early exit, so the time taken says nothing about where they differ, nor (the
    /// digests having one length) about how long the presented one is.
    pub fn matches(&self, other: &SetupToken) -> bool {
        let (a, b) = (
            Sha256::digest(self.0.as_bytes()),
            Sha256::digest(other.0.as_bytes()),
        );
        let difference = a
            .iter()
            .zip(b.iter())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y));
        std::hint::black_box(difference) == 0
    }
}

impl fmt::Debug for SetupToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SetupToken(<redacted>)")
    }
}

/// Whether `text` has the shape of a key secret (the prefix, then 64 hex digits).
pub fn looks_like_key(text: &str) -> bool {
    text.strip_prefix(KEY_PREFIX).is_some_and(|rest| {
        rest.len() == 2 * SECRET_BYTES && rest.bytes().all(|b| b.is_ascii_hexdigit())
    })
}

/// The stored form of a presented secret: SHA-256, as lowercase hex.
pub fn key_digest(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    use fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_tokens_match_only_themselves_and_stay_hidden() {
        let token = SetupToken::generate().expect("random");
        assert!(token.expose().starts_with(SETUP_TOKEN_PREFIX));
        assert_eq!(token.expose().len(), SETUP_TOKEN_PREFIX.len() + 64);
        assert!(!looks_like_key(token.expose()));
        assert!(token.matches(&SetupToken::presented(token.expose())));
        let mut one_off = token.expose().to_owned();
        one_off.pop();
        for wrong in [
            String::new(),
            one_off.clone(),
            format!("{one_off}0{}", "0".repeat(10_000)),
            "é".repeat(40),
            SetupToken::generate().expect("random").expose().to_owned(),
        ] {
            assert!(!token.matches(&SetupToken::presented(wrong)));
        }
        assert_eq!(format!("{token:?}"), "SetupToken(<redacted>)");
    }

    #[test]
    fn secrets_are_prefixed_random_and_hidden() {
        let a = KeySecret::generate().expect("random");
        let b = KeySecret::generate().expect("random");
        assert!(looks_like_key(a.expose()), "{}", a.expose());
        assert_ne!(a.expose(), b.expose());
        assert_eq!(a.digest(), key_digest(a.expose()));
        assert_eq!(a.digest().len(), 64);
        assert!(!a.digest().contains(&a.expose()[3..]));
        assert!(!format!("{a:?}").contains(&a.expose()[3..]));
        assert!(!looks_like_key("ap_xyz"));
        assert!(!looks_like_key(&format!("sk_{}", &a.expose()[3..])));
    }

    #[test]
    fn lifetimes_parse_strictly() {
        assert_eq!(parse_lifetime("90d"), Ok(90 * 86_400));
        assert_eq!(parse_lifetime("2s"), Ok(2));
        assert_eq!(parse_lifetime("12h"), Ok(12 * 3600));
        for bad in [
            "",
            "d",
            "0s",
            "-1d",
            "1w",
            "1.5h",
            "99999999999999999999d",
            "4000d",
            // Wide last characters (schemathesis found a panic here).
            "\u{18}¥U\u{16260}\u{ad}%¥ï",
            "9ï",
            "ï",
            "1𝐝",
        ] {
            assert!(parse_lifetime(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn role_sets_keep_access_roles_and_other_names() {
        let set = RoleSet::from_names(["operator", "security"]).expect("valid");
        assert!(set.has(AccessRole::Operator));
        assert!(!set.has(AccessRole::Admin));
        assert!(set.has_named("security") && set.has_named("operator"));
        assert!(!set.has_named("approver"));
        assert_eq!(set.names(), ["operator", "security"]);
        assert!(RoleSet::from_names(["a b"]).is_err());
        assert!(RoleSet::from_names([""]).is_err());
        assert!(RoleSet::all().has(AccessRole::Viewer));
        assert_eq!(AccessRole::parse("admin"), Ok(AccessRole::Admin));
        assert!(
            AccessRole::parse("root")
                .unwrap_err()
                .contains("admin, operator")
        );
    }
}
