//! The "could this still become a finding?" test a stream needs: from a detector's
//! pattern, a second regex that matches every text a finding could begin with.
//!
//! A stream holds back its tail only from the first place where a finding could start
//! and be completed by the next piece; plain prose (no digit, no `@`, no `sk-`) is passed
//! on at once instead of always waiting `max_len` bytes. What must not live here: any
//! decision about what is a finding — that is the pattern and its check, in `detector`.

use regex::{Regex, RegexBuilder};
use regex_syntax::hir::{Hir, HirKind, Look, Repetition};

/// The compiled size a prefix regex may take; one that needs more is dropped and the
/// stream falls back to holding back `max_len` bytes (slower to release, never wrong).
/// The built-in `secret` detector's, with its long bounded runs, needs about 4 MiB; a
/// custom pattern's is a few times its own, itself at most `PATTERN_SIZE_LIMIT`.
const PREFIX_SIZE_LIMIT: usize = 8 << 20;

/// A regex matching, at the very end of a text, any non-empty start of a text the
/// `pattern` could match (its assertions ignored, so it finds a superset: holding back
/// too much delays text, holding back too little would leak it). `None` when the
/// pattern does not parse or the prefix regex is too large.
pub(super) fn prefix_regex(pattern: &str) -> Option<Regex> {
    let hir = regex_syntax::parse(pattern).ok()?;
    let prefixes = Hir::concat(vec![prefixes(&hir), Hir::look(Look::End)]);
    RegexBuilder::new(&prefixes.to_string())
        .size_limit(PREFIX_SIZE_LIMIT)
        .dfa_size_limit(PREFIX_SIZE_LIMIT)
        .build()
        .ok()
}

/// Every start (the empty one and the whole included) of every text `hir` matches,
/// look-around assertions treated as always true.
fn prefixes(hir: &Hir) -> Hir {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => Hir::empty(),
        HirKind::Literal(literal) => {
            // One optional step per character: `abc` gives `(?:a(?:b(?:c)?)?)?`.
            let steps: Vec<Hir> = match std::str::from_utf8(&literal.0) {
                Ok(text) => text
                    .chars()
                    .map(|c| Hir::literal(c.to_string().into_bytes()))
                    .collect(),
                Err(_) => literal.0.iter().map(|b| Hir::literal(vec![*b])).collect(),
            };
            steps.into_iter().rev().fold(Hir::empty(), |rest, step| {
                optional(Hir::concat(vec![step, rest]))
            })
        }
        HirKind::Class(_) => optional(hir.clone()),
        HirKind::Repetition(rep) => match rep.max {
            Some(0) => Hir::empty(),
            // Some whole repetitions, then the start of one more.
            max => Hir::concat(vec![
                Hir::repetition(Repetition {
                    min: 0,
                    max: max.map(|m| m - 1),
                    greedy: true,
                    sub: Box::new(without_looks(&rep.sub)),
                }),
                prefixes(&rep.sub),
            ]),
        },
        HirKind::Capture(capture) => prefixes(&capture.sub),
        // The start of the first part, or the whole first part and a start of the rest;
        // nested from the right, so the result grows linearly with the parts.
        HirKind::Concat(parts) => {
            let mut parts = parts.iter().rev();
            let last = parts.next().map_or_else(Hir::empty, prefixes);
            parts.fold(last, |rest, part| {
                Hir::alternation(vec![
                    prefixes(part),
                    Hir::concat(vec![without_looks(part), rest]),
                ])
            })
        }
        HirKind::Alternation(branches) => Hir::alternation(branches.iter().map(prefixes).collect()),
    }
}

/// `hir` with every look-around assertion dropped (treated as true).
fn without_looks(hir: &Hir) -> Hir {
    match hir.kind() {
        HirKind::Look(_) => Hir::empty(),
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) => hir.clone(),
        HirKind::Repetition(rep) => Hir::repetition(Repetition {
            sub: Box::new(without_looks(&rep.sub)),
            ..rep.clone()
        }),
        HirKind::Capture(capture) => without_looks(&capture.sub),
        HirKind::Concat(parts) => Hir::concat(parts.iter().map(without_looks).collect()),
        HirKind::Alternation(branches) => {
            Hir::alternation(branches.iter().map(without_looks).collect())
        }
    }
}

fn optional(hir: Hir) -> Hir {
    Hir::repetition(Repetition {
        min: 0,
        max: Some(1),
        greedy: true,
        sub: Box::new(hir),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the tail that could still grow into a match starts, if anywhere.
    fn tail(pattern: &str, text: &str) -> Option<usize> {
        let re = prefix_regex(pattern).expect("prefix regex");
        re.find(text).filter(|m| !m.is_empty()).map(|m| m.start())
    }

    #[test]
    fn a_literal_prefix_is_found_at_the_end_only() {
        assert_eq!(tail("sk-[a-z]{4}", "key s"), Some(4));
        assert_eq!(tail("sk-[a-z]{4}", "key sk-ab"), Some(4));
        assert_eq!(tail("sk-[a-z]{4}", "key sk-abcd"), Some(4));
        assert_eq!(tail("sk-[a-z]{4}", "key sx"), None);
        assert_eq!(tail("sk-[a-z]{4}", "key sk-abcde"), None);
        assert_eq!(tail("sk-[a-z]{4}", ""), None);
    }

    #[test]
    fn repetitions_alternations_and_assertions() {
        // The leftmost start wins: `12 34` could be the start of a run of digits groups.
        assert_eq!(tail(r"\b[0-9](?:[ -]?[0-9]){3,5}\b", "n 12 34"), Some(2));
        assert_eq!(tail(r"\b[0-9](?:[ -]?[0-9]){3,5}\b", "n 12 34 x"), None);
        assert_eq!(tail(r"(?:ab|cd)+e", "xxabcdab"), Some(2));
        assert_eq!(tail(r"(?:ab|cd)+e", "xxabcdaX"), None);
        assert_eq!(tail(r"(?P<k>é+)ü", "aéé"), Some(1));
    }

    #[test]
    fn a_prefix_regex_that_would_be_too_large_is_none() {
        assert!(prefix_regex(r"\w{4000}").is_none());
        assert!(prefix_regex("(").is_none());
    }
}
