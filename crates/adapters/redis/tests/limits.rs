//! The Redis limiter against a real redis-server: the shared one of `scripts/redis.sh`
//! (`AGENTPLANE_TEST_REDIS_URL`) for counting, and servers of the test's own
//! (`AGENTPLANE_TEST_REDIS_SERVER`) to stop and restart. Required in CI; elsewhere the
//! tests print a note and pass when the variables are unset. Every test uses policy
//! names of its own, so tests and runs never share counters.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentplane_core::policy::{CountKey, RateLimit};
use agentplane_engine::ports::{RateError, RateFacts, RateLimits};
use agentplane_redis::{OnUnavailable, RedisRateConfig, RedisRateLimiter, counter_key};
use redis::AsyncCommands;

fn env(name: &str) -> Option<String> {
    let value = std::env::var(name).ok().filter(|v| !v.is_empty());
    if value.is_none() {
        assert!(
            std::env::var("CI").is_err(),
            "CI must provide {name} (scripts/test.sh runs scripts/redis.sh)"
        );
        eprintln!("{name} is not set; run ./scripts/test.sh to include this check");
    }
    value
}

fn limiter(url: &str, on_unavailable: OnUnavailable) -> RedisRateLimiter {
    RedisRateLimiter::new(&RedisRateConfig {
        url: url.to_owned(),
        on_unavailable,
        timeout: Duration::from_secs(5),
    })
    .expect("a valid URL")
}

fn limit(max: u32, secs: u64, per: Vec<CountKey>) -> RateLimit {
    RateLimit {
        window: Duration::from_secs(secs),
        max,
        per,
    }
}

fn facts<'a>(agent: &'a str, tool: Option<&'a str>, client: &'a str) -> RateFacts<'a> {
    RateFacts {
        agent,
        tool,
        client,
    }
}

/// A policy name no other test or run uses.
fn policy(name: &str) -> String {
    format!("{name}-{}", uuid::Uuid::now_v7().simple())
}

fn limited(result: Result<(), RateError>) -> agentplane_engine::ports::Limited {
    match result {
        Err(RateError::Limited(limited)) => limited,
        other => panic!("expected a full window, got {other:?}"),
    }
}

