//! Tool calls a model wrote as text, recovered (ADR 0032).
//!
//! Small local models often know which tool to call and with which arguments, but write
//! the call into the answer's text instead of the server's `tool_calls`: the server only
//! parses its own strict form. This module reads the common shapes back into calls:
//!
//! - Hermes `<tool_call>{"name": …, "arguments": {…}}</tool_call>`, and `<tools>…</tools>`;
//! - fenced (```` ```json ````) or bare `{"name": …, "arguments": {…}}` JSON, also with
//!   every brace doubled (`{{…}}`), and `arguments` given as a JSON string;
//! - a function call `name({…})`;
//! - a self-closing tag `<name attr="…"/>`, its attributes the arguments;
//! - elements `<name>TOOL</name><arguments><key>value</key>…</arguments>`;
//! - `"function"` (or `"tool"`) for `"name"`, and OpenAI's own
//!   `{"type": "function", "function": {…}}`.
//!
//! It is a pure function of a string and the request's tools: no I/O, no state, never a
//! panic. What it returns is never trusted more than a native call: a call is recovered
//! only when its name is a tool offered in that request and its arguments validate
//! against that tool's schema; anything else stays text. The work is linear in the text's
//! length: one pass finds the top-level `{…}` spans, each byte is parsed as JSON at most
//! twice, and the tag scan never goes back.

use serde_json::{Map, Value};

use crate::schema::Schema;

/// Largest `{…}` span read as a call, in bytes: larger spans stay text.
pub const MAX_SPAN: usize = 64 * 1024;

/// Most calls recovered from one answer.
pub const MAX_CALLS: usize = 8;

/// Longest tool name looked for before `(` or after `<`.
const MAX_NAME: usize = 64;

/// A tool offered in the request: its name and compiled argument schema.
pub struct Offered<'a> {
    pub name: &'a str,
    pub schema: &'a Schema,
}

/// A call read from text: the offered tool's name (as offered) and valid arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveredCall {
    pub name: String,
    pub arguments: Value,
}

/// What the text says: the calls found, in order, and the text before the first one.
#[derive(Debug, Clone, PartialEq)]
pub struct Recovered {
    pub text: String,
    pub calls: Vec<RecoveredCall>,
}

