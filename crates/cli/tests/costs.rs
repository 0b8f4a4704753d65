//! `agentplane costs`: the real binary against a SQLite file prepared through
//! `agentplane-sqlite` (threads, turns and `cost` events appended as the turn loop
//! does): the table, JSON, groupings, client scoping and refused arguments; and the
//! same report from a PostgreSQL database, which the runtime opens for it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use agentplane_core::ReplicaId;
use agentplane_core::{EventPayload, StopReason, ThreadId, TurnId, usd_of_micros};
use agentplane_engine::ports::{EventStore, NewThread};
use agentplane_postgres::PostgresStore;
use agentplane_sqlite::SqliteStore;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_agentplane");

/// A temp dir with `agentplane.toml` pointing at `events.db` beside it.
struct Sandbox {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Sandbox {
    fn new() -> Self {
        Self::with_store("path = \"events.db\"")
    }

    /// A sandbox whose `[store]` section is `store`.
    fn with_store(store: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().to_path_buf();
        std::fs::write(root.join("agentplane.toml"), format!("[store]\n{store}\n"))
            .expect("config");
        Self { _dir: dir, root }
    }

    fn db(&self) -> PathBuf {
        self.root.join("events.db")
    }

    async fn costs(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(BIN);
        cmd.current_dir(&self.root)
            .arg("--config")
            .arg(self.root.join("agentplane.toml"))
            .arg("costs")
            .args(args)
            .env_remove("AGENTPLANE_CONFIG")
            .env_remove("AGENTPLANE_DB")
            .env("AGENTPLANE_LOG", "warn")
            .stdin(Stdio::null());
        tokio::task::spawn_blocking(move || cmd.output())
            .await
            .expect("join")
            .expect("the binary runs")
    }
}

/// A thread of `client` and a finished turn whose model calls cost these
/// `(model, input tokens, output tokens, micro-dollars)`. Returns the ids.
async fn spend(
    store: &dyn EventStore,
    client: &str,
    agent: &str,
    calls: &[(&str, u64, u64, u64)],
) -> (ThreadId, TurnId) {
    let thread = store
        .create_thread(NewThread {
            agent_version: None,
            id: ThreadId::new(),
            client_id: client.into(),
            agent: agent.into(),
            cwd: "/tmp/work".into(),
            title: None,
        })
        .await
        .expect("thread")
        .id;
    let turn = TurnId::new();
    store
        .begin_turn(&thread, &turn, "spend", false)
        .await
        .expect("turn");
    for &(model, input_tokens, output_tokens, usd_micros) in calls {
        store
            .append(
                &thread,
                &turn,
                EventPayload::Cost {
                    provider: "openai".into(),
                    model: model.into(),
                    input_tokens,
                    output_tokens,
                    usd_micros,
                    usd: usd_of_micros(usd_micros),
                },
            )
            .await
            .expect("cost event");
    }
    store
        .complete_turn(&thread, &turn, StopReason::Finished, Value::Null)
        .await
        .expect("complete");
    (thread, turn)
}

/// Local runs on two agents and another client's spend.
async fn prepare(db: &Path) -> (ThreadId, TurnId, ThreadId) {
    let store = SqliteStore::open(db).await.expect("store");
    let (local, turn) = spend(
        &store,
        "local",
        "engineering",
        &[
            ("gpt-4o", 1_000, 100, 3_500),
            ("gpt-4o-mini", 10_000, 1_000, 2_100),
        ],
    )
    .await;
    spend(&store, "local", "review", &[("gpt-4o", 1, 1, 13)]).await;
    let (alice, _) = spend(
        &store,
        "alice",
        "engineering",
        &[("gpt-4o", 1_000_000, 0, 2_500_000)],
    )
    .await;
    (local, turn, alice)
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json_of(out: &Output) -> Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(out)))
}

#[tokio::test]
async fn the_table_groups_the_local_clients_costs_with_a_total() {
    let sandbox = Sandbox::new();
    prepare(&sandbox.db()).await;
    let out = sandbox.costs(&[]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines,
        vec![
            vec![
                "AGENT", "CALLS", "INPUT", "TOKENS", "OUTPUT", "TOKENS", "USD"
            ],
            vec!["engineering", "2", "11000", "1100", "0.005600"],
            vec!["review", "1", "1", "1", "0.000013"],
            vec!["TOTAL", "3", "11001", "1101", "0.005613"],
        ],
        "{text}"
    );
}

