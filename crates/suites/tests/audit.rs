//! The audit chain through the real binary (ADR 0048, `docs/audit.md`): turns run on a
//! server, then `agentplane audit verify` passes and its export passes
//! `scripts/audit_verify.py` (standard-library Python, the documented algorithm only);
//! one payload edited behind the store's back — with the `sqlite3` command line on
//! SQLite, with `psql` on PostgreSQL — makes both fail, naming the thread and the seq.
//! `GET /v1/threads/{id}/audit` gives the head the export ends with. The gateway's model
//! calls form a chain of their own, checked the same ways.

use std::process::Command;

use agentplane_suites::postgres::{drop_database, fresh_database, service};
use agentplane_suites::{Sandbox, Served, SseReader, api, audit, create_thread, sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use reqwest::Method;
use serde_json::Value;

const TURNS: usize = 3;

/// Two threads with turns on the server; their ids.
async fn run_turns(served: &Served, sb: &Sandbox) -> Vec<String> {
    let mut threads = Vec::new();
    for name in ["first", "second"] {
        let thread = create_thread(served, sb, "chat", name).await;
        for turn in 0..TURNS {
            let mut sse = SseReader::open(served, &thread, &format!("{name} {turn}")).await;
            sse.until("turn_completed").await;
        }
        threads.push(thread);
    }
    threads
}

fn scripted() -> Scenario {
    Scenario::new(vec![Step::text("an answer, streamed"); 2 * TURNS])
}

/// The head the server shows for `thread`, checked against the verifier's.
async fn head(served: &Served, thread: &str) -> (u64, String) {
    let response = api(served, Method::GET, &format!("/v1/threads/{thread}/audit"))
        .send()
        .await
        .expect("audit head");
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["thread_id"], thread);
    assert_eq!(body["chained_since_seq"], 1);
    let seq = body["head"]["seq"].as_u64().expect("seq");
    assert_eq!(body["events"].as_u64(), Some(seq));
    (seq, body["head"]["hash"].as_str().expect("hash").to_owned())
}

