#!/usr/bin/env bash
# What exporting traces costs a turn: three `serve` processes (release, SQLite, the
# scripted model answering at once), one without a collector, one exporting to an OTLP
# receiver on 127.0.0.1 (crates/testkit/peers/otlp_receiver.py), one exporting to a
# port nothing listens on; the same sequential turns against each, rounds alternating
# in one run. Prints turns/s and the server's CPU per turn (/proc/PID/stat).
#   bench/traces/run.sh [TURNS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
turns="${1:-300}"
rounds="${2:-3}"
target="${CARGO_TARGET_DIR:-target}"
cargo build --release -q -p agentplane -p agentplane-testkit --bin agentplane --bin scripted-llm
bin="$target/release/agentplane"
llm="$target/release/scripted-llm"
eval "$(./scripts/test-peers.sh)"
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

cat >"$work/scenario.json" <<'JSON'
{"repeat": true, "steps": [{"text": "The answer is 42.", "usage": {"prompt_tokens": 12, "completion_tokens": 5}}]}
JSON
llm_port="$(free_port)"
"$llm" --scenario "$work/scenario.json" --listen "127.0.0.1:$llm_port" >"$work/llm.log" 2>&1 &
pids+=($!)
"$AGENTPLANE_TEST_PYTHON" crates/testkit/peers/otlp_receiver.py "$work/spans.jsonl" >"$work/receiver.port" &
pids+=($!)
for _ in $(seq 100); do [[ -s "$work/receiver.port" ]] && break; sleep 0.1; done
receiver_port="$(awk '{print $2}' "$work/receiver.port")"

targets=()
start() { # NAME TELEMETRY-SECTION
  local dir="$work/$1" port
  mkdir -p "$dir/ws" "$dir/config"
  port="$(free_port)"
  printf '[store]\npath = "events.db"\n[llm]\nmax_retries = 0\n[agents.chat]\nsystem_prompt = "You chat."\n%s' "$2" >"$dir/config/agentplane.toml"
  (cd "$dir" && exec env AGENTPLANE_LLM_BASE_URL="http://127.0.0.1:$llm_port/v1" \
    AGENTPLANE_LLM_MODEL=scripted-model AGENTPLANE_LOG=warn \
    "$root_bin" --config "$dir/config/agentplane.toml" serve --listen "127.0.0.1:$port") >"$dir/serve.log" 2>&1 &
  pids+=($!)
  targets+=("$1=http://127.0.0.1:$port=$!=$dir/ws")
  for _ in $(seq 300); do
    curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "bench: $1 did not start" >&2; cat "$dir/serve.log" >&2; exit 1
}
root_bin="$(realpath "$bin")"
start off ""
start exporting "[telemetry]
otlp_endpoint = \"http://127.0.0.1:$receiver_port\"
"
start collector_down "[telemetry]
otlp_endpoint = \"http://127.0.0.1:$(free_port)\"
"
python3 bench/traces/turns.py --turns "$turns" --rounds "$rounds" "${targets[@]}"
echo "spans received: $(wc -l <"$work/spans.jsonl" 2>/dev/null || echo 0)"
