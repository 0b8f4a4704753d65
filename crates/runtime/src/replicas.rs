//! The store, whichever database it is, and this process's life as a replica (ADR 0019).
//!
//! `--db` selects the store: the SQLite file (the default; locked to one process) or a
//! PostgreSQL database several `serve` processes share. Each process is a replica with
//! a fresh id. It beats a heartbeat; once started as a server it also looks for dead
//! replicas and recovers their work: their running turns end `interrupted`, their
//! running executions are retried or interrupted per `[executions] on_restart`. A dead
//! replica leaves the registry only once its work is recovered (`recovered`): should
//! this process die halfway, another survivor claims it again (ADR 0027).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use agentplane_core::{ReplicaId, TurnId};
use agentplane_engine::executions::Executions;
use agentplane_engine::hub::Hub;
use agentplane_engine::ports::{
    AuditStore, EventStore, ExecutionStore, KeyStore, ReplicaStore, ResponseStore, StoreError,
    ToolPinStore, VersionStore,
};
use agentplane_postgres::PostgresStore;
use agentplane_sqlite::SqliteStore;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::settings::cluster::ClusterConfig;
use crate::settings::store::StoreConfig;

/// Every store port in one object: what the runtime holds, SQLite or PostgreSQL.
pub trait Store:
    EventStore
    + ExecutionStore
    + VersionStore
    + ReplicaStore
    + KeyStore
    + AuditStore
    + ResponseStore
    + ToolPinStore
{
}

impl<T> Store for T where
    T: EventStore
        + ExecutionStore
        + VersionStore
        + ReplicaStore
        + KeyStore
        + AuditStore
        + ResponseStore
        + ToolPinStore
        + ?Sized
{
}

/// Opens the configured store as a new replica. The URL of a PostgreSQL database never
/// appears in a message with its password.
pub async fn open_store(config: &StoreConfig) -> Result<Arc<dyn Store>, StoreError> {
    let replica = ReplicaId::new();
    match &config.postgres {
        None => Ok(Arc::new(SqliteStore::open_as(&config.path, replica).await?)),
        Some(url) => {
            tracing::info!(db = %url, %replica, "connecting to the PostgreSQL store");
            let store = PostgresStore::connect(url.expose(), replica)
                .await
                .map_err(|e| scrub(e, url.expose(), &url.redacted()))?;
            Ok(Arc::new(store))
        }
    }
}

/// Opens the configured store to read reports from (`agentplane costs`), beside a
/// running server: the SQLite file without taking its lock (a server holds it), a
/// PostgreSQL database as a connection that never joins the replica registry.
pub async fn open_for_reports(config: &StoreConfig) -> Result<Arc<dyn Store>, StoreError> {
    match &config.postgres {
        None => Ok(Arc::new(SqliteStore::open_unlocked(&config.path).await?)),
        Some(_) => open_store(config).await,
    }
}

/// Opens the configured store for `agentplane audit`: a SQLite file read only (never
/// created, migrated or written; a missing file is an error), PostgreSQL as for reports.
pub async fn open_for_audit(config: &StoreConfig) -> Result<Arc<dyn Store>, StoreError> {
    match &config.postgres {
        None => Ok(Arc::new(SqliteStore::open_read_only(&config.path).await?)),
        Some(_) => open_store(config).await,
    }
}

/// Whether the configured store is a SQLite file a running server holds, so that a
/// command changing it must ask that server instead (`agentplane keys`). PostgreSQL
/// is never held: commands run beside replicas.
pub fn held_by_a_server(config: &StoreConfig) -> bool {
    config.postgres.is_none() && SqliteStore::held_elsewhere(&config.path)
}

/// `e` with every copy of the URL replaced by its redacted form.
fn scrub(e: StoreError, url: &str, redacted: &str) -> StoreError {
    let clean = |m: String| m.replace(url, redacted);
    match e {
        StoreError::NotFound(m) => StoreError::NotFound(clean(m)),
        StoreError::Conflict(m) => StoreError::Conflict(clean(m)),
        StoreError::Backend(m) => StoreError::Backend(clean(m)),
    }
}

