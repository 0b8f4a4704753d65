//! The ledger: one record chain (`audit_ledger`) for what a decision or a bill rests on
//! but no event holds — where each chain began (the genesis), who owns a thread and
//! where it works, its deletion, the API keys and their roles, each policy set loaded.
//!
//! A ledger record is `(kind, ts, subject, detail)`: `detail` is a JSON object, stored
//! and hashed as the text written. The store appends one in the transaction that makes
//! the change it records, so the ledger and the tables cannot disagree unless someone
//! wrote the tables by hand; `audit verify` replays the ledger ([`LedgerState::replay`])
//! and compares what it says with what the tables hold.
//!
//! The genesis is the first record, written once in the migration that creates the
//! ledger: on a database created chained it names no thread and no record as "before
//! the chain", so none can claim to be.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ChainedRecord;

/// The genesis: where each chain began. Written once, as the ledger's first record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Genesis {
    /// The store's schema version when the ledger began.
    pub schema: u32,
    /// Threads whose events before a seq predate the event chain: `{thread: first
    /// chained seq}`. Only threads that existed when the ledger began; every other
    /// thread is chained from seq 1.
    #[serde(default)]
    pub threads_chained_since: BTreeMap<String, u64>,
    /// Records stored before their chain existed, per record chain (`model_calls`,
    /// `mcp_calls`): there can never be more of them.
    #[serde(default)]
    pub unchained_records: BTreeMap<String, u64>,
}

/// A thread as the ledger records it when it is created (subject: the thread id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadCreated {
    pub client_id: String,
    pub agent: String,
    pub cwd: String,
    pub created_at: String,
}

/// A thread's deletion (subject: the thread id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadDeleted {
    pub deleted_at: String,
}

/// An API key as created (subject: the key id). `roles` is the stored JSON text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyCreated {
    pub client_id: String,
    pub digest: String,
    pub roles: String,
    pub created_at: String,
    #[serde(default)]
    pub expires_at: Option<String>,
}

/// A key's revocation (subject: the key id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRevoked {
    pub revoked_at: String,
}

/// A policy set taking effect (subject: its hash): who loaded it and from where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicySetLoaded {
    /// `startup`, `reload`, or the client that asked.
    pub by: String,
    pub policies: u64,
}

/// One ledger record, its detail parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Genesis(Genesis),
    ThreadCreated(ThreadCreated),
    ThreadDeleted(ThreadDeleted),
    KeyCreated(KeyCreated),
    KeyRevoked(KeyRevoked),
    PolicySetLoaded(PolicySetLoaded),
}

impl Entry {
    /// The `kind` column.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Genesis(_) => "genesis",
            Self::ThreadCreated(_) => "thread_created",
            Self::ThreadDeleted(_) => "thread_deleted",
            Self::KeyCreated(_) => "key_created",
            Self::KeyRevoked(_) => "key_revoked",
            Self::PolicySetLoaded(_) => "policy_set_loaded",
        }
    }

    /// The `detail` column: the JSON text stored and hashed.
    pub fn detail(&self) -> String {
        let value = match self {
            Self::Genesis(d) => serde_json::to_string(d),
            Self::ThreadCreated(d) => serde_json::to_string(d),
            Self::ThreadDeleted(d) => serde_json::to_string(d),
            Self::KeyCreated(d) => serde_json::to_string(d),
            Self::KeyRevoked(d) => serde_json::to_string(d),
            Self::PolicySetLoaded(d) => serde_json::to_string(d),
        };
        // Serializing these plain structs cannot fail.
        value.unwrap_or_default()
    }

    /// Parses a stored record's `kind` and `detail`.
    pub fn parse(kind: &str, detail: &str) -> Result<Self, String> {
        fn de<T: serde::de::DeserializeOwned>(detail: &str) -> Result<T, String> {
            serde_json::from_str(detail).map_err(|e| format!("its detail is not readable: {e}"))
        }
        Ok(match kind {
            "genesis" => Self::Genesis(de(detail)?),
            "thread_created" => Self::ThreadCreated(de(detail)?),
            "thread_deleted" => Self::ThreadDeleted(de(detail)?),
            "key_created" => Self::KeyCreated(de(detail)?),
            "key_revoked" => Self::KeyRevoked(de(detail)?),
            "policy_set_loaded" => Self::PolicySetLoaded(de(detail)?),
            other => return Err(format!("its kind {other:?} is not a ledger record")),
        })
    }
}

/// A thread as the ledger says it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerThread {
    pub created: ThreadCreated,
    pub deleted_at: Option<String>,
    /// The ledger position of the record that last changed it.
    pub pos: u64,
}

/// A key as the ledger says it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerKey {
    pub created: KeyCreated,
    pub revoked_at: Option<String>,
    pub pos: u64,
}

/// What the ledger says, replayed to its end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LedgerState {
    pub genesis: Genesis,
    pub threads: BTreeMap<String, LedgerThread>,
    pub keys: BTreeMap<String, LedgerKey>,
    /// Every policy set loaded: its hash, and the position of the first load.
    pub policy_sets: BTreeMap<String, u64>,
    /// When the ledger began (its genesis's `ts`): decisions from before it name
    /// policy sets the ledger never saw.
    pub since: String,
}

/// A ledger record that does not make sense where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerBreak {
    pub pos: u64,
    pub reason: String,
}

