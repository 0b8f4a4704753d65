//! The ledger and the rows it vouches for (docs/audit.md): what an operator with the
//! database's password changes behind the store's back — a thread's owner, workspace or
//! deletion, a thread inserted or removed outright, a turn's input or result, an
//! approval's decision or decider, a key's roles — is named by `audit verify`, which
//! record and which field, while every hash link still holds.

use std::sync::Arc;

use agentplane_core::{ApprovalId, ApprovalOutcome, EventPayload, KeyId, StopReason, TurnId};
use agentplane_engine::ports::{ApprovalDecision, NewApproval, NewKey};
use agentplane_engine::services::reports::{AuditReport, verify_chains};
use serde_json::json;

use crate::fixtures::{RawSql, Store, new_thread, unguard};

/// The (subject, message) of every mismatch, for assertions.
fn named(report: &AuditReport) -> Vec<(String, String)> {
    report
        .mismatches
        .iter()
        .map(|m| (m.subject.clone(), m.message.clone()))
        .collect()
}

/// Whether `report` names `subject` with a message containing `what`.
fn names(report: &AuditReport, subject: &str, what: &str) -> bool {
    report
        .mismatches
        .iter()
        .any(|m| m.subject == subject && m.message.contains(what))
}

pub async fn a_moved_owner_workspace_or_deletion_and_an_inserted_or_removed_thread_are_named<
    S: Store,
>(
    store: Arc<S>,
    raw: &dyn RawSql,
) {
    let kept = store.create_thread(new_thread()).await.expect("thread").id;
    let deleted = store.create_thread(new_thread()).await.expect("thread").id;
    let removed = store.create_thread(new_thread()).await.expect("thread").id;
    store.delete_thread(&deleted).await.expect("delete");
    let report = verify_chains(&*store, None).await.expect("verify");
    assert!(report.holds(), "{report:?}");

    raw.execute(&format!(
        "UPDATE threads SET client_id = 'mallory', cwd = '/etc' WHERE id = '{kept}'"
    ))
    .await
    .expect("move the owner");
    unguard(raw, "threads", "threads_stay_deleted").await;
    raw.execute(&format!(
        "UPDATE threads SET deleted_at = NULL WHERE id = '{deleted}'"
    ))
    .await
    .expect("undelete");
    raw.execute(&format!("DELETE FROM threads WHERE id = '{removed}'"))
        .await
        .expect("remove outright");
    let forged = agentplane_core::ThreadId::new();
    raw.execute(&format!(
        "INSERT INTO threads (id, client_id, agent, cwd, created_at)
         VALUES ('{forged}', 'mallory', 'coder', '/', '2026-01-01T00:00:00.000Z')"
    ))
    .await
    .expect("insert a thread");

    let report = verify_chains(&*store, None).await.expect("verify");
    assert_eq!((&report.broken, &report.broken_record), (&None, &None));
    let all = named(&report);
    for (subject, what) in [
        (format!("thread {kept}"), "owner (client_id) is \"mallory\""),
        (format!("thread {kept}"), "workspace (cwd) is \"/etc\""),
        (format!("thread {deleted}"), "deletion (deleted_at) is none"),
        (format!("thread {removed}"), "deleted outright"),
        (format!("thread {forged}"), "inserted outside agentplane"),
    ] {
        assert!(
            names(&report, &subject, what),
            "{subject}: {what} in {all:#?}"
        );
    }
    assert_eq!(all.len(), 5, "{all:#?}");
    // One thread checked alone: its own mismatches, and no claim about the others.
    let alone = verify_chains(&*store, Some(&kept)).await.expect("verify");
    assert_eq!(alone.mismatches.len(), 2, "{:#?}", named(&alone));
}

