#!/usr/bin/env bash
# The gateway benchmark: what agentplane's OpenAI-compatible gateway adds to a model
# call, side by side with LiteLLM's proxy and Portkey's gateway, in one run, against the
# same fixed upstream.
#
#   bench/gateway/run.sh [RUNS]        # default 3 runs; results in $BENCH_OUT
#
# Three targets get the same non-streaming chat completion (post.lua) from wrk:
#   direct      nginx (fixed-upstream) answering with a constant body: the baseline
#   agentplane  `agentplane serve`, POST /openai/v1/chat/completions -> nginx
#   litellm     LiteLLM proxy (PyPI litellm[proxy], pinned below), POST /v1/chat/completions -> nginx
#   portkey     Portkey's AI gateway (npm @portkey-ai/gateway, pinned below, on node),
#               POST /v1/chat/completions with x-portkey-custom-host -> nginx
# Each run: for each concurrency, for each target, a warm-up (BENCH_WARMUP, 3s) then a
# measurement (BENCH_DURATION, 10s) with `wrk --latency`. Targets are interleaved per
# point, so all three see the same machine. The summary (medians over runs, added
# latency = target - direct, ratios) is printed and written to $BENCH_OUT/summary.md.
#
# Needs: nginx and wrk (Debian: apt-get install -y nginx-light wrk), python3 (LiteLLM
# is installed into .local-model/bench), node and npm (Portkey, into
# .local-model/bench/portkey), and a release build (done here).
# Environment: BENCH_CONCURRENCY ("1 10 100"), BENCH_DURATION (10s), BENCH_WARMUP (3s),
# BENCH_OUT (a new temp dir), BENCH_TARGETS ("direct agentplane litellm portkey"), BENCH_STREAM=1
# (streamed completions: the upstream's /stream/v1 SSE body, post-stream.lua),
# BENCH_NO_BUILD=1 (use the release binary as it is), BENCH_API=chat|responses|messages
# (the client API measured: OpenAI's chat completions, its Responses API, or Anthropic's
# Messages API; the upstream is chat completions for all, so agentplane and LiteLLM both
# translate; `direct` stays the upstream's chat completion, Portkey serves chat only).
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"
here="$root/bench/gateway"

runs="${1:-3}"
concurrency="${BENCH_CONCURRENCY:-1 10 100}"
duration="${BENCH_DURATION:-10s}"
warmup="${BENCH_WARMUP:-3s}"
targets="${BENCH_TARGETS:-direct agentplane litellm portkey}"
litellm_version="1.106.2"
portkey_version="1.15.2"
portkey_port=18787
upstream_port=18080
agentplane_port=18686
litellm_port=18400
out="${BENCH_OUT:-$(mktemp -d /tmp/gateway-bench.XXXXXX)}"
if [[ "${BENCH_STREAM:-0}" == 1 ]]; then
  upstream_base="/stream/v1"
  script="post-stream.lua"
  llm_stream=true
  body='{"model":"fake-model","stream":true,"messages":[{"role":"user","content":"hi"}]}'
  expect='424242'
else
  upstream_base="/v1"
  script="post.lua"
  llm_stream=false
  body='{"model":"fake-model","messages":[{"role":"user","content":"hi"}]}'
  expect='The answer is 42.'
fi
api="${BENCH_API:-chat}"
case "$api" in
  chat) ;;
  responses)
    script="post-api.lua"
    body='{"model":"fake-model","input":"hi","store":false}'
    ;;
  messages)
    script="post-api.lua"
    body='{"model":"fake-model","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}'
    ;;
  *) echo "gateway bench: BENCH_API must be chat, responses or messages" >&2; exit 1 ;;
esac
if [[ "$api" != chat && "${BENCH_STREAM:-0}" == 1 ]]; then
  echo "gateway bench: BENCH_STREAM=1 measures chat completions only" >&2
  exit 1
fi
export BODY="$body"
mkdir -p "$out"

for tool in /usr/sbin/nginx wrk; do
  if ! command -v "$tool" >/dev/null; then
    echo "gateway bench: $tool is missing; install it with: apt-get install -y nginx-light wrk" >&2
    exit 1
  fi
