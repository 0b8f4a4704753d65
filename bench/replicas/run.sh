#!/usr/bin/env bash
# Turns per second with one and with two `serve` replicas on PostgreSQL, beside one
# replica on SQLite (the baseline), on this machine, with the scripted model answering
# at once. Method and results: docs/performance.md ("Replicas").
#
#   bench/replicas/run.sh            # needs scripts/postgres.sh (PostgreSQL on 127.0.0.1)
#
# Knobs: BENCH_REPLICAS_TURNS (turns per run, default 400), BENCH_REPLICAS_CLIENTS
# (concurrent clients, default 16), BENCH_REPLICAS_RUNS (runs per setup, default 3),
# AGENTPLANE_BIN (default: a release build, `cargo build --release -p agentplane`).
set -euo pipefail
cd "$(dirname "$0")/../.."

turns="${BENCH_REPLICAS_TURNS:-400}"
clients="${BENCH_REPLICAS_CLIENTS:-16}"
runs="${BENCH_REPLICAS_RUNS:-3}"
target="${CARGO_TARGET_DIR:-target}"
if [[ -z "${AGENTPLANE_BIN:-}" ]]; then
  cargo build --release -q -p agentplane -p agentplane-testkit --bin agentplane --bin scripted-llm
  bin="$target/release/agentplane"
  llm="$target/release/scripted-llm"
else
  bin="$AGENTPLANE_BIN"
  llm="$(dirname "$bin")/scripted-llm"
fi
eval "$(./scripts/postgres.sh)"
pg="$AGENTPLANE_TEST_POSTGRES_URL"

work="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

cat > "$work/scenario.json" <<'JSON'
{"repeat": true, "steps": [{"text": "The answer is 42.", "usage": {"prompt_tokens": 12, "completion_tokens": 5}}]}
JSON
llm_port="$(free_port)"
"$llm" --scenario "$work/scenario.json" --listen "127.0.0.1:$llm_port" >"$work/llm.log" 2>&1 &
sleep 0.5
pids+=($!)
cat > "$work/agentplane.toml" <<'TOML'
[llm]
max_retries = 0
[agents.chat]
system_prompt = "You chat."
TOML

# start_replica DB: starts a replica on DB; its base URL is left in $base.
start_replica() {
  local port; port="$(free_port)"
  (cd "$work" && exec env AGENTPLANE_LLM_BASE_URL="http://127.0.0.1:$llm_port/v1" \
    AGENTPLANE_LLM_MODEL=scripted-model AGENTPLANE_LOG=warn \
    "$bin" serve --listen "127.0.0.1:$port" --db "$1") >"$work/serve-$port.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 300); do
    if curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then
      base="http://127.0.0.1:$port"
      return
    fi
    sleep 0.1
  done
  echo "serve on $port did not start" >&2; cat "$work/serve-$port.log" >&2; exit 1
}

stop_replicas() {
  local keep=1
  for pid in "${pids[@]:$keep}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  pids=("${pids[@]:0:$keep}")
}

fresh_pg() {
  local name="ap_bench_$$_$1"
  psql_bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)/psql"
  "$psql_bin" "$pg" -q -c "DROP DATABASE IF EXISTS $name WITH (FORCE)" -c "CREATE DATABASE $name" >/dev/null
  echo "${pg%/*}/$name"
}

load() { python3 "bench/replicas/load.py" --turns "$turns" --clients "$clients" "$@"; }

echo "setup,run,turns,seconds,turns_per_s"
for run in $(seq 1 "$runs"); do
  start_replica "$work/sqlite-$run.db"; a="$base"
  echo "sqlite-1,$run,$(load "$a")"
  stop_replicas

  db="$(fresh_pg "one_$run")"
  start_replica "$db"; a="$base"
  echo "postgres-1,$run,$(load "$a")"
  stop_replicas

  db="$(fresh_pg "two_$run")"
  start_replica "$db"; a="$base"
  start_replica "$db"; b="$base"
  echo "postgres-2,$run,$(load "$a" "$b")"
  stop_replicas
done
