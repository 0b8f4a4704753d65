//! Scanning a stream (a model's streamed answer) piece by piece: text is passed on as
//! soon as no finding can start in it any more, and what it passes on, joined, is what
//! scanning the whole text would give, wherever the pieces are cut.
//!
//! The tail that is held back starts at the first position where some detector's
//! finding could still be made or changed by the next piece: a run of digits, a word
//! that could be an email's start, `sk-`… and is never longer than the detectors'
//! `max_len`. Plain prose passes at once. What must not live here: what a finding is
//! (`detector.rs`, `check.rs`) and how overlaps are settled (`mod.rs`): the stream runs
//! the same code as [`Detectors::scan`], only stopping where the text is not decided.

use std::fmt;

use super::scan::{Candidate, Detectors, Finding, Taken, push_redacted};

/// How many characters before the next search a stream keeps: the checks look at two
/// before a candidate (`check.rs`), the regexes' word boundaries at one.
const CONTEXT_CHARS: usize = 2;

/// Scans a stream of text pieces with a list of detectors, passing on the text (redacted
/// or not) as soon as it is decided, and the findings as they complete.
pub struct StreamScanner {
    detectors: Detectors,
    redact: bool,
    /// The text from `base` on that is not yet passed on, and the context before it.
    pending: String,
    /// Stream offset of `pending`'s first byte.
    base: usize,
    /// Stream offset up to which text has been passed on.
    sent: usize,
    /// Per detector, the stream offset its next search starts at; no finding of it
    /// starts before it unreported.
    at: Vec<usize>,
    /// Findings of the detectors not yet settled against each other (offsets in
    /// `pending`-independent stream offsets).
    candidates: Vec<Candidate>,
    taken: Taken,
}

/// Offsets and sizes only: the held-back text is what may be sensitive.
impl fmt::Debug for StreamScanner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamScanner")
            .field("redact", &self.redact)
            .field("received", &(self.base + self.pending.len()))
            .field("sent", &self.sent)
            .finish_non_exhaustive()
    }
}

impl StreamScanner {
    /// A scanner for one stream. With `redact`, every finding is replaced by
    /// `[REDACTED:<detector>]` in the text passed on; without, the text passes unchanged
    /// and only the findings are reported.
    pub fn new(detectors: Detectors, redact: bool) -> Self {
        let at = vec![0; detectors.entries.len()];
        StreamScanner {
            detectors,
            redact,
            pending: String::new(),
            base: 0,
            sent: 0,
            at,
            candidates: Vec::new(),
            taken: Taken::default(),
        }
    }

    /// Takes the next piece of a stream; returns the text that is now safe to pass on
    /// (redacted when `redact`), and the findings completed so far (offsets relative to
    /// the whole stream as received). Holds back at most the detectors' `max_len` bytes.
    pub fn push(&mut self, piece: &str) -> (String, Vec<Finding>) {
        self.pending.push_str(piece);
        self.step(false)
    }

    /// The end of the stream: the rest, and its findings. The scanner is then ready for
    /// a new stream, its offsets starting at 0 again.
    pub fn finish(&mut self) -> (String, Vec<Finding>) {
        let out = self.step(true);
        *self = StreamScanner::new(self.detectors.clone(), self.redact);
        out
    }

    /// Runs every detector as far as the text is decided (to the end when `complete`),
    /// settles the findings that start before the first undecided position, and passes
    /// on the text up to it (or to the end of a finding across it).
    fn step(&mut self, complete: bool) -> (String, Vec<Finding>) {
        let end = self.base + self.pending.len();
        let mut decided = end;
        for (index, entry) in self.detectors.entries.iter().enumerate() {
            let mut at = self.at[index] - self.base;
            let base = self.base;
            let candidates = &mut self.candidates;
            entry.advance(&self.pending, &mut at, complete, |span| {
                candidates.push(Candidate::new(
                    base + span.start..base + span.end,
                    index,
                    entry.rank,
                ));
            });
            self.at[index] = base + at;
            decided = decided.min(base + at);
        }
        // Every candidate starting before `decided` is known, so these are settled as
        // the whole text would settle them; the others wait.
        self.candidates.sort_by_key(Candidate::order);
        let ready = self
            .candidates
            .iter()
            .take_while(|c| c.span.start < decided)
            .count();
        let mut ready: Vec<Candidate> = self.candidates.drain(..ready).collect();
        let taken = self.taken.take(&mut ready);
        let until = taken
            .last()
            .map_or(decided, |last| last.span.end.max(decided))
            .max(self.sent);

        let mut out = String::with_capacity(until - self.sent);
        let mut findings = Vec::with_capacity(taken.len());
        for candidate in taken {
            let finding = self.detectors.finding(candidate, 0);
            if self.redact {
                out.push_str(self.text(self.sent..finding.start));
                push_redacted(&mut out, &finding.detector);
            } else {
                out.push_str(self.text(self.sent..finding.end));
            }
            self.sent = finding.end;
            findings.push(finding);
        }
        out.push_str(self.text(self.sent..until));
        self.sent = until;
        self.forget_before(self.at.iter().copied().fold(self.sent, usize::min));
        (out, findings)
    }

    /// The stream's text between two stream offsets still held.
    fn text(&self, range: std::ops::Range<usize>) -> &str {
        &self.pending[range.start - self.base..range.end - self.base]
    }

    /// Drops the held text before `offset`, but for [`CONTEXT_CHARS`] characters.
    fn forget_before(&mut self, offset: usize) {
        let keep = &self.pending[..offset - self.base];
        let context: usize = keep
            .chars()
            .rev()
            .take(CONTEXT_CHARS)
            .map(char::len_utf8)
            .sum();
        let drop = keep.len() - context;
        if drop > 0 {
            self.pending.drain(..drop);
            self.base += drop;
        }
    }
}
