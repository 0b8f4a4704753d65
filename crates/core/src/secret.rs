//! Secret redaction: every known secret value in a text or JSON document becomes
//! `[REDACTED:NAME]` before it is stored, logged or answered.
//!
//! A [`Redactor`] is built from (name, value) pairs once, at start-up, by whoever loads
//! the secrets (the runtime). The process-wide one ([`install`], [`redact`]) is for the
//! places that cannot be handed a value: log lines and error envelopes. What must not
//! live here: reading secrets (environment, files) — this crate does no I/O.
//!
//! Matching is exact and byte-wise: a value is found wherever it occurs, also inside a
//! longer word, in its JSON-escaped form (a value holding `"` or `\` appears escaped in
//! JSON text) and in its percent-encoded form (a value in a URL, as an access log shows
//! it). Where two values overlap, the whole covered run is replaced once,
//! naming both (`[REDACTED:A,B]`), so no fragment of either survives.

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use serde_json::Value;

/// The shortest value that can be redacted: a shorter one would match ordinary text
/// everywhere and turn every log line into noise, so it is refused at load instead.
pub const MIN_SECRET_LEN: usize = 4;

/// A secret that cannot be redacted safely. Names the secret, never its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedactorError {
    /// The secret's name.
    pub name: String,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for RedactorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "secret `{}`: {}", self.name, self.message)
    }
}

impl std::error::Error for RedactorError {}

/// One form of one secret to look for.
#[derive(Clone)]
struct Needle {
    text: String,
    /// Index into `Redactor::names`.
    name: usize,
}

/// Replaces known secret values with `[REDACTED:NAME]`. Cheap to clone behind an `Arc`;
/// an empty one never allocates.
#[derive(Clone, Default)]
pub struct Redactor {
    names: Vec<String>,
    /// Longest first, so a value that contains another is reported under its own name.
    needles: Vec<Needle>,
}

/// Names only: a redactor holds every secret value and must never print one.
impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("secrets", &self.names)
            .finish()
    }
}

impl Redactor {
    /// A redactor for these (name, value) pairs. A value shorter than
    /// [`MIN_SECRET_LEN`] bytes is refused, naming the secret.
    pub fn new<N, V>(secrets: impl IntoIterator<Item = (N, V)>) -> Result<Self, RedactorError>
    where
        N: Into<String>,
        V: AsRef<str>,
    {
        let mut names = Vec::new();
        let mut needles = Vec::new();
        for (name, value) in secrets {
            let name = name.into();
            let value = value.as_ref();
            if value.len() < MIN_SECRET_LEN {
                return Err(RedactorError {
                    name,
                    message: format!(
                        "its value is shorter than {MIN_SECRET_LEN} bytes, too short to \
                         redact from logs and events safely"
                    ),
                });
            }
            let index = names.len();
            names.push(name);
            needles.push(Needle {
                text: value.to_owned(),
                name: index,
            });
            for form in [json_escaped(value), percent_encoded(value)] {
                if form != value && !needles.iter().any(|n: &Needle| n.text == form) {
                    needles.push(Needle {
                        text: form,
                        name: index,
                    });
                }
            }
        }
        needles.sort_by_key(|n| std::cmp::Reverse(n.text.len()));
        Ok(Self { names, needles })
    }

