//! Who is calling the hub, proven: the [`Caller`] every hub method takes, and what
//! each access role allows (ADR 0030, 0031).
//!
//! The interfaces (HTTP, `/mcp`, the gateway) build a `Caller` from what they
//! verified — a key, a token, or, on a server with no keys, the claimed client id —
//! and the hub decides with [`Access::allowed`]. A plain `&str` is an in-process
//! caller (the CLI's `run`, tests): it holds every role, because whoever runs the
//! process already holds its database. Nothing outside the process can become one.

use std::borrow::Cow;
use std::fmt;

use agentplane_core::{AccessRole, KeyId, RoleSet};

/// How a caller proved who it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// Code in this process (the CLI, tests).
    Local,
    /// A server with no keys: the client is whoever `X-Client-ID` claims.
    Claimed,
    /// The single `--auth-token`: an admin that may name any client.
    Token,
    /// An API key.
    Key(KeyId),
    /// An OIDC token's subject.
    Oidc { subject: String },
}

impl fmt::Display for Principal {
    /// How a decision records its decider: `key:key_…`, `oidc:SUBJECT`, `token`…
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Local => f.write_str("local"),
            Self::Claimed => f.write_str("claimed"),
            Self::Token => f.write_str("token"),
            Self::Key(id) => write!(f, "key:{id}"),
            Self::Oidc { subject } => write!(f, "oidc:{subject}"),
        }
    }
}

/// A caller of the hub: the client it acts as, its roles, and its proof.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    client: String,
    roles: RoleSet,
    principal: Principal,
}

impl Caller {
    /// An in-process caller with every role.
    pub fn local(client: impl Into<String>) -> Self {
        Self::with(client, RoleSet::all(), Principal::Local)
    }

    /// A caller whose client id is only claimed (a server with no keys): every role,
    /// as before keys existed.
    pub fn claimed(client: impl Into<String>) -> Self {
        Self::with(client, RoleSet::all(), Principal::Claimed)
    }

    /// The holder of the single `--auth-token`: an admin acting as `client`.
    pub fn token(client: impl Into<String>) -> Self {
        Self::with(client, RoleSet::all(), Principal::Token)
    }

    /// A caller proven by `principal`, with exactly `roles`.
    pub fn with(client: impl Into<String>, roles: RoleSet, principal: Principal) -> Self {
        Self {
            client: client.into(),
            roles,
            principal,
        }
    }

    /// The client it acts as: the tenancy key.
    pub fn client(&self) -> &str {
        &self.client
    }

    /// Its roles.
    pub fn roles(&self) -> &RoleSet {
        &self.roles
    }

    /// How it proved who it is.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// Whether its identity was proven (a key, a token, OIDC), not just claimed.
    pub fn proven(&self) -> bool {
        !matches!(self.principal, Principal::Claimed)
    }
}

/// Anything a hub method accepts as its caller: a [`Caller`], or a `&str` naming an
/// in-process client.
pub trait AsCaller: Send + Sync {
    /// The caller.
    fn as_caller(&self) -> Cow<'_, Caller>;
}

impl AsCaller for Caller {
    fn as_caller(&self) -> Cow<'_, Caller> {
        Cow::Borrowed(self)
    }
}

impl AsCaller for str {
    fn as_caller(&self) -> Cow<'_, Caller> {
        Cow::Owned(Caller::local(self))
    }
}

impl AsCaller for String {
    fn as_caller(&self) -> Cow<'_, Caller> {
        Cow::Owned(Caller::local(self.as_str()))
    }
}

/// What a hub call needs; each maps to the roles that grant it (the table in
/// `docs/identity.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// List what is configured for everyone: agents, their versions, policies. Every
    /// proven caller may, whatever its roles (an OIDC token whose roles are all beyond
    /// the four access roles included).
    List,
    /// Read the caller's own threads, history, costs, executions, agents, policies.
    Read,
    /// Create and delete threads, start and cancel turns, answer permissions, submit
    /// and cancel executions, call the gateway.
    Operate,
    /// See and decide approvals addressed to the caller.
    Approve,
    /// Keys, agent versions, policies reload.
    Administer,
}

impl Access {
    /// The roles that grant it, the first being the one a refusal names.
    pub fn granted_by(self) -> &'static [AccessRole] {
        match self {
            Self::List => &[
                AccessRole::Viewer,
                AccessRole::Approver,
                AccessRole::Operator,
                AccessRole::Admin,
            ],
            Self::Read => &[AccessRole::Viewer, AccessRole::Operator, AccessRole::Admin],
            Self::Operate => &[AccessRole::Operator, AccessRole::Admin],
            Self::Approve => &[
                AccessRole::Approver,
                AccessRole::Operator,
                AccessRole::Admin,
            ],
            Self::Administer => &[AccessRole::Admin],
        }
    }

    /// Whether `roles` grant it.
    pub fn allowed(self, roles: &RoleSet) -> bool {
        self == Self::List || self.granted_by().iter().any(|r| roles.has(*r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roles(names: &[&str]) -> RoleSet {
        RoleSet::from_names(names.iter().copied()).expect("roles")
    }

    #[test]
    fn the_role_table_holds() {
        let viewer = roles(&["viewer"]);
        let operator = roles(&["operator"]);
        let approver = roles(&["approver"]);
        let admin = roles(&["admin"]);
        assert!(Access::Read.allowed(&viewer) && !Access::Operate.allowed(&viewer));
        assert!(!Access::Approve.allowed(&viewer) && !Access::Administer.allowed(&viewer));
        assert!(Access::Operate.allowed(&operator) && !Access::Administer.allowed(&operator));
        assert!(Access::Approve.allowed(&approver) && !Access::Read.allowed(&approver));
        assert!(!Access::Operate.allowed(&approver));
        assert!(Access::List.allowed(&approver) && Access::List.allowed(&viewer));
        // Listing needs no access role at all (an OIDC token with only `security`).
        assert!(Access::List.allowed(&roles(&["security"])));
        assert!(Access::List.allowed(&RoleSet::default()));
        for access in [
            Access::Read,
            Access::Operate,
            Access::Approve,
            Access::Administer,
        ] {
            assert!(access.allowed(&admin));
            assert!(!access.allowed(&RoleSet::default()));
        }
    }

    #[test]
    fn principals_name_the_decider() {
        let id = KeyId::new();
        assert_eq!(Principal::Key(id.clone()).to_string(), format!("key:{id}"));
        assert_eq!(
            Principal::Oidc {
                subject: "u1".into()
            }
            .to_string(),
            "oidc:u1"
        );
        assert_eq!("alice".as_caller().client(), "alice");
        assert!("alice".as_caller().roles().has(AccessRole::Admin));
        assert!(!Caller::claimed("a").proven() && Caller::token("a").proven());
    }
}
