//! Content guardrails through the real binary, on every surface, streamed and not: a
//! card number in a turn's input, a tool's arguments, a tool's result, the model's
//! streamed answer (cut inside the number), a gateway request and a gateway answer
//! streamed in pieces; `redact` replaces it everywhere it would be stored or answered,
//! `deny` refuses the call or the request, `flag` only records. Findings are events
//! and metrics naming the detector and the place, never the text. Also `mode: audit`:
//! would-be denials of a turn's admission and of a call recorded as `policy_audited`,
//! the turn and the call still run.

use agentplane_suites::{
    Sandbox, Served, SseReader, api, create_thread, events_of, history, sandbox, start,
};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use serde_json::{Value, json};

const CARD: &str = "4111 1111 1111 1111";
const OTHER_CARD: &str = "5500-0000-0000-0004";
const IBAN: &str = "DE89 3704 0044 0532 0130 00";
const AWS_KEY: &str = "AKIAIOSFODNN7EXAMPLE";

const POLICIES: &str = "\
- name: redact-cards
  type: content
  rules:
    detectors: [card, iban]
    action: redact
- name: no-keys
  type: content
  rules:
    detectors: [secret]
    surfaces: [tool_arguments, tool_results, model_output, gateway_request, gateway_answer]
    action: deny
- name: flag-mail
  type: content
  rules:
    detectors: [email]
    surfaces: [tool_arguments]
    action: flag
- name: rehearse-no-writes
  type: tool_access
  mode: audit
  targets: {tools: [write_file]}
  rules: {deny: ['*']}
";

/// Every day of the week but today (UTC), for a time window that is closed now.
fn all_days_but_today() -> String {
    const FROM_THURSDAY: [&str; 7] = ["thu", "fri", "sat", "sun", "mon", "tue", "wed"];
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        / 86_400;
    let today = FROM_THURSDAY[(days % 7) as usize];
    FROM_THURSDAY
        .iter()
        .filter(|d| **d != today)
        .copied()
        .collect::<Vec<_>>()
        .join(", ")
}

async fn served(steps: Vec<Step>) -> (Served, Sandbox, ScriptedServer) {
    let model = ScriptedServer::start(Scenario::new(steps))
        .await
        .expect("model");
    let sb = sandbox(
        "[agents.writer]\nsystem_prompt = \"You write.\"\nensembles = [\"fs\"]\n\
         [policies]\ndir = \"policies\"\n",
    );
    std::fs::create_dir(sb.root.join("policies")).expect("policies dir");
    let rehearsal = format!(
        "- name: closed-today\n  type: time_window\n  mode: audit\n  targets: {{agents: [writer]}}\n  \
         rules: {{timezone: UTC, days: [{}]}}\n",
        all_days_but_today()
    );
    std::fs::write(
        sb.root.join("policies").join("content.yaml"),
        format!("{POLICIES}{rehearsal}"),
    )
    .expect("policy");
    let served = start(&sb, &model.base_url(), &[]).await;
    (served, sb, model)
}

/// Runs a turn to its end; the SSE events it streamed.
async fn turn(served: &Served, thread: &str, input: &str) -> Vec<agentplane_suites::Received> {
    SseReader::open(served, thread, input)
        .await
        .until("turn_completed")
        .await
}

fn of_kind<'e>(events: &'e [Value], kind: &str) -> Vec<&'e Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

