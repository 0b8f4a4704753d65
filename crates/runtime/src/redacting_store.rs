//! `RedactingStore`: an `EventStore` in front of another that replaces every secret
//! value in what is written (event payloads, turn inputs and results, summaries,
//! permission and approval arguments, reasons, feedback, snapshots) with
//! `[REDACTED:NAME]` before it reaches the database.
//!
//! Everything the engine records goes through one store, so this one decorator keeps
//! secrets out of the database file and out of everything derived from it (SSE, history,
//! runlogs). The returned events are the stored, redacted ones, which is what observers
//! stream. Reads pass through untouched: nothing unredacted was ever written. A payload
//! that cannot be redacted is refused, never stored as it was (fail closed).
//!
//! Streamed text comes in pieces (`message_delta`), and a secret may be cut between
//! two of them, each harmless alone. So the end of each piece that could be the start
//! of a secret is held back (per turn) and put in front of the turn's next piece, where
//! the whole value is redacted; any other event of the turn (and its end) first
//! records what is still held as a `message_delta` of its own (issue 17).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agentplane_core::policy::Timestamp;
use agentplane_core::secret::{HeldBack, Redactor};
use agentplane_core::{
    ApprovalId, Event, EventPayload, PermissionDecision, PermissionId, StopReason, ThreadId, TurnId,
};
use agentplane_engine::ports::{
    ApprovalDecision, ApprovalQuery, ApprovalRecord, ApprovalStore, CallStore, CostQuery, CostRow,
    EventStore, McpCallQuery, McpCallRecord, ModelCallRecord, NewApproval, NewPermission,
    NewThread, PermissionRecord, StoreError, ThreadRecord, ThreadStore, TurnLog, TurnRecord,
};
use async_trait::async_trait;
use serde_json::Value;

/// A store that redacts secret values from every write before passing it on.
pub struct RedactingStore {
    inner: Arc<dyn EventStore>,
    redactor: Redactor,
    /// Per turn, the end of the streamed text that could be the start of a secret.
    held: Mutex<HashMap<TurnId, HeldBack>>,
}

