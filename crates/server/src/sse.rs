//! A hub event stream as an SSE response: `id:` is the event's `seq`, `event:` its kind,
//! `data:` the event as JSON, with heartbeat comments in between.
//!
//! The SSE stream is only a view of the log: events were stored before the hub handed
//! them out, so a client that reconnects with `Last-Event-ID` loses nothing. A failure
//! while streaming becomes one `event: error` whose data is the error envelope (and
//! which has no `id:`, since it is not in the log), and then the stream ends. Whatever
//! must live as long as the client listens (a turn's disconnect guard) is moved into
//! the stream, so a client that goes away drops it.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use agentplane_engine::hub::EventStream;
use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use futures_util::{Stream, StreamExt};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;

use crate::error::ApiError;

/// A heartbeat: an SSE comment, which clients skip.
const HEARTBEAT: &[u8] = b": heartbeat\n\n";

/// How a stream is kept alive and when it ends.
pub(crate) struct StreamOptions {
    /// The longest silence before a heartbeat.
    pub heartbeat: Duration,
    /// Cancelled at shutdown: the stream ends.
    pub end: CancellationToken,
}

/// The state of one response's stream.
struct Streaming<G> {
    events: EventStream,
    _keep: G,
    failed: bool,
}

/// Streams `events` as SSE until they end, `options.end` is cancelled or the client
/// leaves; `keep` is dropped with the stream. Each event's frame is the one the hub
/// encoded for every subscriber of its thread (`SharedEvent::sse_frame`): sending it
/// to one more client costs a reference count, not a serialization.
pub(crate) fn respond<G: Send + 'static>(
    events: EventStream,
    keep: G,
    options: StreamOptions,
) -> Response {
    let state = Streaming {
        events,
        _keep: keep,
        failed: false,
    };
    let frames = futures_util::stream::unfold(state, |mut state| async move {
        if state.failed {
            return None;
        }
        let frame = match state.events.next_shared().await? {
            Ok(shared) => shared.sse_frame().unwrap_or_else(|e| {
                state.failed = true;
                error_frame(&ApiError::internal(&e))
            }),
            Err(e) => {
                state.failed = true;
                error_frame(&ApiError::from(e))
            }
        };
        Some((frame, state))
    })
    .take_until(options.end.cancelled_owned());
    event_stream(Body::from_stream(Heartbeats::new(
        frames,
        options.heartbeat,
    )))
}

/// `body`, already SSE frames, as a `text/event-stream` response that is never cached.
pub(crate) fn event_stream(body: Body) -> Response {
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// `event: error` with the envelope as its data, and no `id:`: it is not in the log.
fn error_frame(error: &ApiError) -> Bytes {
    // The envelope is compact JSON: its line breaks are escaped.
    Bytes::from(format!("event: error\ndata: {}\n\n", error.envelope()))
}

/// `frames`, with a heartbeat after every `interval` of silence. The timer is moved
/// only when it fires, to where the silence would end: a busy stream (10,000 of them
/// fanning out one turn) touches no timer per frame.
struct Heartbeats<S> {
    frames: Pin<Box<S>>,
    timer: Pin<Box<Sleep>>,
    interval: Duration,
    /// When the last frame or heartbeat went out.
    last: Instant,
}

impl<S> Heartbeats<S> {
    fn new(frames: S, interval: Duration) -> Self {
        Self {
            frames: Box::pin(frames),
            timer: Box::pin(tokio::time::sleep(interval)),
            interval,
            last: Instant::now(),
        }
    }
}

impl<S: Stream<Item = Bytes>> Stream for Heartbeats<S> {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        match this.frames.as_mut().poll_next(cx) {
            Poll::Ready(Some(frame)) => {
                this.last = Instant::now();
                return Poll::Ready(Some(Ok(frame)));
            }
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => {}
        }
        loop {
            ready!(this.timer.as_mut().poll(cx));
            let due = this.last + this.interval;
            if due > Instant::now() {
                // A frame went out since the timer was set: wait out the rest.
                this.timer.as_mut().reset(due);
                continue;
            }
            this.last = Instant::now();
            this.timer.as_mut().reset(this.last + this.interval);
            return Poll::Ready(Some(Ok(Bytes::from_static(HEARTBEAT))));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::mpsc;

    /// A stream of the frames sent on the returned sender.
    fn frames() -> (
        mpsc::UnboundedSender<Bytes>,
        impl Stream<Item = Bytes> + Send,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        let stream = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|frame| (frame, rx))
        });
        (tx, stream)
    }

    #[tokio::test]
    async fn a_heartbeat_comes_only_after_an_interval_of_silence() {
        let interval = Duration::from_millis(60);
        let (tx, stream) = frames();
        let mut stream = Heartbeats::new(stream, interval);
        let started = Instant::now();
        // Silence: the first item is a heartbeat, no sooner than the interval.
        let first = stream.next().await.expect("item").expect("infallible");
        assert_eq!(first, HEARTBEAT);
        assert!(started.elapsed() >= interval);
        // Frames sent in between come out as they are, and each one moves the next
        // heartbeat to an interval after it.
        for n in 0..3 {
            tokio::time::sleep(interval / 2).await;
            tx.send(Bytes::from(format!("data: {n}\n\n")))
                .expect("send");
            let sent = Instant::now();
            let frame = stream.next().await.expect("item").expect("infallible");
            assert_eq!(frame, format!("data: {n}\n\n").as_bytes());
            let mut next = std::pin::pin!(stream.next());
            if n < 2 {
                // Not a heartbeat: the next frame is sent before any could be due.
                assert!(
                    futures_util::poll!(next.as_mut()).is_pending(),
                    "nothing is due right after a frame"
                );
                continue;
            }
            let beat = next.await.expect("item").expect("infallible");
            assert_eq!(beat, HEARTBEAT);
            assert!(
                sent.elapsed() >= interval,
                "a heartbeat is never sooner than the interval after the last frame"
            );
        }
        // The stream ends when its frames do.
        drop(tx);
        assert!(stream.next().await.is_none());
    }
}
