//! Budgets hold for agents whose cost is known only after they ran (issue 49), through
//! the real binary on real SQLite: a remote A2A agent (`peers/a2a_agent.py`, the
//! official `a2a-sdk` server classes) and an external ACP agent (`peers/acp_agent.mjs`,
//! the official ACP SDK) each reserve their `max_cost_usd` before they are asked.
//!
//! - 10 concurrent turns of a remote that costs $0.009 against a $0.01 budget: one is
//!   answered, the other nine end with `BUDGET_EXCEEDED` and a `policy_denied` naming
//!   the budget, and what is settled (`GET /v1/costs`, the `cost` events) stays within
//!   $0.01 (before the fix: $0.09);
//! - a remote that reports more than its `max_cost_usd` is charged its max, and the
//!   report is kept as a `usage_over_reported` security event;
//! - an agent without `max_cost_usd` under a budget is named in a warning at start, and
//!   its turns are refused, naming the key, the remote never asked;
//! - the same for an ACP agent ($0.35 a turn against a $0.50 budget, 10 at once);
//! - a native agent that asks the remote as its `a2a__NAME` tool reserves the remote's
//!   `max_cost_usd` on its own budget before each call: 10 concurrent turns, each
//!   calling the $0.009 remote, against a $0.01 budget settle one call, the others
//!   refused before the remote is asked; a remote without `max_cost_usd` under the
//!   caller's budget is never called.

use agentplane_suites::{
    Sandbox, Served, SseReader, api, create_thread, events_of, history, sandbox, start_with_env,
};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use serde_json::{Value, json};

/// The key the A2A peer requires.
const KEY: &str = "a2a-budget-peer-key-2f8e";

/// `[agents.NAME]` of kind a2a at the peer; `max_cost` is its `max_cost_usd` line.
fn remote_agent(name: &str, base: &str, max_cost: &str) -> String {
    format!(
        "[agents.{name}]\nkind = \"a2a\"\ndescription = \"The SDK's test agent.\"\n\
         url = \"{base}/.well-known/agent-card.json\"\n{max_cost}\n\
         [agents.{name}.a2a]\napi_key = \"peer_key\"\ntimeout_secs = 60\n"
    )
}

/// `[agents.NAME]` of kind acp running the SDK peer.
fn acp_agent(name: &str, max_cost: &str) -> String {
    let (node, args) = agentplane_testkit::peers::acp_sdk_agent();
    let args = args
        .iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "[agents.{name}]\nkind = \"acp\"\nprofile = \"opencode\"\n{max_cost}\n\
         [agents.{name}.acp]\ncommand = {node:?}\nargs = [{args}]\n"
    )
}

/// A sandbox with the peer's secret, `agents` and one monthly budget per `(policy,
/// agent, usd)`.
fn configured(agents: &str, budgets: &[(&str, &str, &str)]) -> Sandbox {
    let sb = sandbox(&format!(
        "[secrets.peer_key]\nenv = \"AGENTPLANE_TEST_PEER_KEY\"\n\
         [policies]\ndir = \"policies\"\n{agents}"
    ));
    std::fs::create_dir_all(sb.root.join("policies")).expect("policies dir");
    for (policy, agent, usd) in budgets {
        std::fs::write(
            sb.root.join(format!("policies/{policy}.yaml")),
            format!(
                "name: {policy}\ntype: budget\ntargets: {{agents: [{agent}]}}\n\
                 rules: {{usd: {usd}, period: month}}\n"
            ),
        )
        .expect("budget");
    }
    sb
}

async fn serve(sb: &Sandbox) -> (Served, ScriptedServer) {
    let model = ScriptedServer::start(Scenario::new(vec![Step::text("unused")]).repeating(true))
        .await
        .expect("model");
    let served = start_with_env(
        sb,
        &model.base_url(),
        &[],
        &[("AGENTPLANE_TEST_PEER_KEY", KEY)],
    )
    .await;
    (served, model)
}

