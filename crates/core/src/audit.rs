//! The tamper-evident audit chain (ADR 0048, `docs/audit.md`): the one canonical
//! encoding of a stored event, the hash that links it to the previous event of its
//! thread, and the check that walks a thread's chain and names the first broken link.
//!
//! Everything here works on the text exactly as the store holds it (the payload's JSON
//! as written, not re-serialized), so a third party can recompute every hash from an
//! export with nothing but SHA-256. What must not live here: reading the store.

use sha2::{Digest, Sha256};

pub mod ledger;

/// The hash the first event of a chain links to: 32 zero bytes.
pub const GENESIS: [u8; 32] = [0; 32];

/// The first field of an event's encoding: which record kind, which version of the
/// encoding. A new encoding is a new tag, never a change to this one.
pub const EVENT_TAG: &str = "agentplane/event/1";

/// One stored event as the chain covers it: every column, as stored text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainedEvent {
    pub thread_id: String,
    pub seq: u64,
    pub turn_id: String,
    pub kind: String,
    /// RFC 3339, as stored.
    pub ts: String,
    /// The payload's JSON, byte for byte as stored.
    pub payload: String,
    /// The stored link (lowercase hex SHA-256); `None` for an event appended before the
    /// chain existed (or one whose hash was removed).
    pub hash: Option<String>,
}

/// An event's columns as stored text, borrowed: what its hash covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventText<'a> {
    pub thread_id: &'a str,
    pub seq: u64,
    pub turn_id: &'a str,
    pub kind: &'a str,
    pub ts: &'a str,
    pub payload: &'a str,
}

impl ChainedEvent {
    /// The columns its hash covers.
    pub fn text(&self) -> EventText<'_> {
        EventText {
            thread_id: &self.thread_id,
            seq: self.seq,
            turn_id: &self.turn_id,
            kind: &self.kind,
            ts: &self.ts,
            payload: &self.payload,
        }
    }
}

/// The hash of an event given the previous event's hash (or [`GENESIS`]):
/// `SHA-256(prev || field(tag) || field(thread_id) || field(seq) || field(turn_id) ||
/// field(kind) || field(ts) || field(payload))`, where `field(x)` is the 8-byte
/// big-endian length of `x`'s UTF-8 bytes followed by those bytes and `seq` is written
/// in decimal. Lengths make the encoding unambiguous whatever the fields contain.
pub fn event_hash(prev: &[u8; 32], event: EventText<'_>) -> [u8; 32] {
    let seq = event.seq.to_string();
    chain_hash(
        prev,
        &[
            EVENT_TAG,
            event.thread_id,
            &seq,
            event.turn_id,
            event.kind,
            event.ts,
            event.payload,
        ],
    )
}

/// `SHA-256(prev || field(f1) || field(f2) …)`, the one construction every chain uses.
pub fn chain_hash(prev: &[u8; 32], fields: &[&str]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(prev);
    for field in fields {
        hasher.update((field.len() as u64).to_be_bytes());
        hasher.update(field.as_bytes());
    }
    hasher.finalize().into()
}

/// A table of records chained in insertion order, one chain per table (ADR 0048): the
/// OpenAI-compatible gateway's model calls and the MCP gateway's calls. A record's
/// position (`chain_pos`, 1, 2, 3… with no gap) is given under the chain's lock when it
/// is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordChain {
    ModelCalls,
    McpCalls,
    /// The ledger of what no event holds (`ledger`): the genesis, threads' owners,
    /// workspaces and deletions, API keys, the policy sets loaded.
    Ledger,
}

impl RecordChain {
    /// Every record chain, in the order reports list them.
    pub const ALL: [Self; 3] = [Self::ModelCalls, Self::McpCalls, Self::Ledger];

    /// The chain's name: its table's.
    pub fn name(self) -> &'static str {
        match self {
            Self::ModelCalls => "model_calls",
            Self::McpCalls => "mcp_calls",
            Self::Ledger => "audit_ledger",
        }
    }

    /// The first field of a record's encoding.
    pub fn tag(self) -> &'static str {
        match self {
            Self::ModelCalls => "agentplane/model_call/1",
            Self::McpCalls => "agentplane/mcp_call/1",
            Self::Ledger => "agentplane/ledger/1",
        }
    }

    /// The columns a record's hash covers, in the order they are hashed (after the tag
    /// and the position). Integers as decimal text; a NULL column as "no value".
    pub fn columns(self) -> &'static [&'static str] {
        match self {
            Self::ModelCalls => &[
                "id",
                "ts",
                "client_id",
                "agent",
                "provider",
                "model",
                "input_tokens",
                "output_tokens",
                "usd_micros",
            ],
            Self::McpCalls => &[
                "id",
                "ts",
                "client_id",
                "agent",
                "server",
                "tool",
                "status",
                "detail",
                "policy",
                "approval_id",
                "duration_ms",
                "usd_micros",
                "result",
            ],
            Self::Ledger => &["kind", "ts", "subject", "detail"],
        }
    }
}

