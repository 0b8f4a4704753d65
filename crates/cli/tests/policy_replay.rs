//! `agentplane policy replay DIR`: real turns recorded by `agentplane serve` with the
//! scripted model (calls allowed, one denied by `tool_access`, one sent for approval,
//! a turn refused at admission by `time_window`, and, under `[retention] tool_args =
//! "hash"`, a call kept only as a hash), then replayed by the real binary against a
//! candidate policies directory: the changed decisions with their arrows and the
//! candidate's explanations, the totals, `--fail-on-change`, the filters, `--json`, a
//! malformed `--since`; on the SQLite file and, when `AGENTPLANE_TEST_POSTGRES_URL` is
//! set, on PostgreSQL.

use std::path::Path;
use std::process::Output;

use agentplane_suites::{Sandbox, Served, SseReader, command, sandbox, start_with_env};
use agentplane_testkit::{Scenario, ScriptedServer, ScriptedToolCall, Step};
use serde_json::{Value, json};

const AGENTS: &str = "[agents.coder]\nsystem_prompt = \"You write.\"\nensembles = [\"fs\"]\n\
                      tags = [\"team-a\"]\n\
                      [agents.nightly]\nsystem_prompt = \"You chat.\"\n\
                      [policies]\ndir = \"policies\"\n";

/// The policies in force when the turns ran. `night-shift` admits `nightly` only in an
/// hour six hours from now, so its turn is refused.
fn current_policies() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let hour = secs / 3600 % 24;
    let from = (hour + 6) % 24;
    format!(
        "- name: no-listing\n  type: tool_access\n  targets: {{agents: [coder]}}\n  \
         rules: {{deny: [list_files]}}\n\
         - name: review-drafts\n  type: approval_required\n  targets: {{tools: [write_file]}}\n  \
         when: {{arg: /path, glob: 'draft*'}}\n\
         - name: night-shift\n  type: time_window\n  targets: {{agents: [nightly]}}\n  \
         rules: {{timezone: UTC, hours: \"{from:02}:00-{:02}:00\"}}\n",
        (from + 1) % 24
    )
}

/// The candidate: writing `secret*` is denied to `team-a`'s agents, listing is no
/// longer denied, `nightly` has no time window; drafts still need a person.
const CANDIDATE: &str = "- name: no-secrets\n  type: tool_access\n  targets: {tags: [team-a]}\n  \
     when: {arg: /path, glob: 'secret*'}\n  rules: {deny: [write_file]}\n\
     - name: review-drafts\n  type: approval_required\n  targets: {tools: [write_file]}\n  \
     when: {arg: /path, glob: 'draft*'}\n";

fn call(id: &str, tool: &str, arguments: Value) -> Step {
    Step::tool_calls(vec![ScriptedToolCall {
        id: Some(id.to_owned()),
        name: tool.to_owned(),
        arguments,
    }])
}

/// A request to the server as `client`.
fn api(
    served: &Served,
    client: &str,
    method: reqwest::Method,
    path: &str,
) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .request(method, format!("{}{path}", served.base))
        .header("X-Client-ID", client)
}

async fn thread_of(served: &Served, sb: &Sandbox, client: &str, agent: &str) -> String {
    let response = api(served, client, reqwest::Method::POST, "/v1/threads")
        .json(&json!({"agent": agent, "cwd": sb.workspace}))
        .send()
        .await
        .expect("create thread");
    assert_eq!(response.status(), 201, "{}", served.stderr());
    let body: Value = response.json().await.expect("thread JSON");
    body["id"].as_str().expect("thread id").to_owned()
}

/// Runs a turn until its event `until`; the HTTP status of its start.
async fn turn(served: &Served, client: &str, thread: &str, until: &str) -> u16 {
    let response = api(
        served,
        client,
        reqwest::Method::POST,
        &format!("/v1/threads/{thread}/turns"),
    )
    .json(&json!({"input": "go"}))
    .send()
    .await
    .expect("start turn");
    let status = response.status().as_u16();
    if status == 200 {
        SseReader::from_response(response).until(until).await;
    }
    status
}

/// The store the servers and the replay share: `AGENTPLANE_DB`, or the SQLite file.
struct Recorded {
    sb: Sandbox,
    env: Vec<(&'static str, String)>,
    /// Thread ids: tester's coder thread, other's coder thread, tester's nightly
    /// thread, the thread written under hash retention.
    coder: String,
    other: String,
    nightly: String,
    hashed: String,
    _model: ScriptedServer,
}

impl Recorded {
    async fn replay(&self, args: &[&str]) -> Output {
        let mut cmd = command(&self.sb, "http://127.0.0.1:9/v1");
        cmd.args(["policy", "replay"])
            .args(args)
            .env("AGENTPLANE_LOG", "warn")
            .envs(self.env.iter().map(|(k, v)| (*k, v.as_str())));
        tokio::task::spawn_blocking(move || cmd.output())
            .await
            .expect("join")
            .expect("agentplane policy replay runs")
    }

