//! Permission requests: stored with their event, answered at most once and only while
//! their turn runs, and declined on behalf of a process that stopped.

use std::sync::Arc;

use agentplane_core::{EventPayload, PermissionDecision, PermissionId, StopReason, TurnId};
use agentplane_engine::ports::{PermissionStatus, StoreError, TurnStatus};

use crate::fixtures::{RawSql, Store, delta, new_permission, running_turn};

pub async fn a_permission_is_created_then_resolved_exactly_once<S: Store>(
    store: Arc<S>,
    raw: &dyn RawSql,
) {
    let (thread, turn) = running_turn(&*store).await;
    store
        .append(&thread, &turn, delta("planning"))
        .await
        .unwrap();

    let mut wanted = new_permission(&thread, &turn);
    wanted.call_id = "call \"1\"; DROP TABLE permissions; --".into();
    wanted.tool = "shell".into();
    wanted.arguments = serde_json::json!({
        "command": "rm -rf / --no-preserve-root",
        "env": {"": "empty key", "nul": "\u{0}", "emoji": "🚀"},
        "list": [1.5, null, true, -1],
    });
    wanted.options = vec!["approved".into(), "declined".into(), "'quoted'".into()];

    let (record, event) = store.create_permission(wanted.clone()).await.unwrap();
    assert_eq!(record.id, wanted.id);
    assert_eq!(record.thread_id, thread);
    assert_eq!(record.turn_id, turn);
    assert_eq!(record.call_id, wanted.call_id);
    assert_eq!(record.arguments, wanted.arguments);
    assert_eq!(record.options, wanted.options);
    // Who may decide it is kept, so a restart or another replica enforces it too.
    assert_eq!(record.policy, wanted.policy);
    assert_eq!(record.status, PermissionStatus::Pending);
    assert_eq!(record.reason, None);
    assert_eq!(record.created_at, event.ts);
    assert_eq!(event.seq, 2);
    assert_eq!((&event.thread_id, &event.turn_id), (&thread, &turn));
    assert_eq!(
        event.payload,
        EventPayload::PermissionRequired {
            permission_id: wanted.id.to_string(),
            call_id: wanted.call_id.clone(),
            tool: wanted.tool.clone(),
            arguments: wanted.arguments.clone(),
            options: wanted.options.clone(),
            runs: wanted.runs.clone(),
            policy: Some("edits-need-approval".into()),
        }
    );
    assert_eq!(
        store.permission(&wanted.id).await.unwrap(),
        Some(record.clone())
    );

    let reason = "approved by ana <script>alert(1)</script>";
    let (resolved, answer) = store
        .resolve_permission(&wanted.id, PermissionDecision::Approved, reason)
        .await
        .unwrap();
    assert_eq!(
        resolved.status,
        PermissionStatus::Resolved(PermissionDecision::Approved)
    );
    assert_eq!(resolved.reason.as_deref(), Some(reason));
    assert_eq!(resolved.created_at, record.created_at);
    assert_eq!(answer.seq, 3);
    assert_eq!(
        answer.payload,
        EventPayload::PermissionResolved {
            permission_id: wanted.id.to_string(),
            decision: PermissionDecision::Approved,
            reason: reason.into(),
        }
    );
    assert_eq!(
        store.permission(&wanted.id).await.unwrap(),
        Some(resolved.clone())
    );

    // A second answer, even the same one, is refused and changes nothing.
    for decision in [PermissionDecision::Declined, PermissionDecision::Approved] {
        let again = store
            .resolve_permission(&wanted.id, decision, "too late")
            .await;
        assert!(
            matches!(&again, Err(StoreError::Conflict(m)) if m.contains("already approved")),
            "{again:?}"
        );
    }
    assert_eq!(store.permission(&wanted.id).await.unwrap(), Some(resolved));
    let events = store.turn_events(&turn).await.unwrap();
    assert_eq!(events.len(), 3);
    assert_eq!(events[1], event);
    assert_eq!(events[2], answer);

    // Unknown ids.
    let unknown = PermissionId::new();
    assert_eq!(store.permission(&unknown).await.unwrap(), None);
    let missing = store
        .resolve_permission(&unknown, PermissionDecision::Approved, "x")
        .await;
    assert!(
        matches!(missing, Err(StoreError::NotFound(_))),
        "{missing:?}"
    );

    // The turn's seqs stay gapless after the refusals.
    let next = store.append(&thread, &turn, delta("go on")).await.unwrap();
    assert_eq!(next.seq, 4);

    // The database itself keeps a resolution final and the record kept.
    let rewritten = raw
        .execute(&format!(
            "UPDATE permissions SET status = 'declined' WHERE id = '{}'",
            wanted.id
        ))
        .await;
    assert!(rewritten.is_err(), "{rewritten:?}");
    assert!(raw.execute("DELETE FROM permissions").await.is_err());
}

