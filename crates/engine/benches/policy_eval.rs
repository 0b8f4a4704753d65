//! What policy evaluation costs per tool call with 1,000 policies loaded: for each
//! call, `engine::policy::gate` (the decision and the rate limits that count the call,
//! in one pass: what the turn loop asks before every tool call), against a baseline of
//! an empty set. Sides are interleaved in rounds so both see the same machine. Prints
//! p50/p99 of single calls (each timed alone, timer included), the mean of untimed
//! batches, evaluations per second and the ratio to the baseline; plus `evaluate` alone
//! and the former three separate passes (evaluate, rate limits, budgets) for scale.
//!
//! A third of the policies carry a `when:` condition on the call's arguments
//! (`path_under`, `all` of two `equals`, `not host_in`), and every call has arguments.
//!
//! The 1,000 policies mix every type (tool_access with globs, approval_required,
//! time_window in three zones, rate_limit, budget, data_scope), each targeted at one or
//! two of 50 agents, 20 tags, 30 MCP servers' tools and 40 clients, so a call is
//! selected by a few dozen of them, as in a real shared deployment.
//!
//! Run: `cargo bench -p agentplane-engine --bench policy_eval`
//! (`POLICY_BENCH_CALLS` sets the timed calls per side, default 200000).

use std::hint::black_box;
use std::time::{Duration, Instant};

use agentplane_core::policy::{PolicySet, PolicySource, Timestamp};
use agentplane_engine::governance::rules::{
    Decision, RequestContext, budgets, evaluate, gate, rate_limits,
};

const POLICIES: usize = 1_000;
const ROUNDS: usize = 20;
/// Distinct calls cycled through, so no single call stays hot in the branch predictor.
const CALL_KINDS: usize = 1_024;

/// One policy of the mix, `i` choosing its type and targets.
fn policy(i: usize) -> String {
    let targets = match i % 6 {
        0 => format!("{{agents: [agent-{}]}}", i % 50),
        1 => format!("{{tags: [tag-{}]}}", i % 20),
        2 => format!("{{tools: ['mcp__svc{}__*']}}", i % 30),
        3 => format!("{{clients: [client-{}]}}", i % 40),
        4 => format!("{{agents: ['agent-{}*'], tags: [tag-{}]}}", i % 5, i % 20),
        _ => format!("{{tags: [tag-{}], tools: ['*_{}']}}", i % 20, i % 7),
    };
    let (kind, rules) = match i % 7 {
        0 | 1 => (
            "tool_access",
            format!(
                "{{deny: ['mcp__svc{}__delete_*', tool_{}], allow: ['mcp__*', 'tool_*', '*_read']}}",
                (i + 7) % 30,
                i % 25
            ),
        ),
        2 => (
            "approval_required",
            "{tools: ['send_*', '*__send_*']}".into(),
        ),
        3 => {
            let zone = ["Europe/Berlin", "America/New_York", "UTC"][i % 3];
            (
                "time_window",
                format!(
                    "{{timezone: {zone}, days: [mon, tue, wed, thu, fri], hours: '06:00-22:00'}}"
                ),
            )
        }
        4 => (
            "rate_limit",
            format!(
                "{{window: {}m, max: {}, per: [agent, tool]}}",
                1 + i % 10,
                10 + i
            ),
        ),
        5 => (
            "budget",
            format!("{{usd: {}, period: day, per: [client]}}", 1 + i % 100),
        ),
        _ => (
            "data_scope",
            format!(
                "{{paths: ['/srv/data-{}/*'], hosts: ['api{}.example.com']}}",
                i % 10,
                i % 10
            ),
        ),
    };
    // A third of the policies look at the call's arguments too.
    let when = match i % 9 {
        0 => "  when: {arg: /path, path_under: [.github, secrets]}\n",
        3 => "  when: {all: [{arg: /program, equals: git}, {arg: /args, equals: push}]}\n",
        6 => "  when: {not: {arg: /url, host_in: [docs.rs, '*.github.com']}}\n",
        _ => "",
    };
    format!("- name: p{i:04}\n  type: {kind}\n  targets: {targets}\n{when}  rules: {rules}\n")
}

