//! What a person sees is what runs: the one rule for showing text that a model, an
//! upstream server or any other outside party wrote (tool arguments on an approval
//! card, an MCP server's tool names and descriptions, history) to a person.
//!
//! A right-to-left override (U+202E) in `src/\u{202e}sr.niam` makes a terminal or a
//! browser draw `src/main.rs`; an escape sequence (`ESC ]0;…`) retitles the window or
//! recolours what follows; a zero-width space makes two different names look the same.
//! So every character that is drawn as something else, or as nothing, is written as its
//! code instead: `\u{202e}`, `\u{1b}`, `\u{200b}`. The rule is an allowlist in spirit:
//! a character passes only if it is drawn as itself. Two characters are kept because a
//! person reads them as what they are: a line break and a tab, when the caller says the
//! text is multi-line ([`Lines::Keep`]); everywhere else they are escaped too.
//!
//! A backslash that could start something that looks like an escape (`\u{`) is written
//! `\\`, so a name that holds the literal text `\u{202e}` cannot pass for an escaped
//! override. What must not live here: any output (this crate does no I/O), and any
//! judgment about whether the text is allowed (the policies').

use std::borrow::Cow;
use std::fmt::Write as _;

/// What [`visible`] does with line breaks and tabs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lines {
    /// One line: `\n`, `\r` and `\t` are escaped like any control character (a name,
    /// a cell of a table, a one-line summary).
    Escape,
    /// A block of text: `\n` and `\t` are kept as they are (a description, a message
    /// shown in full); `\r` is still escaped, since it moves the cursor back over what
    /// was written.
    Keep,
}

