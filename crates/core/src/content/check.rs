//! The checks a built-in pattern's candidate must pass: Luhn for cards, ISO 13616
//! mod-97 and country lengths for IBANs, digit counts and separators for phone numbers.
//!
//! Each takes the scanned text and the candidate's byte range, and returns the part of
//! the candidate that is a finding. It may look at two characters before the candidate
//! and one after it, never further: a stream keeps exactly that much context, so the
//! answer is the same whether the text arrives whole or in pieces. No I/O, no regexes.

use std::ops::Range;

/// A card number (the candidate is up to 20 digits, each pair optionally separated by
/// one space or `-`): 13 to 19 digits, not continuing a run of digits before it, Luhn
/// valid.
pub(super) fn card(hay: &str, span: Range<usize>) -> Option<Range<usize>> {
    let digits: Vec<u8> = hay[span.clone()]
        .bytes()
        .filter(u8::is_ascii_digit)
        .map(|b| b - b'0')
        .collect();
    if !(13..=19).contains(&digits.len()) || continues_a_run(hay, span.start) {
        return None;
    }
    luhn(&digits).then_some(span)
}

/// Whether the text before `start` is a digit, or a single separator after a digit: the
/// candidate is the rest of a longer run, not a number of its own.
fn continues_a_run(hay: &str, start: usize) -> bool {
    let mut before = hay[..start].chars().rev();
    match before.next() {
        Some(c) if c.is_ascii_digit() => true,
        Some(' ' | '-' | '.' | '(' | ')') => before.next().is_some_and(|c| c.is_ascii_digit()),
        _ => false,
    }
}

/// The Luhn checksum (ISO/IEC 7812): doubling every second digit from the right, the
/// sum is a multiple of 10.
pub(super) fn luhn(digits: &[u8]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            let d = u32::from(d);
            if i % 2 == 1 {
                let doubled = d * 2;
                if doubled > 9 { doubled - 9 } else { doubled }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// An IBAN (the candidate is two letters, two digits and 11 to 30 of `A-Z0-9`, possibly
/// in space-separated groups of four): the longest of the candidate and of its starts
/// ending at a group (a trailing word of four is not part of it) that is a valid IBAN.
pub(super) fn iban(hay: &str, span: Range<usize>) -> Option<Range<usize>> {
    let mut text = &hay[span.clone()];
    loop {
        let compact: String = text.chars().filter(|c| *c != ' ').collect();
        if compact.len() < 15 {
            return None;
        }
        if valid_iban(&compact) {
            return Some(span.start..span.start + text.len());
        }
        text = &text[..text.rfind(' ')?];
    }
}

/// Whether `compact` (no spaces, `[A-Z]{2}[0-9]{2}[A-Z0-9]+`) is a valid IBAN: its
/// country's length when known, and mod 97 of its rearranged digits equal to 1.
pub(super) fn valid_iban(compact: &str) -> bool {
    if !(15..=34).contains(&compact.len()) || !compact.is_ascii() {
        return false;
    }
    if let Some(len) = iban_length(&compact[..2])
        && len != compact.len()
    {
        return false;
    }
    let rearranged = compact[4..].bytes().chain(compact[..4].bytes());
    let mut rest: u32 = 0;
    for byte in rearranged {
        rest = match byte {
            b'0'..=b'9' => (rest * 10 + u32::from(byte - b'0')) % 97,
            b'A'..=b'Z' => (rest * 100 + u32::from(byte - b'A') + 10) % 97,
            _ => return false,
        };
    }
    rest == 1
}

/// An IBAN's length in the countries that use one (the SWIFT IBAN registry).
fn iban_length(country: &str) -> Option<usize> {
    Some(match country {
        "NO" => 15,
        "BE" => 16,
        "DK" | "FI" | "FK" | "FO" | "GL" | "NL" | "SD" => 18,
        "MK" | "SI" => 19,
        "AT" | "BA" | "EE" | "KZ" | "LT" | "LU" | "MN" | "XK" => 20,
        "CH" | "CR" | "HR" | "LI" | "LV" => 21,
        "BG" | "BH" | "DE" | "GB" | "GE" | "IE" | "ME" | "RS" | "VA" => 22,
        "AE" | "GI" | "IL" | "IQ" | "OM" | "SO" | "TL" => 23,
        "AD" | "CZ" | "ES" | "MD" | "PK" | "RO" | "SA" | "SE" | "SK" | "TN" | "VG" => 24,
        "LY" | "PT" | "ST" => 25,
        "IS" | "TR" => 26,
        "BI" | "DJ" | "FR" | "GR" | "IT" | "MC" | "MR" | "SM" => 27,
        "AL" | "AZ" | "BY" | "CY" | "DO" | "GT" | "HN" | "HU" | "LB" | "NI" | "PL" | "SV" => 28,
        "BR" | "EG" | "PS" | "QA" | "UA" => 29,
        "JO" | "KW" | "MU" | "YE" => 30,
        "MT" | "SC" => 31,
        "LC" => 32,
        "RU" => 33,
        _ => return None,
    })
}

/// A phone number (the candidate is the run of digits, spaces, `().-` after an optional
/// `+`, at most 33 bytes): see [`super::Detector::Phone`] for the rules.
pub(super) fn phone(hay: &str, span: Range<usize>) -> Option<Range<usize>> {
    // A run longer than the candidate is not a number of its own.
    if hay[span.end..]
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_digit() || " ().-".contains(c))
    {
        return None;
    }
    let text = &hay[span.clone()];
    let text = &text[..text.rfind(|c: char| c.is_ascii_digit())? + 1];
    let international = text.starts_with('+');
    let glued = hay[..span.start]
        .chars()
        .next_back()
        .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '+');
    if glued || (!international && continues_a_run(hay, span.start)) {
        return None;
    }
    let shape = Shape::of(text.trim_start_matches('+'))?;
    let digits: usize = shape.groups.iter().sum();
    let accepted = if international {
        (8..=15).contains(&digits)
    } else {
        (10..=15).contains(&digits)
            && shape.groups.len() >= 2
            && shape.groups[1..].iter().all(|&len| len >= 2)
            && !shape.is_date()
            && !shape.is_ipv4()
            && !shape.is_grouped_thousands()
    };
    accepted.then(|| span.start..span.start + text.len())
}