pub async fn a_permission_needs_a_running_turn_of_its_thread<S: Store>(
    store: Arc<S>,
    raw: &dyn RawSql,
) {
    let (thread, turn) = running_turn(&*store).await;
    let (other_thread, other_turn) = running_turn(&*store).await;

    let unknown = store
        .create_permission(new_permission(&thread, &TurnId::new()))
        .await;
    assert!(
        matches!(unknown, Err(StoreError::NotFound(_))),
        "{unknown:?}"
    );
    let crossed = store
        .create_permission(new_permission(&thread, &other_turn))
        .await;
    assert!(
        matches!(crossed, Err(StoreError::NotFound(_))),
        "{crossed:?}"
    );

    let first = new_permission(&thread, &turn);
    store.create_permission(first.clone()).await.unwrap();
    let duplicate = store.create_permission(first.clone()).await;
    assert!(
        matches!(&duplicate, Err(StoreError::Conflict(m)) if m.contains("already exists")),
        "{duplicate:?}"
    );

    store
        .complete_turn(
            &thread,
            &turn,
            StopReason::Cancelled,
            serde_json::Value::Null,
        )
        .await
        .unwrap();
    let ended = store
        .create_permission(new_permission(&thread, &turn))
        .await;
    assert!(
        matches!(&ended, Err(StoreError::Conflict(m)) if m.contains("already ended")),
        "{ended:?}"
    );

    // Nothing of the refused requests reached the log or the table.
    let seqs: Vec<u64> = store
        .thread_events(&thread, 0, 100)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, [1, 2], "permission_required, then turn_completed");
    assert!(
        store
            .thread_events(&other_thread, 0, 100)
            .await
            .unwrap()
            .is_empty()
    );
    let rows = raw
        .query_i64("SELECT count(*) FROM permissions")
        .await
        .unwrap();
    assert_eq!(rows, 1);
}

pub async fn a_permission_cannot_be_answered_after_its_turn_ended<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let (thread, turn) = running_turn(&*store).await;
    let (pending, _) = store
        .create_permission(new_permission(&thread, &turn))
        .await
        .unwrap();
    store
        .complete_turn(&thread, &turn, StopReason::Error, serde_json::Value::Null)
        .await
        .unwrap();

    let late = store
        .resolve_permission(&pending.id, PermissionDecision::Approved, "late click")
        .await;
    assert!(
        matches!(&late, Err(StoreError::Conflict(m)) if m.contains("no longer be answered")),
        "{late:?}"
    );
    assert_eq!(store.permission(&pending.id).await.unwrap(), Some(pending));
    let events = store.turn_events(&turn).await.unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.payload.kind()).collect();
    assert_eq!(kinds, ["permission_required", "turn_completed"]);
}