impl LedgerState {
    /// Replays the ledger's records (by position, their links already checked). The
    /// first must be the genesis, and there is one; a thread or key is created once and
    /// deleted (revoked) at most once, after it was created.
    pub fn replay<'a>(
        records: impl IntoIterator<Item = &'a ChainedRecord>,
    ) -> Result<Self, LedgerBreak> {
        let mut state = Self::default();
        let mut seen_genesis = false;
        for record in records {
            let pos = record.pos;
            let broken = |reason: String| LedgerBreak { pos, reason };
            let text = |i: usize| record.values.get(i).and_then(Option::as_deref);
            let (Some(kind), Some(subject), Some(detail)) = (text(0), text(2), text(3)) else {
                return Err(broken("a column is missing".into()));
            };
            let entry = Entry::parse(kind, detail).map_err(broken)?;
            match (&entry, seen_genesis) {
                (Entry::Genesis(_), true) => return Err(broken("a second genesis".into())),
                (Entry::Genesis(_), false) => {}
                (_, false) => {
                    return Err(broken(
                        "the ledger does not begin with its genesis record".into(),
                    ));
                }
                _ => {}
            }
            match entry {
                Entry::Genesis(genesis) => {
                    seen_genesis = true;
                    state.genesis = genesis;
                    state.since = text(1).unwrap_or_default().to_owned();
                }
                Entry::ThreadCreated(created) => {
                    if state.threads.contains_key(subject) {
                        return Err(broken(format!("thread {subject} is created twice")));
                    }
                    state.threads.insert(
                        subject.to_owned(),
                        LedgerThread {
                            created,
                            deleted_at: None,
                            pos,
                        },
                    );
                }
                Entry::ThreadDeleted(deleted) => {
                    let Some(thread) = state.threads.get_mut(subject) else {
                        return Err(broken(format!(
                            "thread {subject} is deleted before it exists"
                        )));
                    };
                    if thread.deleted_at.is_some() {
                        return Err(broken(format!("thread {subject} is deleted twice")));
                    }
                    thread.deleted_at = Some(deleted.deleted_at);
                    thread.pos = pos;
                }
                Entry::KeyCreated(created) => {
                    if state.keys.contains_key(subject) {
                        return Err(broken(format!("key {subject} is created twice")));
                    }
                    state.keys.insert(
                        subject.to_owned(),
                        LedgerKey {
                            created,
                            revoked_at: None,
                            pos,
                        },
                    );
                }
                Entry::KeyRevoked(revoked) => {
                    let Some(key) = state.keys.get_mut(subject) else {
                        return Err(broken(format!("key {subject} is revoked before it exists")));
                    };
                    if key.revoked_at.is_some() {
                        return Err(broken(format!("key {subject} is revoked twice")));
                    }
                    key.revoked_at = Some(revoked.revoked_at);
                    key.pos = pos;
                }
                Entry::PolicySetLoaded(_) => {
                    state.policy_sets.entry(subject.to_owned()).or_insert(pos);
                }
            }
        }
        if !seen_genesis {
            return Err(LedgerBreak {
                pos: 1,
                reason: "the ledger has no genesis record (it was removed)".into(),
            });
        }
        Ok(state)
    }
}

#[cfg(test)]
mod tests {
    use super::super::RecordChain;
    use super::*;

    fn record(pos: u64, entry: &Entry, subject: &str) -> ChainedRecord {
        ChainedRecord {
            chain: RecordChain::Ledger,
            pos,
            values: vec![
                Some(entry.kind().into()),
                Some("2026-12-02T00:00:00.000Z".into()),
                Some(subject.into()),
                Some(entry.detail()),
            ],
            hash: None,
        }
    }

    fn created(client: &str) -> Entry {
        Entry::ThreadCreated(ThreadCreated {
            client_id: client.into(),
            agent: "a".into(),
            cwd: "/w".into(),
            created_at: "t".into(),
        })
    }

    #[test]
    fn a_replay_ends_with_each_subjects_last_state() {
        let deleted = Entry::ThreadDeleted(ThreadDeleted {
            deleted_at: "later".into(),
        });
        let records = [
            record(1, &Entry::Genesis(Genesis::default()), ""),
            record(2, &created("alice"), "thr_1"),
            record(3, &deleted, "thr_1"),
        ];
        let state = LedgerState::replay(&records).expect("replays");
        let thread = &state.threads["thr_1"];
        assert_eq!(thread.created.client_id, "alice");
        assert_eq!(thread.deleted_at.as_deref(), Some("later"));
        assert_eq!(thread.pos, 3);
    }

    #[test]
    fn a_ledger_without_its_genesis_or_with_two_is_broken() {
        let no_genesis = [record(1, &created("alice"), "thr_1")];
        assert!(LedgerState::replay(&no_genesis).is_err());
        assert!(LedgerState::replay(&[]).is_err());
        let genesis = Entry::Genesis(Genesis::default());
        let two = [record(1, &genesis, ""), record(2, &genesis, "")];
        assert_eq!(LedgerState::replay(&two).map(|_| ()).unwrap_err().pos, 2);
    }

    #[test]
    fn a_thread_created_twice_or_deleted_unborn_is_broken() {
        let genesis = record(1, &Entry::Genesis(Genesis::default()), "");
        let twice = [
            genesis.clone(),
            record(2, &created("alice"), "thr_1"),
            record(3, &created("mallory"), "thr_1"),
        ];
        assert_eq!(LedgerState::replay(&twice).unwrap_err().pos, 3);
        let deleted = Entry::ThreadDeleted(ThreadDeleted {
            deleted_at: "t".into(),
        });
        let unborn = [genesis, record(2, &deleted, "thr_9")];
        assert_eq!(LedgerState::replay(&unborn).unwrap_err().pos, 2);
    }
}
