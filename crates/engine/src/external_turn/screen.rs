//! What an external agent (ACP or A2A) reports, screened before the turn streams,
//! stores or exports it, by the one screen of everything that comes out of a call
//! (`governance::outgoing`: the process's secrets, then the content policies of the
//! surface):
//!
//! - its answer's text on `model_output`: each chunk through the stream scanner as it
//!   passes (only a possible start of a finding held back), the whole answer screened
//!   at the end for the findings, the verdict and the turn's result;
//! - its tool calls on `tool_arguments`: the title it gives, the arguments it reports
//!   (announced, sent late, or carried by a permission ask; every string and key) and
//!   its plan;
//! - its tool calls' outputs on `tool_results`, and the words it ends with (an error, a
//!   stop reason) on `model_output`.
//!
//! A call id is screened too, without findings (the same id screens the same way, so
//! the calls stay matched), and so is what the adapter says about the agent: a refused
//! breach's detail (the path it asked for) and the fields of an `a2a_request` record
//! that the remote chose. A `deny` finding cannot undo what the agent already did; it
//! redacts like `redact`, and the turn ends refused (`FORBIDDEN`, `policy_denied` of
//! type `content`), as a native turn whose answer a policy denies.
//!
//! What must not live here: recording (the turn's, `mod.rs`), the policies' decisions
//! on what the agent asks (`asks.rs`).

use agentplane_core::EventPayload;
use agentplane_core::policy::{PolicySet, Surface};
use serde_json::Value;

use crate::governance::content::{ContentGuard, ContentStream, Found};
use crate::governance::outgoing::{self, Returned};
use crate::governance::rules::RequestContext;

/// The first `deny` finding of the turn: what it was in, for the refusal.
pub(super) struct Denied {
    pub(super) policy: String,
    pub(super) found: Vec<Found>,
    /// `the answer`, `a tool call`, `a tool's output`, `the error`.
    pub(super) held: &'static str,
}

/// A tool call the agent reported, screened.
pub(super) struct ScreenedCall {
    pub(super) call_id: String,
    pub(super) tool: String,
    pub(super) title: Option<String>,
    pub(super) arguments: Value,
}

/// The screens of one external turn.
pub(super) struct Screens<'p> {
    answer: ContentGuard<'p>,
    calls: ContentGuard<'p>,
    results: ContentGuard<'p>,
    stream: Option<ContentStream>,
    /// The answer as it came: screened whole at the end, never recorded as it is.
    raw: String,
    denied: Option<Denied>,
}

impl<'p> Screens<'p> {
    /// The screens of `policies` for a turn of `ctx`.
    pub(super) fn new(policies: &'p PolicySet, ctx: &RequestContext<'_>) -> Self {
        let answer = ContentGuard::new(policies, ctx, Surface::ModelOutput);
        let stream = answer.stream();
        Self {
            answer,
            calls: ContentGuard::new(policies, ctx, Surface::ToolArguments),
            results: ContentGuard::new(policies, ctx, Surface::ToolResults),
            stream,
            raw: String::new(),
            denied: None,
        }
    }

    /// The first `deny` finding so far.
    pub(super) fn denied(&self) -> Option<&Denied> {
        self.denied.as_ref()
    }

    /// The first `deny` finding, once the turn is over.
    pub(super) fn take_denied(&mut self) -> Option<Denied> {
        self.denied.take()
    }

    fn verdict(&mut self, denied_by: Option<String>, found: &[Found], held: &'static str) {
        if let (None, Some(policy)) = (&self.denied, denied_by) {
            self.denied = Some(Denied {
                policy,
                found: found.to_vec(),
                held,
            });
        }
    }

    /// One chunk of the answer: what may pass now.
    pub(super) fn chunk(&mut self, text: &str) -> String {
        self.raw.push_str(text);
        match self.stream.as_mut() {
            Some(stream) => stream.push(text),
            None => text.to_owned(),
        }
    }

    /// The end of the answer's stream: what the scanner still held.
    pub(super) fn chunks_end(&mut self) -> String {
        self.stream
            .as_mut()
            .map(ContentStream::finish)
            .unwrap_or_default()
    }

    /// The whole answer screened: its text (the turn's result) and its findings.
    pub(super) fn answer(&mut self) -> (String, Vec<EventPayload>) {
        let raw = std::mem::take(&mut self.raw);
        let screened = outgoing::screen(&self.answer, Returned::tool(Ok(raw)));
        let events = self.answer.events(&screened.found, None);
        self.verdict(screened.denied_by, &screened.found, "the answer");
        let (Ok(text) | Err(text)) = screened.returned.text;
        (text, events)
    }

