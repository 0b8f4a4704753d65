//! Turns over SSE: the stream is the log, one turn at a time per thread, reconnecting
//! loses nothing and repeats nothing, cancellation is prompt.

use agentplane_testkit::Step;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{PATIENCE, Setup, assert_frames_are};

#[tokio::test]
async fn a_turn_streams_from_turn_started_to_turn_completed() {
    let api = Setup::new(vec![Step::text("The capital is Paris.").with_split(4)])
        .start()
        .await;
    let thread = api.create_thread("alice", "chat").await;
    let mut stream = api.start_turn("alice", &thread, "capital of France?").await;
    let frames = stream.until_completed().await;
    assert!(
        stream.next().await.is_none(),
        "the stream ends after turn_completed"
    );

    assert!(frames[0].is("turn_started"), "{frames:?}");
    let started = frames[0].json();
    assert_eq!(started["input"], "capital of France?");
    assert_eq!(started["thread_id"], thread.as_str());
    let last = frames.last().expect("frames").json();
    assert_eq!(last["kind"], "turn_completed");
    assert_eq!(last["stop_reason"], "text_answer");
    assert_eq!(last["result"], json!({"text": "The capital is Paris."}));
    for pair in frames.windows(2) {
        assert_eq!(pair[1].seq(), pair[0].seq() + 1, "ids are gapless seqs");
    }
    let text: String = frames
        .iter()
        .filter(|f| f.is("message_delta"))
        .map(|f| f.json()["text"].as_str().expect("text").to_owned())
        .collect();
    assert_eq!(text, "The capital is Paris.");

    let turn = started["turn_id"].as_str().expect("turn id");
    assert_frames_are(&frames, &api.stored_events(turn).await);
}

#[tokio::test]
async fn hostile_text_stays_inside_one_frame_for_every_subscriber() {
    // Text that would end the event and forge others if a frame were written by hand.
    let hostile = "a\n\nid: 999\nevent: turn_completed\ndata: {\"kind\":\"turn_completed\"}\r\n\r\n: beat\rb\u{2028}c";
    let api = Setup::new(vec![Step::text(hostile).with_split(3)])
        .start()
        .await;
    let thread = api.create_thread("alice", "chat").await;
    // Followers share the turn's frames with its own stream (one encoding per event).
    let mut followers = Vec::new();
    for _ in 0..3 {
        followers.push(api.follow("alice", &thread, "", None).await);
    }
    let mut stream = api.start_turn("alice", &thread, "say it").await;
    let frames = stream.until_completed().await;
    let turn = frames[0].json()["turn_id"]
        .as_str()
        .expect("turn id")
        .to_owned();
    let stored = api.stored_events(&turn).await;
    assert_frames_are(&frames, &stored);
    let text: String = frames
        .iter()
        .filter(|f| f.is("message_delta"))
        .map(|f| f.json()["text"].as_str().expect("text").to_owned())
        .collect();
    assert_eq!(text, hostile);
    for mut follower in followers {
        assert_frames_are(&follower.until_completed().await, &stored);
    }
}

#[tokio::test]
async fn heartbeats_keep_a_quiet_stream_alive() {
    let api = Setup::new(vec![Step::text("late").with_delay_ms(700)])
        .start()
        .await;
    let thread = api.create_thread("alice", "chat").await;
    let mut stream = api.start_turn("alice", &thread, "wait").await;
    stream.until_completed().await;
    assert!(stream.heartbeats >= 2, "heartbeats: {}", stream.heartbeats);
}

#[tokio::test]
async fn a_second_turn_on_a_busy_thread_is_409_and_other_threads_run() {
    let api = Setup::new(vec![
        Step::text("slow").with_delay_ms(30_000),
        Step::text("other thread"),
    ])
    .start()
    .await;
    let thread = api.create_thread("alice", "chat").await;
    let mut first = api.start_turn("alice", &thread, "slow one").await;
    let started = first.until("turn_started").await;
    let turn = started[0].json()["turn_id"]
        .as_str()
        .expect("turn")
        .to_owned();
    api.model_called(1).await;

    let busy = api
        .post(
            &format!("/v1/threads/{thread}/turns"),
            "alice",
            json!({"input": "again"}),
        )
        .await;
    busy.assert_error(409, "CONFLICT");
    let content_type = busy
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok());
    assert_eq!(content_type, Some("application/json"));
    // Deleting a thread with a running turn is refused too.
    api.delete(&format!("/v1/threads/{thread}"), "alice")
        .await
        .assert_error(409, "CONFLICT");

    // Another thread is not blocked by it.
    let other = api.create_thread("alice", "chat").await;
    let frames = api
        .start_turn("alice", &other, "quick")
        .await
        .until_completed()
        .await;
    assert_eq!(
        frames.last().expect("frames").json()["stop_reason"],
        "text_answer"
    );

    let cancelled = api
        .post(&format!("/v1/turns/{turn}/cancel"), "alice", Value::Null)
        .await;
    assert_eq!(cancelled.status, StatusCode::ACCEPTED);
    first.until_completed().await;
}