fn loaded_set() -> PolicySet {
    // Ten files of 100, as an operator might split them.
    let files: Vec<(String, String)> = (0..10)
        .map(|f| {
            let text: String = (f * 100..(f + 1) * 100).map(policy).collect();
            (format!("p{f}.yaml"), text)
        })
        .collect();
    let sources: Vec<PolicySource<'_>> = files
        .iter()
        .map(|(name, text)| PolicySource { name, text })
        .collect();
    let set = PolicySet::parse(&sources).expect("the generated policies are valid");
    assert_eq!(set.len(), POLICIES);
    set
}

/// The facts of one tool call; `tags` lives in `CallFacts` so contexts can borrow it.
struct CallFacts {
    agent: String,
    tags: Vec<String>,
    tool: String,
    client: String,
    args: serde_json::Value,
}

const PATHS: [&str; 3] = ["src/main.rs", ".github/workflows/ci.yml", "a/../secrets/x"];
const URLS: [&str; 2] = ["https://docs.rs/serde", "https://evil.example/x"];

fn calls() -> Vec<CallFacts> {
    (0..CALL_KINDS)
        .map(|r| {
            let op = ["read", "list_items", "delete_item", "send_mail"][r % 4];
            let tool = if r % 3 == 0 {
                format!("tool_{}", r % 30)
            } else {
                format!("mcp__svc{}__{op}", r % 35)
            };
            CallFacts {
                agent: format!("agent-{}", r % 60),
                tags: vec![format!("tag-{}", r % 25), format!("tag-{}", (r * 7) % 25)],
                tool,
                client: format!("client-{}", r % 45),
                args: serde_json::json!({
                    "path": PATHS[r % 3],
                    "program": "git",
                    "args": if r % 2 == 0 { vec!["status"] } else { vec!["push", "origin"] },
                    "url": URLS[r % 2],
                }),
            }
        })
        .collect()
}

fn context<'a>(call: &'a CallFacts, at: Timestamp) -> RequestContext<'a> {
    RequestContext::new(&call.agent, &call.tags, &call.client)
        .tool(call.tool.as_str())
        .arguments(&call.args)
        .at(at)
}

/// What the turn loop asks per tool call (one pass: the decision and the rate limits
/// that count the call); returns something derived from the answer so nothing is
/// optimized away.
fn per_call(set: &PolicySet, ctx: &RequestContext<'_>) -> usize {
    let gate = gate(set, ctx);
    decision_size(&gate.decision) + gate.rate_limits.len()
}

/// What the turn loop asked per tool call before the one-pass gate: `evaluate`, then
/// the rate limits and the budgets, each a pass of its own.
fn three_passes(set: &PolicySet, ctx: &RequestContext<'_>) -> usize {
    evaluate_only(set, ctx) + rate_limits(set, ctx).len() + budgets(set, ctx).len()
}

fn decision_size(decision: &Decision<'_>) -> usize {
    match decision {
        Decision::Allow => 0,
        Decision::Deny { policy, .. } => policy.len(),
        Decision::RequireApproval { policy } => policy.len() + 1,
    }
}

/// `evaluate` alone, to show what the two accessors add.
fn evaluate_only(set: &PolicySet, ctx: &RequestContext<'_>) -> usize {
    match evaluate(set, ctx) {
        Decision::Allow => 0,
        Decision::Deny { policy, .. } => policy.len(),
        Decision::RequireApproval { policy } => policy.len() + 1,
    }
}

