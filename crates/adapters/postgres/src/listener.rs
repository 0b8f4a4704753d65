//! The `LISTEN` task: one dedicated connection (outside the pool) listens on the
//! channel the `events_announce` trigger notifies and on the cancel channel, and feeds
//! `ReplicaStore::announcements`. PostgreSQL delivers a notification only after its
//! transaction commits, and in commit order, so each wake-up names an event (or a
//! cancel request) any replica can already read.
//!
//! When the connection drops, the task reconnects (backing off up to a few seconds)
//! and listens again. What was committed while it was away is not announced, so once
//! it listens again it sends `Announcement::Resumed` before anything newer: the
//! consumer reads the store at once and misses nothing (ADR 0027). Until the feed is
//! taken, notifications are dropped rather than queued without bound.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agentplane_core::{ThreadId, TurnId};
use agentplane_engine::ports::{Announcement, Appended, StoreError};
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_postgres::{AsyncMessage, Client, Config, NoTls};

use crate::rows::pg;
use crate::schema;

/// Wake-ups buffered for a consumer that is momentarily busy.
const FEED: usize = 4_096;

/// The longest pause between two reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The feed's receiving end, in the store until someone takes it.
pub(crate) type Slot = Arc<Mutex<Option<mpsc::Receiver<Announcement>>>>;

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
    notifications: mpsc::UnboundedReceiver<(String, String)>,
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
                    let message = (n.channel().to_owned(), n.payload().to_owned());
                    if sender.send(message).is_err() {
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
        .batch_execute(&format!(
            "LISTEN {}; LISTEN {}",
            schema::CHANNEL,
            schema::CANCEL_CHANNEL
        ))
        .await
        .map_err(pg)?;
    Ok(Listening {
        _client: client,
        notifications,
    })
}

async fn run(config: Config, slot: Slot, feed: mpsc::Sender<Announcement>, first: Listening) {
    let mut listening = first;
    loop {
        while let Some((channel, payload)) = listening.notifications.recv().await {
            let Some(announcement) = parse(&channel, &payload) else {
                tracing::warn!(%channel, %payload, "ignoring a malformed notification");
                continue;
            };
            send(&slot, &feed, announcement).await;
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
        // Listening again: whatever commits from now on is announced; what committed
        // during the gap is for the consumer to read, at once.
        send(&slot, &feed, Announcement::Resumed).await;
        tracing::info!("postgres listen connection restored");
    }
}

/// Hands `announcement` to the consumer, once it has taken the feed.
async fn send(slot: &Slot, feed: &mpsc::Sender<Announcement>, announcement: Announcement) {
    let taken = slot
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .is_none();
    // A consumer that went away leaves nothing to wake.
    if taken && feed.send(announcement).await.is_err() {
        tracing::debug!("the announcements feed was dropped");
    }
}

/// `thread_id:seq` on the events channel, as the trigger writes it; a turn id on the
/// cancel channel.
fn parse(channel: &str, payload: &str) -> Option<Announcement> {
    if channel == schema::CANCEL_CHANNEL {
        return TurnId::parse(payload)
            .ok()
            .map(Announcement::CancelRequested);
    }
    let (thread, seq) = payload.rsplit_once(':')?;
    Some(Announcement::Appended(Appended {
        thread: ThreadId::parse(thread).ok()?,
        seq: seq.parse().ok()?,
    }))
}
