//! What each detector finds: the built-in patterns, word for word, and the checks
//! (Luhn, mod-97, digit counts) a pattern's match must pass, and custom patterns with
//! the limits that keep them linear in time and bounded in length.
//!
//! A detector is a pattern plus a check. The pattern finds a candidate of bounded length
//! (its longest match is the detector's `max_len`, which a stream holds back at most);
//! the check looks at the candidate and at most two characters before it and one after,
//! and keeps all, part or none of it. What must not live here: scanning a text or a
//! stream, and the choice between overlapping findings (`mod.rs`, `stream.rs`).

use std::ops::Range;
use std::sync::{Arc, LazyLock};

use regex::{Regex, RegexBuilder};

use super::check;

/// The longest custom pattern accepted, in bytes.
pub const MAX_PATTERN_LEN: usize = 1024;
/// The compiled size a custom pattern may take (`RegexBuilder::size_limit`).
pub const PATTERN_SIZE_LIMIT: usize = 256 * 1024;
/// The lazy DFA cache a custom pattern may use (`RegexBuilder::dfa_size_limit`).
pub const PATTERN_DFA_SIZE_LIMIT: usize = 1024 * 1024;
/// A custom pattern's `max_len` when none is given.
pub const DEFAULT_CUSTOM_MAX_LEN: usize = 256;
/// The largest `max_len` a custom pattern may declare: a stream may hold back that much.
pub const MAX_CUSTOM_MAX_LEN: usize = 4096;

/// One kind of sensitive content. Word boundaries below are ASCII ones: a letter, digit
/// or `_` next to the match ends it; any other character (also a non-ASCII letter) does
/// not.
#[derive(Debug, Clone)]
pub enum Detector {
    /// API keys and tokens, by their published shapes:
    /// - AWS access key ids: `AKIA` or `ASIA` and 16 of `A-Z0-9`, a whole word;
    /// - GitHub tokens: `ghp_`, `gho_`, `ghu_`, `ghs_` or `ghr_` and 36 of `A-Za-z0-9`,
    ///   a whole word; `github_pat_` and 82 of `A-Za-z0-9_`, a whole word;
    /// - OpenAI and Anthropic keys: `sk-`, `sk-proj-` or `sk-ant-` at the start of a word,
    ///   and 20 to 200 of `A-Za-z0-9_-`;
    /// - Slack tokens: `xoxb-`, `xoxa-`, `xoxp-`, `xoxr-` or `xoxs-` at the start of a word,
    ///   and 10 to 200 of `A-Za-z0-9-`;
    /// - Google API keys: `AIza` at the start of a word and 35 of `A-Za-z0-9_-`;
    /// - Stripe live keys: `sk_live_` or `rk_live_` at the start of a word and 16 to 200
    ///   of `A-Za-z0-9`;
    /// - PEM private keys: the header `-----BEGIN PRIVATE KEY-----`, with up to three
    ///   words of 1 to 20 of `A-Z0-9` and a space before `PRIVATE` (`RSA `, `EC `,
    ///   `OPENSSH `, `ENCRYPTED `), and
    ///   the base64 lines that follow it (up to 64 lines of up to 80 of `A-Za-z0-9+/=`)
    ///   and its `-----END … PRIVATE KEY-----` footer when they are there;
    /// - JWTs: at the start of a word, `eyJ` and 5 to 500 of `A-Za-z0-9_-`, a `.`, `eyJ`
    ///   and 5 to 2500 of them, a `.`, and up to 1000 of them (the signature).
    ///
    /// A key longer than its shape's maximum is found by its first characters (up to the
    /// maximum); a longer AWS, GitHub or Google key, or a longer JWT, is not found.
    Secret,
    /// Email addresses: 1 to 64 of `A-Za-z0-9._%+-` (of a longer local part, its last
    /// 64), `@`, one to eight domain labels (letters, digits and inner `-`, up to 63
    /// each) each followed by `.`, and a top-level domain of 2 to 24 letters ending a
    /// word. Not a bare `@handle`, not `user@host` without a dot.
    Email,
    /// Phone numbers. A candidate is a run of digits, spaces, `(`, `)`, `.` and `-` that
    /// starts with a digit, `(`, `+` or `+(` and is at most 33 bytes long (a longer run
    /// is not a phone number), its trailing non-digits left out. It is one when:
    /// - it is not glued to a letter, digit, `_` or `+` before it, and (without `+`) not
    ///   after a digit and one separator;
    /// - between two groups of digits there are one to three characters: at most two
    ///   spaces and at most one `-` or `.`, and the parentheses of at most one pair
    ///   (`(555) 123-4567`, `+49 (0)30 1234567`);
    /// - international: `+` and 8 to 15 digits (`+44 20 7946 0958`, `+4915123456789`);
    /// - national: no `+`, 10 to 15 digits in at least two groups, every group after the
    ///   first of two digits or more (`020 7946 0958`, `1-800-555-1234`), and not a date
    ///   (`2026-11-27 10-30`, `27.11.2026 10.30`: groups of 4-2-2 or 2-2-4 first), a
    ///   version (`10.0.19041.1234`), an IPv4 address (`192.168.100.200`) or an amount
    ///   with dots between thousands (`1.234.567.890`).
    ///
    /// So a number without `+` or separators (an id) is never one.
    Phone,
    /// Payment card numbers: 13 to 19 digits, with at most one space or `-` between two
    /// digits, passing the Luhn check, and not part of a longer run: not right after a
    /// digit, or after a digit and one space or `-`, and not followed by more digits
    /// (with or without one separator). Two numbers apart by a single space are one run.
    Card,
    /// IBANs (ISO 13616): two capital letters, two check digits and 11 to 30 of
    /// `A-Z0-9`, written as one word or in groups of four separated by single spaces
    /// (the last group shorter), with a valid mod-97 checksum and, for a country whose
    /// IBAN length is known (DE 22, GB 22, FR 27, NL 18, ES 24, IT 27, CH 21, AT 20,
    /// BE 16 and 80 more), exactly that length. A word of four that follows a grouped
    /// IBAN is left out of it.
    Iban,
    /// A pattern of the policy's own, built with [`Detector::custom`]: its matches, at
    /// most `max_len` bytes each. Build it with [`Detector::custom`], which checks the
    /// pattern: one built by hand whose matches can be longer than `max_len` has those
    /// dropped, and may then find differently in a stream than in the whole text.
    Custom {
        /// Names the detector in findings and in `[REDACTED:<name>]`.
        name: String,
        /// The compiled pattern.
        regex: Regex,
        /// The longest text the pattern can match, in bytes.
        max_len: usize,
    },
}