/// One stored record as its chain covers it: its position and every hashed column as
/// stored text, in [`RecordChain::columns`] order (`None` for NULL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainedRecord {
    pub chain: RecordChain,
    pub pos: u64,
    pub values: Vec<Option<String>>,
    /// The stored link; `None` only when it was removed (records stored before the
    /// chain existed have no position and are not read as chained records).
    pub hash: Option<String>,
}

/// The hash of a record given the previous record's hash (or [`GENESIS`]):
/// `SHA-256(prev || field(tag) || field(pos) || value(c1) || value(c2) …)`, where
/// `value(x)` is `field(x)` for a value and the 8 bytes `FF…FF` (a length no value can
/// have) with nothing after them for NULL.
pub fn record_hash(
    prev: &[u8; 32],
    chain: RecordChain,
    pos: u64,
    values: &[Option<&str>],
) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(prev);
    let pos = pos.to_string();
    for field in [chain.tag(), pos.as_str()] {
        hasher.update((field.len() as u64).to_be_bytes());
        hasher.update(field.as_bytes());
    }
    for value in values {
        match value {
            Some(v) => {
                hasher.update((v.len() as u64).to_be_bytes());
                hasher.update(v.as_bytes());
            }
            None => hasher.update(u64::MAX.to_be_bytes()),
        }
    }
    hasher.finalize().into()
}

/// Lowercase hex, as hashes (and the anchors' keys and signatures) are stored and shown.
pub fn to_hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(2 * bytes.len()), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// The 32 bytes of a stored hash, or `None` when it is not 64 hex digits.
pub fn from_hex(text: &str) -> Option<[u8; 32]> {
    let bytes = text.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        let digit = |c: u8| (c as char).to_digit(16);
        out[i] = u8::try_from(digit(pair[0])? * 16 + digit(pair[1])?).ok()?;
    }
    Some(out)
}

/// Why a link of a chain does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BreakReason {
    /// The stored hash is not the hash recomputed from the stored event and the
    /// previous link: the event (or an earlier one) was changed.
    HashMismatch { stored: String, computed: String },
    /// The event is inside the chain (at or after the thread's first chained seq, or
    /// after a chained event) but has no hash.
    MissingHash,
    /// The stored hash is not 64 hex digits.
    MalformedHash(String),
    /// An event is missing before this one (seqs are gapless).
    SeqGap { expected: u64 },
}

impl std::fmt::Display for BreakReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::HashMismatch { stored, computed } => write!(
                f,
                "the stored hash {stored} is not the recomputed {computed}: this event or \
                 the link before it was changed"
            ),
            Self::MissingHash => f.write_str("the event has no hash but lies inside the chain"),
            Self::MalformedHash(h) => write!(f, "the stored hash {h:?} is not 64 hex digits"),
            Self::SeqGap { expected } => {
                write!(
                    f,
                    "event {expected} is missing before it (seqs are gapless)"
                )
            }
        }
    }
}

/// The first link of a chain that does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainBreak {
    /// The thread; for a record chain, the chain's name (`model_calls`, `mcp_calls`).
    pub thread_id: String,
    /// The event's seq; for a record chain, the record's position.
    pub seq: u64,
    pub reason: BreakReason,
}

/// Walks one thread's events in `seq` order and stops at the first broken link.
///
/// Events without a hash before the first chained one, and before `chained_since`
/// (the thread's first seq appended after the chain existed), are "not chained": they
/// predate the migration. The chain starts at the first event with a hash, which must
/// link to [`GENESIS`]; from there on every event must carry the right hash. Raising
/// `chained_since` hides nothing: a hashed event is checked wherever it lies.
#[derive(Debug, Clone)]
pub struct ChainWalk {
    thread_id: String,
    chained_since: u64,
    /// The seq the next event must have.
    next_seq: u64,
    /// The previous link; `None` while no chained event has been seen.
    prev: Option<[u8; 32]>,
    /// How many events were before the chain (not chained).
    unchained: u64,
    /// How many events were checked.
    chained: u64,
    /// The first chained event's seq.
    first_chained: Option<u64>,
}

/// What a thread's walk found, when every link held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainSummary {
    pub thread_id: String,
    /// Events appended before the chain existed.
    pub unchained: u64,
    /// Events whose link was checked.
    pub chained: u64,
    /// The first chained event's seq, if any.
    pub first_chained: Option<u64>,
    /// The last chained event: its seq and hash (what to anchor).
    pub head: Option<(u64, String)>,
}

