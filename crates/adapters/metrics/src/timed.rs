//! The start times of running turns, so a turn's duration is measured from its
//! `turn_started` to its end; bounded by [`MAX_TIMED_TURNS`].

use std::collections::HashMap;
use std::time::Instant;

use agentplane_core::TurnId;

/// How many running turns are timed at once. A turn that starts when the map is full
/// evicts the oldest entry (a turn whose end this process will never see).
pub const MAX_TIMED_TURNS: usize = 10_000;

/// Running turns' start times, with the order they started in: ties between two
/// `Instant`s must not decide which entry is evicted.
#[derive(Debug, Default)]
pub(crate) struct TimedTurns {
    pub(crate) next: u64,
    pub(crate) started: HashMap<TurnId, (u64, Instant)>,
}
