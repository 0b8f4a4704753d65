//! `[agents.NAME]` of `kind = "a2a"` and the `a2a__NAME` tool in the configuration:
//! what loads, and what is refused at load, naming the key.

use agentplane_runtime::config::Config;
use agentplane_runtime::settings::overrides::Overrides;

fn load(text: &str) -> Result<Config, String> {
    Config::parse(text, None, &Overrides::default()).map_err(|e| e.to_string())
}

const REMOTE: &str = "[secrets.peer]\nenv = \"PEER_KEY\"\n\
    [agents.peer]\nkind = \"a2a\"\nurl = \"http://10.0.0.5:9000/.well-known/agent-card.json\"\n\
    [agents.peer.a2a]\napi_key = \"peer\"\nheaders = { X-Team = \"ops\", X-Extra = \"${secret:peer}\" }\n";

#[test]
fn a_remote_agent_and_a_native_agent_calling_it_load() {
    let text =
        format!("{REMOTE}[agents.caller]\nsystem_prompt = \"Ask.\"\nensembles = [\"a2a__peer\"]\n");
    let config = load(&text).expect("loads");
    assert!(config.agents["peer"].is_a2a());
}

#[test]
fn max_cost_usd_is_each_external_agents_ceiling_in_micro_dollars() {
    let text = "[agents.peer]\nkind = \"a2a\"\nurl = \"http://h/card\"\nmax_cost_usd = 0.009\n\
        [agents.coder]\nkind = \"acp\"\nprofile = \"codex\"\nmax_cost_usd = 2\n\
        [agents.free]\nkind = \"acp\"\nprofile = \"codex\"\nmax_cost_usd = 0\n";
    let config = load(text).expect("loads");
    let agents = agentplane_runtime::agents::catalogue(&config);
    assert_eq!(agents["peer"].limits.max_cost_micros, Some(9_000));
    assert_eq!(agents["coder"].limits.max_cost_micros, Some(2_000_000));
    assert_eq!(agents["free"].limits.max_cost_micros, Some(0));
    assert_eq!(agents["engineering"].limits.max_cost_micros, None);
}

#[test]
fn bad_remote_agents_are_refused_naming_the_key() {
    let cases = [
        ("[agents.x]\nkind = \"a2a\"\n", "agents.x.url"),
        (
            "[agents.x]\nkind = \"a2a\"\nurl = \"ftp://h/card\"\n",
            "http or https",
        ),
        (
            "[agents.x]\nkind = \"a2a\"\nurl = \"http://u:p@h/card\"\n",
            "credentials",
        ),
        (
            "[agents.x]\nkind = \"a2a\"\nurl = \"not a url\"\n",
            "not a URL",
        ),
        (
            "[agents.x]\nkind = \"a2a\"\nurl = \"http://h/c\"\nensembles = [\"fs\"]\n",
            "agents.x.ensembles",
        ),
        (
            "[agents.x]\nkind = \"a2a\"\nurl = \"http://h/c\"\n[agents.x.a2a]\napi_key = \"nope\"\n",
            "unknown secret `nope`",
        ),
        (
            "[agents.x]\nkind = \"a2a\"\nurl = \"http://h/c\"\n[agents.x.a2a]\ntoken = \"k\"\n",
            "unknown field",
        ),
        (
            "[agents.x]\nkind = \"a2a\"\nurl = \"http://h/c\"\n[agents.x.a2a]\ntimeout_secs = 0\n",
            "at least 1",
        ),
        (
            "[agents.x]\nsystem_prompt = \"s\"\nurl = \"http://h/c\"\n",
            "need `kind = \"a2a\"`",
        ),
        (
            "[agents.x]\nsystem_prompt = \"s\"\nensembles = [\"a2a__nobody\"]\n",
            "names no agent of kind `a2a`",
        ),
        ("[agents.x]\nkind = \"mcp\"\n", "use `llm`, `acp` or `a2a`"),
        (
            "[agents.x]\nkind = \"a2a\"\nurl = \"http://h/c\"\nmax_cost_usd = -0.5\n",
            "agents.x.max_cost_usd",
        ),
        (
            "[agents.x]\nkind = \"a2a\"\nurl = \"http://h/c\"\nmax_cost_usd = nan\n",
            "finite, non-negative",
        ),
        (
            "[agents.x]\nkind = \"a2a\"\nurl = \"http://h/c\"\nmax_cost_usd = 2e6\n",
            "at most 1000000 dollars",
        ),
        (
            "[agents.x]\nsystem_prompt = \"s\"\nmax_cost_usd = 0.5\n",
            "is for external agents",
        ),
    ];
    for (text, expected) in cases {
        let error = load(text).expect_err(text);
        assert!(error.contains(expected), "{text}: {error}");
    }
}
