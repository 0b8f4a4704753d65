//! Agent versions through the runtime with real parts (ADR 0016): a configured agent's
//! `version` is its baseline, a stored version and the traffic split survive a restart,
//! a thread keeps its version across the restart and its turns record it, and a thread
//! pinned to a baseline number the configuration no longer has is refused, not moved.

use agentplane_core::{EventPayload, SpecPatch, TrafficSplit};
use agentplane_engine::NoObserver;
use agentplane_engine::hub::{CreateThread, HubError};
use agentplane_engine::services::versions::CreateVersion;
use agentplane_runtime::config::ConfigSource;
use agentplane_runtime::{Config, Runtime};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn config(dir: &std::path::Path, base_url: &str, version: &str) -> Config {
    let file = dir.join("agentplane.toml");
    std::fs::write(
        &file,
        format!(
            "[llm]\nbase_url = \"{base_url}\"\nmodel = \"scripted-model\"\nmax_retries = 0\n\
             [store]\npath = \"events.db\"\n\
             [agents.chat]\nsystem_prompt = \"Baseline.\"\nversion = \"{version}\"\n"
        ),
    )
    .expect("config");
    let env = |_: &str| None;
    Config::load_from(&ConfigSource {
        explicit: Some(&file),
        cwd: dir,
        env: &env,
    })
    .expect("config loads")
}

#[tokio::test]
async fn versions_traffic_and_pinned_threads_survive_a_restart() {
    let steps = (0..4).map(|i| Step::text(format!("answer {i}"))).collect();
    let server = ScriptedServer::start(Scenario::new(steps))
        .await
        .expect("server");
    let dir = tempfile::tempdir().expect("tempdir");
    let cwd = dir.path().display().to_string();
    let runtime = Runtime::start(config(dir.path(), &server.base_url(), "2.0.0"))
        .await
        .expect("runtime");
    let hub = runtime.hub().clone();
    let listed = hub
        .versions()
        .agent_versions("ops", "chat")
        .await
        .expect("versions");
    assert_eq!(listed.traffic, TrafficSplit::all_on("2.0.0"));
    // Semver must increase over the configured baseline, too.
    let low = hub
        .versions()
        .create_version(
            "ops",
            "chat",
            CreateVersion {
                version: "1.5.0".into(),
                ..CreateVersion::default()
            },
        )
        .await;
    assert!(matches!(low, Err(HubError::Conflict(_))), "{low:?}");
    hub.versions()
        .create_version(
            "ops",
            "chat",
            CreateVersion {
                version: "2.1.0".into(),
                from: None,
                spec: SpecPatch {
                    system_prompt: Some("Version two point one.".into()),
                    ..SpecPatch::default()
                },
            },
        )
        .await
        .expect("create");
    hub.versions()
        .promote_version("ops", "chat", "2.1.0", None)
        .await
        .expect("staging");
    hub.versions()
        .promote_version("ops", "chat", "2.1.0", None)
        .await
        .expect("production");
    hub.versions()
        .set_traffic("ops", "chat", TrafficSplit::all_on("2.1.0"))
        .await
        .expect("traffic");
    let new = CreateThread {
        agent: "chat".into(),
        cwd: cwd.clone(),
        title: None,
    };
    let on_new = hub.create_thread("c1", new.clone()).await.expect("thread");
    assert_eq!(on_new.agent_version.as_deref(), Some("2.1.0"));
    let on_old = hub
        .create_thread_on("c1", new.clone(), Some("2.0.0"))
        .await
        .expect("pinned thread");
    assert_eq!(on_old.agent_version.as_deref(), Some("2.0.0"));
    hub.run_turn_here(
        "c1",
        &on_new.id,
        "first".into(),
        &NoObserver,
        CancellationToken::new(),
    )
    .await
    .expect("turn");
    hub.shutdown(Duration::from_secs(5)).await;
    runtime.shutdown().await;
    drop(hub);
    drop(runtime);

    // A new process on the same database, with the baseline renumbered to 3.0.0.
    let runtime = Runtime::start(config(dir.path(), &server.base_url(), "3.0.0"))
        .await
        .expect("runtime again");
    let hub = runtime.hub().clone();
    let listed = hub
        .versions()
        .agent_versions("ops", "chat")
        .await
        .expect("versions");
    assert_eq!(listed.traffic, TrafficSplit::all_on("2.1.0"));
    let record = hub.thread("c1", &on_new.id).await.expect("thread");
    assert_eq!(record.agent_version.as_deref(), Some("2.1.0"));
    let outcome = hub
        .run_turn_here(
            "c1",
            &on_new.id,
            "second".into(),
            &NoObserver,
            CancellationToken::new(),
        )
        .await
        .expect("turn after restart");
    let turns = runtime.store().list_turns(&on_new.id).await.expect("turns");
    assert_eq!(turns.len(), 2);
    assert!(
        turns
            .iter()
            .all(|t| t.agent_version.as_deref() == Some("2.1.0"))
    );
    let events = runtime
        .store()
        .turn_events(&outcome.turn)
        .await
        .expect("events");
    assert!(matches!(
        &events[0].payload,
        EventPayload::TurnStarted { agent_version: Some(v), .. } if v == "2.1.0"
    ));
    let request = server.requests().pop().expect("a chat request");
    assert_eq!(request["messages"][0]["content"], "Version two point one.");

    // 2.0.0 was the baseline's number and exists no more: its thread is refused.
    let refused = hub
        .run_turn_here(
            "c1",
            &on_old.id,
            "hello".into(),
            &NoObserver,
            CancellationToken::new(),
        )
        .await;
    assert!(
        matches!(&refused, Err(HubError::Conflict(m)) if m.contains("no longer exists")),
        "{refused:?}"
    );
    hub.shutdown(Duration::from_secs(5)).await;
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_configured_version_that_is_not_semver_is_a_config_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("agentplane.toml");
    std::fs::write(
        &file,
        "[agents.chat]\nsystem_prompt = \"p\"\nversion = \"latest\"\n",
    )
    .expect("config");
    let env = |_: &str| None;
    let error = Config::load_from(&ConfigSource {
        explicit: Some(&file),
        cwd: dir.path(),
        env: &env,
    })
    .expect_err("refused");
    assert!(error.to_string().contains("agents.chat.version"), "{error}");
}