done

venv="$root/.local-model/bench"
if [[ " $targets " == *" litellm "* ]] &&
  ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('litellm') != '$litellm_version')" 2>/dev/null; then
  echo "gateway bench: installing litellm[proxy]==$litellm_version into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "litellm[proxy]==$litellm_version" >&2
fi

portkey_dir="$root/.local-model/bench/portkey"
portkey_server="$portkey_dir/node_modules/@portkey-ai/gateway/build/start-server.js"
if [[ " $targets " == *" portkey "* ]] &&
  [[ "$(node -p "require('$portkey_dir/node_modules/@portkey-ai/gateway/package.json').version" 2>/dev/null)" != "$portkey_version" ]]; then
  echo "gateway bench: installing @portkey-ai/gateway@$portkey_version into $portkey_dir" >&2
  mkdir -p "$portkey_dir"
  (cd "$portkey_dir" && npm install --no-audit --no-fund --loglevel=error \
    "@portkey-ai/gateway@$portkey_version" >&2)
fi

if [[ "${BENCH_NO_BUILD:-0}" != 1 ]]; then
  echo "gateway bench: release build" >&2
  cargo build --release --quiet -p agentplane
fi
binary="${CARGO_TARGET_DIR:-$root/target}/release/agentplane"

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

wait_for() { # URL [HEADER]
  local deadline=$((SECONDS + 120))
  until curl -fsS -o /dev/null ${2:+-H "$2"} "$1" 2>/dev/null; do
    if ((SECONDS >= deadline)); then
      echo "gateway bench: $1 did not answer within 120 s" >&2
      exit 1
    fi
    sleep 0.5
  done
}

pids+=("$("$here/fixed-upstream" "$upstream_port")")
wait_for "http://127.0.0.1:$upstream_port/v1/models"

if [[ " $targets " == *" agentplane "* ]]; then
  mkdir -p "$out/agentplane"
  cat >"$out/agentplane/agentplane.toml" <<TOML
[llm]
base_url = "http://127.0.0.1:$upstream_port$upstream_base"
model = "fake-model"
stream = $llm_stream
max_retries = 0
[store]
path = "events.db"
[server]
listen = "127.0.0.1:$agentplane_port"
TOML
  (cd "$out/agentplane" && exec "$binary" --config agentplane.toml serve >serve.log 2>&1) &
  pids+=("$!")
  wait_for "http://127.0.0.1:$agentplane_port/healthz"
fi

# LiteLLM calls an `openai/` model's own Responses or Messages route upstream; as a
# `hosted_vllm/` model with `use_chat_completions_api` it translates them to chat
# completions, as agentplane does.
litellm_model="openai/fake-model"
litellm_bridge=false
[[ "$api" != chat ]] && litellm_model="hosted_vllm/fake-model" && litellm_bridge=true
if [[ " $targets " == *" litellm "* ]]; then
  mkdir -p "$out/litellm"
  cat >"$out/litellm/config.yaml" <<YAML
model_list:
  - model_name: fake-model
    litellm_params:
      model: $litellm_model
      api_base: http://127.0.0.1:$upstream_port$upstream_base
      api_key: fake-key
      use_chat_completions_api: $litellm_bridge
litellm_settings:
  telemetry: false
general_settings:
  master_key: sk-bench-0123456789
YAML
  (cd "$out/litellm" && LITELLM_LOCAL_MODEL_COST_MAP=True LITELLM_TELEMETRY=False \
    exec "$venv/bin/litellm" --config config.yaml --host 127.0.0.1 --port "$litellm_port" \
    >litellm.log 2>&1) &
  pids+=("$!")
  wait_for "http://127.0.0.1:$litellm_port/health/liveliness"
fi

if [[ " $targets " == *" portkey "* ]]; then
  mkdir -p "$out/portkey"
  (cd "$out/portkey" && exec node "$portkey_server" --port="$portkey_port" >portkey.log 2>&1) &
  pids+=("$!")
  wait_for "http://127.0.0.1:$portkey_port/"
fi
# Portkey learns the upstream from each request's headers (post.lua reads this).
export PORTKEY_HOST="http://127.0.0.1:$upstream_port$upstream_base"