#[tokio::test]
async fn json_groupings_and_client_scoping() {
    let sandbox = Sandbox::new();
    let (local, turn, alice) = prepare(&sandbox.db()).await;

    let by_model = json_of(&sandbox.costs(&["--group-by", "model", "--json"]).await);
    assert_eq!(
        by_model,
        json!({
            "group_by": "model",
            "rows": [
                {"key": "gpt-4o", "calls": 2, "input_tokens": 1_001, "output_tokens": 101,
                 "usd_micros": 3_513, "usd": 0.003513},
                {"key": "gpt-4o-mini", "calls": 1, "input_tokens": 10_000,
                 "output_tokens": 1_000, "usd_micros": 2_100, "usd": 0.0021},
            ],
            "total": {"calls": 3, "input_tokens": 11_001, "output_tokens": 1_101,
                      "usd_micros": 5_613, "usd": 0.005613},
        })
    );

    let everyone = json_of(
        &sandbox
            .costs(&["--group-by", "client", "--all-clients", "--json"])
            .await,
    );
    let clients: Vec<(&str, u64)> = everyone["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap_or(""),
                r["usd_micros"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(clients, [("alice", 2_500_000), ("local", 5_613)]);

    let as_alice = json_of(&sandbox.costs(&["--client", "alice", "--json"]).await);
    assert_eq!(as_alice["total"]["usd_micros"], 2_500_000);
    assert_eq!(as_alice["total"]["usd"], 2.5);

    let per_turn = json_of(
        &sandbox
            .costs(&["--group-by", "turn", "--thread", local.as_str(), "--json"])
            .await,
    );
    assert_eq!(per_turn["rows"][0]["key"], turn.as_str());
    assert_eq!(per_turn["rows"].as_array().map(Vec::len), Some(1));
    assert_eq!(per_turn["total"]["usd_micros"], 5_600);

    // Someone else's thread is not found for `local`.
    let out = sandbox.costs(&["--thread", alice.as_str()]).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("NOT_FOUND"), "{}", stderr(&out));

    let future = json_of(
        &sandbox
            .costs(&["--since", "2999-01-01T00:00:00Z", "--json"])
            .await,
    );
    assert_eq!(future["rows"], json!([]));
    assert_eq!(future["total"]["calls"], 0);
}

#[tokio::test]
async fn bad_arguments_exit_2_with_the_code() {
    let sandbox = Sandbox::new();
    prepare(&sandbox.db()).await;
    let cases: [&[&str]; 8] = [
        &["--group-by", "nope"],
        &["--group-by", "Agent"],
        &["--group-by", "turn"],
        &["--since", "yesterday"],
        &["--until", "2026-01-01"],
        &[
            "--since",
            "2026-02-01T00:00:00Z",
            "--until",
            "2026-01-01T00:00:00Z",
        ],
        &["--thread", "thr_../../etc/passwd"],
        &["--thread", "turn_0197a6c0f0a07c3a8b1e5f2d3c4b5a69"],
    ];
    for args in cases {
        let out = sandbox.costs(args).await;
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("error [INVALID_ARGUMENT]"),
            "{args:?}: {}",
            stderr(&out)
        );
        assert!(stdout(&out).is_empty(), "{args:?}: {}", stdout(&out));
    }
    // clap refuses conflicting scopes before anything runs.
    let out = sandbox.costs(&["--client", "x", "--all-clients"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[tokio::test]
async fn an_empty_store_reports_zero() {
    let sandbox = Sandbox::new();
    let out = sandbox.costs(&[]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let last = text.lines().last().expect("a total line");
    assert_eq!(
        last.split_whitespace().collect::<Vec<_>>(),
        ["TOTAL", "0", "0", "0", "0.000000"]
    );
}

#[tokio::test]
async fn costs_are_reported_from_a_postgresql_store_too() {
    let Some(url) = agentplane_suites::postgres::service("AGENTPLANE_TEST_POSTGRES_URL") else {
        return;
    };
    let (db, name) = agentplane_suites::postgres::fresh_database(&url).await;
    {
        let store = PostgresStore::connect(&db, ReplicaId::new())
            .await
            .expect("the PostgreSQL store");
        spend(
            &store,
            "local",
            "engineering",
            &[("gpt-4o", 1_000, 100, 3_500)],
        )
        .await;
        spend(&store, "alice", "engineering", &[("gpt-4o", 7, 7, 9)]).await;
    }
    let sandbox = Sandbox::with_store(&format!("url = \"{db}\""));
    let out = sandbox.costs(&["--json"]).await;
    agentplane_suites::postgres::drop_database(&url, &name).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let report = json_of(&out);
    assert_eq!(report["total"]["usd_micros"], 3_500, "{report}");
    assert_eq!(
        report["total"]["calls"], 1,
        "only the local client's: {report}"
    );
}