/// How one turn ended: its stop reason and its stored events.
struct Ended {
    stop: String,
    events: Vec<Value>,
}

/// Runs one turn of `agent` on a new thread to its end.
async fn one_turn(served: &Served, sb: &Sandbox, agent: &str, input: &str) -> Ended {
    let thread = create_thread(served, sb, agent, agent).await;
    let mut sse = SseReader::open(served, &thread, input).await;
    let received = sse.until("turn_completed").await;
    let stop = received.last().expect("an end").data["stop_reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    Ended {
        stop,
        events: events_of(&history(served, &thread).await),
    }
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

/// The settled spend of `agent`'s threads (`GET /v1/costs?agent=`).
async fn costs_of(served: &Served, agent: &str) -> u64 {
    let response = api(
        served,
        reqwest::Method::GET,
        &format!("/v1/costs?agent={agent}"),
    )
    .send()
    .await
    .expect("costs");
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("costs JSON");
    body["total"]["usd_micros"].as_u64().expect("usd_micros")
}

/// `n` turns of `agent` at once; then checks that exactly one was answered, every
/// other one was refused by `policy` with `BUDGET_EXCEEDED` before the agent was asked,
/// and what was settled is `each` micro-dollars, within `cap`.
async fn race_against_the_budget(
    served: &Served,
    sb: &Sandbox,
    (agent, input, n): (&str, &str, usize),
    (policy, cap, each): (&str, u64, u64),
) {
    let runs = (0..n).map(|_| one_turn(served, sb, agent, input));
    let ended = futures_util::future::join_all(runs).await;
    let answered: Vec<&Ended> = ended.iter().filter(|e| e.stop == "text_answer").collect();
    assert_eq!(
        answered.len(),
        1,
        "one turn fits the budget: {:?}",
        ended.iter().map(|e| &e.stop).collect::<Vec<_>>()
    );
    for refused in ended.iter().filter(|e| e.stop != "text_answer") {
        assert_eq!(refused.stop, "error", "{:#?}", refused.events);
        let denied = of_kind(&refused.events, "policy_denied");
        assert_eq!(denied.len(), 1, "{:#?}", refused.events);
        assert_eq!(denied[0]["policy"], policy);
        assert_eq!(denied[0]["policy_type"], "budget");
        let error = of_kind(&refused.events, "error");
        assert_eq!(error[0]["code"], "BUDGET_EXCEEDED", "{:#?}", refused.events);
        // Refused before the agent was asked: nothing of it, nothing charged.
        assert!(of_kind(&refused.events, "message_delta").is_empty());
        assert!(of_kind(&refused.events, "cost").is_empty());
    }
    let recorded: u64 = ended
        .iter()
        .flat_map(|e| of_kind(&e.events, "cost"))
        .map(|c| c["usd_micros"].as_u64().expect("usd_micros"))
        .sum();
    assert_eq!(recorded, each, "the cost events");
    let settled = costs_of(served, agent).await;
    assert_eq!(settled, each, "GET /v1/costs");
    assert!(settled <= cap);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_remote_turns_reserve_their_max_cost_and_never_pass_the_budget() {
    let (_peer, base) = agentplane_suites::python_peer(
        &agentplane_testkit::peers::a2a_agent_script(),
        &["--auth", "bearer", "--key", KEY],
    )
    .await;
    let sb = configured(
        &format!(
            "{}{}{}",
            remote_agent("priced", &base, "max_cost_usd = 0.009"),
            remote_agent("liar", &base, "max_cost_usd = 0.005"),
            remote_agent("unbounded", &base, ""),
        ),
        &[
            ("priced-budget", "priced", "0.01"),
            ("liar-budget", "liar", "1"),
            ("unbounded-budget", "unbounded", "1"),
        ],
    );
    let (served, _model) = serve(&sb).await;
    // Said at start: the agent a budget selects without max_cost_usd, and the budget.
    let stderr = served.stderr();
    assert!(
        stderr.contains("budget `unbounded-budget` applies to external agent `unbounded`"),
        "{stderr}"
    );
    assert!(!stderr.contains("external agent `priced`"), "{stderr}");

    // 10 at once, $0.009 each, $0.01 to spend: one runs; before this was fixed all
    // ten ran and $0.09 was settled.
    race_against_the_budget(
        &served,
        &sb,
        ("priced", "priced=0.009", 10),
        ("priced-budget", 10_000, 9_000),
    )
    .await;
    // The account is not spent ($0.001 left) but no turn fits in it any more.
    let after = one_turn(&served, &sb, "priced", "priced=0.009").await;
    assert_eq!(after.stop, "error", "{:#?}", after.events);
    assert_eq!(costs_of(&served, "priced").await, 9_000);

    // Reports $0.009 against a max of $0.005: charged $0.005, the report kept.
    let liar = one_turn(&served, &sb, "liar", "priced=0.009").await;
    assert_eq!(liar.stop, "text_answer", "{:#?}", liar.events);
    let cost = of_kind(&liar.events, "cost");
    assert_eq!(cost.len(), 1);
    assert_eq!(cost[0]["usd_micros"], 5_000);
    let flagged = of_kind(&liar.events, "security_event");
    assert_eq!(flagged.len(), 1, "{:#?}", liar.events);
    assert_eq!(flagged[0]["event_type"], "usage_over_reported");
    let detail = flagged[0]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("$0.009") && detail.contains("$0.005"),
        "{detail}"
    );
    assert_eq!(costs_of(&served, "liar").await, 5_000);

    // No max_cost_usd under a budget: refused, naming the key; the remote never asked.
    let methods = |record: Value| record["methods"].as_array().map_or(0, Vec::len);
    let record = || async {
        reqwest::get(format!("{base}/record"))
            .await
            .expect("record")
            .json::<Value>()
            .await
            .expect("record JSON")
    };
    let before = methods(record().await);
    let unbounded = one_turn(&served, &sb, "unbounded", "priced=0.009").await;
    assert_eq!(unbounded.stop, "error", "{:#?}", unbounded.events);
    let error = of_kind(&unbounded.events, "error");
    assert_eq!(error[0]["code"], "BUDGET_EXCEEDED");
    let message = error[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("[agents.unbounded] max_cost_usd"),
        "{message}"
    );
    let denied = of_kind(&unbounded.events, "policy_denied");
    assert_eq!(denied[0]["policy"], "unbounded-budget", "{denied:#?}");
    assert_eq!(
        methods(record().await),
        before,
        "the remote was never asked"
    );
    assert_eq!(costs_of(&served, "unbounded").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_acp_turns_reserve_their_max_cost_and_never_pass_the_budget() {
    let sb = configured(
        &format!(
            "{}{}",
            acp_agent("coder", "max_cost_usd = 0.35"),
            acp_agent("unbounded", "")
        ),
        &[
            ("coder-budget", "coder", "0.5"),
            ("unbounded-budget", "unbounded", "1"),
        ],
    );
    let (served, _model) = serve(&sb).await;

    // The peer reports $0.35 a session; $0.50 pays for one.
    race_against_the_budget(
        &served,
        &sb,
        ("coder", "usage", 10),
        ("coder-budget", 500_000, 350_000),
    )
    .await;

    let unbounded = one_turn(&served, &sb, "unbounded", "usage").await;
    assert_eq!(unbounded.stop, "error", "{:#?}", unbounded.events);
    let error = of_kind(&unbounded.events, "error");
    assert_eq!(error[0]["code"], "BUDGET_EXCEEDED");
    let message = error[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("[agents.unbounded] max_cost_usd"),
        "{message}"
    );
    assert!(of_kind(&unbounded.events, "message_delta").is_empty());
    assert_eq!(costs_of(&served, "unbounded").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_a2a_tool_calls_reserve_the_remotes_max_cost_on_the_callers_budget() {
    let (_peer, base) = agentplane_suites::python_peer(
        &agentplane_testkit::peers::a2a_agent_script(),
        &["--auth", "bearer", "--key", KEY],
    )
    .await;
    let sb = configured(
        &format!(
            "{}{}\
             [agents.caller]\nsystem_prompt = \"You ask the remote.\"\n\
             ensembles = [\"a2a__priced\"]\nmax_steps = 2\n\
             [agents.careless]\nsystem_prompt = \"You ask the remote.\"\n\
             ensembles = [\"a2a__unbounded\"]\nmax_steps = 2\n",
            remote_agent("priced", &base, "max_cost_usd = 0.009"),
            remote_agent("unbounded", &base, ""),
        ),
        &[
            ("caller-budget", "caller", "0.01"),
            ("careless-budget", "careless", "1"),
        ],
    );
    // Every model answer calls the remote (each turn twice, to its step limit), so the
    // order in which concurrent turns ask does not matter.
    let model = ScriptedServer::start(
        Scenario::new(vec![
            Step::tool_call("a2a__priced", json!({"message": "priced=0.009"})),
            Step::tool_call("a2a__unbounded", json!({"message": "priced=0.009"})),
        ])
        .repeating(true),
    )
    .await
    .expect("model");
    let served = start_with_env(
        &sb,
        &model.base_url(),
        &[],
        &[("AGENTPLANE_TEST_PEER_KEY", KEY)],
    )
    .await;
    let methods = || async {
        reqwest::get(format!("{base}/record"))
            .await
            .expect("record")
            .json::<Value>()
            .await
            .expect("record JSON")["methods"]
            .as_array()
            .map_or(0, Vec::len)
    };
    let before = methods().await;

    let runs = (0..10).map(|_| one_turn(&served, &sb, "caller", "ask the remote"));
    let ended = futures_util::future::join_all(runs).await;
    let events: Vec<&Value> = ended.iter().flat_map(|e| e.events.iter()).collect();
    let results: Vec<&&Value> = events
        .iter()
        .filter(|e| e["kind"] == "tool_call_result" && e["tool"] == "a2a__priced")
        .collect();
    let answered: Vec<&&&Value> = results.iter().filter(|r| r["status"] == "ok").collect();
    assert_eq!(
        answered.len(),
        1,
        "one call fits the budget: {:#?}",
        results
    );
    let denied: Vec<&&Value> = events
        .iter()
        .filter(|e| e["kind"] == "policy_denied" && e["tool"] == "a2a__priced")
        .collect();
    assert_eq!(denied.len(), results.len() - 1, "{denied:#?}");
    assert!(
        denied
            .iter()
            .all(|d| d["policy"] == "caller-budget" && d["policy_type"] == "budget"),
        "{denied:#?}"
    );
    let costs: Vec<u64> = events
        .iter()
        .filter(|e| e["kind"] == "cost" && e["model"] == "a2a:priced")
        .map(|c| c["usd_micros"].as_u64().expect("usd_micros"))
        .collect();
    assert_eq!(costs, [9_000], "one call charged what the remote reported");
    let settled = costs_of(&served, "caller").await;
    assert_eq!(settled, 9_000, "GET /v1/costs");
    assert!(settled <= 10_000);
    // The refused calls never reached the remote: one exchange's requests only.
    let asked = methods().await - before;
    assert!(asked >= 1, "the one call reached the remote");

    // No max_cost_usd under the caller's budget: refused naming the key, never asked.
    let before = methods().await;
    let careless = one_turn(&served, &sb, "careless", "ask the remote").await;
    let denied = of_kind(&careless.events, "policy_denied");
    assert!(!denied.is_empty(), "{:#?}", careless.events);
    assert_eq!(denied[0]["policy"], "careless-budget");
    let detail = denied[0]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("[agents.unbounded] max_cost_usd"),
        "{detail}"
    );
    assert_eq!(methods().await, before, "the remote was never asked");
    assert_eq!(costs_of(&served, "careless").await, 0);
}