impl Detector {
    /// A built-in detector by its name: `secret`, `email`, `phone`, `card` or `iban`.
    pub fn parse(name: &str) -> Option<Detector> {
        Some(match name {
            "secret" => Detector::Secret,
            "email" => Detector::Email,
            "phone" => Detector::Phone,
            "card" => Detector::Card,
            "iban" => Detector::Iban,
            _ => return None,
        })
    }

    /// A detector for a policy's own pattern, refused with a message that says why when
    /// it could be slow, unbounded or meaningless: a pattern over [`MAX_PATTERN_LEN`]
    /// bytes or over the compiled size limits, one with backreferences or look-around
    /// (not supported: matching stays linear in time), one that can match the empty
    /// string, and one whose matches can be longer than `max_len` bytes (default
    /// [`DEFAULT_CUSTOM_MAX_LEN`], at most [`MAX_CUSTOM_MAX_LEN`]). The name (1 to 64 of
    /// `A-Za-z0-9_-`, not a built-in's) appears in findings and redactions.
    pub fn custom(name: &str, pattern: &str, max_len: Option<usize>) -> Result<Detector, String> {
        let valid_name = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid_name {
            return Err(format!(
                "content detector name `{name}`: use 1 to 64 of A-Z, a-z, 0-9, `_` and `-`"
            ));
        }
        if Detector::parse(name).is_some() {
            return Err(format!(
                "content detector name `{name}` is a built-in detector's; choose another"
            ));
        }
        let refuse = |why: String| Err(format!("content detector `{name}`: {why}"));
        let max_len = max_len.unwrap_or(DEFAULT_CUSTOM_MAX_LEN);
        if max_len == 0 || max_len > MAX_CUSTOM_MAX_LEN {
            return refuse(format!(
                "max_len is {max_len}; it must be between 1 and {MAX_CUSTOM_MAX_LEN} bytes"
            ));
        }
        if pattern.len() > MAX_PATTERN_LEN {
            return refuse(format!(
                "the pattern is {} bytes long; at most {MAX_PATTERN_LEN} are allowed",
                pattern.len()
            ));
        }
        let ast = match regex_syntax::ast::parse::Parser::new().parse(pattern) {
            Ok(ast) => ast,
            Err(err) => {
                use regex_syntax::ast::ErrorKind;
                return refuse(match err.kind() {
                    ErrorKind::UnsupportedBackreference => {
                        "backreferences (`\\1`) are not supported: patterns must match in \
                         linear time"
                            .to_owned()
                    }
                    ErrorKind::UnsupportedLookAround => {
                        "look-around (`(?=`, `(?!`, `(?<=`, `(?<!`) is not supported: \
                         patterns must match in linear time"
                            .to_owned()
                    }
                    _ => format!("the pattern is not a valid regex: {err}"),
                });
            }
        };
        let hir = match regex_syntax::hir::translate::Translator::new().translate(pattern, &ast) {
            Ok(hir) => hir,
            Err(err) => return refuse(format!("the pattern is not a valid regex: {err}")),
        };
        if hir.properties().minimum_len() == Some(0) {
            return refuse(
                "the pattern can match the empty string, which would be a finding \
                 everywhere; require at least one character"
                    .to_owned(),
            );
        }
        let longest = match hir.properties().maximum_len() {
            Some(longest) if longest <= max_len => longest,
            Some(longest) => {
                return refuse(format!(
                    "the pattern can match up to {longest} bytes, more than its max_len of \
                     {max_len}; bound its repetitions or raise max_len (at most \
                     {MAX_CUSTOM_MAX_LEN})"
                ));
            }
            None => {
                return refuse(format!(
                    "the pattern can match text of any length (`*`, `+` or `{{n,}}`); bound \
                     its repetitions (`{{1,64}}`) so a match is at most max_len ({max_len}) \
                     bytes"
                ));
            }
        };
        let regex = RegexBuilder::new(pattern)
            .size_limit(PATTERN_SIZE_LIMIT)
            .dfa_size_limit(PATTERN_DFA_SIZE_LIMIT)
            .build()
            .map_err(|err| match err {
                regex::Error::CompiledTooBig(limit) => format!(
                    "content detector `{name}`: the pattern compiles to more than {limit} \
                     bytes; make it smaller (fewer or shorter repetitions, ASCII classes \
                     instead of Unicode ones)"
                ),
                other => {
                    format!("content detector `{name}`: the pattern is not a valid regex: {other}")
                }
            })?;
        Ok(Detector::Custom {
            name: name.to_owned(),
            regex,
            max_len: longest,
        })
    }