impl ChainWalk {
    /// A walk of `thread_id`'s chain, whose events from `chained_since` on must be
    /// chained.
    pub fn new(thread_id: &str, chained_since: u64) -> Self {
        Self {
            thread_id: thread_id.to_owned(),
            chained_since,
            next_seq: 1,
            prev: None,
            unchained: 0,
            chained: 0,
            first_chained: None,
        }
    }

    /// Checks the next event of the thread.
    pub fn push(&mut self, event: &ChainedEvent) -> Result<(), ChainBreak> {
        self.push_link(event.seq, event.hash.as_deref(), |prev| {
            event_hash(prev, event.text())
        })
    }

    /// Checks the next record of a record chain (a walk made with `chained_since` 1:
    /// every record with a position is chained).
    pub fn push_record(&mut self, record: &ChainedRecord) -> Result<(), ChainBreak> {
        let values: Vec<Option<&str>> = record.values.iter().map(Option::as_deref).collect();
        self.push_link(record.pos, record.hash.as_deref(), |prev| {
            record_hash(prev, record.chain, record.pos, &values)
        })
    }

    /// Checks the link at `seq` whose stored hash is `stored`; `compute` hashes the
    /// item given the previous link.
    fn push_link(
        &mut self,
        seq: u64,
        stored: Option<&str>,
        compute: impl FnOnce(&[u8; 32]) -> [u8; 32],
    ) -> Result<(), ChainBreak> {
        let broken = |reason| ChainBreak {
            thread_id: self.thread_id.clone(),
            seq,
            reason,
        };
        if seq != self.next_seq {
            return Err(broken(BreakReason::SeqGap {
                expected: self.next_seq,
            }));
        }
        self.next_seq = seq.saturating_add(1);
        let Some(stored) = stored else {
            if self.prev.is_none() && seq < self.chained_since {
                self.unchained += 1;
                return Ok(());
            }
            return Err(broken(BreakReason::MissingHash));
        };
        let Some(stored_bytes) = from_hex(stored) else {
            return Err(broken(BreakReason::MalformedHash(stored.to_owned())));
        };
        let computed = compute(self.prev.as_ref().unwrap_or(&GENESIS));
        if computed != stored_bytes {
            return Err(broken(BreakReason::HashMismatch {
                stored: stored.to_owned(),
                computed: to_hex(&computed),
            }));
        }
        self.first_chained.get_or_insert(seq);
        self.prev = Some(computed);
        self.chained += 1;
        Ok(())
    }

