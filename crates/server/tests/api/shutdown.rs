//! Serving and stopping: the bind policy, and a graceful shutdown that ends running
//! turns and open streams instead of hanging on them.

use std::time::Duration;

use agentplane_server::{ServeError, ServeOptions, serve};
use agentplane_testkit::Step;

use crate::harness::{PATIENCE, Setup};

#[tokio::test]
async fn shutdown_cancels_running_turns_and_ends_open_streams() {
    let mut api = Setup::new(vec![Step::text("never").with_delay_ms(30_000)])
        .start()
        .await;
    let idle = api.create_thread("alice", "chat").await;
    let busy = api.create_thread("alice", "chat").await;
    let mut follower = api.follow("alice", &idle, "", None).await;
    let mut turn = api.start_turn("alice", &busy, "wait").await;
    turn.until("turn_started").await;

    let stopped = tokio::time::timeout(PATIENCE, api.shut_down())
        .await
        .expect("serve returns");
    assert!(stopped.is_ok(), "{stopped:?}");

    // The turn outlived the 1 s grace: cancelled, recorded, streamed to its end.
    let rest = turn.until_completed().await;
    assert_eq!(
        rest.last().expect("completed").json()["stop_reason"],
        "cancelled"
    );
    // The follower of a quiet thread was let go.
    assert!(follower.next().await.is_none());
    // And nothing listens any more.
    assert!(api.http.get(api.url("/healthz")).send().await.is_err());
}

#[tokio::test]
async fn serve_refuses_a_public_listener_without_permission_or_token() {
    let api = Setup::new(vec![]).start().await;
    for (allow_public, token) in [(false, Some("t".to_owned())), (true, None)] {
        let listener = tokio::net::TcpListener::bind("0.0.0.0:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let result = tokio::time::timeout(
            Duration::from_secs(5),
            serve(
                api.runtime.services().clone(),
                listener,
                ServeOptions {
                    listen: addr,
                    auth_token: token,
                    allow_public,
                    shutdown_grace: Duration::from_secs(1),
                    heartbeat: Duration::from_secs(1),
                    metrics: None,
                    executions: None,
                    stop: None,
                    connections: agentplane_server::ConnectionLimits::default(),
                    followers: agentplane_server::FollowerLimits::default(),
                    allowed_origins: agentplane_server::AllowedOrigins::default(),
                    a2a: agentplane_server::A2aOptions::default(),
                },
                std::future::pending(),
            ),
        )
        .await
        .expect("refused at once");
        match (allow_public, result) {
            (false, Err(ServeError::PublicNotAllowed(_))) => {}
            (true, Err(ServeError::PublicWithoutToken(_))) => {}
            (_, other) => panic!("allow_public={allow_public}: {other:?}"),
        }
    }
}