/// Reads the calls written in `content`. Without any, `text` is `content` unchanged.
pub fn recover(content: &str, offered: &[Offered<'_>]) -> Recovered {
    let mut found: Vec<(usize, RecoveredCall)> = Vec::new();
    if !offered.is_empty() {
        let spans = object_spans(content);
        for &(start, end) in &spans {
            if let Some(call) = span_call(content, start, end, offered) {
                found.push((start, call));
            }
            if found.len() >= MAX_CALLS {
                break;
            }
        }
        // Tags and elements inside a JSON object (a file's content, say) are its text.
        let outside = |(at, _): &(usize, RecoveredCall)| {
            let i = spans.partition_point(|(start, _)| start <= at);
            i == 0 || spans[i - 1].1 <= *at
        };
        if found.len() < MAX_CALLS {
            let tags = tag_calls(content, offered, MAX_CALLS - found.len());
            found.extend(tags.into_iter().filter(outside));
        }
        if found.len() < MAX_CALLS {
            let elements = element_calls(content, offered, MAX_CALLS - found.len());
            found.extend(elements.into_iter().filter(outside));
        }
    }
    found.sort_by_key(|(at, _)| *at);
    found.truncate(MAX_CALLS);
    let text = match found.first() {
        None => content.to_owned(),
        Some((at, _)) => text_before(content, *at),
    };
    Recovered {
        text,
        calls: found.into_iter().map(|(_, call)| call).collect(),
    }
}

/// A call `content` meant but that could not be read: the first top-level `{…}` span
/// naming an offered tool (`"name": "TOOL"`) that did not become a call, and why. The
/// model is told this instead of a general correction, so it can write the call again.
pub fn near_miss(content: &str, offered: &[Offered<'_>]) -> Option<NearMiss> {
    for (start, end) in object_spans(content) {
        let span = &content[start..end];
        let Some(tool) = offered.iter().find(|t| names_tool(span, t.name)) else {
            continue;
        };
        let reason = match parse_object(span) {
            None if span.len() > MAX_SPAN => format!("the call is over {MAX_SPAN} bytes"),
            None => match serde_json::from_str::<Value>(span) {
                Err(e) => format!(
                    "it is not valid JSON ({e}{}); every argument must be a literal JSON \
                     value: tools do not run code, so read what you need first and write \
                     the value itself",
                    near(span, e.line(), e.column())
                ),
                Ok(_) => "it is not a JSON object".to_owned(),
            },
            Some(value) => {
                let call = match value.get("function") {
                    Some(inner @ Value::Object(_)) => inner,
                    _ => &value,
                };
                match call.get("arguments").or_else(|| call.get("parameters")) {
                    None => "it has no \"arguments\"".to_owned(),
                    Some(Value::Object(arguments)) => {
                        match tool.schema.check(&Value::Object(arguments.clone())) {
                            Err(problem) => format!("its arguments do not match: {problem}"),
                            // It is a call after all (recovered elsewhere, or not first).
                            Ok(()) => continue,
                        }
                    }
                    Some(_) => "its \"arguments\" are not a JSON object".to_owned(),
                }
            }
        };
        return Some(NearMiss {
            tool: tool.name.to_owned(),
            reason,
        });
    }
    None
}

/// `, near `…`` with the text at a JSON error's line and column, when there is one.
fn near(span: &str, line: usize, column: usize) -> String {
    let Some(text) = span.lines().nth(line.saturating_sub(1)) else {
        return String::new();
    };
    let from = text
        .char_indices()
        .nth(column.saturating_sub(1))
        .map_or(text.len(), |(i, _)| i);
    let shown: String = text[from..].trim().chars().take(24).collect();
    if shown.is_empty() {
        String::new()
    } else {
        format!(", near `{shown}`")
    }
}

/// A call written as text that could not be read ([`near_miss`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NearMiss {
    pub tool: String,
    pub reason: String,
}

/// Whether `span` names `tool` as a call's name: `"name"` (or `"function"`, `"tool"`)
/// followed by the tool's name as a JSON string.
fn names_tool(span: &str, tool: &str) -> bool {
    let quoted = format!("\"{tool}\"");
    ["\"name\"", "\"function\"", "\"tool\""].iter().any(|key| {
        span.match_indices(key).any(|(at, _)| {
            let rest = span[at + key.len()..].trim_start();
            rest.strip_prefix(':')
                .is_some_and(|value| value.trim_start().starts_with(&quoted))
        })
    })
}

/// The JSON object in `content` that is the whole answer (fences and blank space
/// around it allowed), when it validates against `schema`: a result written as text.
pub fn result_text(content: &str, schema: &Schema) -> Option<Value> {
    let spans = object_spans(content);
    let [(start, end)] = spans.as_slice() else {
        return None;
    };
    let outside = format!("{}{}", &content[..*start], &content[*end..]);
    let outside = outside.replace("```json", "").replace("```", "");
    if !outside.trim().is_empty() {
        return None;
    }
    let value = parse_object(&content[*start..*end])?;
    schema.check(&value).ok().map(|()| value)
}

/// The top-level balanced `{…}` spans of `text` as byte ranges. Braces inside JSON
/// strings do not count; an unclosed span ends nothing, except one opened with a
/// doubled brace (`{{"name": …}}` written with one closing brace too few), whose spans
/// from its second brace on are read once more.
fn object_spans(text: &str) -> Vec<(usize, usize)> {
    let (mut spans, unclosed) = balanced_spans(text);
    if let Some(start) = unclosed
        && text[start..].starts_with("{{")
    {
        let (inner, _) = balanced_spans(&text[start + 1..]);
        spans.extend(
            inner
                .into_iter()
                .map(|(a, b)| (a + start + 1, b + start + 1)),
        );
    }
    spans
}

/// The balanced spans of [`object_spans`] in one pass, and where an unclosed one began.
fn balanced_spans(text: &str) -> (Vec<(usize, usize)>, Option<usize>) {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' if depth > 0 => in_string = true,
            b'{' => {
                if depth == 0 {
                    start = i;
                }
                depth += 1;
            }
            b'}' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    spans.push((start, i + 1));
                }
            }
            _ => {}
        }
    }
    (spans, (depth > 0).then_some(start))
}