impl RedactingStore {
    /// `inner`, with every write redacted by `redactor`.
    pub fn new(inner: Arc<dyn EventStore>, redactor: Redactor) -> Self {
        Self {
            inner,
            redactor,
            held: Mutex::new(HashMap::new()),
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<TurnId, HeldBack>> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A streamed piece joined to what was held before it, redacted, minus a new end
    /// that could begin a secret (held for the next piece: `secret::HeldBack`).
    fn streamed_piece(&self, turn: &TurnId, text: &str) -> String {
        let mut held = self.held();
        // The turn's id is cloned only for its first piece, not for every delta.
        let stream = match held.get_mut(turn) {
            Some(stream) => stream,
            None => held.entry(turn.clone()).or_default(),
        };
        stream.push(&self.redactor, text).unwrap_or_default()
    }

    /// What is still held for `turn`, as a `message_delta` of its own to be written
    /// before the turn's next event of another kind.
    fn take_held(&self, turn: &TurnId) -> Option<EventPayload> {
        self.held()
            .remove(turn)
            .and_then(|held| held.finish(&self.redactor))
            .map(|text| EventPayload::MessageDelta { text })
    }

    /// Records what is still held for `turn`, before the turn's next event of another
    /// kind.
    async fn release_held(&self, thread: &ThreadId, turn: &TurnId) -> Result<(), StoreError> {
        let Some(released) = self.take_held(turn) else {
            return Ok(());
        };
        self.inner
            .append(thread, turn, released)
            .await
            .map_err(|e| self.error(e))?;
        Ok(())
    }

    /// `payloads` redacted as [`TurnLog::append`] redacts one each: streamed text
    /// joined to what was held, and what was held released before an event of
    /// another kind.
    fn payloads(
        &self,
        turn: &TurnId,
        payloads: Vec<EventPayload>,
    ) -> Result<Vec<EventPayload>, StoreError> {
        let mut out = Vec::with_capacity(payloads.len() + 1);
        for payload in payloads {
            match payload {
                EventPayload::MessageDelta { text } if !self.redactor.is_empty() => {
                    out.push(EventPayload::MessageDelta {
                        text: self.streamed_piece(turn, &text),
                    });
                }
                other => {
                    out.extend(self.take_held(turn));
                    out.push(self.payload(other)?);
                }
            }
        }
        Ok(out)
    }

    fn text(&self, text: &str) -> String {
        self.redactor.redact(text).into_owned()
    }

    fn json(&self, mut value: Value) -> Value {
        self.redactor.redact_json(&mut value);
        value
    }

    /// The payload with every string redacted, through its JSON form (so a new event
    /// kind is covered without a change here).
    fn payload(&self, payload: EventPayload) -> Result<EventPayload, StoreError> {
        if self.redactor.is_empty() {
            return Ok(payload);
        }
        let mut value = serde_json::to_value(&payload).map_err(|e| {
            StoreError::Backend(format!("an event could not be checked for secrets: {e}"))
        })?;
        if !self.redactor.redact_json(&mut value) {
            return Ok(payload);
        }
        serde_json::from_value(value).map_err(|_| {
            StoreError::Backend(
                "an event held a secret that could not be redacted; it was not stored".into(),
            )
        })
    }

    /// Errors may quote what was written (a conflict naming an input, say).
    fn error(&self, error: StoreError) -> StoreError {
        match error {
            StoreError::NotFound(m) => StoreError::NotFound(self.text(&m)),
            StoreError::Conflict(m) => StoreError::Conflict(self.text(&m)),
            StoreError::Backend(m) => StoreError::Backend(self.text(&m)),
        }
    }
}

#[async_trait]
impl ThreadStore for RedactingStore {
    async fn create_thread(&self, mut thread: NewThread) -> Result<ThreadRecord, StoreError> {
        thread.title = thread.title.map(|t| self.text(&t));
        thread.cwd = self.text(&thread.cwd);
        self.inner
            .create_thread(thread)
            .await
            .map_err(|e| self.error(e))
    }

    async fn thread(&self, id: &ThreadId) -> Result<Option<ThreadRecord>, StoreError> {
        self.inner.thread(id).await
    }

    async fn list_threads(&self, client_id: &str) -> Result<Vec<ThreadRecord>, StoreError> {
        self.inner.list_threads(client_id).await
    }

    async fn threads_active_since(
        &self,
        since: Option<Timestamp>,
    ) -> Result<Vec<ThreadRecord>, StoreError> {
        self.inner.threads_active_since(since).await
    }

    async fn delete_thread(&self, id: &ThreadId) -> Result<(), StoreError> {
        self.inner.delete_thread(id).await
    }

    async fn set_summary(&self, id: &ThreadId, summary: &str) -> Result<(), StoreError> {
        self.inner
            .set_summary(id, &self.redactor.redact(summary))
            .await
            .map_err(|e| self.error(e))
    }
}

#[async_trait]
impl TurnLog for RedactingStore {
    async fn begin_turn(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        input: &str,
        internal: bool,
    ) -> Result<TurnRecord, StoreError> {
        self.inner
            .begin_turn(thread, turn, &self.redactor.redact(input), internal)
            .await
            .map_err(|e| self.error(e))
    }

    async fn start_turn(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        input: &str,
        internal: bool,
        started: EventPayload,
    ) -> Result<(TurnRecord, Event), StoreError> {
        let started = self.payload(started)?;
        self.inner
            .start_turn(
                thread,
                turn,
                &self.redactor.redact(input),
                internal,
                started,
            )
            .await
            .map_err(|e| self.error(e))
    }

    async fn append(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        payload: EventPayload,
    ) -> Result<Event, StoreError> {
        let payload = match payload {
            EventPayload::MessageDelta { text } if !self.redactor.is_empty() => {
                EventPayload::MessageDelta {
                    text: self.streamed_piece(turn, &text),
                }
            }
            other => {
                self.release_held(thread, turn).await?;
                self.payload(other)?
            }
        };
        self.inner
            .append(thread, turn, payload)
            .await
            .map_err(|e| self.error(e))
    }

    async fn complete_turn(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        stop_reason: StopReason,
        result: Value,
    ) -> Result<Event, StoreError> {
        self.release_held(thread, turn).await?;
        self.inner
            .complete_turn(thread, turn, stop_reason, self.json(result))
            .await
            .map_err(|e| self.error(e))
    }

    async fn append_all(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        payloads: Vec<EventPayload>,
    ) -> Result<Vec<Event>, StoreError> {
        let payloads = self.payloads(turn, payloads)?;
        self.inner
            .append_all(thread, turn, payloads)
            .await
            .map_err(|e| self.error(e))
    }

    async fn complete_turn_after(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        before: Vec<EventPayload>,
        stop_reason: StopReason,
        result: Value,
    ) -> Result<(Vec<Event>, Event), StoreError> {
        let mut before = self.payloads(turn, before)?;
        before.extend(self.take_held(turn));
        self.inner
            .complete_turn_after(thread, turn, before, stop_reason, self.json(result))
            .await
            .map_err(|e| self.error(e))
    }

    async fn answered_turns(
        &self,
        thread: &ThreadId,
        limit: usize,
    ) -> Result<Vec<TurnRecord>, StoreError> {
        self.inner.answered_turns(thread, limit).await
    }

    async fn turn(&self, id: &TurnId) -> Result<Option<TurnRecord>, StoreError> {
        self.inner.turn(id).await
    }

    async fn list_turns(&self, thread: &ThreadId) -> Result<Vec<TurnRecord>, StoreError> {
        self.inner.list_turns(thread).await
    }

    async fn turn_events(&self, turn: &TurnId) -> Result<Vec<Event>, StoreError> {
        self.inner.turn_events(turn).await
    }

    async fn thread_events(
        &self,
        thread: &ThreadId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        self.inner.thread_events(thread, after, limit).await
    }

    async fn interrupt_running_turns(&self) -> Result<Vec<TurnId>, StoreError> {
        self.inner.interrupt_running_turns().await
    }
}

#[async_trait]
impl ApprovalStore for RedactingStore {
    async fn create_permission(
        &self,
        mut permission: NewPermission,
    ) -> Result<(PermissionRecord, Event), StoreError> {
        permission.arguments = self.json(permission.arguments);
        permission.options = permission.options.iter().map(|o| self.text(o)).collect();
        self.inner
            .create_permission(permission)
            .await
            .map_err(|e| self.error(e))
    }

    async fn resolve_permission(
        &self,
        id: &PermissionId,
        decision: PermissionDecision,
        reason: &str,
    ) -> Result<(PermissionRecord, Event), StoreError> {
        self.inner
            .resolve_permission(id, decision, &self.redactor.redact(reason))
            .await
            .map_err(|e| self.error(e))
    }

    async fn permission(&self, id: &PermissionId) -> Result<Option<PermissionRecord>, StoreError> {
        self.inner.permission(id).await
    }

    async fn create_approval(
        &self,
        mut approval: NewApproval,
    ) -> Result<(ApprovalRecord, Event), StoreError> {
        // The hash was taken by the engine from the arguments as called; a hash reveals
        // nothing, so it stays (it lets a reviewer match the call with its events).
        approval.arguments = self.json(approval.arguments);
        approval.snapshot = self.json(approval.snapshot);
        approval.policy = self.text(&approval.policy);
        self.inner
            .create_approval(approval)
            .await
            .map_err(|e| self.error(e))
    }

    async fn decide_approval(
        &self,
        id: &ApprovalId,
        mut decision: ApprovalDecision,
    ) -> Result<(ApprovalRecord, Event), StoreError> {
        decision.arguments = decision.arguments.map(|a| self.json(a));
        decision.feedback = decision.feedback.map(|f| self.text(&f));
        decision.by = self.text(&decision.by);
        self.inner
            .decide_approval(id, decision)
            .await
            .map_err(|e| self.error(e))
    }

    async fn claim_approval(&self, id: &ApprovalId) -> Result<ApprovalRecord, StoreError> {
        self.inner.claim_approval(id).await
    }

    async fn approval(&self, id: &ApprovalId) -> Result<Option<ApprovalRecord>, StoreError> {
        self.inner.approval(id).await
    }

    async fn list_approvals(
        &self,
        query: &ApprovalQuery,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        self.inner.list_approvals(query).await
    }
}

#[async_trait]
impl CallStore for RedactingStore {
    async fn costs(&self, query: &CostQuery) -> Result<Vec<CostRow>, StoreError> {
        self.inner.costs(query).await
    }

    async fn record_model_call(&self, mut call: ModelCallRecord) -> Result<(), StoreError> {
        // The model name comes from the upstream's answer: never trusted.
        call.model = self.text(&call.model);
        self.inner.record_model_call(call).await
    }

    async fn record_mcp_call(&self, mut call: McpCallRecord) -> Result<(), StoreError> {
        // Errors and answers come from the upstream server: never trusted.
        call.detail = call.detail.map(|d| self.text(&d));
        if let Some(result) = call.result.as_mut() {
            self.redactor.redact_json(result);
        }
        self.inner.record_mcp_call(call).await
    }

    async fn mcp_calls(&self, query: &McpCallQuery) -> Result<Vec<McpCallRecord>, StoreError> {
        self.inner.mcp_calls(query).await
    }
}

#[cfg(test)]
mod tests {
    use agentplane_core::ToolStatus;
    use agentplane_sqlite::SqliteStore;
    use serde_json::json;

    use super::*;

    const VALUE: &str = "sk-leak-8f3Kq\"x\\y";

    async fn store(dir: &std::path::Path) -> (RedactingStore, Arc<SqliteStore>) {
        let sqlite = Arc::new(
            SqliteStore::open(&dir.join("events.db"))
                .await
                .expect("open"),
        );
        let redactor = Redactor::new([("api_token", VALUE)]).expect("redactor");
        (RedactingStore::new(sqlite.clone(), redactor), sqlite)
    }

    /// Every byte of the database and its WAL.
    fn database_bytes(dir: &std::path::Path) -> Vec<u8> {
        let mut bytes = Vec::new();
        for entry in std::fs::read_dir(dir).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.to_string_lossy().contains("events.db") {
                bytes.extend(std::fs::read(&path).expect("read db file"));
            }
        }
        bytes
    }

    fn contains(haystack: &[u8], needle: &str) -> bool {
        haystack
            .windows(needle.len())
            .any(|w| w == needle.as_bytes())
    }

    /// A thread of its own with a running turn, through the redacting store.
    async fn running_turn(store: &RedactingStore) -> (ThreadId, TurnId) {
        let thread = ThreadId::new();
        store
            .create_thread(NewThread {
                agent_version: None,
                id: thread.clone(),
                client_id: "c".into(),
                agent: "a".into(),
                cwd: "/tmp".into(),
                title: None,
            })
            .await
            .expect("thread");
        let turn = TurnId::new();
        store
            .begin_turn(&thread, &turn, "hi", false)
            .await
            .expect("turn");
        (thread, turn)
    }

    #[tokio::test]
    async fn writes_reach_the_database_redacted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, sqlite) = store(dir.path()).await;
        let thread = ThreadId::new();
        store
            .create_thread(NewThread {
                agent_version: None,
                id: thread.clone(),
                client_id: "c".into(),
                agent: "a".into(),
                cwd: "/tmp".into(),
                title: Some(format!("title {VALUE}")),
            })
            .await
            .expect("thread");
        let turn = TurnId::new();
        store
            .begin_turn(&thread, &turn, &format!("input {VALUE}"), false)
            .await
            .expect("turn");
        let event = store
            .append(
                &thread,
                &turn,
                EventPayload::ToolCallResult {
                    call_id: "c1".into(),
                    tool: "t".into(),
                    status: ToolStatus::Ok,
                    latency_ms: 1,
                    error_type: None,
                    output: format!("out {VALUE} out"),
                    truncated: false,
                    args_preview_hash: "h".into(),
                },
            )
            .await
            .expect("append");
        let EventPayload::ToolCallResult { output, .. } = &event.payload else {
            panic!("same kind back");
        };
        assert_eq!(output, "out [REDACTED:api_token] out");
        store.set_summary(&thread, VALUE).await.expect("summary");
        store
            .complete_turn(
                &thread,
                &turn,
                StopReason::Finished,
                json!({ "summary": VALUE, VALUE: [VALUE] }),
            )
            .await
            .expect("complete");