    /// The name in findings and in `[REDACTED:<name>]`: `secret`, `email`, `phone`,
    /// `card`, `iban`, or a custom detector's own.
    pub fn name(&self) -> &str {
        match self {
            Detector::Secret => "secret",
            Detector::Email => "email",
            Detector::Phone => "phone",
            Detector::Card => "card",
            Detector::Iban => "iban",
            Detector::Custom { name, .. } => name,
        }
    }

    /// The longest text one finding can cover, in bytes: the most a stream holds back
    /// for this detector.
    pub fn max_len(&self) -> usize {
        match self {
            Detector::Custom { max_len, .. } => *max_len,
            builtin => builtin_of(builtin).map_or(0, |b| b.max_len),
        }
    }

    /// The pattern that finds candidates, what checks them, and the prefix regex of
    /// [`super::prefix`], if there is one. Shared, not cloned: a cloned `Regex` starts
    /// with an empty search cache, which the built-in patterns are slow to fill.
    pub(super) fn matcher(&self) -> (Arc<Regex>, Check, Option<Arc<Regex>>) {
        match self {
            Detector::Custom { regex, .. } => (
                Arc::new(regex.clone()),
                Check::None,
                super::prefix::prefix_regex(regex.as_str()).map(Arc::new),
            ),
            builtin => {
                let b = builtin_of(builtin).expect("a built-in detector");
                (Arc::clone(&b.regex), b.check, b.prefix.clone())
            }
        }
    }

    /// Which of two findings with the same span names it: the more specific detector
    /// (a checksum beats a shape), then the earlier in the list.
    pub(super) fn rank(&self) -> u8 {
        match self {
            Detector::Secret => 0,
            Detector::Card => 1,
            Detector::Iban => 2,
            Detector::Email => 3,
            Detector::Phone => 4,
            Detector::Custom { .. } => 5,
        }
    }
}

