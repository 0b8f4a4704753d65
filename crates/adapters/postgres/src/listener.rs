//! The `LISTEN` task: one dedicated connection (outside the pool) listens on the
//! channel the `events_announce` trigger notifies, and feeds `ReplicaStore::appended`.
//! PostgreSQL delivers a notification only after its transaction commits, and in
//! commit order, so each wake-up names an event any replica can already read.
//!
//! When the connection drops, the task reconnects (backing off up to a few seconds)
//! and listens again; events committed while it was away are not announced, which a
//! consumer tolerates because a wake-up only tells it to read the store. Until the
//! feed is taken, notifications are dropped rather than queued without bound.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agentplane_core::ThreadId;
use agentplane_engine::ports::{Appended, StoreError};
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_postgres::{AsyncMessage, Client, Config, NoTls};

use crate::{pg, schema};

/// Wake-ups buffered for a consumer that is momentarily busy.
const FEED: usize = 4_096;

/// The longest pause between two reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The feed's receiving end, in the store until someone takes it.
pub(crate) type Slot = Arc<Mutex<Option<mpsc::Receiver<Appended>>>>;

/// Connects and listens once (so a broken URL or a refused `LISTEN` fails `connect`,
/// and every event committed after `connect` returns is announced), then keeps
/// listening in the background.
pub(crate) async fn spawn(config: Config, slot: Slot) -> Result<JoinHandle<()>, StoreError> {
    let mut config = config;
    // Named apart from the pool's connections, for operators reading pg_stat_activity.
    config.application_name("agentplane-listener");
    let (feed, receiver) = mpsc::channel(FEED);
    *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(receiver);
    let first = listen(&config).await?;
    Ok(tokio::spawn(run(config, slot, feed, first)))
}

/// A listening connection: its client (dropping it closes the connection) and the
/// notifications it receives; the receiver ends when the connection does.
struct Listening {
    _client: Client,
    notifications: mpsc::UnboundedReceiver<String>,
}

async fn listen(config: &Config) -> Result<Listening, StoreError> {
    let (client, mut connection) = config
        .connect(NoTls)
        .await
        .map_err(|e| StoreError::Backend(format!("cannot connect to PostgreSQL to listen: {e}")))?;
    let (sender, notifications) = mpsc::unbounded_channel();
    // The connection does its I/O only while polled: this task drives it and hands
    // notifications over until the server or the network ends it.
    tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    if sender.send(n.payload().to_owned()).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "postgres listen connection failed");
                    return;
                }
            }
        }
    });
    client
        .batch_execute(&format!("LISTEN {}", schema::CHANNEL))
        .await
        .map_err(pg)?;
    Ok(Listening {
        _client: client,
        notifications,
    })
}

async fn run(config: Config, slot: Slot, feed: mpsc::Sender<Appended>, first: Listening) {
    let mut listening = first;
    loop {
        while let Some(payload) = listening.notifications.recv().await {
            let Some(appended) = parse(&payload) else {
                tracing::warn!(%payload, "ignoring a malformed event notification");
                continue;
            };
            let taken = slot
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_none();
            // A consumer that went away leaves nothing to wake.
            if taken && feed.send(appended).await.is_err() {
                tracing::debug!("the appended feed was dropped");
            }
        }
        tracing::warn!("postgres listen connection lost; reconnecting");
        let mut backoff = Duration::from_millis(100);
        listening = loop {
            tokio::time::sleep(backoff).await;
            match listen(&config).await {
                Ok(listening) => break listening,
                Err(e) => {
                    tracing::warn!(error = %e, "postgres listen reconnect failed");
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        };
        tracing::info!("postgres listen connection restored");
    }
}

/// `thread_id:seq`, as the trigger writes it.
fn parse(payload: &str) -> Option<Appended> {
    let (thread, seq) = payload.rsplit_once(':')?;
    Some(Appended {
        thread: ThreadId::parse(thread).ok()?,
        seq: seq.parse().ok()?,
    })
}