#[tokio::test]
async fn content_policies_redact_deny_and_flag_on_every_surface() {
    let (served, sb, model) = served(vec![
        // Turn 1: arguments with a card and an address, a result with an IBAN, then an
        // answer streamed in two pieces cut inside the card number.
        Step::tool_call(
            "write_file",
            json!({"path": "note.txt", "content": format!("card {OTHER_CARD} for a@co.example")}),
        ),
        Step::tool_call("read_file", json!({"path": "data.txt"})),
        Step::text(format!("pay with {CARD} now")).with_split(2),
        // Turn 2: arguments holding an access key are refused.
        Step::tool_call(
            "write_file",
            json!({"path": "key.txt", "content": format!("key={AWS_KEY}")}),
        ),
        Step::text("done"),
        // The gateway: an answer with a card, streamed in pieces.
        Step::text(format!("your card {CARD} is on file")).with_split(5),
    ])
    .await;
    std::fs::write(sb.workspace.join("data.txt"), format!("IBAN {IBAN}\n")).expect("data");
    let thread = create_thread(&served, &sb, "writer", "content").await;

    let streamed = turn(&served, &thread, &format!("my card is {CARD}, note it")).await;
    let all = history(&served, &thread).await;
    let events = events_of(&all);
    let text = without_ids(&all.to_string());
    for needle in [CARD, OTHER_CARD, IBAN, "4111", "5500-0000"] {
        assert!(!text.contains(needle), "{needle} stored: {text}");
    }
    let live: String = streamed
        .iter()
        .filter(|r| r.event == "message_delta")
        .filter_map(|r| r.data["text"].as_str())
        .collect();
    assert_eq!(
        live, "pay with [REDACTED:card] now",
        "the stream, cut inside the number"
    );
    let input = all["turns"][0]["input"].as_str().expect("input");
    assert_eq!(input, "my card is [REDACTED:card], note it");
    let written = std::fs::read_to_string(sb.workspace.join("note.txt")).expect("written");
    assert_eq!(written, "card [REDACTED:card] for a@co.example");
    let findings = of_kind(&events, "content_finding");
    let at = |surface: &str, detector: &str| {
        findings
            .iter()
            .filter(|f| f["surface"] == surface && f["detector"] == detector)
            .count()
    };
    assert_eq!(at("turn_input", "card"), 1, "{findings:?}");
    assert_eq!(at("tool_arguments", "card"), 1, "{findings:?}");
    assert_eq!(at("tool_arguments", "email"), 1, "flagged: {findings:?}");
    assert_eq!(at("tool_results", "iban"), 1, "{findings:?}");
    assert_eq!(at("model_output", "card"), 1, "{findings:?}");
    let flagged = findings
        .iter()
        .find(|f| f["detector"] == "email")
        .expect("flag");
    assert_eq!(flagged["action"], "flag");
    assert_eq!(flagged["pointer"], "/content");
    for finding in &findings {
        let keys: Vec<&str> = finding
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        assert!(
            !keys.contains(&"text") && !keys.contains(&"match"),
            "{finding}"
        );
    }
    // The model was told the redacted result, never the IBAN.
    assert!(
        !serde_json::to_string(&model.requests())
            .expect("json")
            .contains("3704 0044")
    );
    // Audit mode: a would-be denial of each write, the writes still ran.
    let audited = of_kind(&events, "policy_audited");
    let of = |policy: &str| -> Vec<(String, String)> {
        audited
            .iter()
            .filter(|a| a["policy"] == policy)
            .map(|a| {
                let tool = a["tool"].as_str().unwrap_or("(admission)").to_owned();
                (tool, a["would"].as_str().unwrap_or_default().to_owned())
            })
            .collect()
    };
    // A window closed today would have refused the admission and both calls.
    let deny = |tool: &str| (tool.to_owned(), "deny".to_owned());
    assert_eq!(
        of("closed-today"),
        [deny("(admission)"), deny("write_file"), deny("read_file")]
    );
    assert_eq!(of("rehearse-no-writes"), [deny("write_file")]);
    assert_eq!(audited.len(), 4, "{audited:?}");

    // Turn 2: an access key in the arguments: refused, recorded, not written.
    turn(&served, &thread, "write the key").await;
    let events = events_of(&history(&served, &thread).await);
    let denied = of_kind(&events, "policy_denied");
    let denied = denied.last().expect("denied");
    assert_eq!(denied["policy"], "no-keys", "{denied}");
    assert_eq!(denied["policy_type"], "content");
    assert!(
        denied["detail"]
            .as_str()
            .is_some_and(|d| d.contains("secret")),
        "{denied}"
    );
    assert!(!sb.workspace.join("key.txt").exists());
    assert!(
        !history(&served, &thread)
            .await
            .to_string()
            .contains(AWS_KEY)
    );

    // The gateway: a request with a card goes upstream redacted; the streamed answer
    // reaches the client redacted; a request with a key is refused.
    let before = model.requests().len();
    let response = api(
        &served,
        reqwest::Method::POST,
        "/openai/v1/chat/completions",
    )
    .json(&json!({
        "model": "scripted-model",
        "stream": true,
        "messages": [{"role": "user", "content": format!("charge {CARD}")}],
    }))
    .send()
    .await
    .expect("gateway");
    assert_eq!(response.status().as_u16(), 200);
    let body = response.text().await.expect("body");
    let answered: String = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(answered, "your card [REDACTED:card] is on file", "{body}");
    assert!(!without_ids(&body).contains("4111"), "{body}");
    let upstream = model.requests()[before].to_string();
    assert!(
        upstream.contains("charge [REDACTED:card]") && !upstream.contains("4111"),
        "{upstream}"
    );
    let refused = api(
        &served,
        reqwest::Method::POST,
        "/openai/v1/chat/completions",
    )
    .json(&json!({
        "model": "scripted-model",
        "messages": [{"role": "user", "content": format!("use {AWS_KEY}")}],
    }))
    .send()
    .await
    .expect("gateway");
    assert_eq!(refused.status().as_u16(), 403);
    let envelope: Value = refused.json().await.expect("envelope");
    assert_eq!(envelope["error"]["code"], "FORBIDDEN", "{envelope}");
    assert!(!envelope.to_string().contains(AWS_KEY));
    assert_eq!(
        model.requests().len(),
        before + 1,
        "the refused request never went upstream"
    );

    // Metrics: findings by policy, surface, detector and action; audits by would.
    let metrics = reqwest::get(format!("{}/metrics", served.base))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("content_findings_total{")
                && l.contains("surface=\"tool_results\"")
                && l.contains("detector=\"iban\"")),
        "{metrics}"
    );
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("policy_audited_total{") && l.contains("would=\"deny\"")),
        "{metrics}"
    );
    // A gateway call has no thread: its findings and its refusal are counted all the same.
    for (surface, detector) in [
        ("gateway_request", "card"),
        ("gateway_answer", "card"),
        ("gateway_request", "secret"),
    ] {
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with("content_findings_total{")
                    && l.contains(&format!("surface=\"{surface}\""))
                    && l.contains(&format!("detector=\"{detector}\""))),
            "{surface} {detector}: {metrics}"
        );
    }
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("policy_denials_total{")
                && l.contains("policy=\"no-keys\"")
                && l.contains("kind=\"content\"")),
        "{metrics}"
    );
    assert!(!metrics.contains("4111"));
}