    /// Whether there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.needles.is_empty()
    }

    /// The names of the secrets this redactor knows.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// `text` with every secret value replaced; borrowed when nothing matched.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.is_empty() {
            return Cow::Borrowed(text);
        }
        let spans = self.matches(text);
        if spans.is_empty() {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for span in spans {
            out.push_str(&text[at..span.start]);
            out.push_str("[REDACTED:");
            for (i, name) in span.names.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&self.names[*name]);
            }
            out.push(']');
            at = span.end;
        }
        out.push_str(&text[at..]);
        Cow::Owned(out)
    }

    /// Redacts every string of a JSON document in place, object keys included.
    /// Returns whether anything changed.
    pub fn redact_json(&self, value: &mut Value) -> bool {
        if self.is_empty() {
            return false;
        }
        match value {
            Value::String(s) => match self.redact(s) {
                Cow::Borrowed(_) => false,
                Cow::Owned(redacted) => {
                    *s = redacted;
                    true
                }
            },
            Value::Array(items) => items
                .iter_mut()
                .fold(false, |changed, item| self.redact_json(item) | changed),
            Value::Object(map) => {
                let mut changed = false;
                for item in map.values_mut() {
                    changed |= self.redact_json(item);
                }
                if map.keys().any(|k| matches!(self.redact(k), Cow::Owned(_))) {
                    let entries = std::mem::take(map);
                    for (key, item) in entries {
                        map.insert(self.redact(&key).into_owned(), item);
                    }
                    changed = true;
                }
                changed
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => false,
        }
    }

    /// How much of `text`, a stream's pending tail, can be sent now: the length of the
    /// longest start of it that ends neither inside a secret nor in a beginning of one
    /// (a tail that the next piece could complete). The rest waits for more text or the
    /// stream's end. Redact what is sent, as any text. Always a char boundary.
    pub fn stream_safe_len(&self, text: &str) -> usize {
        let bytes = text.as_bytes();
        let mut safe = text.len();
        for needle in &self.needles {
            let needle = needle.text.as_bytes();
            // The longest proper prefix of the needle that ends the text.
            let longest = needle.len().saturating_sub(1).min(bytes.len());
            if let Some(len) = (1..=longest)
                .rev()
                .find(|&len| bytes[bytes.len() - len..] == needle[..len])
            {
                safe = safe.min(bytes.len() - len);
            }
        }
        // A whole secret that straddles the cut is held back from its start.
        for span in self.matches(text) {
            if span.start < safe && span.end > safe {
                safe = span.start;
            }
        }
        // A needle starts on a char boundary, so `safe` is one; stay safe regardless.
        while !text.is_char_boundary(safe) {
            safe -= 1;
        }
        safe
    }

    /// How many bytes at the end of `text` a stream must hold back until the next piece
    /// shows whether a secret follows: what [`Redactor::stream_safe_len`] does not let
    /// through, so a secret split across two pieces is never sent in halves.
    pub fn held_back(&self, text: &str) -> usize {
        text.len() - self.stream_safe_len(text)
    }

    /// Every occurrence of every needle, overlapping runs merged, in text order.
    fn matches(&self, text: &str) -> Vec<Span> {
        let mut found: Vec<(usize, usize, usize)> = Vec::new();
        for needle in &self.needles {
            let step = needle.text.chars().next().map_or(1, char::len_utf8);
            let mut from = 0;
            while let Some(offset) = text[from..].find(&needle.text) {
                let start = from + offset;
                found.push((start, start + needle.text.len(), needle.name));
                // The match starts on a char boundary, so does start + its first char.
                from = start + step;
            }
        }
        found.sort_by_key(|&(start, end, _)| (start, std::cmp::Reverse(end)));
        let mut spans: Vec<Span> = Vec::new();
        for (start, end, name) in found {
            match spans.last_mut() {
                Some(last) if start < last.end => {
                    // A value wholly inside the run is already covered by its name.
                    if end > last.end {
                        last.end = end;
                        if !last.names.contains(&name) {
                            last.names.push(name);
                        }
                    }
                }
                _ => spans.push(Span {
                    start,
                    end,
                    names: vec![name],
                }),
            }
        }
        spans
    }
}

/// A run of text covered by one or more secret values.
struct Span {
    start: usize,
    end: usize,
    names: Vec<usize>,
}

/// The value as it appears inside a JSON string literal (without the quotes).
fn json_escaped(value: &str) -> String {
    let quoted = Value::String(value.to_owned()).to_string();
    quoted[1..quoted.len() - 1].to_owned()
}