/// What is measured for one call.
type Work = fn(&PolicySet, &RequestContext<'_>) -> usize;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

/// One side's figures.
struct Side {
    single: Vec<Duration>,
    batched: Duration,
    batched_calls: usize,
}

impl Side {
    fn new(calls: usize) -> Self {
        Self {
            single: Vec::with_capacity(calls),
            batched: Duration::ZERO,
            batched_calls: 0,
        }
    }

    fn mean_ns(&self) -> f64 {
        self.batched.as_nanos() as f64 / self.batched_calls as f64
    }
}

fn run_round(
    work: Work,
    set: &PolicySet,
    calls: &[CallFacts],
    at: Timestamp,
    n: usize,
    side: &mut Side,
) {
    for i in 0..n {
        let ctx = context(&calls[i % calls.len()], at);
        let started = Instant::now();
        black_box(work(black_box(set), black_box(&ctx)));
        side.single.push(started.elapsed());
    }
    let started = Instant::now();
    let mut sum = 0usize;
    for i in 0..n {
        let ctx = context(&calls[i % calls.len()], at);
        sum = sum.wrapping_add(work(black_box(set), black_box(&ctx)));
    }
    side.batched += started.elapsed();
    side.batched_calls += n;
    black_box(sum);
}

fn report(name: &str, side: &mut Side) -> (Duration, Duration, f64) {
    side.single.sort();
    let (p50, p99) = (
        percentile(&side.single, 0.5),
        percentile(&side.single, 0.99),
    );
    let mean = side.mean_ns();
    println!(
        "{name:<16} p50 {:>9} ns  p99 {:>9} ns  mean {:>10.1} ns  {:>12.0} evaluations/s",
        p50.as_nanos(),
        p99.as_nanos(),
        mean,
        1e9 / mean
    );
    (p50, p99, mean)
}

fn main() {
    let calls_per_side: usize = std::env::var("POLICY_BENCH_CALLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200_000);
    let loaded = loaded_set();
    let empty = PolicySet::default();
    let calls = calls();
    // A Wednesday at noon UTC: inside every generated time window.
    let at: Timestamp = "2026-11-25T12:00:00Z".parse().expect("instant");

    // What the mix decides, so the figures are read against a realistic workload.
    let (mut allow, mut deny, mut approval, mut selected) = (0, 0, 0, 0usize);
    for call in &calls {
        let ctx = context(call, at);
        selected += agentplane_engine::governance::rules::applicable(&loaded, &ctx).count();
        match evaluate(&loaded, &ctx) {
            Decision::Allow => allow += 1,
            Decision::Deny { .. } => deny += 1,
            Decision::RequireApproval { .. } => approval += 1,
        }
    }
    println!(
        "{POLICIES} policies; {CALL_KINDS} distinct calls: {allow} allowed, {deny} denied, \
         {approval} need approval; {:.1} policies select a call on average",
        selected as f64 / CALL_KINDS as f64
    );

    let warm_up = (calls_per_side / 20).max(1);
    let mut scratch = Side::new(warm_up);
    run_round(per_call, &loaded, &calls, at, warm_up, &mut scratch);
    run_round(per_call, &empty, &calls, at, warm_up, &mut scratch);

    let per_round = calls_per_side.div_ceil(ROUNDS);
    let mut with = Side::new(calls_per_side);
    let mut baseline = Side::new(calls_per_side);
    let mut decide_only = Side::new(calls_per_side);
    let mut separate = Side::new(calls_per_side);
    for round in 0..ROUNDS {
        // Alternate which side goes first, so neither always runs on a warmer cache.
        if round % 2 == 0 {
            run_round(per_call, &loaded, &calls, at, per_round, &mut with);
            run_round(per_call, &empty, &calls, at, per_round, &mut baseline);
        } else {
            run_round(per_call, &empty, &calls, at, per_round, &mut baseline);
            run_round(per_call, &loaded, &calls, at, per_round, &mut with);
        }
        run_round(
            evaluate_only,
            &loaded,
            &calls,
            at,
            per_round / 4,
            &mut decide_only,
        );
        run_round(
            three_passes,
            &loaded,
            &calls,
            at,
            per_round / 4,
            &mut separate,
        );
    }
    println!(
        "{} timed calls per side in {ROUNDS} rounds, plus as many untimed (mean)",
        per_round * ROUNDS
    );
    let (p50, p99, mean) = report("1000 policies", &mut with);
    let (base_p50, base_p99, base_mean) = report("empty set", &mut baseline);
    report("evaluate only", &mut decide_only);
    report("three passes (before the gate)", &mut separate);
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::INFINITY };
    println!(
        "ratio to the empty set: p50 {:.1}x  p99 {:.1}x  mean {:.1}x; added per call: {:.2} µs (mean)",
        ratio(p50.as_nanos() as f64, base_p50.as_nanos() as f64),
        ratio(p99.as_nanos() as f64, base_p99.as_nanos() as f64),
        ratio(mean, base_mean),
        (mean - base_mean) / 1000.0
    );
}