url_of() {
  case "$api:$1" in
    *:direct) echo "http://127.0.0.1:$upstream_port$upstream_base/chat/completions" ;;
    chat:agentplane) echo "http://127.0.0.1:$agentplane_port/openai/v1/chat/completions" ;;
    responses:agentplane) echo "http://127.0.0.1:$agentplane_port/openai/v1/responses" ;;
    messages:agentplane) echo "http://127.0.0.1:$agentplane_port/anthropic/v1/messages" ;;
    chat:litellm) echo "http://127.0.0.1:$litellm_port/v1/chat/completions" ;;
    responses:litellm) echo "http://127.0.0.1:$litellm_port/v1/responses" ;;
    messages:litellm) echo "http://127.0.0.1:$litellm_port/v1/messages" ;;
    *:portkey) echo "http://127.0.0.1:$portkey_port/v1/chat/completions" ;;
  esac
}
auth_of() {
  case "$1" in
    litellm) echo "sk-bench-0123456789" ;;
    portkey) echo "fake-key" ;;
    *) echo "" ;;
  esac
}

# Every target must answer the request with a completion before anything is timed.
for target in $targets; do
  auth="$(auth_of "$target")"
  extra=()
  # The baseline is the upstream's own chat completion, whatever API is measured.
  [[ "$target" == direct ]] && answer_body='{"model":"fake-model","messages":[{"role":"user","content":"hi"}]}' || answer_body="$body"
  [[ "$target" == portkey ]] && extra=(-H "x-portkey-provider: openai" -H "x-portkey-custom-host: $PORTKEY_HOST")
  answer="$(curl -fsS -H 'Content-Type: application/json' -H 'X-Client-ID: bench' \
    ${auth:+-H "Authorization: Bearer $auth"} "${extra[@]}" \
    -d "$answer_body" "$(url_of "$target")")"
  # Streamed answers are checked by their text deltas joined.
  joined="$(printf '%s' "$answer" | grep -o '"content":"[^"]*"' | sed 's/"content":"//; s/"$//' | tr -d '\n' || true)"
  if [[ "$answer" != *"$expect"* && "$joined" != *"$expect"* ]]; then
    echo "gateway bench: $target answered something else: $answer" >&2
    exit 1
  fi
done

results="$out/results.tsv"
printf 'run\tconcurrency\ttarget\trps\tp50_us\tp99_us\terrors\n' >"$results"
for run in $(seq 1 "$runs"); do
  for c in $concurrency; do
    for target in $targets; do
      auth="$(auth_of "$target")"
      url="$(url_of "$target")"
      host=""
      [[ "$target" == portkey ]] && host="$PORTKEY_HOST"
      run_script="$script"
      [[ "$target" == direct && "$api" != chat ]] && run_script="post.lua"
      AUTH="$auth" PORTKEY_HOST="$host" wrk -t1 -c"$c" -d"$warmup" --timeout 5s -s "$here/$run_script" "$url" >/dev/null
      AUTH="$auth" PORTKEY_HOST="$host" wrk -t1 -c"$c" -d"$duration" --timeout 5s --latency -s "$here/$run_script" "$url" \
        >"$out/wrk-$run-$c-$target.txt"
      python3 "$here/summary.py" --parse "$out/wrk-$run-$c-$target.txt" "$run" "$c" "$target" >>"$results"
      tail -n 1 "$results" >&2
    done
  done
done

for target in agentplane litellm portkey; do
  for pid in "${pids[@]}"; do
    if [[ -r "/proc/$pid/status" ]] && [[ "$(cat "/proc/$pid/cmdline" 2>/dev/null | tr '\0' ' ')" == *"$target"* ]]; then
      grep -E 'VmRSS|VmHWM' "/proc/$pid/status" | sed "s/^/$target /" >>"$out/memory.txt"
    fi
  done
done

python3 "$here/summary.py" --summarize "$results" | tee "$out/summary.md"
[[ -s "$out/memory.txt" ]] && cat "$out/memory.txt"
echo "gateway bench: raw results in $out" >&2