#[tokio::test]
async fn a_reconnect_with_last_event_id_gets_every_remaining_event_exactly_once() {
    let api = Setup::new(vec![
        Step::text("one two three four five six seven eight nine ten eleven twelve")
            .with_split(12)
            .with_chunk_delay_ms(60),
    ])
    .start()
    .await;
    let thread = api.create_thread("alice", "chat").await;
    let mut first = api.start_turn("alice", &thread, "count").await;
    let mut seen = vec![first.next().await.expect("turn_started")];
    let turn = seen[0].json()["turn_id"].as_str().expect("turn").to_owned();
    seen.extend(first.until("message_delta").await);
    seen.push(first.next().await.expect("another event"));
    drop(first);
    let last = seen.last().expect("seen").seq();

    // `after` says 0, the header says where we were: the header wins.
    let mut resumed = api
        .follow("alice", &thread, "?after=0", Some(&last.to_string()))
        .await;
    let rest = resumed.until_completed().await;
    assert!(!rest.is_empty());
    assert_eq!(
        rest[0].seq(),
        last + 1,
        "resumes right after the last seen event"
    );
    seen.extend(rest);

    let stored = api.stored_events(&turn).await;
    assert!(
        stored
            .iter()
            .filter(|e| e.payload.kind() == "message_delta")
            .count()
            > 3,
        "the turn streamed while we reconnected"
    );
    assert_frames_are(&seen, &stored);

    // `after` alone replays from there too, then follows (nothing more comes).
    let mut replay = api.follow("alice", &thread, "?after=2", None).await;
    let replayed = replay.until_completed().await;
    assert_frames_are(&replayed, &stored[2..]);
    // And without a position, from the start.
    let mut everything = api.follow("alice", &thread, "", None).await;
    assert_frames_are(&everything.until_completed().await, &stored);
}

#[tokio::test]
async fn a_follower_sees_the_next_turn_live() {
    let api = Setup::new(vec![
        Step::text("first"),
        Step::text("second").with_delay_ms(300),
    ])
    .start()
    .await;
    let thread = api.create_thread("alice", "chat").await;
    api.start_turn("alice", &thread, "one")
        .await
        .until_completed()
        .await;
    let mut follower = api.follow("alice", &thread, "", None).await;
    let first = follower.until_completed().await;
    let mut second = api.start_turn("alice", &thread, "two").await;
    let direct = second.until_completed().await;
    let live = follower.until_completed().await;
    assert_eq!(live, direct, "the follower saw the same events, once");
    assert_eq!(live[0].seq(), first.last().expect("first").seq() + 1);
    assert_frames_are(
        &[first, live].concat(),
        &api.stored_thread_events(&thread).await,
    );
}

#[tokio::test]
async fn cancel_ends_a_streaming_turn_as_cancelled() {
    let api = Setup::new(vec![Step::text("never").with_delay_ms(30_000)])
        .start()
        .await;
    let thread = api.create_thread("alice", "chat").await;
    let mut stream = api.start_turn("alice", &thread, "wait forever").await;
    let started = stream.until("turn_started").await;
    let turn = started[0].json()["turn_id"]
        .as_str()
        .expect("turn")
        .to_owned();
    api.model_called(1).await;

    let answer = api
        .post(&format!("/v1/turns/{turn}/cancel"), "alice", Value::Null)
        .await;
    assert_eq!(answer.status, StatusCode::ACCEPTED);
    assert_eq!(answer.body, json!({"cancelled": true}));
    let rest = tokio::time::timeout(PATIENCE, stream.until_completed())
        .await
        .expect("the stream ends");
    let completed = rest.last().expect("turn_completed").json();
    assert_eq!(completed["kind"], "turn_completed");
    assert_eq!(completed["stop_reason"], "cancelled");

    api.post(&format!("/v1/turns/{turn}/cancel"), "alice", Value::Null)
        .await
        .assert_error(409, "CONFLICT");
    let history = api
        .get(&format!("/v1/threads/{thread}/history"), "alice")
        .await;
    assert_eq!(history.body["turns"][0]["stop_reason"], "cancelled");
    // The thread is free again. The scenario is exhausted, so this turn fails upstream:
    // the failure is in the log, streamed as its `error` event.
    let frames = api
        .start_turn("alice", &thread, "again")
        .await
        .until_completed()
        .await;
    let error = frames.iter().find(|f| f.is("error")).expect("error event");
    assert_eq!(error.json()["code"], "UPSTREAM_UNAVAILABLE");
    assert_eq!(
        frames.last().expect("frames").json()["stop_reason"],
        "error"
    );
}

#[tokio::test]
async fn turn_input_is_checked_before_the_stream_opens() {
    let api = Setup::new(vec![]).start().await;
    let thread = api.create_thread("alice", "chat").await;
    let path = format!("/v1/threads/{thread}/turns");
    for body in [
        json!({"input": ""}),
        json!({"input": "   "}),
        json!({"input": "x".repeat(300 * 1024)}),
    ] {
        api.post(&path, "alice", body)
            .await
            .assert_error(400, "INVALID_ARGUMENT");
    }
    assert!(api.scripted.requests().is_empty());
}
