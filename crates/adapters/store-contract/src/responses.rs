//! Responses-API answers kept for `previous_response_id`: read back exactly (hostile
//! text included) by the client that kept them and by no other, not past their age,
//! kept once, and never changed behind the store's back.

use std::sync::Arc;

use agentplane_core::{ChatMessage, ToolCall};
use agentplane_engine::ports::{KeptResponse, StoreError};

use crate::fixtures::{RawSql, Store};

const DAY: u64 = 86_400;

pub async fn a_kept_response_is_found_by_its_client_only_and_never_changes<S: Store>(
    store: Arc<S>,
    raw: &dyn RawSql,
) {
    let messages = vec![
        ChatMessage::user("nul \0 quote ' emoji 🦀 \u{202e} \"}]"),
        ChatMessage::assistant(
            None,
            vec![ToolCall {
                id: "call_1".into(),
                name: "get_weather".into(),
                arguments: "{\"city\":\"Paris\"}".into(),
            }],
        ),
        ChatMessage::tool_result("call_1", "sunny"),
        ChatMessage::assistant(Some("Sunny.".into()), Vec::new()),
    ];
    let kept = KeptResponse {
        id: "chatcmpl-1".into(),
        client: "alice".into(),
        messages: messages.clone(),
    };
    store.keep_response(kept.clone()).await.expect("keep");
    let found = store.kept_response("chatcmpl-1", "alice", DAY).await;
    assert_eq!(found.expect("read"), Some(messages));
    // Another client's id is one never kept.
    let other = store.kept_response("chatcmpl-1", "bob", DAY).await;
    assert_eq!(other.expect("read"), None);
    let unknown = store.kept_response("chatcmpl-2", "alice", DAY).await;
    assert_eq!(unknown.expect("read"), None);
    // Kept once: a second keep of the id is a conflict, and the first stays.
    let again = KeptResponse {
        client: "bob".into(),
        ..kept
    };
    assert!(matches!(
        store.keep_response(again).await,
        Err(StoreError::Conflict(_))
    ));
    let stolen = store.kept_response("chatcmpl-1", "bob", DAY).await;
    assert_eq!(stolen.expect("read"), None);
    // Never changed behind the store's back.
    let changed = raw
        .execute("UPDATE gateway_responses SET client_id = 'bob'")
        .await;
    assert!(changed.is_err(), "{changed:?}");
    // Not past its age: one kept "two days ago" is not found with a one-day limit.
    raw.execute(
        "INSERT INTO gateway_responses (id, client_id, created_at, conversation) \
         VALUES ('chatcmpl-old', 'alice', '2000-01-01T00:00:00.000Z', '[]')",
    )
    .await
    .expect("an old row");
    let old = store.kept_response("chatcmpl-old", "alice", DAY).await;
    assert_eq!(old.expect("read"), None);
}
