//! The connections kept between a thread's turns, and every connection made (so that
//! shutdown ends them all). A connection belongs to one (thread, server); a healthy one
//! is kept for the thread's next turn and ended by a reaper once it sat unused for the
//! server's idle timeout. Broken connections are never kept.
//!
//! What must not live here: which servers exist (`super::servers`) or one turn's use of
//! a connection (`super::ensemble`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use agentplane_core::ThreadId;

use super::connection::{self, Connection};
use super::oauth::TokenSource;
use super::pins::Pins;
use super::spec::{McpServerSpec, McpTransport};

/// Connections kept between turns, and every connection made (for shutdown).
#[derive(Default)]
pub(crate) struct Pool {
    kept: Mutex<HashMap<(ThreadId, String), Lease>>,
    /// Every connection not yet closed through the pool, by id.
    live: Mutex<HashMap<u64, Weak<Connection>>>,
    next_id: AtomicU64,
    shut_down: AtomicBool,
    /// The access tokens of each server with an OAuth grant, shared by all its
    /// connections, by server name.
    tokens: Mutex<HashMap<String, Arc<TokenSource>>>,
    /// Where tool definitions are pinned, once the store is given.
    pins: std::sync::OnceLock<Pins>,
}

/// A connection handed out by the pool, with the id it is known by there (the reaper
/// compares ids to tell whether a kept entry is still the one it was started for).
#[derive(Clone)]
pub(crate) struct Lease {
    id: u64,
    pub(crate) connection: Arc<Connection>,
}

impl Pool {
    /// The kept connection of (thread, server) when it is still healthy, or a new one.
    pub(crate) async fn connection(
        self: &Arc<Self>,
        spec: &Arc<McpServerSpec>,
        thread: &ThreadId,
    ) -> Result<Lease, String> {
        let key = (thread.clone(), spec.name.clone());
        let kept = self
            .kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        if let Some(kept) = kept {
            if kept.connection.is_healthy().await {
                return Ok(kept);
            }
            self.end(kept.id, &kept.connection).await;
        }
        let connection = Arc::new(connection::connect(spec, self.tokens(spec), self.pins()).await?);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, Arc::downgrade(&connection));
        if self.shut_down.load(Ordering::SeqCst) {
            // Shutdown ran while we connected; the caller still gets a working
            // connection, which its own close ends.
            tracing::debug!(server = %spec.name, "MCP connection opened after shutdown");
        }
        Ok(Lease { id, connection })
    }

    /// Takes a connection back at the end of a turn: kept when the server keeps
    /// connections and this one is healthy, ended otherwise.
    pub(crate) async fn release(
        self: &Arc<Self>,
        spec: &Arc<McpServerSpec>,
        thread: &ThreadId,
        lease: Lease,
    ) {
        let Lease { id, connection } = &lease;
        let id = *id;
        if spec.idle_timeout.is_zero()
            || self.shut_down.load(Ordering::SeqCst)
            || !connection.is_healthy().await
        {
            self.end(id, connection).await;
            return;
        }
        let key = (thread.clone(), spec.name.clone());
        let replaced = self
            .kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.clone(), lease.clone());
        if let Some(old) = replaced
            && old.id != id
        {
            self.end(old.id, &old.connection).await;
        }
        // The reaper holds the pool weakly: a dropped pool drops its connections (and
        // so kills their processes) without waiting for the reaper.
        let pool = Arc::downgrade(self);
        let idle = spec.idle_timeout;
        tokio::spawn(async move {
            tokio::time::sleep(idle).await;
            let Some(pool) = pool.upgrade() else {
                return;
            };
            let expired = {
                let mut kept = pool.kept.lock().unwrap_or_else(|e| e.into_inner());
                match kept.get(&key) {
                    Some(entry) if entry.id == id => kept.remove(&key),
                    _ => None,
                }
            };
            if let Some(expired) = expired {
                pool.end(expired.id, &expired.connection).await;
            }
        });
    }

    /// The token source of `spec`'s OAuth grant, made on first use; `None` without one.
    /// Pins tool definitions in `pins` from now on (once; a second call is ignored).
    pub(crate) fn pin_in(&self, pins: Pins) {
        let _ = self.pins.set(pins);
    }

    /// Where tool definitions are pinned, if anywhere.
    pub(crate) fn pins(&self) -> Option<&Pins> {
        self.pins.get()
    }

    pub(crate) fn tokens(&self, spec: &McpServerSpec) -> Option<Arc<TokenSource>> {
        let McpTransport::Http {
            oauth: Some(grant), ..
        } = &spec.transport
        else {
            return None;
        };
        let mut tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        let source = tokens
            .entry(spec.name.clone())
            .or_insert_with(|| Arc::new(TokenSource::new(&spec.name, grant.clone())));
        Some(Arc::clone(source))
    }

    /// From now on no connection is kept: each one released is ended.
    pub(crate) fn refuse_keeping(&self) {
        self.shut_down.store(true, Ordering::SeqCst);
    }

    /// Ends every connection, kept or in use, and its processes.
    pub(crate) async fn close_all(&self) {
        // Strong references first: a kept connection dropped without `close` would
        // only be killed, not waited for.
        let kept: Vec<Lease> = {
            let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
            kept.drain().map(|(_, lease)| lease).collect()
        };
        let mut live: Vec<Arc<Connection>> = {
            let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
            live.drain().filter_map(|(_, c)| c.upgrade()).collect()
        };
        live.extend(kept.into_iter().map(|lease| lease.connection));
        for connection in live {
            connection.close().await;
        }
    }

    async fn end(&self, id: u64, connection: &Connection) {
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        connection.close().await;
    }
}