/// The text an SSE body streamed: gateway deltas and turn `message_delta`s, in order.
fn streamed_text(body: &str) -> String {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .or_else(|| {
                    (v["kind"] == "message_delta")
                        .then(|| v["text"].as_str())
                        .flatten()
                })
                .map(str::to_owned)
        })
        .collect()
}

/// The redaction guarantee attacked: 12 gateway streams and 4 turns at once, the model's
/// answer (two cards and an IBAN) cut into pieces of 1 to 8 bytes so every cut of every
/// number happens somewhere, half the clients gone after their first bytes, then a
/// `kill -9` and a restart. No client's text, no history, no database page, WAL or log
/// holds a number, or a run of it long enough to rebuild one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_streams_cut_anywhere_vanishing_clients_and_a_restart_leak_no_number() {
    let text = format!("pay {CARD} or {OTHER_CARD}, iban {IBAN} ok. ");
    let steps = (1..=8)
        .map(|bytes| Step::text(text.repeat(2)).with_split((2 * text.len()).div_ceil(bytes)))
        .collect();
    let model = ScriptedServer::start(Scenario::new(steps).repeating(true))
        .await
        .expect("model");
    let sb = sandbox(
        "[agents.writer]\nsystem_prompt = \"You write.\"\nensembles = [\"fs\"]\n\
         [policies]\ndir = \"policies\"\n",
    );
    std::fs::create_dir(sb.root.join("policies")).expect("policies dir");
    std::fs::write(sb.root.join("policies").join("content.yaml"), POLICIES).expect("policy");
    let mut served = start(&sb, &model.base_url(), &[]).await;
    let mut threads = Vec::new();
    for i in 0..4 {
        threads.push(create_thread(&served, &sb, "writer", &format!("t{i}")).await);
    }
    let mut tasks = Vec::new();
    for i in 0..12 {
        let request = api(
            &served,
            reqwest::Method::POST,
            "/openai/v1/chat/completions",
        )
        .json(&json!({
            "model": "scripted-model",
            "stream": true,
            "messages": [{"role": "user", "content": "say it"}],
        }));
        tasks.push(tokio::spawn(async move {
            let mut response = request.send().await.expect("gateway");
            let mut seen = String::new();
            while let Ok(Some(chunk)) = response.chunk().await {
                seen.push_str(&String::from_utf8_lossy(&chunk));
                if i % 2 == 1 {
                    break;
                }
            }
            seen
        }));
    }
    for (i, thread) in threads.iter().enumerate() {
        let request = api(
            &served,
            reqwest::Method::POST,
            &format!("/v1/threads/{thread}/turns"),
        )
        .json(&json!({"input": "say it"}));
        tasks.push(tokio::spawn(async move {
            let mut response = request.send().await.expect("turn");
            let mut seen = String::new();
            while let Ok(Some(chunk)) = response.chunk().await {
                seen.push_str(&String::from_utf8_lossy(&chunk));
                if i % 2 == 1 || seen.contains("turn_completed") {
                    break;
                }
            }
            seen
        }));
    }
    // Runs long enough to rebuild a number: four digits of a card, the IBAN's bank code.
    let pieces = [
        "4111",
        "1111 1111",
        "5500",
        "0000-0000",
        "3704 0044",
        "DE89 3704",
    ];
    let mut answers = Vec::new();
    let mut whole = 0;
    for task in tasks {
        let seen = task.await.expect("client task");
        let said = streamed_text(&seen);
        for piece in pieces {
            assert!(!said.contains(piece), "{piece} reached a client: {said}");
            assert!(
                !without_ids(&seen).contains(piece),
                "{piece} in a raw stream: {seen}"
            );
        }
        whole += usize::from(said.contains("[REDACTED:card]"));
        answers.push(seen);
    }
    assert!(
        whole >= 8,
        "the clients that stayed read the redacted answer"
    );
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    served.kill_9();
    let served = start(&sb, &model.base_url(), &[]).await;
    for thread in &threads {
        answers.push(history(&served, thread).await.to_string());
    }
    for piece in pieces {
        if piece.chars().all(|c| c.is_ascii_hexdigit()) {
            // Four hex digits may occur by chance in the raw file: every event's audit
            // hash is 64 of them (ADR 0048). What the store keeps is read instead.
            assert!(!stored_text_holds(&sb, piece), "the store keeps {piece}");
            let log = without_ids(&served.stderr());
            assert!(!log.contains(piece), "the log holds {piece}");
            for answer in &answers {
                assert!(
                    !without_ids(answer).contains(piece),
                    "an answer holds {piece}: {answer}"
                );
            }
        } else {
            agentplane_suites::attacks::assert_nowhere(&sb, &served, &answers, piece);
        }
    }
}

/// `text` without its runs of 16 or more hex digits: ids (`turn_01a2…`) and hashes, in
/// which any four digits may occur by chance. A number's pieces are shorter runs.
fn without_ids(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut run = String::new();
    for c in text.chars() {
        if c.is_ascii_hexdigit() {
            run.push(c);
            continue;
        }
        if run.len() < 16 {
            out.push_str(&run);
        }
        run.clear();
        out.push(c);
    }
    if run.len() < 16 {
        out.push_str(&run);
    }
    out
}

/// Whether any text the store keeps (events, turn inputs, thread titles) holds `piece`.
fn stored_text_holds(sb: &agentplane_suites::Sandbox, piece: &str) -> bool {
    let db =
        rusqlite::Connection::open_with_flags(&sb.db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("the database");
    [
        ("events", "payload"),
        ("turns", "input"),
        ("threads", "title"),
    ]
    .iter()
    .any(|(table, column)| {
        db.query_row(
            &format!("SELECT count(*) FROM {table} WHERE instr({column}, ?1) > 0"),
            [piece],
            |row| row.get::<_, i64>(0),
        )
        .expect("a count")
            > 0
    })
}