pub async fn a_damaged_permission_row_is_an_error_naming_it<S: Store>(
    store: Arc<S>,
    raw: &dyn RawSql,
) {
    let (thread, turn) = running_turn(&*store).await;
    let id = PermissionId::new();
    raw.execute(&format!(
        "INSERT INTO permissions
             (id, thread_id, turn_id, call_id, tool, arguments, options, status, created_at)
         VALUES ('{id}', '{thread}', '{turn}', 'c', 't', '{{\"unterminated', '[]', 'pending',
                 '2026-01-01T00:00:00.000Z')"
    ))
    .await
    .unwrap();
    for outcome in [
        store.permission(&id).await.map(|_| ()),
        store
            .resolve_permission(&id, PermissionDecision::Declined, "x")
            .await
            .map(|_| ()),
    ] {
        match outcome {
            Err(StoreError::Backend(message)) => {
                assert!(message.contains(id.as_str()), "{message}");
                assert!(message.contains("arguments"), "{message}");
            }
            other => panic!("expected a Backend error, got {other:?}"),
        }
    }
    assert!(store.turn_events(&turn).await.unwrap().is_empty());
}

pub async fn a_restart_declines_pending_permissions_before_ending_the_turn<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let (thread, turn, answered, open_ones, quiet) = {
        let (thread, turn) = running_turn(&*store).await;
        let mut asked = Vec::new();
        for call in ["call_a", "call_b", "call_c"] {
            let mut permission = new_permission(&thread, &turn);
            permission.call_id = call.into();
            asked.push(store.create_permission(permission).await.unwrap().0);
        }
        store
            .resolve_permission(&asked[0].id, PermissionDecision::Approved, "ana said yes")
            .await
            .unwrap();
        store
            .append(&thread, &turn, delta("waiting"))
            .await
            .unwrap();
        let quiet = running_turn(&*store).await;
        let answered = asked.remove(0);
        (thread, turn, answered, asked, quiet)
    };
    let interrupted = store.interrupt_running_turns().await.unwrap();
    assert_eq!(interrupted, vec![turn.clone(), quiet.1.clone()]);

    let events = store.turn_events(&turn).await.unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=8).collect::<Vec<u64>>(), "gapless");
    let reason = "agentplane stopped while this permission was pending";
    let tail: Vec<EventPayload> = events[5..].iter().map(|e| e.payload.clone()).collect();
    assert_eq!(
        tail,
        vec![
            EventPayload::PermissionResolved {
                permission_id: open_ones[0].id.to_string(),
                decision: PermissionDecision::Declined,
                reason: reason.into(),
            },
            EventPayload::PermissionResolved {
                permission_id: open_ones[1].id.to_string(),
                decision: PermissionDecision::Declined,
                reason: reason.into(),
            },
            EventPayload::TurnCompleted {
                stop_reason: StopReason::Interrupted,
                result: serde_json::Value::Null,
            },
        ]
    );
    for pending in &open_ones {
        let now = store.permission(&pending.id).await.unwrap().unwrap();
        assert_eq!(
            now.status,
            PermissionStatus::Resolved(PermissionDecision::Declined)
        );
        assert_eq!(now.reason.as_deref(), Some(reason));
    }
    let kept = store.permission(&answered.id).await.unwrap().unwrap();
    assert_eq!(
        kept.status,
        PermissionStatus::Resolved(PermissionDecision::Approved)
    );
    assert_eq!(kept.reason.as_deref(), Some("ana said yes"));

    let record = store.turn(&turn).await.unwrap().unwrap();
    assert_eq!(record.status, TurnStatus::Ended(StopReason::Interrupted));
    assert_eq!(record.result, Some(serde_json::Value::Null));
    assert_eq!(record.ended_at.as_deref(), Some(events[7].ts.as_str()));
    assert_eq!(store.thread_events(&thread, 0, 100).await.unwrap(), events);
    // The quiet turn had nothing to decline.
    let quiet_events = store.turn_events(&quiet.1).await.unwrap();
    assert_eq!(quiet_events.len(), 1);
    assert_eq!(quiet_events[0].payload.kind(), "turn_completed");
}
