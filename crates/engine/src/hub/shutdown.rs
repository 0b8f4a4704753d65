//! The hub's shutdown: stop accepting turns, let running ones finish within a grace
//! period, cancel the rest and wait for them to be written, then close the live feeds.
//! Every method that starts work asks `accepting` first.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::state::Hub;
use crate::error::HubError;

impl Hub {
    /// How many turns are running.
    pub fn running_turns(&self) -> usize {
        self.live.running_count()
    }

    /// Stops accepting turns, lets running ones finish within `grace`, then cancels the
    /// rest (recorded as `cancelled`) and waits for them to be written.
    pub async fn shutdown(&self, grace: Duration) {
        self.accepting.store(false, Ordering::SeqCst);
        self.stopping.cancel();
        self.tasks.close();
        if tokio::time::timeout(grace, self.tasks.wait())
            .await
            .is_err()
        {
            let tokens = self.live.all_cancel_tokens();
            tracing::warn!(
                turns = tokens.len(),
                "shutdown grace period over; cancelling running turns"
            );
            for token in tokens {
                token.cancel();
            }
            let _ = tokio::time::timeout(Duration::from_secs(10), self.tasks.wait()).await;
        }
        // Closing the feeds ends live streams once they have delivered what is stored.
        self.live.close_feeds();
    }

    /// Whether the hub still accepts work: `ShuttingDown` once `shutdown` began.
    pub(super) fn accepting(&self) -> Result<(), HubError> {
        if self.accepting.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err(HubError::ShuttingDown)
        }
    }
}