/// What a candidate must pass besides its pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Check {
    None,
    Phone,
    Card,
    Iban,
}

impl Check {
    /// The part of the candidate `hay[span]` that is a finding, if any. Looks at no more
    /// than two characters before the candidate and one after it.
    pub(super) fn accept(self, hay: &str, span: Range<usize>) -> Option<Range<usize>> {
        match self {
            Check::None => Some(span),
            Check::Phone => check::phone(hay, span),
            Check::Card => check::card(hay, span),
            Check::Iban => check::iban(hay, span),
        }
    }
}

/// A built-in detector, compiled once per process.
struct Builtin {
    regex: Arc<Regex>,
    prefix: Option<Arc<Regex>>,
    max_len: usize,
    check: Check,
}

impl Builtin {
    fn new(pattern: &str, check: Check) -> Builtin {
        let regex = Regex::new(pattern).expect("a built-in pattern compiles");
        let max_len = regex_syntax::parse(pattern)
            .expect("a built-in pattern parses")
            .properties()
            .maximum_len()
            .expect("a built-in pattern is bounded");
        Builtin {
            regex: Arc::new(regex),
            prefix: super::prefix::prefix_regex(pattern).map(Arc::new),
            max_len,
            check,
        }
    }
}

fn builtin_of(detector: &Detector) -> Option<&'static Builtin> {
    static SECRET: LazyLock<Builtin> = LazyLock::new(|| Builtin::new(SECRET_PATTERN, Check::None));
    static EMAIL: LazyLock<Builtin> = LazyLock::new(|| Builtin::new(EMAIL_PATTERN, Check::None));
    static PHONE: LazyLock<Builtin> = LazyLock::new(|| Builtin::new(PHONE_PATTERN, Check::Phone));
    static CARD: LazyLock<Builtin> = LazyLock::new(|| Builtin::new(CARD_PATTERN, Check::Card));
    static IBAN: LazyLock<Builtin> = LazyLock::new(|| Builtin::new(IBAN_PATTERN, Check::Iban));
    Some(match detector {
        Detector::Secret => &SECRET,
        Detector::Email => &EMAIL,
        Detector::Phone => &PHONE,
        Detector::Card => &CARD,
        Detector::Iban => &IBAN,
        Detector::Custom { .. } => return None,
    })
}

/// `(?-u:\b)` is an ASCII word boundary: cheap, and a key glued to a non-ASCII letter is
/// still found.
const SECRET_PATTERN: &str = r"(?x)
      (?-u:\b) (?:AKIA|ASIA) [0-9A-Z]{16} (?-u:\b)
    | (?-u:\b) gh[pousr]_ [A-Za-z0-9]{36} (?-u:\b)
    | (?-u:\b) github_pat_ [A-Za-z0-9_]{82} (?-u:\b)
    | (?-u:\b) sk- (?:proj-|ant-)? [A-Za-z0-9_-]{20,200}
    | (?-u:\b) xox[baprs]- [A-Za-z0-9-]{10,200}
    | (?-u:\b) AIza [0-9A-Za-z_-]{35}
    | (?-u:\b) [sr]k_live_ [A-Za-z0-9]{16,200}
    | -----BEGIN\x20 (?:[A-Z0-9]{1,20}\x20){0,3} PRIVATE\x20KEY-----
      (?: \r?\n [A-Za-z0-9+/=]{1,80} ){0,64}
      (?: \r?\n -----END\x20 (?:[A-Z0-9]{1,20}\x20){0,3} PRIVATE\x20KEY----- )?
    | (?-u:\b) eyJ [A-Za-z0-9_-]{5,500} \. eyJ [A-Za-z0-9_-]{5,2500} \. [A-Za-z0-9_-]{0,1000}
";

const EMAIL_PATTERN: &str = r"(?x)
    [A-Za-z0-9._%+-]{1,64}
    @
    (?: [A-Za-z0-9] (?:[A-Za-z0-9-]{0,61} [A-Za-z0-9])? \. ){1,8}
    [A-Za-z]{2,24} (?-u:\b)
";

/// A candidate only: the run of phone characters (at most 33 bytes, so a longer run is
/// seen as one, continued by the character after it); `check::phone` decides.
const PHONE_PATTERN: &str = r"\+?\(?[0-9][0-9 ().-]{0,30}";