#[tokio::test]
async fn a_thread_from_before_versions_is_pinned_at_its_next_turn_by_the_weights() {
    let server = ScriptedServer::start(Scenario::new(vec![Step::text("hi")]))
        .await
        .expect("server");
    let dir = tempfile::tempdir().expect("tempdir");
    let runtime = Runtime::start(config(dir.path(), &server.base_url(), "1.0.0"))
        .await
        .expect("runtime");
    let hub = runtime.hub().clone();
    // Written as an older agentplane did: no version pinned.
    let thread = runtime
        .store()
        .create_thread(agentplane_engine::ports::NewThread {
            agent_version: None,
            id: agentplane_core::ThreadId::new(),
            client_id: "c1".into(),
            agent: "chat".into(),
            cwd: dir.path().display().to_string(),
            title: None,
        })
        .await
        .expect("thread");
    assert_eq!(thread.agent_version, None);
    hub.versions()
        .create_version(
            "ops",
            "chat",
            CreateVersion {
                version: "1.1.0".into(),
                ..CreateVersion::default()
            },
        )
        .await
        .expect("create");
    hub.versions()
        .promote_version("ops", "chat", "1.1.0", None)
        .await
        .expect("staging");
    hub.versions()
        .promote_version("ops", "chat", "1.1.0", None)
        .await
        .expect("production");
    hub.versions()
        .set_traffic("ops", "chat", TrafficSplit::all_on("1.1.0"))
        .await
        .expect("traffic");
    let outcome = hub
        .run_turn_here(
            "c1",
            &thread.id,
            "hello".into(),
            &NoObserver,
            CancellationToken::new(),
        )
        .await
        .expect("turn");
    let pinned = hub.thread("c1", &thread.id).await.expect("thread");
    assert_eq!(pinned.agent_version.as_deref(), Some("1.1.0"));
    let turn = runtime
        .store()
        .turn(&outcome.turn)
        .await
        .expect("read")
        .expect("turn");
    assert_eq!(turn.agent_version.as_deref(), Some("1.1.0"));
    hub.shutdown(Duration::from_secs(5)).await;
    runtime.shutdown().await;
}
