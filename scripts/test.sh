#!/usr/bin/env bash
# Runs every test of the workspace. First makes sure the system packages the tests need
# are there (scripts/install-deps.sh: installs them as root, else names the one command
# to run and stops before anything builds). Starts the local llama.cpp model server
# (cached after the first run) so the real-server check runs too; set
# AGENTPLANE_TEST_LLAMA_URL to use a server you already have.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh

if [ -z "${AGENTPLANE_TEST_LLAMA_URL:-}" ]; then
  port="${AGENTPLANE_LOCAL_MODEL_PORT:-8690}"
  # A server left running by an earlier run is reused; otherwise start one.
  if ! curl -fsS "http://127.0.0.1:${port}/v1/models" >/dev/null 2>&1; then
    AGENTPLANE_LOCAL_MODEL_PORT="$port" ./scripts/local-model.sh --background
    pidfile="${AGENTPLANE_LOCAL_MODEL_DIR:-$PWD/.local-model}/server.pid"
    # Stop the server this run started, however the run ends.
    trap 'kill "$(cat "$pidfile")" 2>/dev/null || true' EXIT
  fi
  export AGENTPLANE_TEST_LLAMA_URL="http://127.0.0.1:${port}/v1"
fi

# The real MCP peers (npm's server-everything, PyPI's mcp client); see the script.
eval "$(./scripts/test-peers.sh)"
# Redis for the shared rate limits (Debian's redis-server on 127.0.0.1:8694).
eval "$(./scripts/redis.sh)"
# A throwaway PostgreSQL on 127.0.0.1:8693 for the PostgreSQL store's tests.
if [ -z "${AGENTPLANE_TEST_POSTGRES_URL:-}" ]; then
  eval "$(./scripts/postgres.sh)"
fi

if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast "$@"
else
  cargo test --workspace --no-fail-fast "$@"
fi
