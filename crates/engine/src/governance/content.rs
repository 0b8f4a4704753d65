//! Content guardrails (`content` policies) on one surface: the policies that select a
//! request and watch the surface, applied in set order to a whole text
//! ([`ContentGuard::check`]) or a stream ([`ContentGuard::stream`]). `redact` replaces
//! each finding, `deny` refuses (and replaces it too, so what it refused is not
//! stored with the refusal), `flag` only reports. Findings become
//! `content_finding` events naming the policy, detector, surface and byte range, never
//! the text found.

use std::borrow::Cow;

use agentplane_core::EventPayload;
use agentplane_core::content::{Finding, StreamScanner};
use agentplane_core::policy::{ContentAction, ContentRule, Policy, PolicySet, Rule, Surface};
use serde_json::Value;

use super::rules::{self, RequestContext};

/// The content policies that apply to one request on one surface, in set order.
pub struct ContentGuard<'p> {
    surface: Surface,
    rules: Vec<(&'p Policy, &'p ContentRule)>,
}

/// One finding, with the policy that made it and what it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub policy: String,
    pub action: ContentAction,
    pub finding: Finding,
    /// Where in the arguments (a JSON pointer), for `tool_arguments`.
    pub pointer: Option<String>,
}

/// A text after the guard.
#[derive(Debug)]
pub struct Checked<'t> {
    /// The text to pass on (redacted where a `redact` policy found something).
    pub text: Cow<'t, str>,
    pub found: Vec<Found>,
    /// The first `deny` policy that found something: the text must not pass.
    pub denied_by: Option<String>,
}

impl<'p> ContentGuard<'p> {
    /// The content policies of `set` that select `ctx` and watch `surface`.
    pub fn new(set: &'p PolicySet, ctx: &RequestContext<'_>, surface: Surface) -> Self {
        let rules = rules::applicable(set, ctx)
            .filter_map(|policy| match policy.rule() {
                Rule::Content(rule) if rule.watches(surface) => Some((policy, rule)),
                _ => None,
            })
            .collect();
        Self { surface, rules }
    }

    /// The surface the policies watch.
    pub fn surface(&self) -> Surface {
        self.surface
    }

    /// Whether no policy watches: nothing to do.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Checks a whole text.
    pub fn check<'t>(&self, text: &'t str) -> Checked<'t> {
        let mut out = Checked {
            text: Cow::Borrowed(text),
            found: Vec::new(),
            denied_by: None,
        };
        for (policy, rule) in &self.rules {
            // `deny` redacts too: what it refuses is never stored either.
            let findings = match rule.action {
                ContentAction::Redact | ContentAction::Deny => {
                    let (redacted, findings) = rule.detectors.redact(&out.text);
                    if !findings.is_empty() {
                        out.text = Cow::Owned(redacted);
                    }
                    findings
                }
                ContentAction::Flag => rule.detectors.scan(&out.text),
            };
            if rule.action == ContentAction::Deny && !findings.is_empty() && out.denied_by.is_none()
            {
                out.denied_by = Some(policy.name().to_owned());
            }
            out.found.extend(findings.into_iter().map(|finding| Found {
                policy: policy.name().to_owned(),
                action: rule.action,
                finding,
                pointer: None,
            }));
        }
        out
    }

    /// Checks every string and every object key in a JSON value (a tool call's
    /// arguments), redacting in place; findings carry the string's pointer (a key's:
    /// its object's). A key is as much the caller's words as a value: a card number or
    /// a secret used as a key is found, redacted (the key renamed, its value kept) and
    /// denied like one in a value, and the pointers below it name the redacted key,
    /// never what it held. Returns the findings and the first denying policy.
    pub fn check_json(&self, value: &mut Value) -> (Vec<Found>, Option<String>) {
        let mut found = Vec::new();
        let mut denied = None;
        self.walk(value, &mut String::new(), &mut found, &mut denied);
        (found, denied)
    }

    fn walk(
        &self,
        value: &mut Value,
        pointer: &mut String,
        found: &mut Vec<Found>,
        denied: &mut Option<String>,
    ) {
        match value {
            Value::String(text) => {
                let checked = self.check(text);
                if denied.is_none() {
                    denied.clone_from(&checked.denied_by);
                }
                found.extend(checked.found.into_iter().map(|f| Found {
                    pointer: Some(pointer.clone()),
                    ..f
                }));
                if let Cow::Owned(redacted) = checked.text {
                    *text = redacted;
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter_mut().enumerate() {
                    let len = pointer.len();
                    pointer.push_str(&format!("/{i}"));
                    self.walk(item, pointer, found, denied);
                    pointer.truncate(len);
                }
            }
            Value::Object(map) => {
                // Rebuilt only when a key changes, so an untouched object keeps its
                // order and costs no copy.
                let renamed: Vec<(String, String)> = map
                    .keys()
                    .filter_map(|key| {
                        let checked = self.check(key);
                        if denied.is_none() {
                            denied.clone_from(&checked.denied_by);
                        }
                        found.extend(checked.found.into_iter().map(|f| Found {
                            pointer: Some(pointer.clone()),
                            ..f
                        }));
                        match checked.text {
                            Cow::Owned(redacted) => Some((key.clone(), redacted)),
                            Cow::Borrowed(_) => None,
                        }
                    })
                    .collect();
                if !renamed.is_empty() {
                    rename_keys(map, &renamed);
                }
                for (key, item) in map.iter_mut() {
                    let len = pointer.len();
                    pointer.push('/');
                    pointer.push_str(&pointer_escape(key));
                    self.walk(item, pointer, found, denied);
                    pointer.truncate(len);
                }
            }
            _ => {}
        }
    }

    /// A scanner for a stream on this surface, when a policy changes or refuses what
    /// passes (`redact`, `deny`): each holds back only what could still become a
    /// finding. `flag` policies see the whole text at the end instead.
    pub fn stream(&self) -> Option<ContentStream> {
        let scanners: Vec<StreamScanner> = self
            .rules
            .iter()
            .filter(|(_, rule)| rule.action != ContentAction::Flag)
            .map(|(_, rule)| StreamScanner::new(rule.detectors.clone(), true))
            .collect();
        (!scanners.is_empty()).then_some(ContentStream { scanners })
    }

    /// The `content_finding` events of `found` on this surface.
    pub fn events(&self, found: &[Found], call_id: Option<&str>) -> Vec<EventPayload> {
        found
            .iter()
            .map(|f| EventPayload::ContentFinding {
                policy: f.policy.clone(),
                surface: self.surface.as_str().to_owned(),
                detector: f.finding.detector.clone(),
                action: f.action.as_str().to_owned(),
                call_id: call_id.map(str::to_owned),
                pointer: f.pointer.clone(),
                start: f.finding.start as u64,
                end: f.finding.end as u64,
            })
            .collect()
    }
}