    /// Words the agent ends with (its error, its stop reason), on the answer's surface
    /// under `/error`.
    pub(super) fn words(&mut self, words: String) -> (String, Vec<EventPayload>) {
        let screened = outgoing::screen(&self.answer, Returned::tool(Err(words)));
        let events = self.answer.events(&screened.found, None);
        self.verdict(screened.denied_by, &screened.found, "the error");
        let (Ok(text) | Err(text)) = screened.returned.text;
        (text, events)
    }

    /// A call id as recorded (no findings: the same id always screens the same way).
    pub(super) fn id(&self, id: String) -> String {
        let id = agentplane_core::secret::redact(&id).into_owned();
        self.calls.check(&id).text.into_owned()
    }

    /// What the adapter writes about the agent (a refused breach's detail, naming the
    /// path the agent asked for), screened as an id is: the same text, the same way.
    pub(super) fn detail(&self, detail: String) -> String {
        self.id(detail)
    }

    /// A record of the adapter's traffic (`a2a_request`), every field the remote
    /// chose (its task and context ids, the outcome's words) screened as an id is.
    pub(super) fn record(&self, payload: EventPayload) -> EventPayload {
        match payload {
            EventPayload::A2aRequest {
                direction,
                method,
                task,
                context,
                protocol_version,
                outcome,
            } => EventPayload::A2aRequest {
                direction,
                method: self.id(method),
                task: task.map(|t| self.id(t)),
                context: context.map(|c| self.id(c)),
                protocol_version: self.id(protocol_version),
                outcome: self.id(outcome),
            },
            other => other,
        }
    }

    /// A tool call the agent announced: its title and arguments (and our name for it).
    pub(super) fn call(
        &mut self,
        call_id: String,
        tool: String,
        title: Option<String>,
        mut arguments: Value,
    ) -> (ScreenedCall, Vec<EventPayload>) {
        let call_id = self.id(call_id);
        let screened = outgoing::screen(
            &self.calls,
            Returned {
                text: Ok(title.clone().unwrap_or_default()),
                tool_calls: Vec::new(),
                model: None,
                metadata: vec![("tool".to_owned(), tool)],
            },
        );
        let mut found = screened.found;
        let mut denied_by = screened.denied_by;
        let (args_found, args_denied) =
            outgoing::screen_value(&self.calls, &mut arguments, "/arguments");
        found.extend(args_found);
        denied_by = denied_by.or(args_denied);
        let events = self.calls.events(&found, Some(&call_id));
        self.verdict(denied_by, &found, "a tool call");
        let mut returned = screened.returned;
        let tool = returned.metadata.pop().map(|(_, t)| t).unwrap_or_default();
        let title = title.and(match returned.text {
            Ok(text) | Err(text) => Some(text),
        });
        (
            ScreenedCall {
                call_id,
                tool,
                title,
                arguments,
            },
            events,
        )
    }

    /// Arguments the agent reports for a call of `call_id` (late, or in a permission
    /// ask), in place.
    pub(super) fn arguments(&mut self, arguments: &mut Value, call_id: &str) -> Vec<EventPayload> {
        let (found, denied_by) = outgoing::screen_value(&self.calls, arguments, "/arguments");
        self.verdict(denied_by, &found, "a tool call");
        self.calls.events(&found, Some(call_id))
    }

    /// A title the agent gives a call in a permission ask.
    pub(super) fn title(&mut self, title: String, call_id: &str) -> (String, Vec<EventPayload>) {
        let screened = outgoing::screen(&self.calls, Returned::tool(Ok(title)));
        self.verdict(screened.denied_by, &screened.found, "a tool call");
        let events = self.calls.events(&screened.found, Some(call_id));
        let (Ok(text) | Err(text)) = screened.returned.text;
        (text, events)
    }

    /// The agent's plan, in place.
    pub(super) fn plan(&mut self, plan: &mut Value) -> Vec<EventPayload> {
        let (found, denied_by) = outgoing::screen_value(&self.answer, plan, "/plan");
        self.verdict(denied_by, &found, "the answer");
        self.answer.events(&found, None)
    }

    /// A tool call's output (`failed`: the call failed, its output an error).
    pub(super) fn result(
        &mut self,
        output: String,
        failed: bool,
        call_id: &str,
    ) -> (String, Vec<EventPayload>) {
        let outcome = if failed { Err(output) } else { Ok(output) };
        let screened = outgoing::screen(&self.results, Returned::tool(outcome));
        let events = self.results.events(&screened.found, Some(call_id));
        self.verdict(screened.denied_by, &screened.found, "a tool's output");
        let (Ok(text) | Err(text)) = screened.returned.text;
        (text, events)
    }
}
