//! Anchors of the audit chain (docs/audit.md): every chain's head — each thread's last
//! chained event, each record chain's last record — signed with an Ed25519 key kept
//! outside the database, as one JSON line appended to a file (or printed for a cron
//! job to ship). Later, `audit verify --anchors FILE` proves that nothing up to an
//! anchored head changed, and that no chain was cut back behind it: whoever rewrites
//! the database must also rewrite every copy of the anchors and hold the key.
//!
//! The signed message is plain text a third party rebuilds from the line alone
//! (`scripts/audit_verify.py` does):
//!
//! ```text
//! agentplane/anchor/1
//! ts 2026-12-02T10:00:00.000Z
//! thread thr_… 42 c41d…        (one line per thread, in the line's order)
//! chain model_calls 7 5e0b…    (one line per record chain with a record)
//! ```
//!
//! Signing and checking use ring's Ed25519 (already in the build through rustls).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agentplane_core::ThreadId;
use agentplane_core::audit::{RecordChain, from_hex, to_hex};
use agentplane_engine::ports::records::stored_now;
use agentplane_engine::ports::{AuditStore, StoreError};
use agentplane_engine::services::reports::{AuditReport, Mismatch, verify_chains};
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};
use serde::{Deserialize, Serialize};

/// The first line of the signed text, and the `anchor` field of each line.
pub const ANCHOR_TAG: &str = "agentplane/anchor/1";

/// One chain's head in an anchor: a thread's (`name` its id, `index` its seq) or a
/// record chain's (`name` the chain, `index` the position).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    pub name: String,
    pub index: u64,
    pub hash: String,
}

/// One anchor line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anchor {
    pub anchor: String,
    pub ts: String,
    pub threads: Vec<Head>,
    pub chains: Vec<Head>,
    /// The signer's public key, hex (which key signed; trust comes from elsewhere).
    pub public_key: String,
    /// Ed25519 over [`Anchor::message`], hex.
    pub signature: String,
}

impl Anchor {
    /// The text the signature covers.
    pub fn message(&self) -> String {
        let mut text = format!("{ANCHOR_TAG}\nts {}\n", self.ts);
        for head in &self.threads {
            text.push_str(&format!(
                "thread {} {} {}\n",
                head.name, head.index, head.hash
            ));
        }
        for head in &self.chains {
            text.push_str(&format!(
                "chain {} {} {}\n",
                head.name, head.index, head.hash
            ));
        }
        text
    }
}

/// Why anchoring or checking anchors failed before any comparison.
#[derive(Debug, thiserror::Error)]
pub enum AnchorError {
    #[error("{0}")]
    Key(String),
    #[error("{0}")]
    Anchors(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Writes a new signing key (an Ed25519 seed, 64 hex digits) to `path`, readable by
/// its owner only; refuses to replace a file. Returns the public key, hex.
pub fn keygen(path: &Path) -> Result<String, AnchorError> {
    let mut seed = [0u8; 32];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut seed)
        .map_err(|_| AnchorError::Key("the system's random source failed".into()))?;
    let pair = Ed25519KeyPair::from_seed_unchecked(&seed)
        .map_err(|_| AnchorError::Key("the new key was refused".into()))?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(path)
        .map_err(|e| AnchorError::Key(format!("writing {}: {e}", path.display())))?;
    writeln!(file, "{}", to_hex(&seed))
        .map_err(|e| AnchorError::Key(format!("writing {}: {e}", path.display())))?;
    Ok(to_hex(pair.public_key().as_ref()))
}

/// The key at `path`.
fn load_key(path: &Path) -> Result<Ed25519KeyPair, AnchorError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| AnchorError::Key(format!("reading the anchor key {}: {e}", path.display())))?;
    let seed = from_hex(text.trim()).ok_or_else(|| {
        AnchorError::Key(format!(
            "{} is not an anchor key (64 hex digits, from `agentplane audit keygen`)",
            path.display()
        ))
    })?;
    Ed25519KeyPair::from_seed_unchecked(&seed)
        .map_err(|_| AnchorError::Key(format!("{} is not a usable key", path.display())))
}

/// The public key (hex) of the key at `path`: what anchors are trusted against.
pub fn public_key_of(path: &Path) -> Result<String, AnchorError> {
    Ok(to_hex(load_key(path)?.public_key().as_ref()))
}

/// The anchor of a store whose every chain holds (`report`, from `verify_chains` over
/// the whole store), signed with the key at `key`. Anchoring a broken store would vouch
/// for the break: the caller refuses first.
pub fn anchor(report: &AuditReport, key: &Path, ts: String) -> Result<Anchor, AnchorError> {
    let pair = load_key(key)?;
    let heads = |summaries: &[agentplane_core::audit::ChainSummary]| {
        summaries
            .iter()
            .filter_map(|s| {
                let (index, hash) = s.head.clone()?;
                Some(Head {
                    name: s.thread_id.clone(),
                    index,
                    hash,
                })
            })
            .collect::<Vec<_>>()
    };
    let mut anchor = Anchor {
        anchor: ANCHOR_TAG.into(),
        ts,
        threads: heads(&report.intact),
        chains: heads(&report.records),
        public_key: to_hex(pair.public_key().as_ref()),
        signature: String::new(),
    };
    anchor.signature = to_hex(pair.sign(anchor.message().as_bytes()).as_ref());
    Ok(anchor)
}

