//! Agent versions in the store (ADR 0016): the port's rules hold through the store and,
//! behind its back, through the schema's triggers: a non-draft spec never changes,
//! stages only move forward, traffic history is append-only and refuses a stale write,
//! a thread's version is pinned once, a turn records its thread's version, and shadow
//! threads are linked and never listed.

use std::sync::Arc;

use std::collections::BTreeMap;

use agentplane_core::version::TrafficAction;
use agentplane_core::{Stage, TrafficSplit, TurnId, VersionSpec};
use agentplane_engine::ports::{NewTraffic, NewVersion, StoreError, TurnRecord};

use crate::fixtures::{RawSql, Store, new_thread};

fn spec(prompt: &str) -> VersionSpec {
    VersionSpec {
        description: String::new(),
        system_prompt: prompt.into(),
        model: None,
        ensembles: vec![],
        output_schema: None,
        max_steps: 4,
        tool_timeout_ms: 1000,
        tool_output_cap_bytes: 4096,
    }
}

fn version(v: &str) -> NewVersion {
    NewVersion {
        agent: "coder".into(),
        version: v.into(),
        spec: spec("first"),
        created_by: "ops".into(),
    }
}

pub async fn only_drafts_change_and_stages_move_forward_also_behind_the_stores_back<S: Store>(
    store: Arc<S>,
    raw: &dyn RawSql,
) {
    let created = store
        .create_version(version("1.1.0"))
        .await
        .expect("create");
    assert_eq!(created.stage, Stage::Draft);
    assert!(matches!(
        store.create_version(version("1.1.0")).await,
        Err(StoreError::Conflict(_))
    ));
    let edited = store
        .edit_draft("coder", "1.1.0", spec("second"))
        .await
        .expect("edit a draft");
    assert_eq!(edited.spec.system_prompt, "second");
    assert!(matches!(
        store
            .set_stage("coder", "1.1.0", Stage::Draft, Stage::Production)
            .await,
        Err(StoreError::Conflict(_))
    ));
    store
        .set_stage("coder", "1.1.0", Stage::Draft, Stage::Staging)
        .await
        .expect("staging");
    // Someone else's promotion already happened: the stale `from` is refused.
    assert!(matches!(
        store
            .set_stage("coder", "1.1.0", Stage::Draft, Stage::Staging)
            .await,
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        store.edit_draft("coder", "1.1.0", spec("third")).await,
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        store.edit_draft("coder", "9.9.9", spec("x")).await,
        Err(StoreError::NotFound(_))
    ));

    for sql in [
        "UPDATE agent_versions SET spec = '{}' WHERE version = '1.1.0'",
        "UPDATE agent_versions SET stage = 'draft' WHERE version = '1.1.0'",
        "DELETE FROM agent_versions",
    ] {
        assert!(raw.execute(sql).await.is_err(), "{sql} must be refused");
    }
    let all = store.all_versions().await.expect("versions");
    assert_eq!(all["coder"][0].spec.system_prompt, "second");
    assert_eq!(all["coder"][0].stage, Stage::Staging);
}

/// One agent's versions are its own, in creation order, whatever the names: another
/// agent's (including one whose name is a prefix, a pattern or a NUL away) never
/// appear, and an agent without versions has none. They agree with `all_versions`.
pub async fn one_agents_versions_are_read_alone_and_in_order<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let agents = [
        "coder",
        "coder2",
        "cod%",
        "co_er",
        "coder\0",
        "cod'er",
        "coder\u{0}x",
    ];
    for (i, agent) in agents.iter().enumerate() {
        for v in ["2.0.0", "1.0.0", "1.5.0"].iter().take(1 + i % 3) {
            let mut new = version(v);
            new.agent = (*agent).to_owned();
            new.spec = spec(&format!("{agent} {v}"));
            store.create_version(new).await.expect("create");
        }
    }
    let all = store.all_versions().await.expect("all versions");
    for (i, agent) in agents.iter().enumerate() {
        let mine = store.versions_of(agent).await.expect("versions of");
        let names: Vec<&str> = mine.iter().map(|v| v.version.as_str()).collect();
        let expected: Vec<&str> = ["2.0.0", "1.0.0", "1.5.0"]
            .into_iter()
            .take(1 + i % 3)
            .collect();
        assert_eq!(names, expected, "{agent:?}: its own, in creation order");
        assert!(
            mine.iter()
                .all(|v| v.agent == *agent && v.spec.system_prompt.starts_with(*agent))
        );
        assert_eq!(mine, all[*agent], "{agent:?}: as all_versions reads them");
    }
    for unknown in ["", "cod", "%", "nobody"] {
        assert!(
            store.versions_of(unknown).await.expect("none").is_empty(),
            "{unknown:?}"
        );
    }
}

