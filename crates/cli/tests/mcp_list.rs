//! `agentplane mcp list` as a real process: it starts each configured MCP server (npm's
//! `@modelcontextprotocol/server-everything` over stdio, and one that cannot start),
//! reports state and tools, exits 1 when a server failed, and leaves no process behind.

use std::path::Path;
use std::process::Command;

use agentplane_testkit::peers;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_agentplane");

fn everything() -> String {
    format!("{}cwd = \"servers\"\n", peers::mcp_everything_toml())
}

/// Processes whose working directory is `dir`.
fn processes_in(dir: &Path) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
                .filter(|pid| {
                    std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == dir)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn list(config_text: &str, json: bool) -> (std::process::Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("servers")).expect("servers dir");
    let config = dir.path().join("agentplane.toml");
    std::fs::write(&config, config_text).expect("config");
    let mut command = Command::new(BIN);
    command.arg("--config").arg(&config).args(["mcp", "list"]);
    if json {
        command.arg("--json");
    }
    let output = command.output().expect("agentplane runs");
    (output, dir)
}

#[test]
fn lists_each_server_with_its_state_and_tools() {
    let config = format!(
        "[mcp.servers.everything]\n{}\
         [mcp.servers.broken]\ncommand = \"sh\"\nargs = [\"-c\", \"echo 'cannot find config' >&2; exit 4\"]\n\
         cwd = \"servers\"\n\
         [agents.helper]\nsystem_prompt = \"Help.\"\nensembles = [\"everything\", \"broken\"]\n",
        everything()
    );
    let (output, dir) = list(&config, true);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "a server failed: {stdout}");
    let servers: Value = serde_json::from_str(&stdout).expect("JSON on stdout");
    let servers = servers.as_array().expect("an array");
    let by_name = |name: &str| {
        servers
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("{name} listed: {stdout}"))
    };
    let good = by_name("everything");
    assert_eq!(good["state"], "ok");
    assert_eq!(good["agents"][0], "helper");
    let tools: Vec<&str> = good["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(tools.contains(&"mcp__everything__echo"), "{tools:?}");
    let bad = by_name("broken");
    assert_eq!(bad["state"], "failed");
    let error = bad["error"].as_str().expect("error text");
    assert!(error.contains("cannot find config"), "stderr tail: {error}");
    let servers_dir = dir.path().join("servers").canonicalize().expect("dir");
    assert_eq!(processes_in(&servers_dir), Vec::<u32>::new());
}

#[test]
fn a_table_and_success_when_every_server_answers() {
    let (output, _dir) = list(
        &format!("[mcp.servers.everything]\n{}", everything()),
        false,
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("everything") && stdout.contains(" ok "),
        "{stdout}"
    );
    assert!(stdout.contains("mcp__everything__get-sum"), "{stdout}");
}

#[test]
fn a_bad_server_entry_is_a_configuration_error() {
    let (output, _dir) = list("[mcp.servers.x]\nurl = \"ftp://nope\"\n", false);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("mcp.servers.x.url"), "{stderr}");
}

#[test]
fn include_and_exclude_choose_the_servers_tools() {
    let (output, _dir) = list(
        &format!(
            "[mcp.servers.everything]\n{}include = [\"echo\", \"get-*\"]\nexclude = [\"get-env\", \"get-resource-*\"]\n",
            everything()
        ),
        true,
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    let servers: Value = serde_json::from_str(&stdout).expect("JSON on stdout");
    let mut tools: Vec<&str> = servers[0]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    tools.sort_unstable();
    assert!(tools.contains(&"mcp__everything__echo"), "{tools:?}");
    assert!(tools.contains(&"mcp__everything__get-sum"), "{tools:?}");
    for gone in [
        "mcp__everything__get-env",
        "mcp__everything__get-resource-links",
        "mcp__everything__trigger-sampling-request",
        "mcp__everything__toggle-simulated-logging",
    ] {
        assert!(!tools.contains(&gone), "{gone} left out: {tools:?}");
    }
    assert!(
        tools
            .iter()
            .all(|t| *t == "mcp__everything__echo" || t.starts_with("mcp__everything__get-")),
        "{tools:?}"
    );
    // A pattern that is not one is refused at load, naming its key.
    let (output, _dir) = list(
        &format!(
            "[mcp.servers.everything]\n{}exclude = [\"has space\"]\n",
            everything()
        ),
        false,
    );
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("mcp.servers.everything.exclude"),
        "{stderr}"
    );
}