pub async fn an_edited_turn_approval_or_key_is_named<S: Store>(store: Arc<S>, raw: &dyn RawSql) {
    let thread = store.create_thread(new_thread()).await.expect("thread").id;
    let turn = TurnId::new();
    let started = EventPayload::TurnStarted {
        agent: "coder".into(),
        input: "fix the parser".into(),
        model: "m".into(),
        workspace: "/tmp/work".into(),
        agent_version: None,
        shadow_of: None,
    };
    store
        .start_turn(&thread, &turn, "fix the parser", false, started)
        .await
        .expect("start");
    let (approval, _) = store
        .create_approval(NewApproval {
            id: ApprovalId::new(),
            thread_id: thread.clone(),
            turn_id: turn.clone(),
            call_id: "call_1".into(),
            tool: "send_email".into(),
            arguments: json!({"to": "a@b.c"}),
            arguments_in_event: true,
            args_preview_hash: "h".into(),
            policy: "email-review".into(),
            approvers: vec!["manager".into()],
            expires_at: "2099-01-01T00:00:00Z".into(),
            explanation: None,
            snapshot: json!({}),
        })
        .await
        .expect("approval");
    store
        .decide_approval(
            &approval.id,
            ApprovalDecision {
                outcome: ApprovalOutcome::Rejected,
                arguments: None,
                feedback: Some("not to them".into()),
                by: "manager".into(),
                decider: Some("key:key_0".into()),
                arguments_in_event: true,
            },
        )
        .await
        .expect("decide");
    store
        .complete_turn(
            &thread,
            &turn,
            StopReason::Finished,
            json!({"summary": "done"}),
        )
        .await
        .expect("complete");
    let key = KeyId::new();
    store
        .create_key(NewKey {
            id: key.clone(),
            digest: "d".repeat(64),
            client: "ci".into(),
            roles: vec!["reader".into()],
            description: None,
            expires_at: None,
            created_by: "admin".into(),
        })
        .await
        .expect("key");
    let report = verify_chains(&*store, None).await.expect("verify");
    assert!(report.holds(), "{report:?}");

    raw.execute(&format!(
        "UPDATE turns SET input = 'rm -rf /', result = '{{\"summary\":\"forged\"}}'
         WHERE id = '{turn}'"
    ))
    .await
    .expect("edit the turn");
    unguard(raw, "approvals", "approvals_decided_once").await;
    raw.execute(&format!(
        "UPDATE approvals SET status = 'approved', decided_by = 'mallory'
         WHERE id = '{}'",
        approval.id
    ))
    .await
    .expect("edit the decision");
    unguard(raw, "api_keys", "api_keys_fixed").await;
    raw.execute(&format!(
        "UPDATE api_keys SET roles = '[\"admin\"]' WHERE id = '{key}'"
    ))
    .await
    .expect("widen the roles");

    let report = verify_chains(&*store, None).await.expect("verify");
    assert_eq!((&report.broken, &report.broken_record), (&None, &None));
    let all = named(&report);
    for (subject, what) in [
        (format!("turn {turn}"), "input is \"rm -rf /\""),
        (format!("turn {turn}"), "forged"),
        (
            format!("approval {}", approval.id),
            "decision is \"approved\"",
        ),
        (
            format!("approval {}", approval.id),
            "decider (decided_by) is \"mallory\"",
        ),
        (format!("key {key}"), "roles is \"[\\\"admin\\\"]\""),
    ] {
        assert!(
            names(&report, &subject, what),
            "{subject}: {what} in {all:#?}"
        );
    }
    assert_eq!(all.len(), 5, "{all:#?}");
}

pub async fn a_ledger_without_its_genesis_is_named<S: Store>(store: Arc<S>, raw: &dyn RawSql) {
    store.create_thread(new_thread()).await.expect("thread");
    assert!(verify_chains(&*store, None).await.expect("verify").holds());
    // Everything removed and the tip reset: no link is left to break, but a store
    // created chained has a genesis, and now it has none.
    unguard(raw, "audit_ledger", ledger_guard(raw)).await;
    raw.execute("DELETE FROM audit_ledger").await.expect("wipe");
    raw.execute(
        "UPDATE audit_chains SET last_pos = 0, last_hash = NULL WHERE chain = 'audit_ledger'",
    )
    .await
    .expect("reset the tip");
    let report = verify_chains(&*store, None).await.expect("verify");
    assert!(
        report
            .mismatches
            .iter()
            .any(|m| m.subject == "ledger" && m.message.contains("no genesis")),
        "{:#?}",
        named(&report)
    );
}