    fn candidate(&self) -> String {
        self.sb.base.join("candidate").display().to_string()
    }

    fn current(&self) -> String {
        self.sb.root.join("policies").display().to_string()
    }
}

async fn serve(sb: &Sandbox, model: &ScriptedServer, env: &[(&'static str, String)]) -> Served {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    start_with_env(sb, &model.base_url(), &[], &env).await
}

/// Records the turns: the first server with full arguments, the second (after the
/// first stopped) with `tool_args = "hash"`.
async fn record(env: Vec<(&'static str, String)>) -> Recorded {
    let model = ScriptedServer::start(Scenario::new(vec![
        // tester, coder: a write the candidate denies.
        call(
            "w-secret",
            "write_file",
            json!({"path": "secret.txt", "content": "s"}),
        ),
        Step::text("done"),
        // tester, coder: a write nobody denies, then a listing denied now.
        call(
            "w-notes",
            "write_file",
            json!({"path": "notes.txt", "content": "n"}),
        ),
        call("l-root", "list_files", json!({"path": "."})),
        Step::text("done"),
        // other, coder: a read nobody denies.
        call("r-notes", "read_file", json!({"path": "notes.txt"})),
        Step::text("done"),
        // tester, coder: a draft that waits for a person (left waiting).
        call(
            "w-draft",
            "write_file",
            json!({"path": "draft.txt", "content": "d"}),
        ),
        // Under hash retention: a write the candidate would deny, kept as a hash.
        call(
            "w-hashed",
            "write_file",
            json!({"path": "secret2.txt", "content": "h"}),
        ),
        Step::text("done"),
    ]))
    .await
    .expect("model");
    let sb = sandbox(AGENTS);
    std::fs::create_dir(sb.root.join("policies")).expect("policies dir");
    std::fs::write(sb.root.join("policies/current.yaml"), current_policies()).expect("policy");
    std::fs::create_dir(sb.base.join("candidate")).expect("candidate dir");
    std::fs::write(sb.base.join("candidate/candidate.yaml"), CANDIDATE).expect("candidate");

    let served = serve(&sb, &model, &env).await;
    let coder = thread_of(&served, &sb, "tester", "coder").await;
    assert_eq!(turn(&served, "tester", &coder, "turn_completed").await, 200);
    assert_eq!(turn(&served, "tester", &coder, "turn_completed").await, 200);
    let other = thread_of(&served, &sb, "other", "coder").await;
    assert_eq!(turn(&served, "other", &other, "turn_completed").await, 200);
    let nightly = thread_of(&served, &sb, "tester", "nightly").await;
    assert_eq!(
        turn(&served, "tester", &nightly, "turn_completed").await,
        403
    );
    assert_eq!(
        turn(&served, "tester", &coder, "approval_requested").await,
        200
    );
    drop(served);

    let config = sb.root.join("agentplane.toml");
    let mut text = std::fs::read_to_string(&config).expect("config");
    text.push_str("[retention]\ntool_args = \"hash\"\n");
    std::fs::write(&config, text).expect("config");
    let served = serve(&sb, &model, &env).await;
    let hashed = thread_of(&served, &sb, "tester", "coder").await;
    assert_eq!(
        turn(&served, "tester", &hashed, "turn_completed").await,
        200
    );
    drop(served);

    Recorded {
        sb,
        env,
        coder,
        other,
        nightly,
        hashed,
        _model: model,
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The lines of `text` from the one starting with `header` up to the next `CHANGED`.
fn block<'t>(text: &'t str, header: &str) -> Vec<&'t str> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with(header));
    let Some(first) = lines.next() else {
        panic!("no `{header}` in:\n{text}");
    };
    std::iter::once(first)
        .chain(lines.take_while(|l| l.starts_with("    ")))
        .collect()
}

async fn replays_recorded_traffic(r: &Recorded) {
    let candidate = r.candidate();
    let out = r.replay(&[&candidate]).await;
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));

    // The write of `secret.txt` would now be denied, by the candidate's policy.
    let secret = block(&text, &format!("CHANGED {} ", r.coder));
    assert!(
        secret[0].ends_with(" w-secret write_file: allow -> deny"),
        "{text}"
    );
    assert!(
        secret[1].starts_with("    decision: deny by `no-secrets` (policy set sha256:"),
        "{text}"
    );
    assert!(
        secret
            .iter()
            .any(|l| l.contains("no-secrets (tool_access, candidate.yaml): match")),
        "{text}"
    );
    // The listing would now run.
    let listing: Vec<&str> = text
        .lines()
        .filter(|l| l.ends_with(" l-root list_files: deny -> allow"))
        .collect();
    assert_eq!(listing.len(), 1, "{text}");
    assert!(listing[0].starts_with(&format!("CHANGED {} ", r.coder)));
    let listing = block(&text, listing[0]);
    assert!(
        listing[1].starts_with("    decision: allow (policy set"),
        "{text}"
    );
    // The nightly turn would now be admitted.
    let admission = block(&text, &format!("CHANGED {} ", r.nightly));
    assert!(
        admission[0].ends_with(" admission of nightly: deny -> allow"),
        "{text}"
    );
    assert!(
        admission[2].starts_with("    reason: no policy selects"),
        "{text}"
    );
    // Unchanged decisions and the hash-only call are not listed.
    for quiet in ["w-notes", "r-notes", "w-draft", "w-hashed"] {
        assert!(!text.contains(&format!(" {quiet} ")), "{quiet}: {text}");
    }
    assert!(
        !text.contains(&r.other) && !text.contains(&r.hashed),
        "{text}"
    );
    assert_eq!(text.matches("CHANGED ").count(), 3, "{text}");
    // Six admissions and five calls replayed; the hash-only call is not.
    assert_eq!(
        text.lines().last(),
        Some(
            "11 decisions replayed, 3 changed (allow->deny 1, deny->allow 2), 8 unchanged, \
             1 not replayable (hash-only arguments 1, stateful refusals 0, content refusals 0)"
        ),
        "{text}"
    );

    let out = r.replay(&[&candidate, "--fail-on-change"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(stdout(&out), text);

    // The policies in force change nothing.
    let current = r.current();
    let out = r.replay(&[&current, "--fail-on-change"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "11 decisions replayed, 0 changed, 11 unchanged, 1 not replayable \
         (hash-only arguments 1, stateful refusals 0, content refusals 0)\n"
    );

    // Filters: one client, one agent, a recent window.
    let out = r.replay(&[&candidate, "--client", "other"]).await;
    assert_eq!(
        stdout(&out),
        "2 decisions replayed, 0 changed, 2 unchanged, 0 not replayable \
         (hash-only arguments 0, stateful refusals 0, content refusals 0)\n",
        "{}",
        stderr(&out)
    );
    let out = r
        .replay(&[&candidate, "--agent", "nightly", "--fail-on-change"])
        .await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.matches("CHANGED ").count(), 1, "{text}");
    assert!(text.ends_with(
        "1 decisions replayed, 1 changed (deny->allow 1), 0 unchanged, 0 not replayable \
         (hash-only arguments 0, stateful refusals 0, content refusals 0)\n"
    ));
    let out = r.replay(&[&candidate, "--since", "1h"]).await;
    assert!(stdout(&out).ends_with("11 decisions replayed, 3 changed (allow->deny 1, deny->allow 2), 8 unchanged, 1 not replayable (hash-only arguments 1, stateful refusals 0, content refusals 0)\n"));
    let out = r.replay(&[&candidate, "--client", "nobody"]).await;
    assert!(stdout(&out).starts_with("0 decisions replayed, 0 changed"));

    // JSON: the same report.
    let out = r.replay(&[&candidate, "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(
        report["totals"],
        json!({
            "replayed": 11, "changed": 3, "unchanged": 8,
            "transitions": {"allow->deny": 1, "deny->allow": 2},
            "not_replayable": 1, "hash_only": 1, "stateful": 0, "content": 0,
        })
    );
    let changes = report["changes"].as_array().expect("changes");
    let secret = changes
        .iter()
        .find(|c| c["call_id"] == "w-secret")
        .expect("the secret write");
    assert_eq!(secret["kind"], "call");
    assert_eq!(secret["tool"], "write_file");
    assert_eq!(secret["client"], "tester");
    assert_eq!(secret["was"], "allow");
    assert_eq!(secret["now"], "deny");
    assert_eq!(secret["explanation"]["decided_by"], "no-secrets");
    let admission = changes
        .iter()
        .find(|c| c["kind"] == "admission")
        .expect("the admission");
    assert_eq!(admission["thread"], r.nightly.as_str());
    assert_eq!(admission["agent"], "nightly");

    // A malformed duration is a usage error, said plainly.
    let out = r.replay(&[&candidate, "--since", "7days"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out).trim(),
        "error: --since: `7days` is not a duration like 30s, 5m, 1h or 1d"
    );
    assert!(stdout(&out).is_empty());
    // So is a candidate that does not load.
    let out = r.replay(&["/nonexistent/policies"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_recorded_in_sqlite_are_replayed_against_a_candidate() {
    let recorded = record(Vec::new()).await;
    assert!(Path::new(&recorded.sb.db).exists());
    replays_recorded_traffic(&recorded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_recorded_in_postgresql_are_replayed_against_a_candidate() {
    let Some(url) = agentplane_suites::postgres::service("AGENTPLANE_TEST_POSTGRES_URL") else {
        return;
    };
    let (db, name) = agentplane_suites::postgres::fresh_database(&url).await;
    let recorded = record(vec![("AGENTPLANE_DB", db)]).await;
    assert!(!recorded.sb.db.exists(), "the SQLite file is not used");
    replays_recorded_traffic(&recorded).await;
    drop(recorded);
    agentplane_suites::postgres::drop_database(&url, &name).await;
}