/// On a store of one process (`shared() == false`) everything another replica left
/// behind is a dead process's: its registry rows go, and the caller recovers its turns
/// and executions as at any start.
pub(crate) async fn forget_others(store: &dyn Store) -> Result<(), StoreError> {
    while store.claim_dead_replica(Duration::ZERO).await?.is_some() {}
    Ok(())
}

/// This process's heartbeat and, once [`ReplicaWatch::recover_dead`] is called, the
/// recovery of dead replicas.
pub(crate) struct ReplicaWatch {
    stop: CancellationToken,
    recovering: Arc<AtomicBool>,
    task: std::sync::Mutex<Option<JoinHandle<()>>>,
}

struct Watched {
    store: Arc<dyn Store>,
    hub: Arc<Hub>,
    executions: Arc<Executions>,
    settings: ClusterConfig,
}

/// What the task holds between beats: nothing that keeps the runtime alive, so that
/// dropping a runtime closes its store (and frees the SQLite file's lock) at once.
struct WatchedWeakly {
    store: Weak<dyn Store>,
    hub: Weak<Hub>,
    executions: Weak<Executions>,
    settings: ClusterConfig,
}

impl WatchedWeakly {
    fn upgrade(&self) -> Option<Watched> {
        Some(Watched {
            store: self.store.upgrade()?,
            hub: self.hub.upgrade()?,
            executions: self.executions.upgrade()?,
            settings: self.settings,
        })
    }
}

impl ReplicaWatch {
    /// Beats the heartbeat every `settings.heartbeat` until [`Self::stop`].
    pub(crate) fn start(
        store: Arc<dyn Store>,
        hub: Arc<Hub>,
        executions: Arc<Executions>,
        settings: ClusterConfig,
    ) -> Self {
        let stop = CancellationToken::new();
        let recovering = Arc::new(AtomicBool::new(false));
        let watched = WatchedWeakly {
            store: Arc::downgrade(&store),
            hub: Arc::downgrade(&hub),
            executions: Arc::downgrade(&executions),
            settings,
        };
        let task = tokio::spawn(watch(watched, stop.clone(), recovering.clone()));
        Self {
            stop,
            recovering,
            task: std::sync::Mutex::new(Some(task)),
        }
    }

    /// From now on, also recover the work of replicas found dead (servers do; a
    /// one-shot `run` only beats, so nobody takes its turn for a dead one's).
    pub(crate) fn recover_dead(&self) {
        self.recovering.store(true, Ordering::SeqCst);
    }

    /// Stops beating and waits for the task; [`Drop`] only stops it.
    pub(crate) async fn stop(&self) {
        self.stop.cancel();
        let task = self.task.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

async fn watch(weakly: WatchedWeakly, stop: CancellationToken, recovering: Arc<AtomicBool>) {
    // Turns recorded as running here that no task ran at the last beat.
    let mut idle = HashSet::new();
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(weakly.settings.heartbeat) => {}
        }
        // The runtime is gone (dropped without a shutdown): so is this replica.
        let Some(watched) = weakly.upgrade() else {
            return;
        };
        let shared = watched.store.shared();
        if let Err(e) = watched.store.heartbeat().await {
            tracing::warn!(error = %e, "could not record this replica's heartbeat");
        }
        if shared && recovering.load(Ordering::SeqCst) {
            recover(&watched).await;
            idle = sweep_orphans(&watched, idle).await;
        }
        if shared {
            // A cancel whose announcement this process missed is honoured within a beat.
            watched.hub.honour_cancel_requests().await;
        }
    }
}