/// A JSON object from a span, reading `{{…}}` doubling as single braces.
fn parse_object(span: &str) -> Option<Value> {
    if span.len() > MAX_SPAN {
        return None;
    }
    if let Ok(value @ Value::Object(_)) = serde_json::from_str::<Value>(span) {
        return Some(value);
    }
    if span.starts_with("{{") && span.ends_with("}}") {
        let single = span.replace("{{", "{").replace("}}", "}");
        if let Ok(value @ Value::Object(_)) = serde_json::from_str::<Value>(&single) {
            return Some(value);
        }
    }
    None
}

/// The call a `{…}` span stands for: `{"name", "arguments"}`, or the arguments of a
/// `name(…)` call written just before it.
fn span_call(
    content: &str,
    start: usize,
    end: usize,
    offered: &[Offered<'_>],
) -> Option<RecoveredCall> {
    let value = parse_object(&content[start..end])?;
    // OpenAI's own shape, `{"type": "function", "function": {"name", "arguments"}}`.
    let call = match value.get("function") {
        Some(inner @ Value::Object(_)) => inner,
        _ => &value,
    };
    let name = ["name", "function", "tool"]
        .iter()
        .find_map(|key| call.get(*key).and_then(Value::as_str));
    if let Some(name) = name {
        let arguments = match call.get("arguments").or_else(|| call.get("parameters")) {
            Some(Value::String(text)) => serde_json::from_str::<Value>(text).ok()?,
            Some(arguments) => arguments.clone(),
            None => return None,
        };
        return checked(name, arguments, offered);
    }
    let name = called_before(&content[..start])?;
    if !content[end..].trim_start().starts_with(')') {
        return None;
    }
    checked(name, value, offered)
}

/// The identifier right before a `(` that ends `before` (blank space allowed).
fn called_before(before: &str) -> Option<&str> {
    let before = before.trim_end().strip_suffix('(')?.trim_end();
    let from = before
        .char_indices()
        .rev()
        .take(MAX_NAME + 1)
        .take_while(|(_, c)| is_name_char(*c))
        .last()
        .map(|(i, _)| i)?;
    let name = &before[from..];
    (name.len() <= MAX_NAME).then_some(name)
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

/// The call when `name` is offered (exactly, or but for case) and `arguments` validate.
fn checked(name: &str, arguments: Value, offered: &[Offered<'_>]) -> Option<RecoveredCall> {
    let tool = offered
        .iter()
        .find(|t| t.name == name)
        .or_else(|| offered.iter().find(|t| t.name.eq_ignore_ascii_case(name)))?;
    if !arguments.is_object() || tool.schema.check(&arguments).is_err() {
        return None;
    }
    Some(RecoveredCall {
        name: tool.name.to_owned(),
        arguments,
    })
}

/// Calls written as `<name attr="value" …/>` (or `…>`), at most `limit` of them.
fn tag_calls(content: &str, offered: &[Offered<'_>], limit: usize) -> Vec<(usize, RecoveredCall)> {
    let mut calls = Vec::new();
    let mut at = 0;
    while calls.len() < limit {
        let Some(offset) = content[at..].find('<') else {
            break;
        };
        let start = at + offset;
        let (call, next) = read_tag(content, start, offered);
        if let Some(call) = call {
            calls.push((start, call));
        }
        // The scan only moves forward: each byte is looked at a bounded number of times.
        at = next.max(start + 1);
    }
    calls
}

/// Reads the tag at `start` (`content[start] == '<'`): its call, if it is an offered
/// tool with valid attributes, and where the scan goes on.
fn read_tag(
    content: &str,
    start: usize,
    offered: &[Offered<'_>],
) -> (Option<RecoveredCall>, usize) {
    let rest = &content[start + 1..];
    let name_len = rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len());
    let name = &rest[..name_len];
    let after_name = start + 1 + name_len;
    if name.is_empty()
        || name.len() > MAX_NAME
        || !offered.iter().any(|t| t.name.eq_ignore_ascii_case(name))
    {
        return (None, after_name);
    }
    let mut attributes = Map::new();
    let mut i = after_name;
    let bytes = content.as_bytes();
    loop {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if content[i..].starts_with("/>") || content[i..].starts_with('>') {
            break;
        }
        let key_len = content[i..]
            .find(|c: char| !is_name_char(c))
            .unwrap_or(content.len() - i);
        if key_len == 0 || !content[i + key_len..].starts_with('=') {
            return (None, i);
        }
        let key = &content[i..i + key_len];
        i += key_len + 1;
        let Some(&quote) = bytes.get(i).filter(|q| **q == b'"' || **q == b'\'') else {
            return (None, i);
        };
        let Some(len) = content[i + 1..].find(quote as char) else {
            return (None, i);
        };
        let value = unescape(&content[i + 1..i + 1 + len]);
        attributes.insert(key.to_owned(), Value::String(value));
        i += len + 2;
    }
    (checked_typed(name, attributes, offered), i)
}

/// Calls written as elements: `<name>TOOL</name>` then `<arguments>` holding one
/// `<key>value</key>` per argument (what `<tools><function>…` answers look like), at
/// most `limit`. Every search starts where the previous one ended.
fn element_calls(
    content: &str,
    offered: &[Offered<'_>],
    limit: usize,
) -> Vec<(usize, RecoveredCall)> {
    let mut calls = Vec::new();
    let mut at = 0;
    while calls.len() < limit {
        let Some(offset) = content[at..].find("<name>") else {
            break;
        };
        let start = at + offset;
        let name_from = start + "<name>".len();
        let Some(name_len) = content[name_from..].find("</name>") else {
            break;
        };
        let name = content[name_from..name_from + name_len].trim();
        at = name_from + name_len + "</name>".len();
        let Some(body) = content[at..].trim_start().strip_prefix("<arguments>") else {
            continue;
        };
        let body_from = content.len() - body.len();
        let Some(body_len) = body.find("</arguments>") else {
            break;
        };
        at = body_from + body_len + "</arguments>".len();
        if name.len() > MAX_NAME {
            continue;
        }
        let Some(arguments) = element_arguments(&body[..body_len]) else {
            continue;
        };
        if let Some(call) = checked_typed(name, arguments, offered) {
            calls.push((start, call));
        }
    }
    calls
}

/// `<key>value</key>…` as an object of strings; `None` unless that is all there is.
fn element_arguments(body: &str) -> Option<Map<String, Value>> {
    let mut arguments = Map::new();
    let mut rest = body.trim_start();
    while !rest.is_empty() {
        let open = rest.strip_prefix('<')?;
        let key_len = open.find('>')?;
        let key = &open[..key_len];
        if key.is_empty() || key.len() > MAX_NAME || !key.chars().all(is_name_char) {
            return None;
        }
        let value_from = &open[key_len + 1..];
        let close = format!("</{key}>");
        let value_len = value_from.find(&close)?;
        arguments.insert(
            key.to_owned(),
            Value::String(unescape(&value_from[..value_len])),
        );
        rest = value_from[value_len + close.len()..].trim_start();
    }
    Some(arguments)
}

/// [`checked`] for arguments written as text: as they are, else with each value that
/// reads as a JSON number, boolean, array or object taken as that.
fn checked_typed(
    name: &str,
    arguments: Map<String, Value>,
    offered: &[Offered<'_>],
) -> Option<RecoveredCall> {
    if let Some(call) = checked(name, Value::Object(arguments.clone()), offered) {
        return Some(call);
    }
    let typed = arguments
        .into_iter()
        .map(
            |(k, v)| match v.as_str().map(serde_json::from_str::<Value>) {
                Some(Ok(parsed)) if !parsed.is_string() => (k, parsed),
                _ => (k, v),
            },
        )
        .collect();
    checked(name, Value::Object(typed), offered)
}

/// XML's five entities in an attribute value.
fn unescape(value: &str) -> String {
    if !value.contains('&') {
        return value.to_owned();
    }
    value
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// The text before a call, without the opening fence or wrapper it sits in.
fn text_before(content: &str, at: usize) -> String {
    let mut text = content[..at].trim_end();
    for opener in ["```json", "```", "<tool_call>", "<tools>", "<|tool_call|>"] {
        if let Some(stripped) = text.strip_suffix(opener) {
            text = stripped.trim_end();
        }
    }
    text.to_owned()
}

#[cfg(test)]
mod tests;