/// A JSON pointer's escaping of one name (RFC 6901).
pub(crate) fn pointer_escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// Renames the keys of `map` that a policy redacted (`(old, new)`), keeping the order
/// of the others: two keys redacted alike stay two keys (`[REDACTED:card] (2)`), so
/// no value is lost to a collision.
pub(crate) fn rename_keys(map: &mut serde_json::Map<String, Value>, renamed: &[(String, String)]) {
    for (key, item) in std::mem::take(map) {
        let mut name = match renamed.iter().find(|(old, _)| *old == key) {
            Some((_, new)) => new.clone(),
            None => key,
        };
        let base = name.clone();
        let mut n = 2;
        while map.contains_key(&name) {
            name = format!("{base} ({n})");
            n += 1;
        }
        map.insert(name, item);
    }
}

/// Redacting scanners chained over a stream (`deny` policies redact too, so what they
/// found never passes; the whole text's check then refuses it).
pub struct ContentStream {
    scanners: Vec<StreamScanner>,
}

impl ContentStream {
    /// The next piece: what may pass now.
    pub fn push(&mut self, piece: &str) -> String {
        let mut text = piece.to_owned();
        for scanner in &mut self.scanners {
            text = scanner.push(&text).0;
        }
        text
    }

    /// The end of the stream: the rest.
    pub fn finish(&mut self) -> String {
        let mut text = String::new();
        for scanner in &mut self.scanners {
            let (mut passed, _) = scanner.push(&text);
            passed.push_str(&scanner.finish().0);
            text = passed;
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use agentplane_core::policy::PolicySource;
    use serde_json::json;

    use super::*;

    const CARD: &str = "4111 1111 1111 1111";

    fn guarded<T>(policies: &str, run: impl FnOnce(&ContentGuard<'_>) -> T) -> T {
        let set = PolicySet::parse(&[PolicySource {
            name: "t.yaml",
            text: policies,
        }])
        .expect("valid");
        let ctx = RequestContext::new("a", &[], "c");
        run(&ContentGuard::new(&set, &ctx, Surface::ToolArguments))
    }

    #[test]
    fn a_key_is_screened_like_a_value() {
        let redact =
            "- name: cards\n  type: content\n  rules: {detectors: [card], action: redact}\n";
        let mut args = json!({
            "a": 1,
            CARD: "kept",
            "nested": {"4242 4242 4242 4242": {"x": CARD}},
            "[REDACTED:card]": "there first",
        });
        let (found, denied) = guarded(redact, |guard| guard.check_json(&mut args));
        assert_eq!(denied, None);
        let text = args.to_string();
        assert!(!text.contains("4111") && !text.contains("4242"), "{text}");
        assert_eq!(args["a"], 1);
        assert_eq!(args["[REDACTED:card]"], "kept");
        assert_eq!(args["[REDACTED:card] (2)"], "there first");
        assert_eq!(args["nested"]["[REDACTED:card]"]["x"], "[REDACTED:card]");
        let pointers: Vec<&str> = found.iter().filter_map(|f| f.pointer.as_deref()).collect();
        assert_eq!(pointers, ["", "/nested", "/nested/[REDACTED:card]/x"]);

        let deny =
            "- name: no-cards\n  type: content\n  rules: {detectors: [card], action: deny}\n";
        let mut args = json!({CARD: true});
        let (found, denied) = guarded(deny, |guard| guard.check_json(&mut args));
        assert_eq!(denied.as_deref(), Some("no-cards"));
        assert_eq!(found.len(), 1);
        assert_eq!(args, json!({"[REDACTED:card]": true}));
    }
}