/// The value as a URL carries it: every byte but RFC 3986's unreserved ones as `%XX`.
fn percent_encoded(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A stream of text on its way out (a gateway answer, a turn's `message_delta`s), held
/// back where its end could begin a secret: the one hold-back every stream uses, so a
/// secret split across two pieces (`sk-` in one, the rest in the next) is never sent
/// in halves. What is released is redacted; the tail waits for the next piece or the end.
#[derive(Debug, Default)]
pub struct HeldBack {
    pending: String,
}

impl HeldBack {
    /// Adds a piece; returns the redacted text that can be sent now, if any.
    pub fn push(&mut self, redactor: &Redactor, piece: &str) -> Option<String> {
        self.pending.push_str(piece);
        let safe = redactor.stream_safe_len(&self.pending);
        if safe == 0 {
            return None;
        }
        let sent = redactor.redact(&self.pending[..safe]).into_owned();
        self.pending.drain(..safe);
        Some(sent)
    }

    /// The stream ended (or another kind of output follows): what is still held,
    /// redacted, if anything.
    pub fn finish(self, redactor: &Redactor) -> Option<String> {
        (!self.pending.is_empty()).then(|| redactor.redact(&self.pending).into_owned())
    }
}

/// Whether a process-wide redactor with something to redact is installed: lets
/// [`redact`] skip the lock on the common path of a process without secrets.
static INSTALLED: AtomicBool = AtomicBool::new(false);
static GLOBAL: RwLock<Option<Arc<Redactor>>> = RwLock::new(None);

/// Makes `redactor` the process-wide one used by [`redact`] (log lines, error
/// envelopes). Installed once at start-up, after the secrets are loaded; a later call
/// replaces it.
pub fn install(redactor: Redactor) {
    let empty = redactor.is_empty();
    let mut global = GLOBAL.write().unwrap_or_else(|e| e.into_inner());
    *global = Some(Arc::new(redactor));
    INSTALLED.store(!empty, Ordering::Release);
}

/// The process-wide redactor (an empty one when none is installed), for callers that
/// need more than [`redact`]: JSON documents, streams held back at a secret's start.
pub fn current() -> Arc<Redactor> {
    GLOBAL
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map_or_else(|| Arc::new(Redactor::default()), Arc::clone)
}

/// `text` with every secret of the process-wide redactor replaced; borrowed (and
/// lock-free) when none is installed or nothing matched.
pub fn redact(text: &str) -> Cow<'_, str> {
    if !INSTALLED.load(Ordering::Acquire) {
        return Cow::Borrowed(text);
    }
    let redactor = GLOBAL
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map(Arc::clone);
    match redactor {
        Some(redactor) => match redactor.redact(text) {
            Cow::Borrowed(_) => Cow::Borrowed(text),
            Cow::Owned(redacted) => Cow::Owned(redacted),
        },
        None => Cow::Borrowed(text),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn redactor(pairs: &[(&str, &str)]) -> Redactor {
        Redactor::new(pairs.iter().copied()).expect("valid secrets")
    }

    #[test]
    fn a_held_back_stream_never_sends_a_secret_in_pieces() {
        let r = redactor(&[("key", "sk-live-0123456789")]);
        let secret = "sk-live-0123456789";
        let text = format!("before {secret} between {secret} after");
        // Every way of cutting the text in two, and one character at a time.
        let mut cuts: Vec<Vec<String>> = (0..=text.len())
            .filter(|&i| text.is_char_boundary(i))
            .map(|i| vec![text[..i].to_owned(), text[i..].to_owned()])
            .collect();
        cuts.push(text.chars().map(String::from).collect());
        for pieces in cuts {
            let mut held = HeldBack::default();
            let mut sent: Vec<String> = pieces.iter().filter_map(|p| held.push(&r, p)).collect();
            sent.extend(held.finish(&r));
            let joined = sent.concat();
            assert_eq!(joined, r.redact(&text), "cut as {pieces:?}");
            for piece in &sent {
                for len in 4..=secret.len() {
                    assert!(
                        !piece.contains(&secret[..len]),
                        "a piece carried `{}`: {piece:?}",
                        &secret[..len]
                    );
                }
            }
        }
    }

    #[test]
    fn every_occurrence_is_replaced_with_the_name() {
        let r = redactor(&[("api_token", "tok-123456")]);
        assert_eq!(
            r.redact("a tok-123456 b tok-123456tok-123456"),
            "a [REDACTED:api_token] b [REDACTED:api_token][REDACTED:api_token]"
        );
        assert_eq!(r.redact("tok-12345"), "tok-12345");
    }

    #[test]
    fn a_trailing_start_of_a_value_is_held_back() {
        let r = redactor(&[("key", "sk-LIVE-99"), ("other", "pass word")]);
        assert_eq!(r.held_back("the key is sk-LI"), "sk-LI".len());
        assert_eq!(r.held_back("the key is s"), 1);
        assert_eq!(r.held_back("nothing here"), 0);
        // A whole value is not held: it is redacted where it stands.
        assert_eq!(r.held_back("sk-LIVE-99"), 0);
        // The percent-encoded form is a value too.
        assert_eq!(r.held_back("url?q=pass%2"), "pass%2".len());
        assert_eq!(r.held_back(""), 0);
        // Pieces joined again at every cut: redacted once the value is whole.
        let text = "before sk-LIVE-99 after";
        for cut in 1..text.len() {
            let (a, b) = text.split_at(cut);
            let held = r.held_back(a);
            let sent = &a[..a.len() - held];
            let rest = format!("{}{b}", &a[a.len() - held..]);
            let out = format!("{}{}", r.redact(sent), r.redact(&rest));
            assert!(!out.contains("sk-LIVE-99"), "cut {cut}: {out}");
            assert!(
                !r.redact(sent).contains("sk-LIVE"),
                "cut {cut}: sent {sent}"
            );
        }
    }

    #[test]
    fn nothing_to_redact_borrows() {
        let empty = Redactor::default();
        assert!(matches!(empty.redact("anything"), Cow::Borrowed(_)));
        let r = redactor(&[("a", "secret-value")]);
        assert!(matches!(r.redact("no match here"), Cow::Borrowed(_)));
        let mut doc = json!({"k": "v"});
        assert!(!empty.redact_json(&mut doc));
    }

    #[test]
    fn a_value_inside_another_is_named_by_the_longer_one() {
        let r = redactor(&[("short", "abcd"), ("long", "xxabcdxx")]);
        assert_eq!(
            r.redact("xxabcdxx abcd"),
            "[REDACTED:long] [REDACTED:short]"
        );
    }

    #[test]
    fn overlapping_values_leave_no_fragment() {
        let r = redactor(&[("a", "abcdef"), ("b", "defghi")]);
        assert_eq!(r.redact("-abcdefghi-"), "-[REDACTED:a,b]-");
        assert_eq!(r.redact("defghi abcdef"), "[REDACTED:b] [REDACTED:a]");
        // Self-overlapping occurrences of one value.
        let r = redactor(&[("aa", "aaaa")]);
        assert_eq!(r.redact("aaaaaa"), "[REDACTED:aa]");
    }

    #[test]
    fn unicode_values_and_text() {
        let r = redactor(&[("ключ", "пароль-🔑")]);
        assert_eq!(r.redact("é пароль-🔑 ü"), "é [REDACTED:ключ] ü");
        assert_eq!(r.redact("ппароль-🔑"), "п[REDACTED:ключ]");
        let r = redactor(&[("e", "ééé")]);
        assert_eq!(r.redact("éééé"), "[REDACTED:e]");
    }

    #[test]
    fn the_json_escaped_form_is_redacted_too() {
        let value = "pa\"ss\\word";
        let r = redactor(&[("pw", value)]);
        let text = json!({ "arg": value }).to_string();
        assert!(text.contains("pa\\\"ss\\\\word"));
        assert_eq!(r.redact(&text), "{\"arg\":\"[REDACTED:pw]\"}");
    }

    #[test]
    fn the_percent_encoded_form_is_redacted_too() {
        let r = redactor(&[("pw", "a b/c\"d")]);
        assert_eq!(
            r.redact("GET /v1/threads/a%20b%2Fc%22d/history"),
            "GET /v1/threads/[REDACTED:pw]/history"
        );
    }

    #[test]
    fn json_strings_and_keys_are_redacted() {
        let r = redactor(&[("t", "s3cr3t-v")]);
        let mut doc = json!({
            "plain": 1,
            "nested": [{"x": "before s3cr3t-v after"}, "s3cr3t-v", null, true],
            "s3cr3t-v": "key holds it",
        });
        assert!(r.redact_json(&mut doc));
        assert_eq!(
            doc,
            json!({
                "plain": 1,
                "nested": [{"x": "before [REDACTED:t] after"}, "[REDACTED:t]", null, true],
                "[REDACTED:t]": "key holds it",
            })
        );
        assert!(!doc.to_string().contains("s3cr3t-v"));
        assert!(!r.redact_json(&mut doc));
    }

    #[test]
    fn short_values_are_refused_by_name_not_value() {
        let err = Redactor::new([("pin", "123")]).expect_err("too short");
        assert_eq!(err.name, "pin");
        assert!(err.to_string().contains("`pin`"));
        assert!(!err.to_string().contains("123"));
        assert!(Redactor::new([("empty", "")]).is_err());
        assert!(Redactor::new([("four", "1234")]).is_ok());
    }

    #[test]
    fn debug_shows_names_only() {
        let r = redactor(&[("api_token", "tok-123456")]);
        let shown = format!("{r:?}");
        assert!(shown.contains("api_token") && !shown.contains("tok-123456"));
    }

    #[test]
    fn the_process_wide_redactor_applies_once_installed() {
        // The only test touching the global; other tests use their own redactors.
        assert_eq!(redact("glob-secret-1"), "glob-secret-1");
        install(redactor(&[("g", "glob-secret-1")]));
        assert_eq!(redact("x glob-secret-1"), "x [REDACTED:g]");
        assert!(matches!(redact("clean"), Cow::Borrowed(_)));
        install(Redactor::default());
        assert_eq!(redact("glob-secret-1"), "glob-secret-1");
    }

    /// A stream cut into every possible pair of pieces: what is sent (the safe part of
    /// each piece redacted, the held tail flushed at the end) never holds the secret.
    #[test]
    fn a_stream_holds_back_a_secrets_start_until_it_is_decided() {
        let r = redactor(&[("k", "sk-Abc123"), ("t", "tok-Zz9")]);
        let text = "key sk-Abc123 then tok-Zz9 and sk-Ab end";
        for cut in 1..text.len() {
            let mut sent = String::new();
            let mut pending = String::new();
            for piece in [&text[..cut], &text[cut..]] {
                pending.push_str(piece);
                let safe = r.stream_safe_len(&pending);
                sent.push_str(&r.redact(&pending[..safe]));
                pending.drain(..safe);
            }
            sent.push_str(&r.redact(&pending));
            assert_eq!(
                sent, "key [REDACTED:k] then [REDACTED:t] and sk-Ab end",
                "cut at {cut}"
            );
        }
        assert_eq!(r.stream_safe_len("plain done"), 10);
        assert_eq!(r.stream_safe_len("ends with sk-A"), 10);
        assert_eq!(Redactor::default().stream_safe_len("sk-A"), 4);
    }
}
