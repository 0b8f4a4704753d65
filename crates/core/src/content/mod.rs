//! Sensitive content in text: API keys, email addresses, phone numbers, card numbers,
//! IBANs and a policy's own patterns, found in a whole text ([`Detectors::scan`],
//! [`Detectors::redact`]) or in a stream of pieces ([`StreamScanner`]) with the same
//! result for any cut.
//!
//! The `content` guardrail policy builds its [`Detectors`] from its configuration once
//! and reports [`Finding`]s: a detector's name and a byte range, never the text found,
//! so a finding can be logged and stored as it is. What must not live here: the policy's
//! configuration and decisions (block, redact, log), and any I/O.
//!
//! How a text is scanned, one rule for the whole text and for a stream: each detector
//! runs its pattern from the start, the next search beginning where the last candidate
//! ended; a candidate passes its detector's check (or not). Then, over all detectors,
//! findings are taken by start, the longer first on the same start (then the more
//! specific detector: secret, card, iban, email, phone, custom, then the earlier in the
//! list), and one that overlaps a finding already taken is dropped.

mod check;
mod detector;
mod prefix;
mod scan;
mod stream;
#[cfg(test)]
mod tests;

pub use detector::{
    DEFAULT_CUSTOM_MAX_LEN, Detector, MAX_CUSTOM_MAX_LEN, MAX_PATTERN_LEN, PATTERN_DFA_SIZE_LIMIT,
    PATTERN_SIZE_LIMIT,
};
pub use scan::{Detectors, Finding};
pub use stream::StreamScanner;
