//! What comes out of a call, screened once before anything records, streams or exports
//! it: the text a tool or a model answered — a result and an error alike —, the tool
//! calls in a model's answer (ids, names, and every string of their arguments, object
//! keys included), the model that answered, and other words of the upstream (a finish
//! reason). Every field gets the process's secret redaction (`secret::redact`) and
//! then the `content` policies watching the surface, in set order ([`screen`]); what
//! comes back is the redacted values, the findings with the field they were in, and
//! the first `deny` policy that found something.
//!
//! Every surface hands what came back to [`screen`]: a native tool call
//! (`turn/tool_call.rs`), the MCP gateway (`mcp_gateway.rs`), every model call
//! (`metered.rs`: a turn's answer and the OpenAI-compatible gateway's) and an external
//! agent's turn (`external_turn/screen.rs`: its text, tool calls, results and errors).
//! An error is a [`Returned`] like a result (`text: Err(..)`), and a model call's error
//! goes to [`screen_error`] (the body of an upstream's error answer, a failover's
//! reason), so no surface has an error path that skips the screen.
//!
//! What must not live here: what a surface does with a refusal (a tool error, a
//! withheld output, a refused answer), recording the findings, any I/O.

use std::borrow::Cow;

use agentplane_core::ToolCall;
use agentplane_core::secret;
use serde_json::{Map, Value};

use crate::ports::ModelError;

use super::content::{ContentGuard, Found, pointer_escape as escape};

/// Everything a call gave back that its upstream controls, as it came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Returned {
    /// A tool's result or a model's text (`Ok`), or the error the call ended with
    /// (`Err`: a JSON-RPC error, an `isError` result, a failure): screened alike.
    pub text: Result<String, String>,
    /// The tool calls of a model's answer: ids, names, arguments (JSON text).
    pub tool_calls: Vec<ToolCall>,
    /// The model that answered, as the upstream named it.
    pub model: Option<String>,
    /// Other words of the upstream that are kept or shown, by name (`finish_reason`).
    pub metadata: Vec<(String, String)>,
}

impl Returned {
    /// What a tool call gave back: its result, or its error.
    pub fn tool(outcome: Result<String, String>) -> Self {
        Self {
            text: outcome,
            tool_calls: Vec::new(),
            model: None,
            metadata: Vec::new(),
        }
    }
}

/// A [`Returned`] after the screen.
#[derive(Debug)]
pub struct Screened {
    /// Every field redacted: secrets, and what `redact` and `deny` policies found.
    pub returned: Returned,
    /// The findings; `pointer` names the field for all but the text: `/error`,
    /// `/tool_calls/0/name`, `/tool_calls/0/arguments/to`, `/model`,
    /// `/metadata/finish_reason`.
    pub found: Vec<Found>,
    /// The first `deny` policy that found something: the surface must refuse it.
    pub denied_by: Option<String>,
}

/// Screens everything a call returned with `guard` (the content policies watching the
/// call's surface; empty: secrets only). With policies, the check is an
/// `apply_guardrail` span of its own.
pub fn screen(guard: &ContentGuard<'_>, returned: Returned) -> Screened {
    if guard.is_empty() {
        return run(guard, returned);
    }
    let span = crate::ports::telemetry::guardrail_span(guard.surface().as_str());
    let screened = span.in_scope(|| run(guard, returned));
    crate::ports::telemetry::record_guardrail(
        &span,
        screened.found.len(),
        screened.denied_by.as_deref(),
    );
    screened
}

/// Screens a model call's error in place, as the call's error is screened on every
/// surface: each word of the upstream in it (`ModelError::upstream_words_mut`: the body
/// of an error answer, a detail, a model name), findings under `/error`. Returns the
/// findings and the first `deny` policy that found something.
pub fn screen_error(
    guard: &ContentGuard<'_>,
    error: &mut ModelError,
) -> (Vec<Found>, Option<String>) {
    let mut screen = Screen {
        guard,
        found: Vec::new(),
        denied_by: None,
    };
    let mut run = || {
        for word in error.upstream_words_mut() {
            *word = screen.text(std::mem::take(word), Some("/error".to_owned()));
        }
    };
    if guard.is_empty() {
        run();
    } else {
        let span = crate::ports::telemetry::guardrail_span(guard.surface().as_str());
        span.in_scope(run);
        crate::ports::telemetry::record_guardrail(
            &span,
            screen.found.len(),
            screen.denied_by.as_deref(),
        );
    }
    (screen.found, screen.denied_by)
}