/// Verify and the independent script pass; the head is the export's last hash.
fn check_intact(sb: &Sandbox, db: Option<&str>, thread: &str, head: &(u64, String)) {
    let (ok, report, text) = audit::verify(sb, db);
    assert!(ok, "audit verify failed on an intact log: {text}");
    assert_eq!(report["broken"], Value::Null, "{text}");
    let export = audit::run(sb, db, &["export"]);
    assert!(export.status.success(), "{export:?}");
    let anchor = format!("{thread}={}", head.1);
    let (ok, text) = audit::python_verify(&export.stdout, &["--anchor", &anchor]);
    assert!(ok, "the independent verifier refused the export: {text}");
    let lines: Vec<Value> = String::from_utf8_lossy(&export.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let events = lines.iter().filter(|l| l.get("seq").is_some()).count();
    assert_eq!(events as u64, 2 * head.0, "two threads of the same length");
    // The ledger: its genesis, the two threads' creation, the policy set loaded.
    let ledger: Vec<&str> = lines
        .iter()
        .filter(|l| l["chain"] == "audit_ledger")
        .filter_map(|l| l["values"][0].as_str())
        .collect();
    assert_eq!(
        ledger,
        [
            "genesis",
            "policy_set_loaded",
            "thread_created",
            "thread_created"
        ]
    );
}

/// After one edit: verify exits 1 naming the thread and seq; the script fails too.
fn check_broken(sb: &Sandbox, db: Option<&str>, thread: &str, seq: u64) {
    let (ok, report, text) = audit::verify(sb, db);
    assert!(!ok, "audit verify passed a tampered log: {text}");
    assert_eq!(report["broken"]["thread_id"], thread, "{text}");
    assert_eq!(report["broken"]["seq"], seq, "{text}");
    assert_eq!(report["broken"]["reason"], "hash_mismatch", "{text}");
    let plain = audit::run(sb, db, &["verify"]);
    assert_eq!(plain.status.code(), Some(1));
    let said = String::from_utf8_lossy(&plain.stdout);
    assert!(
        said.contains(&format!("thread {thread} event {seq}")),
        "{said}"
    );
    let export = audit::run(sb, db, &["export", "--thread", thread]);
    let (ok, text) = audit::python_verify(&export.stdout, &[]);
    assert!(
        !ok,
        "the independent verifier passed a tampered export: {text}"
    );
    assert!(text.contains(&format!("event {seq}")), "{text}");
}

/// Every stored payload starts with `{"kind"`: the edit adds a field to the one row.
const EDIT: &str =
    "UPDATE events SET payload = replace(payload, '{\"kind\"', '{\"edited\":true,\"kind\"')";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_verify_passes_then_names_an_event_edited_with_sqlite3() {
    let model = ScriptedServer::start(scripted()).await.expect("model");
    let sb = sandbox("");
    let served = start(&sb, &model.base_url(), &[]).await;
    let threads = run_turns(&served, &sb).await;
    let head = head(&served, &threads[1]).await;
    // Beside the running server: the audit reads without the file's lock.
    check_intact(&sb, None, &threads[1], &head);
    drop(served);

    // One event of the second thread's second turn, rewritten the way an operator with
    // the file could: the append-only guard lifted, one row changed.
    let seq = head.0 / 2 + 2;
    let sql = format!(
        "DROP TRIGGER events_never_update; {EDIT} WHERE thread_id = '{}' AND seq = {seq};",
        threads[1]
    );
    let out = Command::new("sqlite3")
        .arg(&sb.db)
        .arg(&sql)
        .output()
        .expect("the sqlite3 command line (apt-get install sqlite3)");
    assert!(out.status.success(), "{out:?}");
    check_broken(&sb, None, &threads[1], seq);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_verify_passes_then_names_an_event_edited_with_psql() {
    let Some(postgres) = service("AGENTPLANE_TEST_POSTGRES_URL") else {
        return;
    };
    let (url, name) = fresh_database(&postgres).await;
    let model = ScriptedServer::start(scripted()).await.expect("model");
    let sb = sandbox("");
    let served = start(&sb, &model.base_url(), &["--db", &url]).await;
    let threads = run_turns(&served, &sb).await;
    let head = head(&served, &threads[1]).await;
    check_intact(&sb, Some(&url), &threads[1], &head);
    drop(served);

    let seq = head.0 / 2 + 2;
    let sql = format!(
        "ALTER TABLE events DISABLE TRIGGER events_append_only; {EDIT} \
         WHERE thread_id = '{}' AND seq = {seq};",
        threads[1]
    );
    let out = Command::new("psql")
        .args([url.as_str(), "-v", "ON_ERROR_STOP=1", "-c", &sql])
        .output()
        .expect("psql");
    assert!(out.status.success(), "{out:?}");
    check_broken(&sb, Some(&url), &threads[1], seq);
    drop_database(&postgres, &name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_records_are_chained_and_an_edited_price_is_named() {
    const CALLS: u64 = 4;
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::text("a gateway answer");
        CALLS as usize
    ]))
    .await
    .expect("model");
    let sb = sandbox("");
    let served = start(&sb, &model.base_url(), &[]).await;
    for _ in 0..CALLS {
        let response = api(&served, Method::POST, "/openai/v1/chat/completions")
            .json(&serde_json::json!({
                "model": "scripted-model",
                "messages": [{"role": "user", "content": "hi"}],
            }))
            .send()
            .await
            .expect("a gateway call");
        assert_eq!(response.status(), 200);
    }
    let (ok, report, text) = audit::verify(&sb, None);
    assert!(ok, "{text}");
    assert_eq!(report["records"][0]["chain"], "model_calls", "{text}");
    assert_eq!(report["records"][0]["chained"], CALLS, "{text}");
    let head = report["records"][0]["head"]["hash"]
        .as_str()
        .expect("a head")
        .to_owned();
    let export = audit::run(&sb, None, &["export"]);
    assert!(export.status.success(), "{export:?}");
    let anchor = format!("model_calls={head}");
    let (ok, text) = audit::python_verify(&export.stdout, &["--anchor", &anchor]);
    assert!(ok, "the independent verifier refused the export: {text}");
    assert!(
        text.contains(&format!("{CALLS} gateway records chained")),
        "{text}"
    );
    drop(served);

    // The second call made cheaper behind the store's back.
    let out = Command::new("sqlite3")
        .arg(&sb.db)
        .arg(
            "DROP TRIGGER model_calls_never_update; \
             UPDATE model_calls SET input_tokens = input_tokens + 1 WHERE chain_pos = 2;",
        )
        .output()
        .expect("the sqlite3 command line (apt-get install sqlite3)");
    assert!(out.status.success(), "{out:?}");
    let (ok, report, text) = audit::verify(&sb, None);
    assert!(!ok, "audit verify passed an edited gateway record: {text}");
    assert_eq!(report["broken_record"]["chain"], "model_calls", "{text}");
    assert_eq!(report["broken_record"]["pos"], 2, "{text}");
    let plain = audit::run(&sb, None, &["verify"]);
    assert_eq!(plain.status.code(), Some(1));
    let said = String::from_utf8_lossy(&plain.stdout);
    assert!(said.contains("chain model_calls record 2"), "{said}");
    let export = audit::run(&sb, None, &["export"]);
    let (ok, text) = audit::python_verify(&export.stdout, &[]);
    assert!(
        !ok,
        "the independent verifier passed an edited record: {text}"
    );
    assert!(text.contains("record 2"), "{text}");
}

/// `sqlite3` on the sandbox's file, which must succeed.
fn sqlite3(sb: &Sandbox, sql: &str) {
    let out = Command::new("sqlite3")
        .arg(&sb.db)
        .arg(sql)
        .output()
        .expect("the sqlite3 command line (apt-get install sqlite3)");
    assert!(out.status.success(), "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_on_a_missing_store_fails_and_creates_nothing() {
    let sb = sandbox("");
    assert!(!sb.db.exists());
    for args in [&["verify"][..], &["verify", "--json"], &["export"]] {
        let out = audit::run(&sb, None, args);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {out:?}");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains("there is no store at"), "{said}");
        assert!(said.contains(&sb.db.display().to_string()), "{said}");
        assert!(out.stdout.is_empty(), "{out:?}");
    }
    let left: Vec<_> = std::fs::read_dir(&sb.root)
        .expect("config folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("events.db"))
        .collect();
    assert!(left.is_empty(), "verify created {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_edited_with_sqlite3_and_a_cut_back_tail_are_named_against_the_ledger_and_anchors() {
    let model = ScriptedServer::start(scripted()).await.expect("model");
    let sb = sandbox("");
    let served = start(&sb, &model.base_url(), &[]).await;
    let threads = run_turns(&served, &sb).await;
    let (seq, _) = head(&served, &threads[0]).await;
    drop(served);
    let (ok, _, text) = audit::verify(&sb, None);
    assert!(ok, "{text}");

    // An anchor, signed with a key outside the database, written to an append-only file.
    let key = sb.base.join("anchor.key");
    let out = audit::run(&sb, None, &["keygen", "--out", &key.display().to_string()]);
    assert!(out.status.success(), "{out:?}");
    let public_key = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert_eq!(public_key.len(), 64, "{public_key}");
    let anchors = sb.base.join("anchors.jsonl");
    let (key_arg, anchors_arg) = (key.display().to_string(), anchors.display().to_string());
    let out = audit::run(
        &sb,
        None,
        &["anchor", "--key", &key_arg, "--out", &anchors_arg],
    );
    assert!(out.status.success(), "{out:?}");
    let checked = [
        "verify",
        "--json",
        "--anchors",
        &anchors_arg,
        "--public-key",
        &public_key,
    ];
    let out = audit::run(&sb, None, &checked);
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(out.status.success(), "{report}");
    assert_eq!(report["anchors_checked"], 1, "{report}");
    // Another key's anchors prove nothing: refused as unsigned.
    let other = sb.base.join("other.key");
    let out = audit::run(
        &sb,
        None,
        &["keygen", "--out", &other.display().to_string()],
    );
    let other_public = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let wrong = [
        "verify",
        "--json",
        "--anchors",
        &anchors_arg,
        "--public-key",
        &other_public,
    ];
    let out = audit::run(&sb, None, &wrong);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    // The independent script agrees, from the export and the anchors alone.
    let script_args = [
        "--anchors",
        anchors_arg.as_str(),
        "--public-key",
        public_key.as_str(),
    ];
    let export = audit::run(&sb, None, &["export"]);
    let (ok, text) = audit::python_verify(&export.stdout, &script_args);
    assert!(ok, "{text}");
    assert!(text.contains("1 anchors hold"), "{text}");
    let wrong_key = [
        "--anchors",
        anchors_arg.as_str(),
        "--public-key",
        other_public.as_str(),
    ];
    let (ok, text) = audit::python_verify(&export.stdout, &wrong_key);
    assert!(!ok && text.contains("signature does not verify"), "{text}");

    // What the owner of the file could do: move a thread to another client, change
    // the input history shows, and cut the other thread's last event off.
    sqlite3(
        &sb,
        &format!(
            "UPDATE threads SET client_id = 'mallory' WHERE id = '{0}';
             UPDATE turns SET input = 'forged' WHERE thread_id = '{0}';",
            threads[0]
        ),
    );
    let (ok, report, text) = audit::verify(&sb, None);
    assert!(!ok, "{text}");
    assert_eq!(
        report["broken"],
        Value::Null,
        "every link still holds: {text}"
    );
    let subjects: Vec<&str> = report["mismatches"]
        .as_array()
        .expect("mismatches")
        .iter()
        .filter_map(|m| m["subject"].as_str())
        .collect();
    assert!(
        subjects.contains(&format!("thread {}", threads[0]).as_str()),
        "{text}"
    );
    assert_eq!(
        subjects.iter().filter(|s| s.starts_with("turn ")).count(),
        TURNS,
        "every turn's input: {text}"
    );
    let plain = audit::run(&sb, None, &["verify"]);
    assert_eq!(plain.status.code(), Some(1));
    let said = String::from_utf8_lossy(&plain.stdout);
    assert!(
        said.contains(&format!(
            "BROKEN  thread {}: its owner (client_id) is \"mallory\"",
            threads[0]
        )),
        "{said}"
    );
    let export = audit::run(&sb, None, &["export"]);
    let (ok, text) = audit::python_verify(&export.stdout, &script_args);
    assert!(!ok, "{text}");
    assert!(
        text.contains(&format!(
            "thread {}: its client_id is 'mallory'",
            threads[0]
        )),
        "{text}"
    );
    assert!(text.contains("its input is 'forged'"), "{text}");

    sqlite3(
        &sb,
        &format!(
            "DROP TRIGGER events_never_delete;
             DELETE FROM events WHERE thread_id = '{0}' AND seq = {seq};
             UPDATE threads SET next_seq = {seq} WHERE id = '{0}';",
            threads[1]
        ),
    );
    let out = audit::run(&sb, None, &checked);
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(out.status.code(), Some(1), "{report}");
    let cut = report["mismatches"]
        .as_array()
        .expect("mismatches")
        .iter()
        .find(|m| m["subject"] == format!("thread {}", threads[1]))
        .unwrap_or_else(|| panic!("the cut is named: {report}"));
    assert!(
        cut["message"].as_str().unwrap_or("").contains("cut back"),
        "{report}"
    );
    assert!(
        cut["against"]
            .as_str()
            .unwrap_or("")
            .starts_with("anchor line 1"),
        "{report}"
    );
    let export = audit::run(&sb, None, &["export"]);
    let (ok, text) = audit::python_verify(&export.stdout, &script_args);
    assert!(!ok, "{text}");
    assert!(
        text.contains(&format!("thread {}: anchor line 1", threads[1]))
            && text.contains("cut back behind the anchor"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_anchors_on_its_own_and_refuses_to_start_without_its_key() {
    let model = ScriptedServer::start(scripted()).await.expect("model");
    let sb = sandbox(
        "[audit]\nanchor_key = \"anchor.key\"\nanchor_file = \"anchors.jsonl\"\n\
         anchor_interval_s = 60\n",
    );
    // No key yet: the server refuses to start rather than run unanchored.
    let out = Command::new(agentplane_suites::binary())
        .current_dir(&sb.base)
        .env("AGENTPLANE_CONFIG", sb.root.join("agentplane.toml"))
        .args(["run", "hello"])
        .output()
        .expect("run");
    assert!(!out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("[audit]") && said.contains("anchor.key"),
        "{said}"
    );

    let key = sb.root.join("anchor.key");
    let out = audit::run(&sb, None, &["keygen", "--out", &key.display().to_string()]);
    assert!(out.status.success(), "{out:?}");
    let public_key = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    // A second keygen never replaces a key.
    let again = audit::run(&sb, None, &["keygen", "--out", &key.display().to_string()]);
    assert!(!again.status.success(), "{again:?}");

    let served = start(&sb, &model.base_url(), &[]).await;
    run_turns(&served, &sb).await;
    // The first anchor is written as the server starts; the next an interval later.
    let anchors = sb.root.join("anchors.jsonl");
    let mut waited = 0;
    while std::fs::read_to_string(&anchors).map_or(true, |t| t.lines().count() == 0) {
        assert!(waited < 200, "no anchor written");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        waited += 1;
    }
    drop(served);
    let anchors_arg = anchors.display().to_string();
    // With the configured key, no --public-key is needed.
    let out = audit::run(&sb, None, &["verify", "--json", "--anchors", &anchors_arg]);
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(out.status.success(), "{report}");
    assert_eq!(report["anchors_checked"], 1, "{report}");
    let export = audit::run(&sb, None, &["export"]);
    let args = [
        "--anchors",
        anchors_arg.as_str(),
        "--public-key",
        public_key.as_str(),
    ];
    let (ok, text) = audit::python_verify(&export.stdout, &args);
    assert!(ok, "{text}");
}
