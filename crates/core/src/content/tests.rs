//! The whole module's promises: each detector's findings, overlaps, hostile input, and
//! a stream giving what the whole text gives for any cut.

use super::*;

fn all_builtins() -> Detectors {
    Detectors::new(
        ["secret", "email", "phone", "card", "iban"]
            .iter()
            .map(|n| Detector::parse(n).expect("built-in"))
            .collect(),
    )
}

fn found(detectors: &Detectors, text: &str) -> Vec<(String, String)> {
    detectors
        .scan(text)
        .into_iter()
        .map(|f| (f.detector, text[f.start..f.end].to_owned()))
        .collect()
}

fn one(name: &str, text: &str) -> Vec<String> {
    let d = Detectors::new(vec![Detector::parse(name).expect("built-in")]);
    found(&d, text).into_iter().map(|(_, t)| t).collect()
}

#[test]
fn secrets() {
    let aws = "AKIAIOSFODNN7EXAMPLE";
    let ghp = format!("ghp_{}", "a1B2".repeat(9));
    let pat = format!("github_pat_{}", "Ab_9".repeat(20) + "xy");
    let sk = "sk-proj-abcdefghijklmnopqrstuvwxyz012345";
    let ant = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz-_0123";
    let slack = "xoxb-123456789012-1234567890123-AbCdEfGhIjKl";
    let google = "AIzaSy0_-abcdefghijklmnopqrstuvwxyz0123";
    let stripe = "sk_live_4eC39HqLyjWDarjtT1zdp7dc";
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
    let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM\nAbCd==\n-----END RSA PRIVATE KEY-----";
    for secret in [aws, &ghp, &pat, sk, ant, slack, google, stripe, jwt, pem] {
        let text = format!("the key: {secret} (keep it)");
        assert_eq!(one("secret", &text), vec![secret.to_owned()], "{secret}");
    }
    assert_eq!(
        one("secret", "-----BEGIN PRIVATE KEY-----"),
        vec!["-----BEGIN PRIVATE KEY-----"]
    );
    // Inside a longer word, too short, or lower case where upper case is the shape.
    for near in [
        "XAKIAIOSFODNN7EXAMPLE",
        "AKIAIOSFODNN7EXAMPL",
        "akiaiosfodnn7example",
        "task-abcdefghijklmnopqrstuvwxyz",
        "sk-short",
        "ghp_tooShort",
        "-----BEGIN PUBLIC KEY-----",
        "eyJhbGciOi.notajwt",
    ] {
        assert!(one("secret", near).is_empty(), "{near}");
    }
}

#[test]
fn emails() {
    assert_eq!(
        one(
            "email",
            "write to jane.doe+x@mail.example.co.uk, or @jane or bob@localhost."
        ),
        vec!["jane.doe+x@mail.example.co.uk"]
    );
    assert!(one("email", "@handle and a@b and foo@@bar.com").is_empty());
    assert_eq!(one("email", "(a@b.io)"), vec!["a@b.io"]);
}

#[test]
fn phones() {
    let text = "call +44 20 7946 0958, (555) 123-4567 or +1 (555) 123-4567 today; \
                id 5551234567, on 2026-11-27, v10.0.19041.1234, at 192.168.100.200, \
                or +4915123456789.";
    assert_eq!(
        one("phone", text),
        vec![
            "+44 20 7946 0958",
            "(555) 123-4567",
            "+1 (555) 123-4567",
            "+4915123456789"
        ]
    );
    assert!(one("phone", "1.2.3 and 2026-11-27 10:30 and 1234567890123").is_empty());
}

#[test]
fn cards() {
    let text = "visa 4111 1111 1111 1111, amex 3782-822463-10005, mc 5555555555554444; \
                not 4111 1111 1111 1112 nor 41111111111111111111 nor 12 4111111111111111";
    assert_eq!(
        one("card", text),
        vec![
            "4111 1111 1111 1111",
            "3782-822463-10005",
            "5555555555554444"
        ]
    );
}

#[test]
fn ibans() {
    let text = "pay DE89 3704 0044 0532 0130 00 NOW or GB29NWBK60161331926819, \
                not DE89 3704 0044 0532 0130 01 or DE8937040044053201300 or XDE89370400440532013000";
    assert_eq!(
        one("iban", text),
        vec!["DE89 3704 0044 0532 0130 00", "GB29NWBK60161331926819"]
    );
}

#[test]
fn custom_findings_are_named() {
    let d = Detectors::new(vec![
        Detector::custom("employee", r"EMP-[0-9]{6}", None).expect("valid"),
        Detector::Email,
    ]);
    assert_eq!(
        found(&d, "EMP-123456 mailed x@y.org"),
        vec![
            ("employee".to_owned(), "EMP-123456".to_owned()),
            ("email".to_owned(), "x@y.org".to_owned())
        ]
    );
    let (redacted, findings) = d.redact("EMP-123456 mailed x@y.org!");
    assert_eq!(redacted, "[REDACTED:employee] mailed [REDACTED:email]!");
    assert_eq!(findings.len(), 2);
}