/// Screens a JSON value a call gave back (an external agent's plan, the arguments it
/// reports for its own tool call) in place: every string and object key, as a tool
/// call's arguments are; findings under `pointer` and below. Returns the findings and
/// the first `deny` policy that found something.
pub fn screen_value(
    guard: &ContentGuard<'_>,
    value: &mut Value,
    pointer: &str,
) -> (Vec<Found>, Option<String>) {
    let mut screen = Screen {
        guard,
        found: Vec::new(),
        denied_by: None,
    };
    let mut at = pointer.to_owned();
    screen.walk(value, &mut at);
    (screen.found, screen.denied_by)
}

fn run(guard: &ContentGuard<'_>, returned: Returned) -> Screened {
    let mut screen = Screen {
        guard,
        found: Vec::new(),
        denied_by: None,
    };
    let text = match returned.text {
        Ok(text) => Ok(screen.text(text, None)),
        Err(error) => Err(screen.text(error, Some("/error".to_owned()))),
    };
    let tool_calls = returned
        .tool_calls
        .into_iter()
        .enumerate()
        .map(|(i, call)| ToolCall {
            id: screen.text(call.id, Some(format!("/tool_calls/{i}/id"))),
            name: screen.text(call.name, Some(format!("/tool_calls/{i}/name"))),
            arguments: screen.arguments(call.arguments, &format!("/tool_calls/{i}/arguments")),
        })
        .collect();
    let model = returned
        .model
        .map(|model| screen.text(model, Some("/model".to_owned())));
    let metadata = returned
        .metadata
        .into_iter()
        .map(|(name, value)| {
            let pointer = format!("/metadata/{}", escape(&name));
            (name, screen.text(value, Some(pointer)))
        })
        .collect();
    Screened {
        returned: Returned {
            text,
            tool_calls,
            model,
            metadata,
        },
        found: screen.found,
        denied_by: screen.denied_by,
    }
}

/// The findings and the verdict so far.
struct Screen<'g, 'p> {
    guard: &'g ContentGuard<'p>,
    found: Vec<Found>,
    denied_by: Option<String>,
}

impl Screen<'_, '_> {
    /// One string: its secrets, then the policies; findings under `pointer`.
    fn text(&mut self, text: String, pointer: Option<String>) -> String {
        let text = match secret::redact(&text) {
            Cow::Borrowed(_) => text,
            Cow::Owned(redacted) => redacted,
        };
        let checked = self.guard.check(&text);
        if self.denied_by.is_none() {
            self.denied_by.clone_from(&checked.denied_by);
        }
        self.found
            .extend(checked.found.into_iter().map(|found| Found {
                pointer: pointer.clone(),
                ..found
            }));
        match checked.text {
            Cow::Borrowed(_) => text,
            Cow::Owned(redacted) => redacted,
        }
    }

    /// A tool call's arguments: every string and key of the JSON, each on its own (a
    /// finding never spans two strings, and a redaction never breaks the JSON);
    /// text that is not JSON is screened as one string. Unchanged arguments keep their
    /// exact text.
    fn arguments(&mut self, arguments: String, pointer: &str) -> String {
        let Ok(mut value) = serde_json::from_str::<Value>(&arguments) else {
            return self.text(arguments, Some(pointer.to_owned()));
        };
        let mut at = pointer.to_owned();
        // A `flag` finding changes nothing; only a change rewrites the text.
        if self.walk(&mut value, &mut at) {
            return value.to_string();
        }
        arguments
    }

    /// Screens every string and key under `value` in place; whether anything changed.
    fn walk(&mut self, value: &mut Value, pointer: &mut String) -> bool {
        match value {
            Value::String(text) => {
                let original = std::mem::take(text);
                let screened = self.text(original.clone(), Some(pointer.clone()));
                let changed = screened != original;
                *text = screened;
                changed
            }
            Value::Array(items) => {
                let mut changed = false;
                for (i, item) in items.iter_mut().enumerate() {
                    let len = pointer.len();
                    pointer.push_str(&format!("/{i}"));
                    changed |= self.walk(item, pointer);
                    pointer.truncate(len);
                }
                changed
            }
            Value::Object(map) => self.walk_object(map, pointer),
            Value::Null | Value::Bool(_) | Value::Number(_) => false,
        }
    }

