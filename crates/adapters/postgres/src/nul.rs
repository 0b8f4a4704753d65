//! Text with NUL characters, which PostgreSQL's `TEXT` cannot hold but SQLite (and so
//! the store's contract) keeps exactly.
//!
//! Free text a client or a model gave (titles, inputs, summaries, names, reasons…) is
//! bound through [`enc`] and every text column is read through [`dec`]. `enc` leaves text
//! as it is unless it holds a NUL or starts with [`MARK`]; such text is stored as `MARK`
//! followed by the text with NUL written `\u{1}0` and `\u{1}` written `\u{1}1`. The
//! mapping is one-to-one, so equality (`client_id = $1`, unique keys) means what it
//! meant, and nearly every value is stored verbatim. JSON columns need none of this:
//! serde writes NUL as `\u0000`.

use std::borrow::Cow;

/// Starts every escaped value; nothing a person types starts with it.
const MARK: &str = "\u{1}agentplane-escaped\u{1}";

/// `text` as stored.
pub(crate) fn enc(text: &str) -> Cow<'_, str> {
    if !text.contains('\0') && !text.starts_with(MARK) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(MARK.len() + text.len() + 8);
    out.push_str(MARK);
    for c in text.chars() {
        match c {
            '\0' => out.push_str("\u{1}0"),
            '\u{1}' => out.push_str("\u{1}1"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// An optional `text` as stored.
pub(crate) fn enc_opt(text: Option<&str>) -> Option<Cow<'_, str>> {
    text.map(enc)
}

/// A stored value as it was given.
pub(crate) fn dec(stored: String) -> String {
    let Some(body) = stored.strip_prefix(MARK) else {
        return stored;
    };
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c != '\u{1}' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('0') => out.push('\0'),
            Some('1') => out.push('\u{1}'),
            // Not written by `enc`: keep what is there.
            Some(other) => {
                out.push('\u{1}');
                out.push(other);
            }
            None => out.push('\u{1}'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trips_and_plain_text_is_stored_verbatim() {
        for plain in [
            "",
            "plain",
            "ünï 🚀",
            "\u{1}",
            "a\u{1}0b",
            "\u{1}agentplane",
        ] {
            assert_eq!(enc(plain), plain);
            assert_eq!(dec(plain.to_owned()), plain);
        }
        for odd in [
            "\0",
            "a\0b\0",
            "\0\u{1}0\u{1}1\u{1}",
            MARK,
            &format!("{MARK}\0"),
            &format!("{MARK}{MARK}x"),
        ] {
            let stored = enc(odd);
            assert!(!stored.contains('\0'), "{stored:?}");
            assert_eq!(dec(stored.into_owned()), odd);
        }
        assert_ne!(enc("a\0"), enc("a\0\0"));
    }
}