/// A port nothing listens on (the listener is dropped before use).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A redis-server of this test's own on `port`, killed when dropped.
async fn own_redis(server: &str, port: u16) -> tokio::process::Child {
    let child = tokio::process::Command::new(server)
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("redis-server starts");
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("url");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(mut c) = client.get_multiplexed_async_connection().await
            && redis::cmd("PING")
                .query_async::<String>(&mut c)
                .await
                .is_ok()
        {
            return child;
        }
        assert!(Instant::now() < deadline, "redis-server did not come up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_on_one_redis_admit_exactly_max_under_concurrency() {
    let Some(url) = env("AGENTPLANE_TEST_REDIS_URL") else {
        return;
    };
    let replicas = [
        Arc::new(limiter(&url, OnUnavailable::Refuse)),
        Arc::new(limiter(&url, OnUnavailable::Refuse)),
    ];
    let name = Arc::new(policy("shared"));
    let l = Arc::new(limit(37, 3600, vec![CountKey::Agent]));
    let tasks: Vec<_> = (0..200)
        .map(|i| {
            let replica = replicas[i % 2].clone();
            let (name, l) = (name.clone(), l.clone());
            tokio::spawn(async move {
                replica
                    .admit(&[(name.as_str(), &l)], facts("a", None, "c"))
                    .await
            })
        })
        .collect();
    let mut admitted = 0;
    for task in tasks {
        match task.await.expect("task") {
            Ok(()) => admitted += 1,
            Err(RateError::Limited(limited)) => {
                assert_eq!(limited.policy, *name);
                assert!(limited.retry_after <= Duration::from_secs(3600));
                assert!(limited.retry_after > Duration::from_secs(3000));
            }
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(admitted, 37);
}

#[tokio::test]
async fn a_refusal_by_one_limit_uses_up_none_of_the_others() {
    let Some(url) = env("AGENTPLANE_TEST_REDIS_URL") else {
        return;
    };
    let limiter = limiter(&url, OnUnavailable::Refuse);
    let (per_client_name, shared_name) = (policy("per-client"), policy("shared"));
    let per_client = limit(1, 60, vec![CountKey::Client]);
    let shared = limit(2, 60, vec![]);
    let limits = [
        (per_client_name.as_str(), &per_client),
        (shared_name.as_str(), &shared),
    ];
    limiter
        .admit(&limits, facts("a", None, "alice"))
        .await
        .expect("first");
    // Alice's own counter is full: refused, and the shared counter is not charged.
    let refused = limited(limiter.admit(&limits, facts("a", None, "alice")).await);
    assert_eq!(refused.policy, per_client_name);
    limiter
        .admit(&limits, facts("a", None, "bob"))
        .await
        .expect("bob");
    let refused = limited(limiter.admit(&limits, facts("a", None, "carol")).await);
    assert_eq!(refused.policy, shared_name);
    assert_eq!(refused.max, 2);
}

#[tokio::test]
async fn the_window_slides_one_admission_at_a_time_and_keys_expire_with_it() {
    let Some(url) = env("AGENTPLANE_TEST_REDIS_URL") else {
        return;
    };
    let limiter = limiter(&url, OnUnavailable::Refuse);
    let name = policy("slides");
    let l = limit(2, 2, vec![]);
    let limits = [(name.as_str(), &l)];
    let f = facts("a", None, "c");
    limiter.admit(&limits, f).await.expect("first");
    tokio::time::sleep(Duration::from_secs(1)).await;
    limiter
        .admit(&limits, f)
        .await
        .expect("second, a second later");
    let refused = limited(limiter.admit(&limits, f).await);
    assert!(refused.retry_after <= Duration::from_secs(1), "{refused:?}");

    let mut raw = redis::Client::open(url.as_str())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let ttl: i64 = raw.pttl(counter_key(&name, &l, f)).await.expect("PTTL");
    assert!(
        (1..=2000).contains(&ttl),
        "the key expires with its window: {ttl}"
    );

    // The first admission leaves the window about a second from now; the second one a
    // second after that. Refusals meanwhile charge nothing.
    let deadline = Instant::now() + Duration::from_secs(30);
    while limiter.admit(&limits, f).await.is_err() {
        assert!(Instant::now() < deadline, "the window never slid");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // One slot freed, not two.
    limited(limiter.admit(&limits, f).await);
}

#[tokio::test]
async fn counters_are_kept_per_agent_tool_and_client_as_the_limit_says() {
    let Some(url) = env("AGENTPLANE_TEST_REDIS_URL") else {
        return;
    };
    let limiter = limiter(&url, OnUnavailable::Refuse);
    let name = policy("per-agent-tool");
    let l = limit(1, 60, vec![CountKey::Agent, CountKey::Tool]);
    let limits = [(name.as_str(), &l)];
    limiter
        .admit(&limits, facts("a", Some("t1"), "alice"))
        .await
        .expect("a t1");
    // The client is not part of this limit's key.
    limited(limiter.admit(&limits, facts("a", Some("t1"), "bob")).await);
    limiter
        .admit(&limits, facts("a", Some("t2"), "alice"))
        .await
        .expect("a t2");
    limiter
        .admit(&limits, facts("b", Some("t1"), "alice"))
        .await
        .expect("b t1");
    limiter
        .admit(&limits, facts("a", None, "alice"))
        .await
        .expect("a without a tool");

    let name = policy("one-for-all");
    let l = limit(1, 60, vec![]);
    let limits = [(name.as_str(), &l)];
    limiter
        .admit(&limits, facts("a", None, "alice"))
        .await
        .expect("first");
    limited(limiter.admit(&limits, facts("b", Some("t"), "bob")).await);

    // No limit at all: admitted without asking Redis.
    limiter
        .admit(&[], facts("a", None, "alice"))
        .await
        .expect("no limits");
}

#[tokio::test]
async fn hostile_names_get_counters_of_their_own_and_touch_nothing_else() {
    let Some(url) = env("AGENTPLANE_TEST_REDIS_URL") else {
        return;
    };
    let mut raw = redis::Client::open(url.as_str())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let sentinel = policy("sentinel");
    let () = raw.set_ex(&sentinel, "kept", 60).await.expect("SET");

    let limiter = limiter(&url, OnUnavailable::Refuse);
    let name = policy("hostile");
    let l = limit(1, 60, vec![CountKey::Agent, CountKey::Client]);
    let limits = [(name.as_str(), &l)];
    let long = "x".repeat(100_000);
    let hostile = [
        ("a:1", "b"),
        ("a", "1:b"),
        ("a\u{0}", "b"),
        ("a", "\u{0}b"),
        ("{tag}", "*"),
        ("a\r\n*1\r\n$8\r\nFLUSHALL\r\n", "c"),
        ("') redis.call('FLUSHALL') --", "]]"),
        ("", ""),
        ("ünïcødé 🦀", "\u{202e}"),
        (long.as_str(), "c"),
    ];
    for (agent, client) in hostile {
        limiter
            .admit(&limits, facts(agent, None, client))
            .await
            .unwrap_or_else(|e| panic!("{agent:?}/{client:?}: {e}"));
    }
    for (agent, client) in hostile {
        limited(limiter.admit(&limits, facts(agent, None, client)).await);
    }
    let kept: Option<String> = raw.get(&sentinel).await.expect("GET");
    assert_eq!(kept.as_deref(), Some("kept"));
}

#[tokio::test]
async fn redis_down_refuses_by_default_without_showing_the_password() {
    let url = format!("redis://agent:s3cret-pw@127.0.0.1:{}/0", free_port());
    let limiter = limiter(&url, OnUnavailable::Refuse);
    let l = limit(5, 60, vec![]);
    for _ in 0..3 {
        match limiter.admit(&[("p", &l)], facts("a", None, "c")).await {
            Err(RateError::Unavailable(message)) => {
                assert!(!message.contains("s3cret-pw"), "{message}");
                assert!(message.contains("on_unavailable"), "{message}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
    assert!(!limiter.shown_url().contains("s3cret-pw"));
    assert!(!format!("{:?}", limiter_config(&url)).contains("s3cret-pw"));
}

fn limiter_config(url: &str) -> RedisRateConfig {
    RedisRateConfig {
        url: url.to_owned(),
        on_unavailable: OnUnavailable::Refuse,
        timeout: Duration::from_secs(1),
    }
}

#[tokio::test]
async fn redis_down_counts_in_memory_when_configured_to() {
    let url = format!("redis://127.0.0.1:{}/0", free_port());
    let limiter = limiter(&url, OnUnavailable::Local);
    let l = limit(2, 60, vec![]);
    let limits = [("p", &l)];
    limiter
        .admit(&limits, facts("a", None, "c"))
        .await
        .expect("1");
    limiter
        .admit(&limits, facts("a", None, "c"))
        .await
        .expect("2");
    limited(limiter.admit(&limits, facts("a", None, "c")).await);
}

#[tokio::test]
async fn a_restarted_redis_is_reconnected_to() {
    let Some(server) = env("AGENTPLANE_TEST_REDIS_SERVER") else {
        return;
    };
    let port = free_port();
    let url = format!("redis://127.0.0.1:{port}/");
    let limiter = limiter(&url, OnUnavailable::Refuse);
    let l = limit(100, 60, vec![]);
    let limits = [("p", &l)];
    let f = facts("a", None, "c");

    let mut first = own_redis(&server, port).await;
    limiter.admit(&limits, f).await.expect("while up");
    first.kill().await.expect("kill redis-server");
    first.wait().await.expect("reaped");
    assert!(matches!(
        limiter.admit(&limits, f).await,
        Err(RateError::Unavailable(_))
    ));

    // A new server (no persistence: the script and the counters are gone too).
    let _second = own_redis(&server, port).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match limiter.admit(&limits, f).await {
            Ok(()) => break,
            Err(RateError::Unavailable(_)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => panic!("not reconnected: {other:?}"),
        }
    }
    limiter
        .admit(&limits, f)
        .await
        .expect("and stays connected");
}

#[test]
fn urls_are_checked_without_being_repeated() {
    for good in [
        "redis://127.0.0.1:6379/0",
        "redis://:pw@localhost/",
        "redis+unix:///run/redis.sock",
    ] {
        agentplane_redis::check_url(good).unwrap_or_else(|e| panic!("{good}: {e}"));
    }
    for bad in [
        "http://127.0.0.1:6379",
        "127.0.0.1:6379",
        "redis://:hunter2@",
        "rediss://:hunter2@example.com",
        "",
    ] {
        let message = agentplane_redis::check_url(bad).expect_err(bad);
        assert!(!message.contains("hunter2"), "{message}");
    }
    assert_eq!(
        agentplane_redis::shown_url("redis://user:hunter2@h:1/2"),
        "redis://user:***@h:1/2"
    );
}
