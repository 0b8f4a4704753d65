//! Protocol 0.3, as `a2a-sdk` 0.3 writes it, and conversions to and from 1.0. What the
//! generations name differently: methods (`message/send`, `message/stream`,
//! `tasks/get`, `tasks/cancel`, `tasks/resubscribe`, `tasks/pushNotificationConfig/*`),
//! a `kind` on every object (`message`, `task`, `status-update`, `artifact-update`;
//! parts `text`, `data`, `file`), lowercase states (`input-required`) and roles, a
//! `final` flag on status updates, `blocking` instead of `returnImmediately`, and the
//! card's single `url` + `preferredTransport` + `protocolVersion` (+
//! `additionalInterfaces`) and `type`-tagged security schemes. A 0.3 client sends no
//! `A2A-Version` header; its method names tell its generation.

//!
//! Files: `shapes` (the version, the method names, the JSON shapes), `convert` (each
//! shape to and from 1.0); this file only names them.

mod convert;
mod shapes;

pub use convert::*;
pub use shapes::*;