/// `[audit] anchor_interval_s` on a running process: every interval, verifies the whole
/// store and, when every chain holds, appends a signed anchor to the file; a broken
/// chain is logged as an error and not anchored (an anchor would vouch for it).
pub struct Anchorer {
    stop: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Anchorer {
    /// Starts anchoring; the key must load now, so a wrong path fails the start.
    pub fn start(
        store: Arc<dyn AuditStore>,
        key: PathBuf,
        file: PathBuf,
        every: Duration,
    ) -> Result<Self, AnchorError> {
        load_key(&key)?;
        let stop = tokio_util::sync::CancellationToken::new();
        let stopping = stop.clone();
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = stopping.cancelled() => return,
                    _ = ticks.tick() => {}
                }
                match anchor_now(store.as_ref(), &key, &file).await {
                    Ok(heads) => tracing::info!(heads, file = %file.display(), "audit anchored"),
                    Err(error) => tracing::error!(%error, "audit not anchored"),
                }
            }
        });
        Ok(Self { stop, task })
    }

    /// Stops anchoring and waits for an anchor in progress to be written.
    pub async fn stop(self) {
        self.stop.cancel();
        drop(self.task.await);
    }
}

/// One anchor of the whole store, appended to `file`: how many heads it holds.
async fn anchor_now(store: &dyn AuditStore, key: &Path, file: &Path) -> Result<usize, AnchorError> {
    let report = verify_chains(store, None).await?;
    if !report.holds() {
        return Err(AnchorError::Anchors(
            "`audit verify` finds a chain broken; an anchor would vouch for it".into(),
        ));
    }
    let anchor = anchor(&report, key, stored_now())?;
    append(file, &anchor)?;
    Ok(anchor.threads.len() + anchor.chains.len())
}

/// Appends `anchor` as one line to `path` (created if missing, never truncated).
pub fn append(path: &Path, anchor: &Anchor) -> Result<(), AnchorError> {
    let line = serde_json::to_string(anchor)
        .map_err(|e| AnchorError::Anchors(format!("encoding the anchor: {e}")))?;
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| AnchorError::Anchors(format!("opening {}: {e}", path.display())))?;
    // One write of the whole line: two writers never interleave within it.
    file.write_all(format!("{line}\n").as_bytes())
        .and_then(|()| file.sync_data())
        .map_err(|e| AnchorError::Anchors(format!("appending to {}: {e}", path.display())))
}

/// Checks every anchor of `text` (JSON Lines) against `public_key` (hex) and the store:
/// each signature, then each anchored head — the event or record at that place must
/// still carry that hash, and the chain must not end before it. What fails is
/// returned as mismatches naming the anchor line; the count of anchors checked too.
pub async fn check(
    store: &dyn AuditStore,
    text: &str,
    public_key: &str,
) -> Result<(usize, Vec<Mismatch>), AnchorError> {
    let key_bytes = from_hex(public_key)
        .ok_or_else(|| AnchorError::Key("the public key is not 64 hex digits".into()))?;
    let key = UnparsedPublicKey::new(&ED25519, key_bytes);
    let mut out = Vec::new();
    let mut checked = 0;
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let against = format!("anchor line {}", number + 1);
        let anchor: Anchor = serde_json::from_str(line)
            .map_err(|e| AnchorError::Anchors(format!("{against} is not an anchor: {e}")))?;
        let broken = |subject: &str, message: String| Mismatch {
            subject: subject.to_owned(),
            against: format!("{against} ({})", anchor.ts),
            message,
        };
        let signature = unhex(&anchor.signature).unwrap_or_default();
        if anchor.anchor != ANCHOR_TAG
            || key.verify(anchor.message().as_bytes(), &signature).is_err()
        {
            out.push(broken(
                "anchor",
                "its signature does not verify with the trusted key: it was not written by \
                 the anchor key, or it was edited"
                    .into(),
            ));
            continue;
        }
        checked += 1;
        for head in &anchor.threads {
            let subject = format!("thread {}", head.name);
            let Ok(thread) = ThreadId::parse(&head.name) else {
                out.push(broken(&subject, "the anchored thread id is not one".into()));
                continue;
            };
            let found = store
                .chained_events(&thread, head.index.saturating_sub(1), 1)
                .await?;
            let stored = found
                .first()
                .filter(|e| e.seq == head.index)
                .map(|e| e.hash.clone());
            if let Some(m) = compare(&subject, "event", head, stored, &broken) {
                out.push(m);
            }
        }
        for head in &anchor.chains {
            let subject = format!("chain {}", head.name);
            let Some(chain) = RecordChain::ALL.into_iter().find(|c| c.name() == head.name) else {
                out.push(broken(
                    &subject,
                    "the anchored chain is not one agentplane keeps".into(),
                ));
                continue;
            };
            let found = store
                .chained_records(chain, head.index.saturating_sub(1), 1)
                .await?;
            let stored = found
                .first()
                .filter(|r| r.pos == head.index)
                .map(|r| r.hash.clone());
            if let Some(m) = compare(&subject, "record", head, stored, &broken) {
                out.push(m);
            }
        }
    }
    Ok((checked, out))
}

/// The anchored `head` against what the store holds at its place (`None`: nothing).
fn compare(
    subject: &str,
    what: &str,
    head: &Head,
    stored: Option<Option<String>>,
    broken: &dyn Fn(&str, String) -> Mismatch,
) -> Option<Mismatch> {
    match stored {
        None => Some(broken(
            subject,
            format!(
                "the anchor's head is {what} {}, which the store no longer has: the chain \
                 was cut back (or removed) behind the anchor",
                head.index
            ),
        )),
        Some(hash) if hash.as_deref() != Some(head.hash.as_str()) => Some(broken(
            subject,
            format!(
                "{what} {} has hash {} but the anchor holds {}: it, or a record before \
                 it, was rewritten after it was anchored",
                head.index,
                hash.as_deref().unwrap_or("none"),
                head.hash
            ),
        )),
        Some(_) => None,
    }
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}
