//! The harness itself: the real binary starts, answers, runs a turn against the scripted
//! model, and its events come back the same over SSE and from history.

use agentplane_suites::{SseReader, create_thread, events_of, history, sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer, Step};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_streams_and_is_stored() {
    let model = ScriptedServer::start(Scenario::new(vec![Step::text("hello")]))
        .await
        .expect("model");
    let sb = sandbox("");
    let served = start(&sb, &model.base_url(), &[]).await;
    let thread = create_thread(&served, &sb, "chat", "harness").await;
    let mut sse = SseReader::open(&served, &thread, "hi").await;
    let streamed = sse.until("turn_completed").await;
    let stored = events_of(&history(&served, &thread).await);
    assert_eq!(streamed.len(), stored.len());
    agentplane_suites::assert_kept(&streamed, &stored);
}
