#!/usr/bin/env bash
# Load under faults (docs/reliability.md): 1,000 concurrent turns through the release
# binary with a model server that always answers, then with one that fails one request
# in ten; prints p50/p99 of both and the ratio.
#
#   bench/load-faults.sh            # LOAD_TURNS=1000 LOAD_FAIL_EVERY=10 LOAD_ROUNDS=1
#   LOAD_ROUNDS=3 bench/load-faults.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p agentplane -p agentplane-suites --bin agentplane --bin load-faults
target="${CARGO_TARGET_DIR:-target}"
# Each turn holds two sockets here and one more in the server.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
AGENTPLANE_BIN="$target/release/agentplane" exec "$target/release/load-faults"
