#!/usr/bin/env bash
# Server CPU per request, builds side by side: what one request costs the
# `agentplane serve` process, read from /proc/PID/stat around a wrk run, which a busy
# machine disturbs far less than latency. Builds are run alternately, point by point.
#
#   bench/cpu/run.sh ENDPOINT BIN [BIN...]
#
# ENDPOINT: `threads` (POST /v1/threads: creating a thread), `gateway` (POST
# /openai/v1/chat/completions against the fixed upstream of bench/gateway), `responses`
# and `responses-kept` (POST /openai/v1/responses with `store: false`, and with the
# answer kept for previous_response_id, as OpenAI's default has it) or `turns`
# (one-call turns, sequential: a new thread, a turn, its SSE stream to the end, against
# the scripted model answering at once; bench/traces/turns.py drives them).
# Environment: BENCH_CONCURRENCY ("1 10"), BENCH_RUNS (3), BENCH_DURATION (8s),
# BENCH_WARMUP (2s); for `turns`, BENCH_TURNS (300) per run and BENCH_SCRIPTED_LLM
# (default: the release `scripted-llm` of the target directory, built if missing).
# Needs wrk and, for `gateway`, nginx (Debian: nginx-light wrk).
# Prints one line per build, concurrency and run: requests/s, p50, CPU µs per request.
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"
endpoint="${1:?usage: bench/cpu/run.sh threads|gateway|responses|responses-kept|turns BIN [BIN...]}"
shift
[ $# -ge 1 ] || { echo "usage: bench/cpu/run.sh threads|gateway BIN [BIN...]" >&2; exit 2; }
concurrency="${BENCH_CONCURRENCY:-1 10}"
runs="${BENCH_RUNS:-3}"
duration="${BENCH_DURATION:-8s}"
warmup="${BENCH_WARMUP:-2s}"
port=18686
upstream_port=18080
work=$(mktemp -d /tmp/agentplane-cpu.XXXXXX)
upstream=""
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  [ -n "$upstream" ] && kill "$upstream" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/ws"
case "$endpoint" in
  threads)
    url="http://127.0.0.1:$port/v1/threads"
    cat >"$work/post.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-Client-ID"] = "bench"
wrk.body = '{"agent": "research", "cwd": "$work/ws", "title": "t"}'
LUA
    ;;
  gateway)
    url="http://127.0.0.1:$port/openai/v1/chat/completions"
    cp "$root/bench/gateway/post.lua" "$work/post.lua"
    upstream=$("$root/bench/gateway/fixed-upstream" "$upstream_port")
    ;;
  responses|responses-kept)
    url="http://127.0.0.1:$port/openai/v1/responses"
    store=',"store":false'
    [ "$endpoint" = responses-kept ] && store=''
    cat >"$work/post.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-Client-ID"] = "bench"
wrk.body = '{"model":"fake-model","input":"hi"$store}'
LUA
    upstream=$("$root/bench/gateway/fixed-upstream" "$upstream_port")
    ;;
  turns)
    llm="${BENCH_SCRIPTED_LLM:-${CARGO_TARGET_DIR:-target}/release/scripted-llm}"
    [ -x "$llm" ] || cargo build --release -q -p agentplane-testkit --bin scripted-llm
    cat >"$work/scenario.json" <<'JSON'
{"repeat": true, "steps": [{"text": "The answer is 42.", "usage": {"prompt_tokens": 12, "completion_tokens": 5}}]}
JSON
    "$llm" --scenario "$work/scenario.json" --listen "127.0.0.1:$upstream_port" >"$work/llm.log" 2>&1 &
    upstream=$!
    ;;
  *) echo "unknown endpoint $endpoint (threads, gateway, responses, responses-kept or turns)" >&2; exit 2 ;;
esac

[ "$endpoint" = turns ] && concurrency=1
for c in $concurrency; do
  for run in $(seq "$runs"); do
    for bin in "$@"; do
      dir="$work/server"
      rm -rf "$dir"; mkdir -p "$dir"
      if [ "$endpoint" = turns ]; then
        model=scripted-model stream=true agents=$'[agents.chat]\nsystem_prompt = "You chat."'
      else
        model=fake-model stream=false agents=""
      fi
      cat >"$dir/agentplane.toml" <<TOML
[llm]
base_url = "http://127.0.0.1:$upstream_port/v1"
model = "$model"
stream = $stream
max_retries = 0
$agents
[store]
path = "events.db"
[server]
listen = "127.0.0.1:$port"
workspace_roots = ["$work/ws"]
TOML
      (cd "$dir" && exec "$bin" --config agentplane.toml serve >log 2>&1) &
      server=$!
      until curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz" 2>/dev/null; do sleep 0.2; done
      if [ "$endpoint" = turns ]; then
        out=$(python3 "$root/bench/traces/turns.py" --turns "${BENCH_TURNS:-300}" --rounds 1 \
          "$(basename "$bin")=http://127.0.0.1:$port=$server=$work/ws")
        echo "turns $(basename "$bin") run=$run: $(echo "$out" | awk '{print $2, "turns/s,", $4, "µs CPU per turn"}')"
        kill "$server"; wait "$server" 2>/dev/null || true; server=""
        continue
      fi
      wrk -t1 -c"$c" -d"$warmup" -s "$work/post.lua" "$url" >/dev/null
      before=$(awk '{print $14 + $15}' "/proc/$server/stat")
      wrk -t1 -c"$c" -d"$duration" --latency -s "$work/post.lua" "$url" >"$work/wrk.txt"
      after=$(awk '{print $14 + $15}' "/proc/$server/stat")
      requests=$(grep -o '^ *[0-9]* requests' "$work/wrk.txt" | awk '{print $1}')
      failed=$(grep -o 'Non-2xx or 3xx responses: [0-9]*' "$work/wrk.txt" | awk '{print $NF}' || true)
      rps=$(awk '/Requests\/sec/ {print $2}' "$work/wrk.txt")
      p50=$(awk '$1 == "50%" {print $2}' "$work/wrk.txt")
      ticks=$(getconf CLK_TCK)
      cpu=$(( (after - before) * 1000000 / ticks / requests ))
      echo "$endpoint $(basename "$bin") c=$c run=$run: ${rps} req/s, p50 ${p50}, ${cpu} µs CPU per request${failed:+, $failed failed}"
      kill "$server"; wait "$server" 2>/dev/null || true; server=""
    done
  done
done
