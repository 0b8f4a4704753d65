#!/usr/bin/env bash
# Runs every test of the workspace. Starts the local llama.cpp model server first (cached
# after the first run) so the real-server check runs too; set AGENTPLANE_TEST_LLAMA_URL to
# use a server you already have.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${AGENTPLANE_TEST_LLAMA_URL:-}" ]; then
  port="${AGENTPLANE_LOCAL_MODEL_PORT:-8690}"
  AGENTPLANE_LOCAL_MODEL_PORT="$port" ./scripts/local-model.sh --background
  export AGENTPLANE_TEST_LLAMA_URL="http://127.0.0.1:${port}/v1"
fi

if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast "$@"
else
  cargo test --workspace --no-fail-fast "$@"
fi