    /// The seq the next link must have.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// What the walk found; call after the thread's last event.
    pub fn finish(self) -> ChainSummary {
        let head = self
            .prev
            .map(|hash| (self.next_seq.saturating_sub(1), to_hex(&hash)));
        ChainSummary {
            thread_id: self.thread_id,
            unchained: self.unchained,
            chained: self.chained,
            first_chained: self.first_chained,
            head,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: u64, payload: &str) -> ChainedEvent {
        ChainedEvent {
            thread_id: "thr_1".into(),
            seq,
            turn_id: "turn_1".into(),
            kind: "message_delta".into(),
            ts: "2026-01-01T00:00:00.000Z".into(),
            payload: payload.into(),
            hash: None,
        }
    }

    fn chain(payloads: &[&str]) -> Vec<ChainedEvent> {
        let mut prev = GENESIS;
        let mut out = Vec::new();
        for (i, p) in payloads.iter().enumerate() {
            let mut e = event(i as u64 + 1, p);
            prev = event_hash(&prev, e.text());
            e.hash = Some(to_hex(&prev));
            out.push(e);
        }
        out
    }

    fn walk(events: &[ChainedEvent], since: u64) -> Result<ChainSummary, ChainBreak> {
        let mut walk = ChainWalk::new("thr_1", since);
        for e in events {
            walk.push(e)?;
        }
        Ok(walk.finish())
    }

    #[test]
    fn the_encoding_is_the_documented_one() {
        // The value docs/audit.md shows and scripts/audit_verify.py recomputes.
        let e = event(1, r#"{"kind":"message_delta","text":"hi"}"#);
        let mut by_hand = Vec::from(GENESIS);
        for f in [
            EVENT_TAG,
            "thr_1",
            "1",
            "turn_1",
            "message_delta",
            "2026-01-01T00:00:00.000Z",
            r#"{"kind":"message_delta","text":"hi"}"#,
        ] {
            by_hand.extend_from_slice(&(f.len() as u64).to_be_bytes());
            by_hand.extend_from_slice(f.as_bytes());
        }
        let expected: [u8; 32] = Sha256::digest(&by_hand).into();
        assert_eq!(event_hash(&GENESIS, e.text()), expected);
        assert_eq!(from_hex(&to_hex(&expected)), Some(expected));
    }

    #[test]
    fn an_intact_chain_holds_and_names_its_head() {
        let events = chain(&["{}", "{\"a\":1}", "[]"]);
        let summary = walk(&events, 1).expect("holds");
        assert_eq!(summary.chained, 3);
        assert_eq!(summary.head, Some((3, events[2].hash.clone().unwrap())));
    }

    #[test]
    fn an_edited_payload_breaks_its_own_link() {
        let mut events = chain(&["{}", "{\"a\":1}", "[]"]);
        events[1].payload = "{\"a\":2}".into();
        let broken = walk(&events, 1).expect_err("broken");
        assert_eq!(broken.seq, 2);
        assert!(matches!(broken.reason, BreakReason::HashMismatch { .. }));
    }

    #[test]
    fn events_before_the_chain_are_not_chained_but_a_stripped_hash_is_broken() {
        let mut events = vec![event(1, "{}"), event(2, "{}")];
        let mut prev = GENESIS;
        for seq in 3..=4 {
            let mut e = event(seq, "{}");
            prev = event_hash(&prev, e.text());
            e.hash = Some(to_hex(&prev));
            events.push(e);
        }
        let summary = walk(&events, 3).expect("holds");
        assert_eq!((summary.unchained, summary.first_chained), (2, Some(3)));

        // The first chained event's hash removed: the next one no longer links to
        // genesis, and the missing hash is inside the chain anyway.
        events[2].hash = None;
        assert_eq!(walk(&events, 3).expect_err("broken").seq, 3);
        assert_eq!(
            walk(&events, 1).expect_err("broken").reason,
            BreakReason::MissingHash
        );
    }

    #[test]
    fn a_removed_event_is_a_gap() {
        let mut events = chain(&["{}", "{}", "{}"]);
        events.remove(1);
        let broken = walk(&events, 1).expect_err("broken");
        assert_eq!(
            (broken.seq, broken.reason),
            (3, BreakReason::SeqGap { expected: 2 })
        );
    }

    #[test]
    fn malformed_hex_is_not_a_hash() {
        assert_eq!(from_hex("zz"), None);
        assert_eq!(from_hex(&"g".repeat(64)), None);
    }

    fn records(values: &[&[Option<&str>]]) -> Vec<ChainedRecord> {
        let mut prev = GENESIS;
        values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let pos = i as u64 + 1;
                prev = record_hash(&prev, RecordChain::ModelCalls, pos, v);
                ChainedRecord {
                    chain: RecordChain::ModelCalls,
                    pos,
                    values: v.iter().map(|x| x.map(str::to_owned)).collect(),
                    hash: Some(to_hex(&prev)),
                }
            })
            .collect()
    }

    fn walk_records(records: &[ChainedRecord]) -> Result<ChainSummary, ChainBreak> {
        let mut walk = ChainWalk::new("model_calls", 1);
        for r in records {
            walk.push_record(r)?;
        }
        Ok(walk.finish())
    }

    #[test]
    fn a_null_column_hashes_apart_from_an_empty_one_and_from_a_shifted_value() {
        let chain = RecordChain::McpCalls;
        let null = record_hash(&GENESIS, chain, 1, &[Some("a"), None]);
        let empty = record_hash(&GENESIS, chain, 1, &[Some("a"), Some("")]);
        let joined = record_hash(&GENESIS, chain, 1, &[Some("a"), Some("")]);
        let shifted = record_hash(&GENESIS, chain, 1, &[Some(""), Some("a")]);
        assert_ne!(null, empty);
        assert_eq!(empty, joined);
        assert_ne!(empty, shifted);
        assert_ne!(
            record_hash(&GENESIS, RecordChain::ModelCalls, 1, &[Some("a"), None]),
            null,
            "the tag keeps the chains apart"
        );
    }

    #[test]
    fn a_record_chain_names_the_edited_the_unhashed_and_the_removed_record() {
        let good = records(&[
            &[Some("a"), Some("1")],
            &[Some("b"), None],
            &[Some("c"), Some("3")],
        ]);
        let summary = walk_records(&good).expect("intact");
        assert_eq!(
            (summary.chained, summary.head.as_ref().map(|h| h.0)),
            (3, Some(3))
        );

        let mut edited = good.clone();
        edited[1].values[1] = Some("2".into());
        let broken = walk_records(&edited).expect_err("an edit");
        assert_eq!(broken.seq, 2);
        assert!(matches!(broken.reason, BreakReason::HashMismatch { .. }));

        let mut unhashed = good.clone();
        unhashed[0].hash = None;
        let broken = walk_records(&unhashed).expect_err("a stripped hash");
        assert_eq!((broken.seq, broken.reason), (1, BreakReason::MissingHash));

        let removed = [good[0].clone(), good[2].clone()];
        let broken = walk_records(&removed).expect_err("a removed record");
        assert_eq!(
            (broken.seq, broken.reason),
            (3, BreakReason::SeqGap { expected: 2 })
        );
    }
}
