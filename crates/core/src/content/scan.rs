//! The compiled [`Detectors`] and one scan of a whole text: each detector's candidates,
//! checked, then the findings taken by the one rule `super` describes. The stream
//! scanner (`super::stream`) takes findings by the same rule, from the same parts.

use std::cmp::Reverse;
use std::ops::Range;
use std::sync::Arc;

use regex::Regex;

use super::detector::{Check, Detector};

/// One piece of sensitive content: which detector found it and where. Holds no text, so
/// it can be logged, stored and answered as it is.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    /// The detector's name ([`Detector::name`]).
    pub detector: String,
    /// Byte offset of the first byte found.
    pub start: usize,
    /// Byte offset just after the last byte found.
    pub end: usize,
}

/// A compiled list of detectors, cheap to clone: the clones share the regexes and their
/// search caches.
#[derive(Debug, Clone)]
pub struct Detectors {
    pub(super) entries: Arc<[Entry]>,
}

#[derive(Debug)]
pub(super) struct Entry {
    detector: Detector,
    regex: Arc<Regex>,
    /// Matches, at the end of a stream's pending text, a start of text the pattern could
    /// still match once more arrives; `None` when there is none (then every position in
    /// the last `max_len` bytes is such a start).
    prefix: Option<Arc<Regex>>,
    check: Check,
    max_len: usize,
    pub(super) rank: u8,
}

impl Detectors {
    /// Compiles the list. Two findings of the same span are named by the more specific
    /// detector, then by the earlier in this list.
    pub fn new(detectors: Vec<Detector>) -> Detectors {
        let entries = detectors
            .into_iter()
            .map(|detector| {
                let (regex, check, prefix) = detector.matcher();
                Entry {
                    prefix,
                    max_len: detector.max_len(),
                    rank: detector.rank(),
                    regex,
                    check,
                    detector,
                }
            })
            .collect();
        Detectors { entries }
    }

    /// Whether there is nothing to find.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The longest text one finding can cover, in bytes: the most a stream holds back.
    pub fn max_len(&self) -> usize {
        self.entries.iter().map(|e| e.max_len).max().unwrap_or(0)
    }

    /// Every finding in `text`, by start, none overlapping another.
    pub fn scan(&self, text: &str) -> Vec<Finding> {
        let mut candidates = Vec::new();
        for (index, entry) in self.entries.iter().enumerate() {
            let mut at = 0;
            entry.advance(text, &mut at, true, |span| {
                candidates.push(Candidate::new(span, index, entry.rank));
            });
        }
        let mut taken = Taken::default();
        taken
            .take(&mut candidates)
            .into_iter()
            .map(|c| self.finding(c, 0))
            .collect()
    }

    /// `text` with every finding replaced by `[REDACTED:<detector>]`, and the findings
    /// (their offsets are in `text`, not in the result).
    pub fn redact(&self, text: &str) -> (String, Vec<Finding>) {
        let findings = self.scan(text);
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for finding in &findings {
            out.push_str(&text[at..finding.start]);
            push_redacted(&mut out, &finding.detector);
            at = finding.end;
        }
        out.push_str(&text[at..]);
        (out, findings)
    }

    pub(super) fn finding(&self, candidate: Candidate, base: usize) -> Finding {
        Finding {
            detector: self.entries[candidate.entry].detector.name().to_owned(),
            start: base + candidate.span.start,
            end: base + candidate.span.end,
        }
    }
}

/// What replaces a finding's text.
pub(super) fn push_redacted(out: &mut String, detector: &str) {
    out.push_str("[REDACTED:");
    out.push_str(detector);
    out.push(']');
}

impl Entry {
    /// Runs the detector over `hay` from `*at`, calling `found` with each finding, until
    /// the first position where a match could still depend on text after `hay` (none
    /// when `complete`: `hay` ends the text). Leaves `*at` there: the next search starts
    /// at it, and no finding of this detector starts before it that was not reported.
    ///
    /// `hay` must hold, before `*at`, the two characters the checks look at (or the
    /// text's start). Candidates are at most `max_len` long, so a match starting more
    /// than `max_len` bytes before the end is decided; a later one is decided unless the
    /// prefix regex says the tail from it could still grow into a match.
    pub(super) fn advance(
        &self,
        hay: &str,
        at: &mut usize,
        complete: bool,
        mut found: impl FnMut(Range<usize>),
    ) {
        let mut undecided = self.undecided_from(hay, *at, complete);
        while *at < hay.len() {
            if *at > undecided {
                undecided = self.undecided_from(hay, *at, complete);
            }
            let Some(m) = self.regex.find_at(hay, *at) else {
                break;
            };
            if m.start() >= undecided {
                break;
            }
            if m.is_empty() {
                // Only a `Detector::Custom` built by hand can match nothing; step over.
                *at = next_char_boundary(hay, m.end());
                continue;
            }
            if m.len() <= self.max_len
                && let Some(span) = self.check.accept(hay, m.range())
            {
                found(span);
            }
            *at = m.end();
        }
        *at = (*at).max(undecided.min(hay.len()));
    }

    /// The first position at or after `at` where a finding could start that text after
    /// `hay` might still make or change; `hay.len()` when there is none.
    fn undecided_from(&self, hay: &str, at: usize, complete: bool) -> usize {
        if complete {
            return hay.len();
        }
        let mut from = at.max(hay.len().saturating_sub(self.max_len));
        while !hay.is_char_boundary(from) {
            from += 1;
        }
        match &self.prefix {
            Some(prefix) => prefix
                .find_at(hay, from)
                .filter(|m| !m.is_empty())
                .map_or(hay.len(), |m| m.start()),
            None => from,
        }
    }
}

fn next_char_boundary(text: &str, at: usize) -> usize {
    text[at..]
        .chars()
        .next()
        .map_or(text.len(), |c| at + c.len_utf8())
}

/// A finding before the overlaps between detectors are settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Candidate {
    pub(super) span: Range<usize>,
    entry: usize,
    rank: u8,
}

impl Candidate {
    pub(super) fn new(span: Range<usize>, entry: usize, rank: u8) -> Candidate {
        Candidate { span, entry, rank }
    }

    /// By start; on the same start the longer, then the more specific detector, then
    /// the earlier in the list.
    pub(super) fn order(&self) -> (usize, Reverse<usize>, u8, usize) {
        (
            self.span.start,
            Reverse(self.span.end),
            self.rank,
            self.entry,
        )
    }
}

/// The findings taken so far: where the last one ends, so one overlapping it is dropped.
#[derive(Debug, Default)]
pub(super) struct Taken {
    end: usize,
}

impl Taken {
    /// Takes `candidates` (all of those starting before a point no other candidate
    /// starts before), drops the overlapping ones, and empties the list.
    pub(super) fn take(&mut self, candidates: &mut Vec<Candidate>) -> Vec<Candidate> {
        candidates.sort_by_key(Candidate::order);
        let mut taken = Vec::new();
        for candidate in candidates.drain(..) {
            if candidate.span.start >= self.end {
                self.end = candidate.span.end;
                taken.push(candidate);
            }
        }
        taken
    }
}
