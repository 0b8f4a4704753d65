#!/usr/bin/env bash
# The client under test for the conformance suite's client scenarios: agentplane's MCP
# client, driven through the CLI as a user drives it. The suite runs
# `client.sh SERVER_URL` with MCP_CONFORMANCE_SCENARIO set (scripts/mcp-conformance.sh
# passes this file as `--command`).
#
#  1. `agentplane mcp list --json` with `[mcp.servers.conformance] url = SERVER_URL`:
#     connect, initialize, list the tools;
#  2. for the scenarios whose server offers a tool to call, one turn of an agent whose
#     only ensemble is that server, with the testkit's scripted model (`scripted-llm`)
#     answering first with a call of `mcp__conformance__TOOL`, then with `finish_task`. The
#     tool and arguments are the scenario's where it needs them (tools_call: add_numbers
#     {a, b}); otherwise the first tool, with `{}`.
#
# Environment: AGENTPLANE_CONFORMANCE_BIN, the directory holding `agentplane` and
# `scripted-llm` (set by scripts/mcp-conformance.sh).
set -euo pipefail
url="${1:?usage: client.sh SERVER_URL}"
scenario="${MCP_CONFORMANCE_SCENARIO:-}"
bin="${AGENTPLANE_CONFORMANCE_BIN:?AGENTPLANE_CONFORMANCE_BIN is the directory of agentplane and scripted-llm}"

work="$(mktemp -d)"
model_pid=""
cleanup() {
  if [[ -n "$model_pid" ]]; then
    kill -TERM "$model_pid" 2>/dev/null || true
    wait "$model_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/config" "$work/ws"
config="$work/config/agentplane.toml"
cat >"$config" <<TOML
[llm]
max_retries = 0

[mcp.servers.conformance]
url = "$url"
startup_timeout_secs = 20
call_timeout_secs = 20

[agents.conformance]
system_prompt = "Call the conformance server's tool once, then say what it returned."
ensembles = ["conformance"]
TOML

echo "client.sh: scenario '$scenario' against $url" >&2
listed="$work/list.json"
"$bin/agentplane" mcp list --config "$config" --json >"$listed" || { status=$?; cat "$listed" >&2; exit "$status"; }
cat "$listed" >&2

# The tool a turn calls, and its arguments; nothing to call means `mcp list` was the test.
call="$(python3 - "$listed" "$scenario" <<'PY'
import json, sys
servers = json.load(open(sys.argv[1]))
scenario = sys.argv[2]
tools = []
for server in servers:
    for tool in server.get("tools") or []:
        tools.append(tool["name"])
# The scenarios whose tool needs arguments: (tool, arguments); otherwise the first tool, {}.
known = {
    "tools_call": ("add_numbers", {"a": 5, "b": 3}),
    "http-invalid-tool-headers": ("valid_tool", {"region": "us-west1"}),
}
# `mcp list` names tools as the model sees them: mcp__conformance__TOOL.
tool, arguments = known.get(scenario, (None, {}))
name = f"mcp__conformance__{tool}" if tool else (tools[0] if tools else None)
if name:
    print(json.dumps({"name": name, "arguments": arguments}))
PY
)"
if [[ -z "$call" ]]; then
  echo "client.sh: the server offers no tool; mcp list was the whole client" >&2
  exit 0
fi

cat >"$work/scenario.json" <<JSON
{"steps": [
  {"tool_calls": [$call], "usage": {"prompt_tokens": 10, "completion_tokens": 5}},
  {"tool_calls": [{"name": "finish_task", "arguments": {"summary": "The tool answered."}}],
   "usage": {"prompt_tokens": 20, "completion_tokens": 5}}
]}
JSON
"$bin/scripted-llm" --scenario "$work/scenario.json" >"$work/model.url" 2>"$work/model.log" &
model_pid=$!
for _ in $(seq 100); do [[ -s "$work/model.url" ]] && break; sleep 0.1; done
model_url="$(head -n1 "$work/model.url")"
[[ -n "$model_url" ]] || { echo "client.sh: scripted-llm did not start" >&2; cat "$work/model.log" >&2; exit 1; }

echo "client.sh: one turn calling $call" >&2
(cd "$work/ws" && AGENTPLANE_LLM_BASE_URL="$model_url" AGENTPLANE_LLM_MODEL="scripted-model" \
  XDG_DATA_HOME="$work/data" \
  "$bin/agentplane" run --config "$config" --agent conformance --workspace "$work/ws" \
  --json "Call the conformance server's tool.")