#[test]
fn overlaps_keep_the_earlier_then_the_longer() {
    let d = Detectors::new(vec![
        Detector::custom("short", r"abc", None).expect("valid"),
        Detector::custom("long", r"abcdef", None).expect("valid"),
        Detector::custom("later", r"cdefgh", None).expect("valid"),
        Detector::custom("same", r"abcdef", None).expect("valid"),
    ]);
    assert_eq!(
        found(&d, "abcdefgh"),
        vec![("long".to_owned(), "abcdef".to_owned())]
    );
    // A 15-digit card is also a national phone number: the checksum names it.
    let d = Detectors::new(vec![Detector::Phone, Detector::Card]);
    assert_eq!(
        found(&d, "3782 822463 10005"),
        vec![("card".to_owned(), "3782 822463 10005".to_owned())]
    );
}

#[test]
fn findings_hold_no_text() {
    let d = all_builtins();
    let secret = "AKIAIOSFODNN7EXAMPLE";
    let findings = d.scan(&format!("k={secret}"));
    assert_eq!(
        findings,
        vec![Finding {
            detector: "secret".to_owned(),
            start: 2,
            end: 22
        }]
    );
    let json = serde_json::to_string(&findings).expect("serializes");
    assert_eq!(json, r#"[{"detector":"secret","start":2,"end":22}]"#);
    assert!(!format!("{findings:?}").contains(secret));
}

#[test]
fn nothing_to_find() {
    let empty = Detectors::new(Vec::new());
    assert!(empty.is_empty());
    assert_eq!(empty.max_len(), 0);
    assert!(empty.scan("4111 1111 1111 1111").is_empty());
    let mut stream = StreamScanner::new(empty, true);
    assert_eq!(stream.push("abc").0, "abc");
    assert_eq!(stream.finish(), (String::new(), Vec::new()));
    assert!(!all_builtins().is_empty());
    assert_eq!(all_builtins().max_len(), Detector::Secret.max_len());
}

/// Hostile input: large, repetitive, near-misses. Nothing panics, nothing is found that
/// should not be, and the stream agrees with the whole text.
#[test]
fn hostile_input() {
    let d = all_builtins();
    let digits: String = (0..1 << 20)
        .map(|i| char::from(b'0' + (i * 7 % 10) as u8))
        .collect();
    assert!(d.scan(&digits).is_empty());
    let ats: String = (0..1 << 20)
        .map(|i| {
            if i % 3 == 0 {
                '@'
            } else {
                char::from(b'a' + (i % 26) as u8)
            }
        })
        .collect();
    assert!(d.scan(&ats).is_empty());
    let plus = "+1 ".repeat(100_000);
    assert!(d.scan(&plus).is_empty());
    let near_misses = "4111 1111 1111 1112 ".repeat(10_000);
    assert!(d.scan(&near_misses).is_empty());
    for text in [&digits, &ats, &plus, &near_misses] {
        let (streamed, findings) = stream_in_pieces(&d, text, &[4096, 1, 999]);
        assert!(findings.is_empty());
        assert_eq!(&streamed, text);
    }
    // Each detector alone holds back no more than its own `max_len` (checked inside).
    let digits = &digits[..64 * 1024];
    for name in ["secret", "email", "phone", "card", "iban"] {
        let alone = Detectors::new(vec![Detector::parse(name).expect("built-in")]);
        let (streamed, _) = stream_in_pieces(&alone, digits, &[1, 7, 300]);
        assert_eq!(streamed, digits);
    }
}

#[test]
fn hostile_matches_are_all_found() {
    let d = all_builtins();
    // Many findings back to back, each decided only by the next.
    let cards = "4111111111111111, ".repeat(5_000);
    assert_eq!(d.scan(&cards).len(), 5_000);
    // Separated by a single space, they are one run of digits: not a card.
    assert!(d.scan(&"4111111111111111 ".repeat(100)).is_empty());
    let mails = "a@b.co,".repeat(20_000);
    assert_eq!(d.scan(&mails).len(), 20_000);
    let (streamed, findings) = stream_in_pieces(&d, &mails, &[3, 1000]);
    assert_eq!(findings.len(), 20_000);
    assert_eq!(streamed, "[REDACTED:email],".repeat(20_000));
}

/// Streams `text` cut into pieces of the given sizes (cycled, moved to char boundaries),
/// checking the hold-back after each; returns the text passed on and the findings.
fn stream_in_pieces(d: &Detectors, text: &str, sizes: &[usize]) -> (String, Vec<Finding>) {
    stream_with(d, true, text, cuts(text, sizes))
}

fn cuts(text: &str, sizes: &[usize]) -> Vec<usize> {
    let mut cuts = Vec::new();
    let mut at = 0;
    for size in sizes.iter().cycle() {
        if at >= text.len() {
            break;
        }
        at = (at + size.max(&1)).min(text.len());
        while !text.is_char_boundary(at) {
            at += 1;
        }
        cuts.push(at);
    }
    cuts
}

fn stream_with(
    d: &Detectors,
    redact: bool,
    text: &str,
    cuts: Vec<usize>,
) -> (String, Vec<Finding>) {
    let mut stream = StreamScanner::new(d.clone(), redact);
    let mut out = String::new();
    let mut findings = Vec::new();
    let mut from = 0;
    let mut sent_raw = 0;
    for cut in cuts {
        let (piece, mut f) = stream.push(&text[from..cut]);
        // What was passed on covers the input up to some point; at most max_len held.
        sent_raw += raw_len(&piece, &f, &findings, redact);
        assert!(
            cut - sent_raw <= d.max_len(),
            "held back {} > {}",
            cut - sent_raw,
            d.max_len()
        );
        out.push_str(&piece);
        findings.append(&mut f);
        from = cut;
    }
    if from < text.len() {
        let (piece, mut f) = stream.push(&text[from..]);
        out.push_str(&piece);
        findings.append(&mut f);
    }
    let (piece, mut f) = stream.finish();
    out.push_str(&piece);
    findings.append(&mut f);
    (out, findings)
}

/// How many input bytes a passed-on piece stands for: its length, with each redaction
/// marker counted as the finding it replaced.
fn raw_len(piece: &str, new: &[Finding], _old: &[Finding], redact: bool) -> usize {
    if !redact {
        return piece.len();
    }
    new.iter().fold(piece.len(), |len, f| {
        len - "[REDACTED:]".len() - f.detector.len() + (f.end - f.start)
    })
}

/// A tiny deterministic xorshift: random cuts without a dependency.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const MIXED: &str = "Hi é! Key AKIAIOSFODNN7EXAMPLE and sk-ant-abcdefghijklmnopqrstuv_-12 \
    mail jane.doe@example.com, call +44 20 7946 0958 or (555) 123-4567, \
    card 4111 1111 1111 1111 and 4111111111111112, iban DE89 3704 0044 0532 0130 00 NOW, \
    GB29NWBK60161331926819; id 5551234567 on 2026-11-27 v1.2.3 — EMP-004211 ünd \
    eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U \
    -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nAbCd==\n-----END PRIVATE KEY----- \
    bye 378282246310005";

fn mixed_detectors() -> Detectors {
    let mut list: Vec<Detector> = ["secret", "email", "phone", "card", "iban"]
        .iter()
        .map(|n| Detector::parse(n).expect("built-in"))
        .collect();
    list.push(Detector::custom("employee", r"EMP-[0-9]{6}", None).expect("valid"));
    list.push(Detector::custom("greeting", r"(?i)\bbye\b", None).expect("valid"));
    Detectors::new(list)
}

#[test]
fn the_mixed_text_has_every_kind() {
    let d = mixed_detectors();
    let names: Vec<String> = d.scan(MIXED).into_iter().map(|f| f.detector).collect();
    assert_eq!(
        names,
        [
            "secret", "secret", "email", "phone", "phone", "card", "iban", "iban", "employee",
            "secret", "secret", "greeting", "card"
        ]
    );
}

/// The property: for any cut, the stream passes on what `redact` gives for the whole
/// (or the whole text itself), with the same findings.
#[test]
fn a_stream_equals_the_whole_for_any_cut() {
    let d = mixed_detectors();
    let (redacted, findings) = d.redact(MIXED);
    let boundaries: Vec<usize> = (1..MIXED.len())
        .filter(|&i| MIXED.is_char_boundary(i))
        .collect();
    // Every single cut, and one character at a time.
    let mut plans: Vec<Vec<usize>> = boundaries.iter().map(|&i| vec![i]).collect();
    plans.push(boundaries.clone());
    // Random piece sizes.
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    for _ in 0..200 {
        let max = 1 + rng.below(40);
        let sizes: Vec<usize> = (0..16).map(|_| 1 + rng.below(max)).collect();
        plans.push(cuts(MIXED, &sizes));
    }
    for (n, plan) in plans.into_iter().enumerate() {
        for redact in [true, false] {
            let (out, got) = stream_with(&d, redact, MIXED, plan.clone());
            let want = if redact { redacted.as_str() } else { MIXED };
            assert_eq!(out, want, "plan {n}, redact {redact}: {plan:?}");
            assert_eq!(got, findings, "plan {n}, redact {redact}");
        }
    }
}

/// A Luhn-valid card cut in every place, two pieces or one byte at a time, is never
/// passed on, not even in part.
#[test]
fn a_split_card_is_redacted() {
    let d = all_builtins();
    let card = "4111 1111 1111 1111";
    let text = format!("pay with {card} now");
    let want = "pay with [REDACTED:card] now";
    let mut plans: Vec<Vec<usize>> = (1..text.len()).map(|i| vec![i]).collect();
    plans.push((1..text.len()).collect());
    for plan in plans {
        let mut stream = StreamScanner::new(d.clone(), true);
        let mut pieces = Vec::new();
        let mut from = 0;
        for cut in plan.iter().copied().chain([text.len()]) {
            pieces.push(stream.push(&text[from..cut]));
            from = cut;
        }
        pieces.push(stream.finish());
        let joined: String = pieces.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(joined, want, "{plan:?}");
        for (piece, _) in &pieces {
            assert!(!piece.contains("4111"), "{piece:?} in {plan:?}");
        }
        let findings: Vec<Finding> = pieces.into_iter().flat_map(|(_, f)| f).collect();
        assert_eq!(
            findings,
            vec![Finding {
                detector: "card".to_owned(),
                start: 9,
                end: 28
            }]
        );
    }
}

/// The same property on random texts glued from entities, near misses and separators,
/// so findings touch each other and the pieces cut them anywhere.
#[test]
fn a_stream_equals_the_whole_on_random_texts() {
    const FRAGMENTS: &[&str] = &[
        "hello ",
        "é",
        " ünd ",
        ", ",
        ".",
        "\n",
        " ",
        "-",
        "(",
        ")",
        "+",
        "@",
        "12345",
        "4111 1111 1111 1111",
        "5555555555554444",
        "378282246310005",
        "4111 1111 1111 1112",
        "+44 20 7946 0958",
        "(555) 123-4567",
        "+1 ",
        "555-123-4567",
        "2026-11-27",
        "a.b@example.org",
        "@handle",
        "x@y",
        "DE89 3704 0044 0532 0130 00",
        "GB29NWBK60161331926819",
        "AKIAIOSFODNN7EXAMPLE",
        "sk-abcdefghijklmnopqrstuvwxyz",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9P",
        "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg\n",
        "-----END EC PRIVATE KEY-----",
        "EMP-123456",
        "bye",
    ];
    let d = mixed_detectors();
    let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
    let mut found = 0;
    for _ in 0..40 {
        let text: String = (0..40)
            .map(|_| FRAGMENTS[rng.below(FRAGMENTS.len())])
            .collect();
        let (redacted, findings) = d.redact(&text);
        found += findings.len();
        for _ in 0..25 {
            let max = 1 + rng.below(60);
            let sizes: Vec<usize> = (0..16).map(|_| 1 + rng.below(max)).collect();
            let plan = cuts(&text, &sizes);
            let redact = rng.below(2) == 0;
            let (out, got) = stream_with(&d, redact, &text, plan.clone());
            let want = if redact {
                redacted.as_str()
            } else {
                text.as_str()
            };
            assert_eq!(out, want, "{text:?} cut at {plan:?}");
            assert_eq!(got, findings, "{text:?} cut at {plan:?}");
        }
    }
    assert!(found > 200, "the texts hold findings: {found}");
}

#[test]
fn prose_passes_at_once() {
    let mut stream = StreamScanner::new(all_builtins(), true);
    // Only the last word could still start an email address.
    assert_eq!(
        stream.push("Nothing to see here, ").0,
        "Nothing to see here, "
    );
    assert_eq!(stream.push("really").0, "");
    assert_eq!(stream.push(". Call 555").0, "really. Call ");
    // The run of phone characters ends at `n`; `now` could start an address.
    assert_eq!(stream.push("-123-4567 now").0, "[REDACTED:phone] ");
    assert_eq!(stream.push(". Bye").0, "now. ");
    assert_eq!(stream.finish().0, "Bye");
}

#[test]
fn a_scanner_shows_no_text() {
    let mut stream = StreamScanner::new(all_builtins(), true);
    stream.push("card 4111 1111 11");
    let shown = format!("{stream:?}");
    assert!(!shown.contains("4111"), "{shown}");
}

#[test]
fn a_finished_scanner_starts_a_new_stream() {
    let mut stream = StreamScanner::new(all_builtins(), false);
    let (first, _) = stream.push("a@b.io ");
    let (rest, findings) = stream.finish();
    assert_eq!(format!("{first}{rest}"), "a@b.io ");
    let all: Vec<Finding> = findings;
    assert!(all.is_empty() || all[0].start == 0);
    let (_, again) = stream.push("x@y.io ");
    let (_, more) = stream.finish();
    let again: Vec<Finding> = again.into_iter().chain(more).collect();
    assert_eq!(again[0].start, 0);
}
