//! One streamed gateway answer, whatever API the client speaks: the call runs in a
//! task of its own, its text deltas pass the secret redactor (text that may be the
//! start of a secret waits for the next delta) and go out in the client's framing
//! ([`StreamFrames`]: OpenAI's chunks, the Responses API's events, Anthropic's
//! events), then the end (tool calls, finish, usage) or one error frame.
//!
//! A client that leaves mid-stream stops the forwarding; the call goes on for
//! [`ABANDONED_GRACE`] to be charged the usage it reports, else the worst case
//! (`governance::meter`), never nothing.

use std::convert::Infallible;

use agentplane_core::secret;
use agentplane_engine::gateway::{AdmittedCall, GatewayReply};
use axum::body::{Body, Bytes};
use axum::response::Response;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::error::ApiError;

/// How long a streamed call goes on after its client left, for the usage it reports.
const ABANDONED_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// How one API frames a streamed answer. Each method returns whole SSE frames.
pub(crate) trait StreamFrames: Send + 'static {
    /// Before any text: the answer's opening.
    fn start(&mut self) -> String;
    /// A text delta (already redacted).
    fn text(&mut self, text: &str) -> String;
    /// The end of an answered call: its tool calls, the finish and the usage.
    fn end(&mut self, reply: &GatewayReply) -> String;
    /// A failure after the stream began.
    fn error(&mut self, error: &ApiError) -> String;
}

/// An SSE frame with an `event:` line; the data passes the redactor (the model's
/// words and tool-call arguments may echo a secret).
pub(crate) fn event(kind: &str, mut data: Value) -> String {
    secret::current().redact_json(&mut data);
    format!("event: {kind}\ndata: {data}\n\n")
}

/// Streams `call`'s answer framed by `frames`.
pub(crate) fn stream(call: AdmittedCall, mut frames: impl StreamFrames) -> Response {
    let (tx, rx) = mpsc::unbounded_channel::<String>();
    // The receiver is still held here, so this send cannot fail.
    let _ = tx.send(frames.start());
    tokio::spawn(async move {
        let deltas = tx.clone();
        let redactor = secret::current();
        let mut held = secret::HeldBack::default();
        let mut on_text = |text: &str| {
            if let Some(safe) = held.push(&redactor, text) {
                // Fails only once the client has gone; `closed()` below ends the call then.
                let _ = deltas.send(frames.text(&safe));
            }
        };
        let answered = {
            let called = call.call(&mut on_text);
            tokio::pin!(called);
            tokio::select! {
                answered = &mut called => answered,
                () = tx.closed() => {
                    // The client left. The model was asked: the call goes on a little
                    // longer so it is charged the usage it reports; past that, dropping
                    // it charges the worst case (`governance::meter`), never nothing.
                    let _ = tokio::time::timeout(ABANDONED_GRACE, &mut called).await;
                    return;
                }
            }
        };
        if let Some(rest) = held.finish(&redactor) {
            let _ = tx.send(frames.text(&rest));
        }
        let last = match answered {
            Ok(reply) => frames.end(&reply),
            Err(e) => frames.error(&ApiError::from(e)),
        };
        let _ = tx.send(last);
    });
    // Ends when the call's task drops its sender.
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        let frame = rx.recv().await?;
        Some((Ok::<_, Infallible>(Bytes::from(frame)), rx))
    });
    crate::sse::event_stream(Body::from_stream(stream))
}