/// Ends the turns the store records as running on this live replica that no task here
/// has run for two beats in a row: a write that would have ended them failed (the
/// database was unreachable for a moment), or their start failed halfway. Returns the
/// turns idle at this beat, for the next one.
async fn sweep_orphans(watched: &Watched, before: HashSet<TurnId>) -> HashSet<TurnId> {
    let me = watched.store.replica().clone();
    let recorded = match watched.store.running_turns_of(&me).await {
        Ok(turns) => turns,
        Err(e) => {
            tracing::warn!(error = %e, "could not list this replica's running turns");
            return before;
        }
    };
    let mut idle = HashSet::new();
    for turn in watched.hub.not_running_here(recorded) {
        if !before.contains(&turn) {
            idle.insert(turn);
            continue;
        }
        match watched.store.interrupt_turn(&turn).await {
            Ok(true) => {
                tracing::warn!(%turn, "a turn no task ran any more was ended as interrupted");
                watched
                    .hub
                    .announce_ended(std::slice::from_ref(&turn))
                    .await;
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(%turn, error = %e, "could not end an orphaned turn");
                idle.insert(turn);
            }
        }
    }
    idle
}

/// Claims each dead replica (one survivor gets each) and recovers its work.
pub(crate) async fn recover_all(
    store: &Arc<dyn Store>,
    hub: &Arc<Hub>,
    executions: &Arc<Executions>,
    settings: ClusterConfig,
) {
    recover(&Watched {
        store: store.clone(),
        hub: hub.clone(),
        executions: executions.clone(),
        settings,
    })
    .await;
}

async fn recover(watched: &Watched) {
    // Each dead replica once per call: one whose recovery failed is claimed again (by
    // this replica) at the next beat.
    let mut tried = std::collections::HashSet::new();
    loop {
        let dead = match watched
            .store
            .claim_dead_replica(watched.settings.replica_timeout)
            .await
        {
            Ok(Some(dead)) => dead,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "could not look for dead replicas");
                return;
            }
        };
        if !tried.insert(dead.clone()) {
            return;
        }
        if recover_one(watched, &dead).await
            && let Err(e) = watched.store.recovered(&dead).await
        {
            tracing::warn!(replica = %dead, error = %e, "could not close a recovery");
        }
    }
}

/// Ends a dead replica's running turns, then recovers its running executions; `true`
/// when both are done. A failure is retried a few times here, then at the next beat
/// (the claim is this replica's until it reports the recovery done, or dies).
async fn recover_one(watched: &Watched, dead: &ReplicaId) -> bool {
    const ATTEMPTS: u32 = 5;
    // Money the dead replica held for calls in flight is released: those calls ended
    // with it, unpaid as far as the budgets know.
    if let Some(ledger) = watched.store.budget_ledger() {
        match ledger.release_holds_of(dead).await {
            Ok(0) => {}
            Ok(released) => {
                tracing::info!(replica = %dead, released, "released a dead replica's budget holds");
            }
            Err(e) => {
                tracing::warn!(replica = %dead, error = %e,
                    "could not release a dead replica's budget holds");
            }
        }
    }
    let mut turns = None;
    for attempt in 1..=ATTEMPTS {
        match watched.store.interrupt_turns_of(dead).await {
            Ok(ended) => {
                turns = Some(ended);
                break;
            }
            Err(e) => {
                tracing::warn!(replica = %dead, attempt, error = %e,
                    "could not interrupt a dead replica's turns");
                tokio::time::sleep(watched.settings.heartbeat).await;
            }
        }
    }
    watched
        .hub
        .announce_ended(turns.as_deref().unwrap_or_default())
        .await;
    let mut recovered = None;
    for attempt in 1..=ATTEMPTS {
        let outcome = match watched.store.executions_of(dead).await {
            Ok(running) => watched
                .executions
                .recover(running)
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match outcome {
            Ok(count) => {
                recovered = Some(count);
                break;
            }
            Err(error) => {
                tracing::warn!(replica = %dead, attempt, %error,
                    "could not recover a dead replica's executions");
                tokio::time::sleep(watched.settings.heartbeat).await;
            }
        }
    }
    let done = turns.is_some() && recovered.is_some();
    let turns = turns.unwrap_or_default();
    tracing::warn!(
        replica = %dead,
        interrupted_turns = turns.len(),
        recovered_executions = recovered.unwrap_or(0),
        done,
        "a replica stopped beating; its work was recovered here"
    );
    done
}

impl Drop for ReplicaWatch {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
