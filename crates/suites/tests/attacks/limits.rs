//! Oversized bodies, headers and URLs: a clear `413` in the envelope on every route
//! that takes a body, `431`/`414` from the HTTP layer before any handler runs, nothing
//! stored, and the server still answering afterwards.

use agentplane_suites::attacks::{Tally, assert_envelope};
use agentplane_suites::{CLIENT, create_thread, history, sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use reqwest::Method;
use serde_json::json;

/// Over the server's 1 MiB body limit.
const BIG: usize = 2 * 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_requests_are_refused_in_the_envelope() {
    let model = ScriptedServer::start(Scenario::new(vec![Step::text("hi")]).repeating(true))
        .await
        .expect("model");
    let sb = sandbox("");
    let served = start(&sb, &model.base_url(), &[]).await;
    let thread = create_thread(&served, &sb, "chat", "limits").await;
    let http = reqwest::Client::new();
    let big_text = "x".repeat(BIG);
    let mut tally = Tally::default();

    // Bodies with a Content-Length over the limit, on every kind of route: refused from
    // the declared length, in the envelope everywhere.
    for (path, body) in [
        (
            "/v1/threads".to_owned(),
            json!({"agent": "chat", "title": big_text}),
        ),
        (
            format!("/v1/threads/{thread}/turns"),
            json!({"input": big_text}),
        ),
        (
            "/v1/executions".to_owned(),
            json!({"agent": "chat", "input": big_text}),
        ),
        (
            "/openai/v1/chat/completions".to_owned(),
            json!({"model": "chat", "messages": [{"role": "user", "content": big_text}]}),
        ),
        (
            "/mcp".to_owned(),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "chat", "arguments": {"task": big_text}}}),
        ),
    ] {
        let response = http
            .post(format!("{}{path}", served.base))
            .header("X-Client-ID", CLIENT)
            .header("Accept", "application/json, text/event-stream")
            .json(&body)
            .send()
            .await
            .expect("request");
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        assert_eq!(status, 413, "{path}: {}", &text[..text.len().min(300)]);
        assert_envelope(&text, "INVALID_ARGUMENT");
        tally.case(true);
    }

    // A chunked body without a length is cut at the limit too.
    let answer = chunked_post(&served.base, &thread).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "chunked: {answer}");
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    assert!(body.contains("INVALID_ARGUMENT"), "chunked: {answer}");
    tally.case(true);

    // Headers: one huge, or very many; a huge URL; an over-long client id.
    let huge = "h".repeat(512 * 1024);
    let mut outcomes = Vec::new();
    let response = http
        .get(format!("{}/v1/threads", served.base))
        .header("X-Client-ID", CLIENT)
        .header("X-Padding", &huge)
        .send()
        .await;
    outcomes.push(("huge-header", response));
    let mut many = http
        .get(format!("{}/v1/threads", served.base))
        .header("X-Client-ID", CLIENT);
    for i in 0..300 {
        many = many.header(format!("x-h{i}"), "v");
    }
    outcomes.push(("many-headers", many.send().await));
    let response = http
        .get(format!("{}/v1/threads?q={huge}", served.base))
        .header("X-Client-ID", CLIENT)
        .send()
        .await;
    outcomes.push(("huge-url", response));
    for (name, outcome) in outcomes {
        // hyper answers these itself (no handler ran, so no envelope), or closes the
        // connection; either way nothing is served.
        if let Ok(response) = outcome {
            let status = response.status().as_u16();
            assert!(matches!(status, 400 | 413 | 414 | 431), "{name}: {status}");
        }
        tally.case(true);
    }
    let response = http
        .get(format!("{}/v1/threads", served.base))
        .header("X-Client-ID", "c".repeat(129))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 400);
    assert_envelope(&response.text().await.expect("body"), "INVALID_ARGUMENT");
    tally.case(true);

    // Nothing was stored, and the server still works.
    let stored = history(&served, &thread).await;
    assert_eq!(
        stored["turns"].as_array().map(Vec::len),
        Some(0),
        "an oversized turn was stored: {stored}"
    );
    let response = http
        .request(Method::GET, format!("{}/v1/threads", served.base))
        .header("X-Client-ID", CLIENT)
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    let listed = response.text().await.expect("body");
    assert!(!listed.contains("yyyy"), "an oversized thread was created");
    tally.report("limits");
}

/// Posts a 2 MiB turn input chunked (no Content-Length) over a raw connection and
/// returns what came back (status line, headers, the start of the body).
async fn chunked_post(base: &str, thread: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "POST /v1/threads/{thread}/turns HTTP/1.1\r\nHost: {addr}\r\nX-Client-ID: {CLIENT}\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let mut chunks = vec![b"{\"input\":\"".to_vec()];
    chunks.extend((0..32).map(|_| vec![b'y'; 64 * 1024]));
    chunks.push(b"\"}".to_vec());
    for chunk in chunks {
        let mut framed = format!("{:x}\r\n", chunk.len()).into_bytes();
        framed.extend_from_slice(&chunk);
        framed.extend_from_slice(b"\r\n");
        // The server may answer and stop reading before the end.
        if stream.write_all(&framed).await.is_err() {
            break;
        }
    }
    let _ = stream.write_all(b"0\r\n\r\n").await;
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = std::time::Instant::now() + agentplane_suites::EVENT_BUDGET;
    while std::time::Instant::now() < deadline {
        match tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => answer.extend_from_slice(&buf[..n]),
        }
        let text = String::from_utf8_lossy(&answer);
        if text.contains("\r\n\r\n") && text.contains("}}") {
            break;
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}
