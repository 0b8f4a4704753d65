//! Agent versions over real HTTP (ADR 0016): the lifecycle draft → staging →
//! production and the immutability of what left draft, semver rules and hostile
//! bodies, a 90/10 canary over 1,000 new threads with each thread staying on its
//! version, rollback of the traffic split, shadow runs whose side-effecting tools are
//! recorded but not executed, and who may change versions.
//!
//! The server is the harness's: the runtime on a temp SQLite file, the scripted model
//! over HTTP, reqwest as the client.

use agentplane_testkit::Step;
use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Answer, Api, PATIENCE, Setup};

const ADMIN: &str = "release-manager";

/// An agent with the file tools and no permission prompts, plain answers as results.
const FILES_AGENT: &str = "
[agents.files]
system_prompt = \"You are version one.\"
ensembles = [\"fs\"]
max_steps = 4
max_nudges = 0
";

impl Api {
    async fn put(&self, path: &str, client: &str, body: Value) -> Answer {
        self.send(self.request(Method::PUT, path, Some(client)).json(&body))
            .await
    }

    async fn patch(&self, path: &str, client: &str, body: Value) -> Answer {
        self.send(self.request(Method::PATCH, path, Some(client)).json(&body))
            .await
    }

    /// Creates `version` of `agent` from its baseline with a new system prompt and
    /// promotes it to `stage`.
    async fn release(&self, agent: &str, version: &str, prompt: &str, stage: &str) {
        let created = self
            .post(
                &format!("/v1/agents/{agent}/versions"),
                ADMIN,
                json!({"version": version, "spec": {"system_prompt": prompt}}),
            )
            .await;
        assert_eq!(created.status.as_u16(), 201, "{:?}", created.body);
        assert_eq!(created.body["stage"], "draft");
        for next in ["staging", "production"] {
            if stage == "draft" {
                break;
            }
            let promoted = self
                .post(
                    &format!("/v1/agents/{agent}/versions/{version}/promote"),
                    ADMIN,
                    json!({}),
                )
                .await;
            assert_eq!(promoted.status.as_u16(), 200, "{:?}", promoted.body);
            assert_eq!(promoted.body["stage"], next);
            if next == stage {
                break;
            }
        }
    }

    async fn set_traffic(&self, agent: &str, weights: Value) -> Answer {
        self.put(
            &format!("/v1/agents/{agent}/traffic"),
            ADMIN,
            json!({"weights": weights}),
        )
        .await
    }

    async fn create_thread_body(&self, client: &str, body: Value) -> Answer {
        self.post("/v1/threads", client, body).await
    }

    /// Runs one turn to its end and returns its `turn_started` and `turn_completed`.
    async fn turn(&self, client: &str, thread: &str, input: &str) -> (Value, Value) {
        let frames = self
            .start_turn(client, thread, input)
            .await
            .until_completed()
            .await;
        let started = frames.first().expect("turn_started").json();
        assert_eq!(started["kind"], "turn_started");
        let completed = frames.last().expect("turn_completed").json();
        assert_eq!(completed["kind"], "turn_completed", "{frames:?}");
        (started, completed)
    }
}

#[tokio::test]
async fn versions_move_draft_staging_production_and_only_drafts_change() {
    let api = Setup::new(vec![]).start().await;
    let listed = api.get("/v1/agents/chat/versions", "c1").await;
    assert_eq!(listed.status.as_u16(), 200, "{:?}", listed.body);
    assert_eq!(listed.body["traffic"], json!({"1.0.0": 100}));
    assert_eq!(listed.body["versions"][0]["baseline"], true);
    assert_eq!(listed.body["versions"][0]["stage"], "production");
    assert_eq!(
        listed.body["versions"][0]["spec"]["system_prompt"],
        "Answer briefly."
    );

    let created = api
        .post(
            "/v1/agents/chat/versions",
            ADMIN,
            json!({"version": "1.1.0", "spec": {"system_prompt": "Answer in one word."}}),
        )
        .await;
    assert_eq!(created.status.as_u16(), 201, "{:?}", created.body);
    assert_eq!(created.body["stage"], "draft");
    assert_eq!(created.body["weight"], 0);
    assert_eq!(created.body["created_by"], ADMIN);

    let edited = api
        .patch(
            "/v1/agents/chat/versions/1.1.0",
            ADMIN,
            json!({"system_prompt": "Answer in two words.", "max_steps": 3}),
        )
        .await;
    assert_eq!(edited.status.as_u16(), 200, "{:?}", edited.body);
    assert_eq!(edited.body["spec"]["system_prompt"], "Answer in two words.");
    assert_eq!(edited.body["spec"]["max_steps"], 3);

    // A draft takes no traffic and cannot be pinned.
    api.set_traffic("chat", json!({"1.1.0": 100}))
        .await
        .assert_error(409, "CONFLICT");
    api.create_thread_body(
        "c1",
        json!({"agent": "chat", "cwd": api.workspace.display().to_string(), "agent_version": "1.1.0"}),
    )
    .await
    .assert_error(409, "CONFLICT");

    let promote = "/v1/agents/chat/versions/1.1.0/promote";
    // No skipping a stage.
    api.post(promote, ADMIN, json!({"to": "production"}))
        .await
        .assert_error(409, "CONFLICT");
    let staged = api.post(promote, ADMIN, json!({})).await;
    assert_eq!(staged.body["stage"], "staging", "{:?}", staged.body);
    api.patch(
        "/v1/agents/chat/versions/1.1.0",
        ADMIN,
        json!({"system_prompt": "changed"}),
    )
    .await
    .assert_error(409, "CONFLICT");
    let released = api.post(promote, ADMIN, json!({"to": "production"})).await;
    assert_eq!(released.body["stage"], "production", "{:?}", released.body);

    // Production is immutable, and there is nothing beyond it.
    let frozen = api
        .patch(
            "/v1/agents/chat/versions/1.1.0",
            ADMIN,
            json!({"system_prompt": "changed"}),
        )
        .await;
    frozen.assert_error(409, "CONFLICT");
    assert!(
        frozen.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("immutable")),
        "{:?}",
        frozen.body
    );
    api.post(promote, ADMIN, json!({}))
        .await
        .assert_error(409, "CONFLICT");
    // The configured baseline is production too.
    api.patch(
        "/v1/agents/chat/versions/1.0.0",
        ADMIN,
        json!({"system_prompt": "changed"}),
    )
    .await
    .assert_error(409, "CONFLICT");
    let shown = api.get("/v1/agents/chat/versions/1.1.0", "c2").await;
    assert_eq!(shown.body["spec"]["system_prompt"], "Answer in two words.");

    // Semver must increase, and a number is used once.
    for taken in ["1.1.0", "1.0.9", "1.1.0-rc.1", "0.9.0"] {
        api.post("/v1/agents/chat/versions", ADMIN, json!({"version": taken}))
            .await
            .assert_error(409, "CONFLICT");
    }
    let next = api
        .post(
            "/v1/agents/chat/versions",
            ADMIN,
            json!({"version": "1.10.0", "from": "1.0.0"}),
        )
        .await;
    assert_eq!(next.status.as_u16(), 201, "{:?}", next.body);
    assert_eq!(next.body["spec"]["system_prompt"], "Answer briefly.");

    // The agent list shows versions and traffic.
    let agents = api.get("/v1/agents", "c1").await;
    let chat = agents.body["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .find(|a| a["name"] == "chat")
        .expect("chat")
        .clone();
    let versions: Vec<(&str, &str)> = chat["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .map(|v| {
            (
                v["version"].as_str().unwrap_or(""),
                v["stage"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        versions,
        [
            ("1.0.0", "production"),
            ("1.1.0", "production"),
            ("1.10.0", "draft")
        ]
    );
    assert_eq!(chat["traffic"], json!({"1.0.0": 100}));
}

#[tokio::test]
async fn hostile_version_bodies_are_refused_in_the_envelope_and_change_nothing() {
    let api = Setup::new(vec![]).extra_config(FILES_AGENT).start().await;
    let path = "/v1/agents/files/versions";
    let bad_bodies = [
        json!({"version": "v1.2.0"}),
        json!({"version": "1.2"}),
        json!({"version": "1.2.0+build.7"}),
        json!({"version": ""}),
        json!({"version": "9".repeat(100)}),
        json!({"version": "1.2.0\u{0000}"}),
        json!({"version": 120}),
        json!({"version": "1.2.0", "stage": "production"}),
        json!({"version": "1.2.0", "spec": {"shell_allow": ["sh"]}}),
        json!({"version": "1.2.0", "spec": {"network": {"allowed": true}}}),
        json!({"version": "1.2.0", "spec": {"ensembles": ["shell"]}}),
        json!({"version": "1.2.0", "spec": {"ensembles": ["fs", "fs"]}}),
        json!({"version": "1.2.0", "spec": {"system_prompt": "   "}}),
        json!({"version": "1.2.0", "spec": {"system_prompt": "x".repeat(70_000)}}),
        json!({"version": "1.2.0", "spec": {"max_steps": 0}}),
        json!({"version": "1.2.0", "spec": {"max_steps": -1}}),
        json!({"version": "1.2.0", "spec": {"tool_output_cap_bytes": 10}}),
        json!({"version": "1.2.0", "spec": {"output_schema": {"type": "string"}}}),
        json!({"version": "1.2.0", "spec": {"output_schema": {"type": "object", "properties": 5}}}),
        json!({"version": "1.2.0", "spec": {"model": "m\u{0007}"}}),
        json!({"version": "1.2.0", "from": "7.7.7"}),
        json!(["1.2.0"]),
        json!(null),
    ];
    for body in bad_bodies {
        let answer = api.post(path, ADMIN, body.clone()).await;
        assert_eq!(answer.status.as_u16(), 400, "{body} -> {:?}", answer.body);
        answer.assert_error(400, "INVALID_ARGUMENT");
    }
    // Not JSON at all.
    let raw = api
        .send(
            api.request(Method::POST, path, Some(ADMIN))
                .header("content-type", "application/json")
                .body("{\"version\":"),
        )
        .await;
    raw.assert_error(400, "INVALID_ARGUMENT");
    let listed = api.get(path, ADMIN).await;
    assert_eq!(listed.body["versions"].as_array().map(Vec::len), Some(1));

    // Traffic: weights are percentages over known production versions.
    for weights in [
        json!({}),
        json!({"1.0.0": 90}),
        json!({"1.0.0": 101}),
        json!({"1.0.0": -10, "2.0.0": 110}),
        json!({"9.9.9": 100}),
        json!({"../../etc": 100}),
        json!({"1.0.0": 4294967295u64, "x": 1}),
        json!({"1.0.0": 50.5, "2.0.0": 49.5}),
    ] {
        api.set_traffic("files", weights)
            .await
            .assert_error(400, "INVALID_ARGUMENT");
    }
    api.put(
        "/v1/agents/files/traffic",
        ADMIN,
        json!({"weights": {"1.0.0": 100}, "x": 1}),
    )
    .await
    .assert_error(400, "INVALID_ARGUMENT");
    assert_eq!(api.get(path, ADMIN).await.body["traffic_changes"], 0);

    // Unknown agents and versions are 404, whatever the path holds.
    api.get("/v1/agents/nobody/versions", "c1")
        .await
        .assert_error(404, "NOT_FOUND");
    api.get("/v1/agents/files/versions/..%2F..%2Fetc", "c1")
        .await
        .assert_error(404, "NOT_FOUND");
    api.patch("/v1/agents/files/versions/3.0.0", ADMIN, json!({}))
        .await
        .assert_error(404, "NOT_FOUND");
    api.post("/v1/agents/files/traffic/rollback", ADMIN, json!({}))
        .await
        .assert_error(409, "CONFLICT");
    // A shadow must be a created, non-draft version.
    api.put(
        "/v1/agents/files/shadow",
        ADMIN,
        json!({"version": "1.0.0"}),
    )
    .await
    .assert_error(409, "CONFLICT");
    api.put(
        "/v1/agents/files/shadow",
        ADMIN,
        json!({"version": "4.0.0"}),
    )
    .await
    .assert_error(404, "NOT_FOUND");
    // Pinning a thread to what does not exist.
    api.create_thread_body(
        "c1",
        json!({"agent": "files", "cwd": api.workspace.display().to_string(), "agent_version": "5.0.0"}),
    )
    .await
    .assert_error(400, "INVALID_ARGUMENT");
}

#[tokio::test]
async fn a_90_10_canary_over_1000_new_threads_lands_within_bounds_and_threads_stay_on_their_version()
 {
    // Turns of the sticky part below: 2 threads × 3 turns, one text answer each.
    let steps = (0..6).map(|i| Step::text(format!("answer {i}"))).collect();
    let api = Setup::new(steps).start().await;
    api.release("chat", "1.1.0", "You are the canary.", "production")
        .await;
    let split = api
        .set_traffic("chat", json!({"1.0.0": 90, "1.1.0": 10}))
        .await;
    assert_eq!(split.status.as_u16(), 200, "{:?}", split.body);
    assert_eq!(split.body["traffic"], json!({"1.0.0": 90, "1.1.0": 10}));

    let cwd = api.workspace.display().to_string();
    let mut on_canary = Vec::new();
    let mut on_stable = Vec::new();
    for _ in 0..1000 {
        let created = api
            .create_thread_body("c1", json!({"agent": "chat", "cwd": cwd}))
            .await;
        assert_eq!(created.status.as_u16(), 201, "{:?}", created.body);
        let id = created.body["id"].as_str().expect("id").to_owned();
        match created.body["agent_version"].as_str() {
            Some("1.1.0") => on_canary.push(id),
            Some("1.0.0") => on_stable.push(id),
            other => panic!("thread on {other:?}"),
        }
    }
    // 10% of 1,000 is 100; sigma = sqrt(1000 × 0.1 × 0.9) ≈ 9.49; ±5 sigma.
    let canary = on_canary.len();
    assert!(
        (53..=147).contains(&canary),
        "{canary} of 1000 threads on the 10% canary"
    );
    assert_eq!(canary + on_stable.len(), 1000);

    // Each thread keeps its version over several turns, also after the split changes.
    api.set_traffic("chat", json!({"1.0.0": 10, "1.1.0": 90}))
        .await;
    for (thread, version, prompt) in [
        (&on_canary[0], "1.1.0", "You are the canary."),
        (&on_stable[0], "1.0.0", "Answer briefly."),
    ] {
        let shown = api.get(&format!("/v1/threads/{thread}"), "c1").await;
        assert_eq!(shown.body["agent_version"], version);
        for i in 0..3 {
            let (started, _) = api.turn("c1", thread, &format!("question {i}")).await;
            assert_eq!(started["agent_version"], version, "{started}");
            let request = api.scripted.requests().pop().expect("a chat request");
            assert_eq!(request["messages"][0]["content"], prompt, "{request}");
        }
        let history = api
            .get(&format!("/v1/threads/{thread}/history"), "c1")
            .await;
        let turns = history.body["turns"].as_array().expect("turns");
        assert_eq!(turns.len(), 3);
        for turn in turns {
            assert_eq!(turn["agent_version"], version, "{turn}");
        }
    }
}

#[tokio::test]
async fn rollback_restores_the_previous_split_and_pinned_threads_stay() {
    let api = Setup::new(vec![]).start().await;
    api.release("chat", "1.1.0", "New prompt.", "production")
        .await;
    api.set_traffic("chat", json!({"1.0.0": 90, "1.1.0": 10}))
        .await;
    let half = api
        .set_traffic("chat", json!({"1.0.0": 50, "1.1.0": 50}))
        .await;
    assert_eq!(half.body["rollback_to"], json!({"1.0.0": 90, "1.1.0": 10}));
    let all_new = api.set_traffic("chat", json!({"1.1.0": 100})).await;
    assert_eq!(all_new.body["traffic"], json!({"1.1.0": 100}));
    let cwd = api.workspace.display().to_string();
    let pinned = api
        .create_thread_body("c1", json!({"agent": "chat", "cwd": cwd}))
        .await;
    assert_eq!(pinned.body["agent_version"], "1.1.0");

    let rollback = "/v1/agents/chat/traffic/rollback";
    let back = api.post(rollback, ADMIN, json!({})).await;
    assert_eq!(back.status.as_u16(), 200, "{:?}", back.body);
    assert_eq!(back.body["traffic"], json!({"1.0.0": 50, "1.1.0": 50}));
    let back = api.post(rollback, ADMIN, json!({})).await;
    assert_eq!(back.body["traffic"], json!({"1.0.0": 90, "1.1.0": 10}));
    let back = api.post(rollback, ADMIN, json!({})).await;
    assert_eq!(back.body["traffic"], json!({"1.0.0": 100}));
    assert_eq!(back.body["rollback_to"], Value::Null);
    // Six changes recorded: three sets, three rollbacks.
    assert_eq!(back.body["traffic_changes"], 6);
    api.post(rollback, ADMIN, json!({}))
        .await
        .assert_error(409, "CONFLICT");

    // New threads follow the restored split; the pinned one stays where it was.
    for _ in 0..20 {
        let created = api
            .create_thread_body("c1", json!({"agent": "chat", "cwd": cwd}))
            .await;
        assert_eq!(created.body["agent_version"], "1.0.0");
    }
    let id = pinned.body["id"].as_str().expect("id");
    let shown = api.get(&format!("/v1/threads/{id}"), "c1").await;
    assert_eq!(shown.body["agent_version"], "1.1.0");
}

#[tokio::test]
async fn a_shadow_version_records_side_effecting_calls_without_executing_them() {
    let steps = vec![
        // The production turn (baseline 1.0.0): a plain answer.
        Step::text("production answer"),
        // Its shadow copy (1.1.0, staging): a write that must not happen, a read that
        // must, then an answer.
        Step::tool_call(
            "write_file",
            json!({"path": "shadow.txt", "content": "from the shadow"}),
        ),
        Step::tool_call("read_file", json!({"path": "seed.txt"})),
        Step::text("shadow answer"),
    ];
    let api = Setup::new(steps).extra_config(FILES_AGENT).start().await;
    std::fs::write(api.workspace.join("seed.txt"), "seeded").expect("seed file");
    api.release("files", "1.1.0", "You are the shadow.", "staging")
        .await;
    let shadowed = api
        .put(
            "/v1/agents/files/shadow",
            ADMIN,
            json!({"version": "1.1.0"}),
        )
        .await;
    assert_eq!(shadowed.status.as_u16(), 200, "{:?}", shadowed.body);
    assert_eq!(shadowed.body["shadow"], "1.1.0");

    let thread = api.create_thread("c1", "files").await;
    let (started, completed) = api.turn("c1", &thread, "write shadow.txt").await;
    assert_eq!(started["agent_version"], "1.0.0");
    assert_eq!(completed["result"], json!({"text": "production answer"}));

    // The shadow ran on a hidden thread linked to this one.
    let mut shadow_thread = None;
    let deadline = std::time::Instant::now() + PATIENCE;
    while std::time::Instant::now() < deadline {
        let listed = api
            .get(&format!("/v1/threads/{thread}/shadows"), "c1")
            .await;
        if let Some(t) = listed.body["threads"].as_array().and_then(|t| t.first()) {
            let id = t["id"].as_str().expect("id").to_owned();
            let history = api
                .get(&format!("/v1/threads/{id}/history?includeEvents=1"), "c1")
                .await;
            if history.body["turns"][0]["status"] == "ended" {
                shadow_thread = Some((id, history.body));
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let (shadow_id, history) = shadow_thread.expect("a finished shadow run");
    assert_eq!(history["thread"]["agent_version"], "1.1.0");
    let turn = &history["turns"][0];
    assert_eq!(turn["agent_version"], "1.1.0");
    assert_eq!(turn["result"], json!({"text": "shadow answer"}));
    let events = turn["events"].as_array().expect("events");
    assert_eq!(events[0]["shadow_of"], thread.as_str());
    let results: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "tool_call_result")
        .collect();
    assert_eq!(results.len(), 2, "{events:?}");
    assert_eq!(results[0]["tool"], "write_file");
    assert_eq!(results[0]["status"], "error");
    assert_eq!(results[0]["error_type"], "not_executed_in_shadow");
    assert_eq!(results[1]["tool"], "read_file");
    assert_eq!(results[1]["status"], "ok");
    assert!(
        results[1]["output"]
            .as_str()
            .is_some_and(|o| o.contains("seeded")),
        "{:?}",
        results[1]
    );
    assert!(
        !api.workspace.join("shadow.txt").exists(),
        "a shadow run must not write"
    );
    // The shadow saw its own system prompt.
    let requests = api.scripted.requests();
    assert_eq!(
        requests[0]["messages"][0]["content"],
        "You are version one."
    );
    assert_eq!(requests[1]["messages"][0]["content"], "You are the shadow.");

    // Hidden from the client's thread list; the original is untouched.
    let listed = api.get("/v1/threads", "c1").await;
    let ids: Vec<&str> = listed.body["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert_eq!(ids, [thread.as_str()]);
    assert!(!ids.contains(&shadow_id.as_str()));
    let original = api.stored_thread_events(&thread).await;
    assert!(
        original
            .iter()
            .all(|e| e.payload.kind() != "tool_call_planned"),
        "{original:?}"
    );
    // A shadow thread runs shadow copies only: no client turn runs side effects there.
    api.post(
        &format!("/v1/threads/{shadow_id}/turns"),
        "c1",
        json!({"input": "write it for real"}),
    )
    .await
    .assert_error(409, "CONFLICT");
    assert!(!api.workspace.join("shadow.txt").exists());
    // Another client cannot see the shadows of c1's thread.
    api.get(&format!("/v1/threads/{thread}/shadows"), "c2")
        .await
        .assert_error(404, "NOT_FOUND");
}

#[tokio::test]
async fn only_the_configured_admins_change_versions() {
    let api = Setup::new(vec![])
        .extra_config(&format!("[versions]\nadmins = [\"{ADMIN}\"]\n"))
        .start()
        .await;
    let create = json!({"version": "2.0.0"});
    api.post("/v1/agents/chat/versions", "intruder", create.clone())
        .await
        .assert_error(403, "FORBIDDEN");
    api.put(
        "/v1/agents/chat/traffic",
        "intruder",
        json!({"weights": {"1.0.0": 100}}),
    )
    .await
    .assert_error(403, "FORBIDDEN");
    api.post("/v1/agents/chat/traffic/rollback", "intruder", json!({}))
        .await
        .assert_error(403, "FORBIDDEN");
    // Reading is open.
    assert_eq!(
        api.get("/v1/agents/chat/versions", "intruder")
            .await
            .status
            .as_u16(),
        200
    );
    let created = api.post("/v1/agents/chat/versions", ADMIN, create).await;
    assert_eq!(created.status.as_u16(), 201, "{:?}", created.body);
}