pub async fn traffic_is_append_only_and_a_stale_change_loses<S: Store>(
    store: Arc<S>,
    raw: &dyn RawSql,
) {
    let split = TrafficSplit(BTreeMap::from([("1.0.0".into(), 100)]));
    let change = |after_seq| NewTraffic {
        agent: "coder".into(),
        after_seq,
        action: TrafficAction::Set,
        split: split.clone(),
        by: "ops".into(),
    };
    assert_eq!(store.record_traffic(change(0)).await.expect("first").seq, 1);
    assert!(matches!(
        store.record_traffic(change(0)).await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(
        store.record_traffic(change(1)).await.expect("second").seq,
        2
    );
    let history = store.traffic("coder").await.expect("history");
    assert_eq!(history.len(), 2);
    assert_eq!(history[1].split, split);
    assert!(store.traffic("other").await.expect("none").is_empty());
    assert!(
        raw.execute("UPDATE agent_traffic SET weights = '{}'")
            .await
            .is_err()
    );
    assert!(raw.execute("DELETE FROM agent_traffic").await.is_err());
}

pub async fn a_thread_is_pinned_once_and_its_turns_record_the_version<S: Store>(
    store: Arc<S>,
    raw: &dyn RawSql,
) {
    let thread = store.create_thread(new_thread()).await.expect("thread");
    assert_eq!(thread.agent_version, None);
    assert_eq!(
        store.pin_thread(&thread.id, "1.1.0").await.expect("pin"),
        "1.1.0"
    );
    let turn = pin_holds(&*store, raw, &thread.id, "1.1.0").await;
    let read = store.turn(&turn.id).await.expect("read").expect("turn");
    assert_eq!(read.agent_version.as_deref(), Some("1.1.0"));
    assert!(matches!(
        store
            .pin_thread(&agentplane_core::ThreadId::new(), "1.0.0")
            .await,
        Err(StoreError::NotFound(_))
    ));

    // A shadow thread: pinned, linked, never listed.
    let shadow = store
        .create_shadow_thread(new_thread(), &thread.id, "1.2.0")
        .await
        .expect("shadow thread");
    assert_eq!(shadow.agent_version.as_deref(), Some("1.2.0"));
    assert_eq!(shadow.shadow_of.as_ref(), Some(&thread.id));
    let listed = store.list_threads("local").await.expect("list");
    assert_eq!(
        listed.iter().map(|t| &t.id).collect::<Vec<_>>(),
        [&thread.id]
    );
    let shadows = store.shadow_threads(&thread.id).await.expect("shadows");
    assert_eq!(shadows.len(), 1);
    assert!(matches!(
        store
            .create_shadow_thread(new_thread(), &agentplane_core::ThreadId::new(), "1.2.0")
            .await,
        Err(StoreError::NotFound(_))
    ));
}

/// A thread created pinned (one write) reads back pinned, its pin never moves, and its
/// turns record the version, as for a thread pinned after it was created.
pub async fn a_thread_created_pinned_keeps_its_version<S: Store>(store: Arc<S>, raw: &dyn RawSql) {
    let thread = store
        .create_thread(agentplane_engine::ports::NewThread {
            agent_version: Some("1.4.0".into()),
            ..new_thread()
        })
        .await
        .expect("thread");
    assert_eq!(thread.agent_version.as_deref(), Some("1.4.0"));
    let read = store
        .thread(&thread.id)
        .await
        .expect("read")
        .expect("thread");
    assert_eq!(read, thread);
    pin_holds(&*store, raw, &thread.id, "1.4.0").await;
}

/// `thread`, pinned to `pinned`, stays so: a later pin returns the first, the column
/// cannot be changed behind the store's back, and a turn records the version. Returns
/// that turn.
async fn pin_holds<S: Store>(
    store: &S,
    raw: &dyn RawSql,
    thread: &agentplane_core::ThreadId,
    pinned: &str,
) -> TurnRecord {
    assert_eq!(
        store.pin_thread(thread, "2.0.0").await.expect("pin again"),
        pinned,
        "the first pin wins"
    );
    assert!(
        raw.execute("UPDATE threads SET agent_version = '3.0.0'")
            .await
            .is_err()
    );
    let turn = store
        .begin_turn(thread, &TurnId::new(), "hi", false)
        .await
        .expect("turn");
    assert_eq!(turn.agent_version.as_deref(), Some(pinned));
    turn
}