/// `text` as a person should see it: every control, bidirectional-formatting and
/// invisible character written as `\u{…}`, and a backslash before `u{` doubled.
/// Borrows when nothing needs escaping, which is the common case.
pub fn visible(text: &str, lines: Lines) -> Cow<'_, str> {
    let needs = |(i, c): (usize, char)| hidden(c, lines) || starts_lookalike(text, i, c);
    if !text.char_indices().any(needs) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for (i, c) in text.char_indices() {
        if hidden(c, lines) {
            // Writing to a String cannot fail.
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else if starts_lookalike(text, i, c) {
            out.push_str("\\\\");
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// One line of text as a person should see it: [`visible`] with [`Lines::Escape`].
pub fn visible_line(text: &str) -> Cow<'_, str> {
    visible(text, Lines::Escape)
}

/// A backslash that begins `\u{`: it would read as one of our escapes.
fn starts_lookalike(text: &str, at: usize, c: char) -> bool {
    c == '\\' && text[at + 1..].starts_with("u{")
}

/// Whether `c` is drawn as something other than itself, or as nothing.
fn hidden(c: char, lines: Lines) -> bool {
    if lines == Lines::Keep && matches!(c, '\n' | '\t') {
        return false;
    }
    c.is_control() || is_format_or_invisible(c)
}

/// Bidirectional formatting, zero-width and other invisible or look-alike-space
/// characters, by their code points (Unicode's `Cf` category and its friends; no table
/// crate for a list this short).
fn is_format_or_invisible(c: char) -> bool {
    matches!(
        u32::from(c),
        0x00AD // soft hyphen
        | 0x034F // combining grapheme joiner
        | 0x061C // Arabic letter mark
        | 0x115F | 0x1160 // Hangul fillers
        | 0x17B4 | 0x17B5 // Khmer inherent vowels
        | 0x180B..=0x180F // Mongolian variation selectors and vowel separator
        | 0x200B..=0x200F // zero-width space, (non-)joiner, LRM, RLM
        | 0x2028 | 0x2029 // line and paragraph separators
        | 0x202A..=0x202E // LRE, RLE, PDF, LRO, RLO
        | 0x2060..=0x206F // word joiner, invisible operators, LRI/RLI/FSI/PDI, deprecated
        | 0x3164 // Hangul filler
        | 0xFE00..=0xFE0F // variation selectors
        | 0xFEFF // zero-width no-break space (BOM)
        | 0xFFA0 // halfwidth Hangul filler
        | 0xFFF9..=0xFFFB // interlinear annotation
        | 0x1D173..=0x1D17A // musical formatting
        | 0xE0000..=0xE007F // tags
        | 0xE0100..=0xE01EF // variation selectors supplement
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        for text in ["src/main.rs", "héllo wörld", "日本語", "emoji 🎉", ""] {
            assert!(matches!(visible_line(text), Cow::Borrowed(t) if t == text));
        }
        assert!(matches!(
            visible("two\nlines\tand a tab", Lines::Keep),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn a_right_to_left_override_cannot_reverse_a_path() {
        assert_eq!(visible_line("src/\u{202e}sr.niam"), "src/\\u{202e}sr.niam");
        for (c, shown) in [
            ('\u{202a}', "\\u{202a}"),
            ('\u{202b}', "\\u{202b}"),
            ('\u{202c}', "\\u{202c}"),
            ('\u{202d}', "\\u{202d}"),
            ('\u{2066}', "\\u{2066}"),
            ('\u{2067}', "\\u{2067}"),
            ('\u{2068}', "\\u{2068}"),
            ('\u{2069}', "\\u{2069}"),
            ('\u{200e}', "\\u{200e}"),
            ('\u{200f}', "\\u{200f}"),
            ('\u{061c}', "\\u{61c}"),
        ] {
            assert_eq!(visible_line(&format!("a{c}b")), format!("a{shown}b"));
        }
    }

    #[test]
    fn terminal_escape_sequences_are_shown_not_run() {
        let title = "\u{1b}]0;pwned\u{7}tool";
        assert_eq!(visible_line(title), "\\u{1b}]0;pwned\\u{7}tool");
        let colour = "\u{1b}[31mred\u{1b}[0m";
        assert_eq!(visible_line(colour), "\\u{1b}[31mred\\u{1b}[0m");
        // C1 controls (a one-byte CSI) and DEL too.
        assert_eq!(visible_line("\u{9b}2J\u{7f}"), "\\u{9b}2J\\u{7f}");
        assert_eq!(visible_line("nul\0"), "nul\\u{0}");
        let shown = visible_line("a\u{1b}[2Jb\u{8}\u{8}c\rd");
        assert!(!shown.chars().any(char::is_control), "{shown}");
    }

    #[test]
    fn invisible_characters_are_shown() {
        for c in [
            '\u{200b}',
            '\u{200c}',
            '\u{200d}',
            '\u{2060}',
            '\u{feff}',
            '\u{00ad}',
            '\u{2028}',
            '\u{2029}',
            '\u{e0041}',
            '\u{fe0f}',
            '\u{3164}',
        ] {
            let text = format!("ab{c}cd");
            assert_eq!(
                visible_line(&text),
                format!("ab\\u{{{:x}}}cd", u32::from(c))
            );
        }
    }

    #[test]
    fn line_breaks_are_kept_only_in_blocks() {
        assert_eq!(visible_line("a\nb\tc"), "a\\u{a}b\\u{9}c");
        assert_eq!(visible("a\nb\tc", Lines::Keep), "a\nb\tc");
        // A carriage return would let a later line overwrite an earlier one.
        assert_eq!(visible("ok\rrm -rf", Lines::Keep), "ok\\u{d}rm -rf");
    }

    #[test]
    fn a_literal_escape_cannot_pass_for_an_escaped_character() {
        // The text `\u{202e}` (eight printable characters) is not the override.
        assert_eq!(visible_line("a\\u{202e}b"), "a\\\\u{202e}b");
        assert_ne!(visible_line("a\\u{202e}b"), visible_line("a\u{202e}b"));
        // Other backslashes are left alone.
        assert_eq!(visible_line("C:\\dir\\file"), "C:\\dir\\file");
        assert_eq!(visible_line("end\\"), "end\\");
    }

    #[test]
    fn hostile_input_never_leaves_a_hidden_character() {
        let mut hostile = String::new();
        for code in (0u32..0x250).chain(0x2000..0x2070).chain(0xFE00..0xFF00) {
            if let Some(c) = char::from_u32(code) {
                hostile.push(c);
            }
        }
        hostile.push_str("\u{e0001}\u{e007f}\u{1d173}");
        let shown = visible(&hostile, Lines::Escape);
        assert!(
            !shown.chars().any(|c| hidden(c, Lines::Escape)),
            "a hidden character survived"
        );
        // Escaping is idempotent in what it leaves visible: a second pass changes only
        // the backslashes it doubles.
        let twice = visible(&shown, Lines::Escape);
        assert!(!twice.chars().any(|c| hidden(c, Lines::Escape)));
    }
}
