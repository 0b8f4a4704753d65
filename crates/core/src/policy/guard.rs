//! A cheap pre-scan of policy text before the YAML parser sees it. The parser is
//! slow or memory-hungry on some hostile input (control characters, thousands of nested
//! brackets, alias bombs), and policy files need none of those, so they are refused up
//! front with a located message.

/// Deepest flow nesting (`[`/`{`) accepted; real policies use two or three.
const MAX_FLOW_DEPTH: usize = 32;
/// Widest indentation accepted; it bounds block nesting the same way.
const MAX_INDENT: usize = 128;

/// The 1-based line and the reason the text is refused, or `None` when it may be parsed.
pub(crate) fn refusal(text: &str) -> Option<(usize, String)> {
    let mut depth = 0usize;
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        // `lines` ends a line at LF or CRLF, so a CR left in a line is a lone one: an
        // old Mac line end, which the YAML parser mishandles (it once panicked on one).
        if line.contains('\r') {
            return Some((
                lineno,
                "a carriage return not followed by a line feed".to_owned(),
            ));
        }
        if let Some(c) = line.chars().find(|&c| c.is_control() && c != '\t') {
            return Some((
                lineno,
                format!("control character U+{:04X}: not YAML text", u32::from(c)),
            ));
        }
        if line.len() - line.trim_start_matches(' ').len() > MAX_INDENT {
            return Some((lineno, format!("indented more than {MAX_INDENT} columns")));
        }
        let mut quote: Option<char> = None;
        let mut prev = ' ';
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            let token_start = matches!(prev, ' ' | '\t' | '[' | '{' | ',' | ':');
            match quote {
                Some('"') if c == '\\' => {
                    chars.next();
                }
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None => match c {
                    '"' | '\'' if token_start => quote = Some(c),
                    '#' if matches!(prev, ' ' | '\t') => break,
                    '[' | '{' => {
                        depth += 1;
                        if depth > MAX_FLOW_DEPTH {
                            return Some((
                                lineno,
                                format!("nested deeper than {MAX_FLOW_DEPTH} levels"),
                            ));
                        }
                    }
                    ']' | '}' => depth = depth.saturating_sub(1),
                    '*' | '&'
                        if token_start && chars.peek().is_some_and(|n| !n.is_whitespace()) =>
                    {
                        return Some((
                            lineno,
                            "YAML anchors and aliases are not allowed in policy files \
                             (quote a pattern that starts with `*`)"
                                .into(),
                        ));
                    }
                    _ => {}
                },
            }
            prev = c;
        }
    }
    None
}
