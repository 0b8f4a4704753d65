//! The attack suite (docs/reliability.md, "Attack suite"): hostile input against the
//! real binary, each case checking that it is refused, recorded as a `security_event`
//! where a confinement was breached, and that nothing leaked.
//!
//! Tools are driven by the scripted model's tool calls; HTTP attacks go straight at
//! the server. Every group prints `attack-figures GROUP: N cases, M refused`
//! (`cargo nextest run -p agentplane-suites --test attacks --no-capture`).

mod auth;
mod egress;
mod escapes;
mod fs;
mod gaps;
mod identity;
mod kernel;
mod limits;
mod masks;
mod moved;
mod oidc;
mod race;
mod restart;
mod roots;
mod secrets;
mod shell;
mod ssrf;
mod tenancy;
