//! Approvals: stored with their event, decided once, claimed once, and a suspended turn
//! survives the start-up sweep that interrupts running turns.

use std::sync::Arc;

use agentplane_core::{ApprovalId, ApprovalOutcome, EventPayload, StopReason};
use agentplane_engine::ports::{
    ApprovalDecision, ApprovalQuery, ApprovalStatus, NewApproval, StoreError, TurnStatus,
};
use serde_json::json;

use crate::fixtures::{RawSql, Store, running_turn};

fn new_approval(thread: &agentplane_core::ThreadId, turn: &agentplane_core::TurnId) -> NewApproval {
    NewApproval {
        id: ApprovalId::new(),
        thread_id: thread.clone(),
        turn_id: turn.clone(),
        call_id: "call_1".into(),
        tool: "send_email".into(),
        arguments: json!({"to": "a@b.c", "body": "hello"}),
        arguments_in_event: true,
        args_preview_hash: "h".into(),
        policy: "email-review".into(),
        approvers: vec!["manager@co.com".into()],
        expires_at: "2099-01-01T00:00:00Z".into(),
        explanation: None,
        snapshot: json!({"step": 1, "messages": ["…"]}),
    }
}

fn decision(outcome: ApprovalOutcome) -> ApprovalDecision {
    ApprovalDecision {
        outcome,
        arguments: None,
        feedback: None,
        by: "client-a".into(),
        decider: Some("key:key_0".into()),
        arguments_in_event: true,
    }
}

pub async fn an_approval_is_stored_with_its_event_and_listed_for_its_client_only<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let (thread, turn) = running_turn(&*store).await;
    let (record, event) = store
        .create_approval(new_approval(&thread, &turn))
        .await
        .unwrap();
    assert_eq!(record.status, ApprovalStatus::Pending);
    assert_eq!(record.client_id, "local");
    assert_eq!(record.snapshot["step"], 1);
    match event.payload {
        EventPayload::ApprovalRequested {
            approval_id,
            arguments,
            policy,
            ..
        } => {
            assert_eq!(approval_id, record.id.to_string());
            assert_eq!(arguments["to"], "a@b.c");
            assert_eq!(policy, "email-review");
        }
        other => panic!("unexpected {other:?}"),
    }
    let mine = ApprovalQuery {
        client: Some("local".into()),
        pending_only: true,
        ..ApprovalQuery::default()
    };
    assert_eq!(store.list_approvals(&mine).await.unwrap().len(), 1);
    let theirs = ApprovalQuery {
        client: Some("someone-else".into()),
        ..ApprovalQuery::default()
    };
    assert!(store.list_approvals(&theirs).await.unwrap().is_empty());
    assert_eq!(store.approval(&record.id).await.unwrap(), Some(record));
}

pub async fn hash_retention_keeps_arguments_out_of_the_events_but_in_the_approval<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let (thread, turn) = running_turn(&*store).await;
    let mut approval = new_approval(&thread, &turn);
    approval.arguments_in_event = false;
    let (record, event) = store.create_approval(approval).await.unwrap();
    assert_eq!(record.arguments["body"], "hello");
    match event.payload {
        EventPayload::ApprovalRequested { arguments, .. } => assert!(arguments.is_null()),
        other => panic!("unexpected {other:?}"),
    }
}

pub async fn a_decision_is_recorded_once_and_claimed_once<S: Store>(
    store: Arc<S>,
    raw: &dyn RawSql,
) {
    let (thread, turn) = running_turn(&*store).await;
    let (record, _) = store
        .create_approval(new_approval(&thread, &turn))
        .await
        .unwrap();
    // Not claimable while pending.
    assert!(matches!(
        store.claim_approval(&record.id).await,
        Err(StoreError::Conflict(_))
    ));
    let mut edit = decision(ApprovalOutcome::Edited);
    edit.arguments = Some(json!({"to": "a@b.c", "body": "edited"}));
    let (decided, event) = store.decide_approval(&record.id, edit).await.unwrap();
    assert_eq!(
        decided.status,
        ApprovalStatus::Decided(ApprovalOutcome::Edited)
    );
    assert_eq!(decided.edited_arguments.unwrap()["body"], "edited");
    assert!(matches!(
        event.payload,
        EventPayload::ApprovalDecided {
            outcome: ApprovalOutcome::Edited,
            ..
        }
    ));
    // A second decision, whatever it says, is refused and changes nothing.
    assert!(matches!(
        store
            .decide_approval(&record.id, decision(ApprovalOutcome::Rejected))
            .await,
        Err(StoreError::Conflict(_))
    ));
    let claimed = store.claim_approval(&record.id).await.unwrap();
    assert!(claimed.resumed);
    assert!(matches!(
        store.claim_approval(&record.id).await,
        Err(StoreError::Conflict(_))
    ));
    // The trigger holds even against hand-written SQL.
    let refused = raw
        .execute(&format!(
            "UPDATE approvals SET status = 'approved' WHERE id = '{}'",
            record.id
        ))
        .await;
    assert!(refused.is_err());
}

pub async fn an_edit_without_arguments_and_unknown_ids_are_refused<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let (thread, turn) = running_turn(&*store).await;
    let (record, _) = store
        .create_approval(new_approval(&thread, &turn))
        .await
        .unwrap();
    assert!(matches!(
        store
            .decide_approval(&record.id, decision(ApprovalOutcome::Edited))
            .await,
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        store
            .decide_approval(&ApprovalId::new(), decision(ApprovalOutcome::Approved))
            .await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(store.approval(&ApprovalId::new()).await.unwrap(), None);
    // One open approval per turn.
    assert!(matches!(
        store.create_approval(new_approval(&thread, &turn)).await,
        Err(StoreError::Conflict(_))
    ));
}

pub async fn a_suspended_turn_survives_a_restart_and_resumes_after<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let (thread, turn, id) = {
        let (thread, turn) = running_turn(&*store).await;
        let (record, _) = store
            .create_approval(new_approval(&thread, &turn))
            .await
            .unwrap();
        (thread, turn, record.id)
    };
    let interrupted = store.interrupt_running_turns().await.unwrap();
    assert!(interrupted.is_empty(), "{interrupted:?}");
    assert_eq!(
        store.turn(&turn).await.unwrap().unwrap().status,
        TurnStatus::Running
    );
    store
        .decide_approval(&id, decision(ApprovalOutcome::Approved))
        .await
        .unwrap();
    let awaiting = ApprovalQuery {
        awaiting_resume: true,
        ..ApprovalQuery::default()
    };
    assert_eq!(store.list_approvals(&awaiting).await.unwrap().len(), 1);
    store.claim_approval(&id).await.unwrap();
    assert!(store.list_approvals(&awaiting).await.unwrap().is_empty());
    // Once resumed, the turn is running again: a restart now interrupts it.
    assert_eq!(
        store.interrupt_running_turns().await.unwrap(),
        vec![turn.clone()]
    );
    let ended = store.turn(&turn).await.unwrap().unwrap();
    assert_eq!(ended.status, TurnStatus::Ended(StopReason::Interrupted));
    assert_eq!(ended.thread_id, thread);
}