/// The trigger that keeps the ledger append-only.
fn ledger_guard(raw: &dyn RawSql) -> &'static str {
    match raw.dialect() {
        crate::fixtures::Dialect::Sqlite => "audit_ledger_never_delete",
        crate::fixtures::Dialect::Postgres => "audit_ledger_append_only",
    }
}

pub async fn the_ledger_holds_under_concurrent_threads_keys_and_policy_loads<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    const TASKS: usize = 16;
    let mut tasks = Vec::new();
    for i in 0..TASKS {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            let thread = store.create_thread(new_thread()).await.expect("thread").id;
            if i % 2 == 0 {
                store.delete_thread(&thread).await.expect("delete");
            }
            let key = KeyId::new();
            store
                .create_key(NewKey {
                    id: key.clone(),
                    digest: format!("{i:064}"),
                    client: format!("client-{i}"),
                    roles: vec!["operator".into()],
                    description: Some("'; DROP TABLE api_keys; --".into()),
                    expires_at: None,
                    created_by: "admin".into(),
                })
                .await
                .expect("key");
            if i % 3 == 0 {
                store.revoke_key(&key).await.expect("revoke");
            }
            store
                .record_policy_set(&format!("sha256:{i:016}"), "reload", 1)
                .await
                .expect("policy set");
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    let report = verify_chains(&*store, None).await.expect("verify");
    assert!(report.holds(), "{report:#?}");
    let ledger = report
        .records
        .iter()
        .find(|s| s.thread_id == "audit_ledger")
        .expect("the ledger");
    // The genesis, then per task: a thread, its deletion (half), a key, its
    // revocation (a third), a policy set.
    let expected = 1 + TASKS + TASKS / 2 + TASKS + TASKS.div_ceil(3) + TASKS;
    assert_eq!(ledger.chained, expected as u64, "{ledger:?}");
}

pub async fn a_decision_under_a_policy_set_never_loaded_is_named<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    store
        .record_policy_set("sha256:0123456789abcdef", "startup", 2)
        .await
        .expect("policy set");
    let thread = store.create_thread(new_thread()).await.expect("thread").id;
    let turn = TurnId::new();
    let started = EventPayload::TurnStarted {
        agent: "coder".into(),
        input: "go".into(),
        model: "m".into(),
        workspace: "/tmp/work".into(),
        agent_version: None,
        shadow_of: None,
    };
    store
        .start_turn(&thread, &turn, "go", false, started)
        .await
        .expect("start");
    let denied = |set: &str| EventPayload::PolicyDenied {
        policy: "no-shell".into(),
        policy_type: "tool_access".into(),
        tool: Some("run_command".into()),
        call_id: None,
        detail: "denied".into(),
        explanation: Some(Box::new(agentplane_core::event::PolicyExplanation {
            policy_set: set.into(),
            decision: "deny".into(),
            decided_by: Some("no-shell".into()),
            matched: vec!["no-shell".into()],
            reason: "denied".into(),
        })),
    };
    store
        .append(&thread, &turn, denied("sha256:0123456789abcdef"))
        .await
        .expect("a decision under the loaded set");
    assert!(verify_chains(&*store, None).await.expect("verify").holds());
    // A decision recorded under a set no process ever loaded: the set in force was
    // swapped without the ledger knowing.
    let swapped = store
        .append(&thread, &turn, denied("sha256:ffffffffffffffff"))
        .await
        .expect("a decision under another set");
    let report = verify_chains(&*store, None).await.expect("verify");
    let all = named(&report);
    assert_eq!(all.len(), 1, "{all:#?}");
    assert!(
        names(
            &report,
            &format!("thread {thread}"),
            &format!(
                "event {} was decided under policy set sha256:ffffffffffffffff",
                swapped.seq
            )
        ),
        "{all:#?}"
    );
}