/// Up to 20 digits, so a run of 20 or more is seen as too long by `check::card`.
const CARD_PATTERN: &str = r"[0-9](?:[ -]?[0-9]){12,19}";

const IBAN_PATTERN: &str = r"(?x)
    (?-u:\b) [A-Z]{2} [0-9]{2}
    (?: [A-Z0-9]{11,30} | (?:\x20[A-Z0-9]{4}){2,7} (?:\x20[A-Z0-9]{1,4})? )
    (?-u:\b)
";

#[cfg(test)]
mod tests {
    use super::*;

    fn error(name: &str, pattern: &str, max_len: Option<usize>) -> String {
        Detector::custom(name, pattern, max_len).expect_err("refused")
    }

    #[test]
    fn built_in_names_round_trip() {
        for name in ["secret", "email", "phone", "card", "iban"] {
            let detector = Detector::parse(name).expect("known");
            assert_eq!(detector.name(), name);
            assert!(detector.max_len() > 0);
            assert!(detector.matcher().2.is_some(), "{name} has a prefix regex");
        }
        assert!(Detector::parse("Secret").is_none());
        assert!(Detector::parse("ssn").is_none());
    }

    #[test]
    fn built_in_lengths_are_what_the_patterns_allow() {
        assert_eq!(Detector::Card.max_len(), 39);
        assert_eq!(Detector::Phone.max_len(), 33);
        assert_eq!(Detector::Iban.max_len(), 44);
        assert_eq!(Detector::Email.max_len(), 64 + 1 + 8 * 64 + 24);
        // The PEM key with its body and footer is the longest secret shape.
        assert!(
            Detector::Secret.max_len() > 4096,
            "{}",
            Detector::Secret.max_len()
        );
        assert!(Detector::Secret.max_len() < 6000);
    }

    #[test]
    fn a_custom_pattern_within_limits() {
        let d = Detector::custom("employee_id", r"EMP-[0-9]{6}", None).expect("valid");
        assert_eq!(d.name(), "employee_id");
        assert_eq!(d.max_len(), 10);
        let d = Detector::custom("word", r"(?i)codename [a-z]{1,20}", Some(100)).expect("ok");
        // Case folding makes `k` and `s` three-byte wide (KELVIN SIGN, LONG S).
        assert!(d.max_len() <= 100);
    }

    #[test]
    fn custom_patterns_that_are_refused_say_why() {
        let e = error("x", r"(a)\1", None);
        assert!(
            e.contains("backreferences") && e.contains("not supported"),
            "{e}"
        );
        for look in [r"a(?=b)", r"a(?!b)", r"(?<=a)b", r"(?<!a)b"] {
            let e = error("x", look, None);
            assert!(
                e.contains("look-around") && e.contains("not supported"),
                "{e}"
            );
        }
        let e = error("x", "a*", None);
        assert!(e.contains("empty string"), "{e}");
        let e = error("x", r"\b", None);
        assert!(e.contains("empty string"), "{e}");
        let e = error("x", "[0-9]+", None);
        assert!(e.contains("any length") && e.contains("{1,64}"), "{e}");
        let e = error("x", "[0-9]{300}", None);
        assert!(
            e.contains("up to 300 bytes") && e.contains("max_len of 256"),
            "{e}"
        );
        assert!(Detector::custom("x", "[0-9]{300}", Some(300)).is_ok());
        let e = error("x", &"a".repeat(1025), Some(4096));
        assert!(e.contains("1025 bytes") && e.contains("1024"), "{e}");
        let e = error("x", r"\w{1000}", Some(4096));
        assert!(e.contains("compiles to more than"), "{e}");
        let e = error("x", "(unclosed", None);
        assert!(e.contains("not a valid regex"), "{e}");
        let e = error("x", "a", Some(0));
        assert!(e.contains("max_len"), "{e}");
        let e = error("x", "a", Some(4097));
        assert!(e.contains("4096"), "{e}");
    }

    #[test]
    fn custom_names_are_checked() {
        assert!(error("", "a", None).contains("1 to 64"));
        assert!(error("has space", "a", None).contains("1 to 64"));
        assert!(error("x]", "a", None).contains("1 to 64"));
        assert!(error(&"n".repeat(65), "a", None).contains("1 to 64"));
        assert!(error("card", "a", None).contains("built-in"));
        assert!(Detector::custom("ticket-id_2", "T-[0-9]{4}", None).is_ok());
    }
}