    /// An object's keys are the upstream's words too: each is screened (its findings
    /// under the object's pointer), and the pointers below it name the screened key,
    /// so a pointer never carries what a key held.
    fn walk_object(&mut self, map: &mut Map<String, Value>, pointer: &mut String) -> bool {
        let mut changed = false;
        for (key, mut item) in std::mem::take(map) {
            let mut name = self.text(key.clone(), Some(pointer.clone()));
            if name != key {
                changed = true;
                // Two keys redacted alike stay two keys.
                let base = name.clone();
                let mut n = 2;
                while map.contains_key(&name) {
                    name = format!("{base} ({n})");
                    n += 1;
                }
            }
            let len = pointer.len();
            pointer.push('/');
            pointer.push_str(&escape(&name));
            changed |= self.walk(&mut item, pointer);
            pointer.truncate(len);
            map.insert(name, item);
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use agentplane_core::policy::{PolicySet, PolicySource, Surface};
    use agentplane_core::secret::{self, Redactor};
    use serde_json::json;

    use super::*;
    use crate::governance::rules::RequestContext;

    const CARD: &str = "4111 1111 1111 1111";
    const MAIL: &str = "victim@example.com";
    const KEY: &str = "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34";
    /// A `[secrets]` value: no detector knows it, only the process's redactor.
    const KNOWN: &str = "hush-outgoing-Zq81Lm";

    fn set(text: &str) -> PolicySet {
        PolicySet::parse(&[PolicySource {
            name: "t.yaml",
            text,
        }])
        .expect("valid")
    }

    const POLICIES: &str = "\
- name: redact-pii
  type: content
  rules: {detectors: [card, email], surfaces: [tool_results, gateway_answer], action: redact}
- name: no-keys
  type: content
  rules: {detectors: [secret], surfaces: [tool_results], action: deny}
";

    fn guarded<T>(surface: Surface, policies: &str, run: impl FnOnce(&ContentGuard<'_>) -> T) -> T {
        secret::install(Redactor::new([("KNOWN", KNOWN)]).expect("redactor"));
        let set = set(policies);
        let ctx = RequestContext::new("a", &[], "c");
        run(&ContentGuard::new(&set, &ctx, surface))
    }

    fn hostile() -> String {
        format!("card {CARD}, mail {MAIL}, key {KEY}, known {KNOWN}")
    }

    fn assert_clean(text: &str) {
        for needle in [CARD, MAIL, KEY, KNOWN, "4111", "victim@"] {
            assert!(!text.contains(needle), "{needle} in {text}");
        }
    }

    #[test]
    fn an_error_is_screened_like_a_result() {
        let (ok, err) = guarded(Surface::ToolResults, POLICIES, |guard| {
            (
                screen(guard, Returned::tool(Ok(hostile()))),
                screen(guard, Returned::tool(Err(hostile()))),
            )
        });
        let Ok(ok_text) = &ok.returned.text else {
            panic!("still a result: {ok:?}");
        };
        let Err(err_text) = &err.returned.text else {
            panic!("still an error: {err:?}");
        };
        assert_eq!(ok_text, err_text);
        assert_clean(err_text);
        assert!(err_text.contains("[REDACTED:card]"), "{err_text}");
        assert!(err_text.contains("[REDACTED:KNOWN]"), "{err_text}");
        for screened in [&ok, &err] {
            assert_eq!(screened.denied_by.as_deref(), Some("no-keys"));
            let detectors: Vec<&str> = screened
                .found
                .iter()
                .map(|f| f.finding.detector.as_str())
                .collect();
            assert_eq!(detectors, ["card", "email", "secret"]);
        }
        assert!(ok.found.iter().all(|f| f.pointer.is_none()));
        assert!(
            err.found
                .iter()
                .all(|f| f.pointer.as_deref() == Some("/error"))
        );
    }

    #[test]
    fn tool_calls_model_and_metadata_are_screened_field_by_field() {
        let arguments = json!({
            "to": MAIL,
            "card": CARD,
            "nested": [{"note": format!("known {KNOWN}")}],
            CARD: "a key that is a card",
            "n": 7,
        })
        .to_string();
        let screened = guarded(Surface::GatewayAnswer, POLICIES, |guard| {
            screen(
                guard,
                Returned {
                    text: Ok(format!("text {CARD}")),
                    tool_calls: vec![ToolCall {
                        id: format!("call-{KNOWN}"),
                        name: format!("send {MAIL}"),
                        arguments,
                    }],
                    model: Some(format!("model-{KNOWN} {MAIL}")),
                    metadata: vec![("finish_reason".into(), format!("stop {CARD}"))],
                },
            )
        });
        let all = format!("{:?}", screened.returned);
        assert_clean(&all);
        // `no-keys` does not watch gateway answers.
        assert_eq!(screened.denied_by, None);
        let call = &screened.returned.tool_calls[0];
        let args: Value = serde_json::from_str(&call.arguments).expect("still JSON");
        assert_eq!(args["to"], "[REDACTED:email]");
        assert_eq!(args["card"], "[REDACTED:card]");
        assert_eq!(args["nested"][0]["note"], "known [REDACTED:KNOWN]");
        assert_eq!(args["[REDACTED:card]"], "a key that is a card");
        assert_eq!(args["n"], 7);
        assert_eq!(call.name, "send [REDACTED:email]");
        assert_eq!(call.id, "call-[REDACTED:KNOWN]");
        assert_eq!(
            screened.returned.model.as_deref(),
            Some("model-[REDACTED:KNOWN] [REDACTED:email]")
        );
        let pointers: Vec<&str> = screened
            .found
            .iter()
            .filter_map(|f| f.pointer.as_deref())
            .collect();
        for pointer in [
            "/tool_calls/0/name",
            "/tool_calls/0/arguments/to",
            "/tool_calls/0/arguments/card",
            "/tool_calls/0/arguments",
            "/model",
            "/metadata/finish_reason",
        ] {
            assert!(pointers.contains(&pointer), "{pointer} in {pointers:?}");
        }
        // A pointer names the redacted key, never the card the key was.
        assert!(pointers.iter().all(|p| !p.contains("4111")), "{pointers:?}");
    }

    #[test]
    fn arguments_that_are_not_json_are_screened_as_text_and_clean_ones_kept_exactly() {
        let (broken, clean) = guarded(Surface::GatewayAnswer, POLICIES, |guard| {
            let call = |arguments: &str| ToolCall {
                id: "c".into(),
                name: "f".into(),
                arguments: arguments.into(),
            };
            let returned = |arguments| Returned {
                tool_calls: vec![call(arguments)],
                ..Returned::tool(Ok(String::new()))
            };
            (
                screen(
                    guard,
                    returned(&format!("{{\"to\": \"{MAIL}\", \"card\": \"{CARD}")),
                ),
                screen(guard, returned("{ \"a\" :  1 }")),
            )
        });
        assert_eq!(
            broken.returned.tool_calls[0].arguments,
            "{\"to\": \"[REDACTED:email]\", \"card\": \"[REDACTED:card]"
        );
        assert_eq!(clean.returned.tool_calls[0].arguments, "{ \"a\" :  1 }");
        assert!(clean.found.is_empty());
    }

    #[test]
    fn without_policies_secrets_are_still_redacted_and_nothing_is_found() {
        let screened = guarded(Surface::ToolResults, "[]", |guard| {
            screen(guard, Returned::tool(Err(hostile())))
        });
        let Err(text) = &screened.returned.text else {
            panic!("an error");
        };
        assert!(
            text.contains("[REDACTED:KNOWN]") && text.contains(CARD),
            "{text}"
        );
        assert!(screened.found.is_empty() && screened.denied_by.is_none());
    }

    #[test]
    fn a_flag_policy_finds_and_changes_nothing() {
        let flag = "- name: watch\n  type: content\n  rules: {detectors: [email], action: flag}\n";
        let arguments = format!("{{\"to\":\"{MAIL}\"}}");
        let screened = guarded(Surface::GatewayAnswer, flag, |guard| {
            screen(
                guard,
                Returned {
                    tool_calls: vec![ToolCall {
                        id: "c".into(),
                        name: "f".into(),
                        arguments: arguments.clone(),
                    }],
                    ..Returned::tool(Ok(MAIL.to_owned()))
                },
            )
        });
        assert_eq!(screened.returned.tool_calls[0].arguments, arguments);
        assert_eq!(screened.returned.text.as_deref(), Ok(MAIL));
        assert_eq!(screened.found.len(), 2);
    }
}