        let read = sqlite.turn(&turn).await.expect("read").expect("turn");
        assert_eq!(read.input, "input [REDACTED:api_token]");
        assert!(!read.result.expect("result").to_string().contains("sk-leak"));
        drop(store);
        drop(sqlite);
        let bytes = database_bytes(dir.path());
        assert!(contains(&bytes, "[REDACTED:api_token]"));
        assert!(!contains(&bytes, "sk-leak-8f3Kq"));
    }

    #[tokio::test]
    async fn a_secret_cut_between_streamed_pieces_is_redacted_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, sqlite) = store(dir.path()).await;
        let (thread, turn) = running_turn(&store).await;
        let text = format!("the key is {VALUE} and, once more, {VALUE}");
        // Every piece 3 bytes long (on char boundaries: the text is ASCII).
        for piece in text.as_bytes().chunks(3) {
            let piece = std::str::from_utf8(piece).expect("ascii").to_owned();
            store
                .append(&thread, &turn, EventPayload::MessageDelta { text: piece })
                .await
                .expect("delta");
        }
        store
            .complete_turn(&thread, &turn, StopReason::Finished, json!({}))
            .await
            .expect("complete");
        let events = sqlite.turn_events(&turn).await.expect("events");
        let mut streamed = String::new();
        for event in &events {
            if let EventPayload::MessageDelta { text } = &event.payload {
                for half in ["sk-leak", "8f3Kq", "leak-8"] {
                    assert!(!text.contains(half), "a piece carried {half}: {text:?}");
                }
                streamed.push_str(text);
            }
        }
        assert_eq!(
            streamed,
            "the key is [REDACTED:api_token] and, once more, [REDACTED:api_token]"
        );
        assert!(
            matches!(
                events.last().map(|e| &e.payload),
                Some(EventPayload::TurnCompleted { .. })
            ),
            "held text is recorded before the turn ends"
        );
    }

    /// The same through whole steps: pieces cut anywhere, an event of another kind in
    /// the middle of a step (the held text goes before it), and the turn's end with the
    /// last pieces.
    #[tokio::test]
    async fn a_secret_cut_between_pieces_of_one_step_is_redacted_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, sqlite) = store(dir.path()).await;
        let (thread, turn) = running_turn(&store).await;
        let piece = |text: &str| EventPayload::MessageDelta { text: text.into() };
        let (head, tail) = VALUE.split_at(6);
        let usage = EventPayload::Usage {
            provider: "p".into(),
            model: format!("m {VALUE}"),
            input_tokens: 1,
            output_tokens: 2,
            reported: true,
        };
        let returned = store
            .append_all(
                &thread,
                &turn,
                vec![
                    piece("the key is "),
                    piece(head),
                    piece(tail),
                    piece(" and "),
                    piece(head),
                    usage,
                ],
            )
            .await
            .expect("step");
        // The text held when the usage came was written before it, and returned too.
        let kinds: Vec<&str> = returned.iter().map(|e| e.payload.kind()).collect();
        assert_eq!(kinds.last(), Some(&"usage"), "{kinds:?}");
        assert_eq!(kinds[kinds.len() - 2], "message_delta", "{kinds:?}");
        store
            .complete_turn_after(
                &thread,
                &turn,
                vec![piece(head), piece(tail)],
                StopReason::Finished,
                json!({}),
            )
            .await
            .expect("end");
        let events = sqlite.turn_events(&turn).await.expect("events");
        let mut streamed = String::new();
        for event in &events {
            let json = serde_json::to_string(&event.payload).expect("json");
            assert!(
                !json.contains("sk-leak") && !json.contains("8f3Kq"),
                "{json}"
            );
            if let EventPayload::MessageDelta { text } = &event.payload {
                streamed.push_str(text);
            }
        }
        // The cut-off head before the usage is not a secret by itself: it stands.
        assert_eq!(
            streamed,
            format!("the key is [REDACTED:api_token] and {head}[REDACTED:api_token]")
        );
        assert!(matches!(
            events.last().map(|e| &e.payload),
            Some(EventPayload::TurnCompleted { .. })
        ));
        assert!(!contains(&database_bytes(dir.path()), VALUE));
    }

    #[tokio::test]
    async fn without_secrets_writes_pass_unchanged() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sqlite = Arc::new(
            SqliteStore::open(&dir.path().join("events.db"))
                .await
                .expect("open"),
        );
        let store = RedactingStore::new(sqlite, Redactor::default());
        let payload = EventPayload::Error {
            code: agentplane_core::ErrorCode::Internal,
            message: "m".into(),
        };
        assert_eq!(store.payload(payload.clone()).expect("same"), payload);
    }
}