/// A phone candidate cut into digit groups and the separators between them.
struct Shape<'a> {
    groups: Vec<usize>,
    separators: Vec<&'a str>,
}

impl<'a> Shape<'a> {
    /// `None` when a separator is not one a phone number is written with: one or two
    /// spaces around at most one `-` or `.`, and one pair of parentheses at most.
    fn of(text: &'a str) -> Option<Shape<'a>> {
        let opening = text.matches('(').count();
        if opening > 1 || text.matches(')').count() != opening {
            return None;
        }
        if opening == 1 && text.find('(') > text.find(')') {
            return None;
        }
        let body = text.strip_prefix('(').unwrap_or(text);
        let mut groups = Vec::new();
        let mut separators = Vec::new();
        let mut rest = body;
        while !rest.is_empty() {
            let digits = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            if digits == 0 {
                return None;
            }
            groups.push(digits);
            rest = &rest[digits..];
            let sep = rest
                .find(|c: char| c.is_ascii_digit())
                .unwrap_or(rest.len());
            if sep > 0 {
                let run = &rest[..sep];
                let marks = run.matches(['-', '.']).count();
                if run.len() > 3 || marks > 1 || run.matches(' ').count() > 2 {
                    return None;
                }
                separators.push(run);
            }
            rest = &rest[sep..];
        }
        Some(Shape { groups, separators })
    }

    /// `2026-11-27…` or `27.11.2026…`: a date, possibly followed by a time.
    fn is_date(&self) -> bool {
        let dated = matches!(self.groups.as_slice(), [4, 2, 2, ..] | [2, 2, 4, ..]);
        dated
            && self.separators[..2]
                .iter()
                .all(|s| matches!(*s, "-" | "." | "/"))
    }

    /// `1.234.567.890`: an amount written with dots between thousands.
    fn is_grouped_thousands(&self) -> bool {
        self.groups[0] <= 3
            && self.groups[1..].iter().all(|&len| len == 3)
            && self.separators.iter().all(|s| *s == ".")
    }

    /// `192.168.100.200`.
    fn is_ipv4(&self) -> bool {
        self.groups.len() == 4
            && self.groups.iter().all(|&len| len <= 3)
            && self.separators.iter().all(|s| *s == ".")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digits(text: &str) -> Vec<u8> {
        text.bytes().map(|b| b - b'0').collect()
    }

    #[test]
    fn luhn_known_numbers() {
        assert!(luhn(&digits("4111111111111111")));
        assert!(luhn(&digits("378282246310005")));
        assert!(luhn(&digits("5555555555554444")));
        assert!(!luhn(&digits("4111111111111112")));
        assert!(!luhn(&digits("1234567812345678")));
    }

    #[test]
    fn iban_checksum_and_country_lengths() {
        for valid in [
            "DE89370400440532013000",
            "GB29NWBK60161331926819",
            "FR1420041010050500013M02606",
            "NL91ABNA0417164300",
            "ES9121000418450200051332",
            "IT60X0542811101000000123456",
            "CH9300762011623852957",
            "AT611904300234573201",
            "BE68539007547034",
            "NO9386011117947",
        ] {
            assert!(valid_iban(valid), "{valid}");
        }
        // One digit changed; a valid checksum at the wrong length for the country.
        assert!(!valid_iban("DE89370400440532013001"));
        assert!(!valid_iban("DE8937040044053201300"));
        // An unknown country is checked by its checksum only.
        assert!(!valid_iban("ZZ00123456789012345"));
    }

    #[test]
    fn a_word_after_a_grouped_iban_is_left_out() {
        let text = "DE89 3704 0044 0532 0130 00 ABCD";
        assert_eq!(iban(text, 0..text.len()), Some(0..27));
        assert_eq!(iban(text, 0..27), Some(0..27));
        let text = "DE89 3704 0044 0532 0130 01";
        assert_eq!(iban(text, 0..text.len()), None);
    }

    #[test]
    fn card_context() {
        let text = "4111 1111 1111 1111";
        assert_eq!(card(text, 0..text.len()), Some(0..text.len()));
        let text = "1 4111 1111 1111 1111";
        assert_eq!(card(text, 2..text.len()), None);
        let text = "x4111111111111111";
        assert_eq!(card(text, 1..text.len()), Some(1..text.len()));
        // Twenty digits: a longer run.
        let text = "41111111111111111111";
        assert_eq!(card(text, 0..text.len()), None);
    }

    #[test]
    fn phone_shapes() {
        let ok = |text: &str| phone(text, 0..text.len());
        assert_eq!(ok("+44 20 7946 0958"), Some(0..16));
        assert_eq!(ok("+1 (555) 123-4567"), Some(0..17));
        assert_eq!(ok("+4915123456789"), Some(0..14));
        assert_eq!(ok("+49 (0)30 1234567"), Some(0..17));
        assert_eq!(ok("+(44) 20 7946 0958"), Some(0..18));
        assert_eq!(ok("(555) 123-4567"), Some(0..14));
        assert_eq!(ok("555.123.4567."), Some(0..12));
        assert_eq!(ok("1-800-555-1234"), Some(0..14));
        // An international number right after another: its `+` starts it.
        let two = "+1 555 123 4567 +1 555 987 6543";
        assert_eq!(phone(two, 0..16), Some(0..15));
        assert_eq!(phone(two, 16..two.len()), Some(16..two.len()));
        assert_eq!(ok("+1 555"), None);
        assert_eq!(ok("5551234567"), None);
        assert_eq!(ok("2026-11-27 10-30"), None);
        assert_eq!(ok("10.0.19041.1234"), None);
        assert_eq!(ok("192.168.100.200"), None);
        assert_eq!(ok("1.234.567.890"), None);
        assert_eq!(ok("555.123.456.789"), None);
        assert_eq!(ok("555 - - 123 4567"), None);
        assert_eq!(ok("(555 123) (456) 7890"), None);
        assert_eq!(ok("555) 123 (4567"), None);
    }
}
