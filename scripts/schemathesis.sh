#!/usr/bin/env bash
# Fuzzes the HTTP API against its own OpenAPI document with schemathesis (PyPI): a live
# `agentplane serve` (debug build, temp DB, a bearer token) on a free port of 127.0.0.1,
# with the testkit's `scripted-llm` as the model, answering every chat with text. Fails
# on any 5xx, on any response outside the document's schemas, on a panic in the server's
# log and on a server that did not survive the run.
#
#   scripts/schemathesis.sh                 # what .ci/run runs (about 1.5 minutes)
#   scripts/schemathesis.sh --full          # at least 5,000 generated cases in all
#   AGENTPLANE_SCHEMATHESIS_MAX=20000 scripts/schemathesis.sh   # a longer hunt
#   scripts/schemathesis.sh --checks all    # extra arguments go to `st run`
#
# Environment: AGENTPLANE_SCHEMATHESIS_DIR (the venv, default $PWD/.local-model/
# schemathesis, gitignored), AGENTPLANE_SCHEMATHESIS_MAX (the cases wanted in all: the
# examples per operation become that over the number of operations; `--full` means
# 5000), SCHEMATHESIS_MAX_EXAMPLES (per operation, default 20, when no total is asked
# for), SCHEMATHESIS_SEED (default 1, so a failure reproduces), AGENTPLANE_SCHEMATHESIS_LOG
# (a file to keep the server's log in).
set -euo pipefail
cd "$(dirname "$0")/.."

version="4.32.5"
total="${AGENTPLANE_SCHEMATHESIS_MAX:-}"
if [[ "${1:-}" == "--full" ]]; then
  shift
  total="${total:-5000}"
fi
cache="${AGENTPLANE_SCHEMATHESIS_DIR:-$PWD/.local-model/schemathesis}"
examples="${SCHEMATHESIS_MAX_EXAMPLES:-20}"
seed="${SCHEMATHESIS_SEED:-1}"
st="$cache/venv/bin/st"

if ! "$st" --version 2>/dev/null | grep -qF "$version"; then
  echo "installing schemathesis $version into $cache/venv" >&2
  mkdir -p "$cache"
  python3 -m venv "$cache/venv"
  "$cache/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "schemathesis==$version"
fi

cargo build --quiet -p agentplane -p agentplane-testkit --bins
bin="${CARGO_TARGET_DIR:-$PWD/target}/debug"

work="$(mktemp -d)"
server_pid=""
model_pid=""
stop() {
  [[ -n "$server_pid" ]] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  [[ -n "$model_pid" ]] && kill -TERM "$model_pid" 2>/dev/null && wait "$model_pid" 2>/dev/null
  rm -rf "$work"
}
trap stop EXIT

# The model: one text answer, repeated forever, so every turn ends quickly and no tool
# ever runs, whatever the fuzzer sends.
cat >"$work/scenario.json" <<'JSON'
{"repeat": true, "steps": [{"text": "scripted answer", "usage": {"prompt_tokens": 5, "completion_tokens": 2}}]}
JSON
"$bin/scripted-llm" --scenario "$work/scenario.json" >"$work/model.url" 2>"$work/model.log" &
model_pid=$!
for _ in $(seq 100); do [[ -s "$work/model.url" ]] && break; sleep 0.1; done
model_url="$(head -n1 "$work/model.url")"
[[ -n "$model_url" ]] || { echo "scripted-llm did not start:" >&2; cat "$work/model.log" >&2; exit 1; }

# The configuration in a folder of its own: a workspace below it is refused (ADR 0040).
mkdir -p "$work/ws" "$work/config"
cat >"$work/config/agentplane.toml" <<'TOML'
[llm]
max_retries = 0
[server]
shutdown_grace_secs = 2
permission_timeout_secs = 2
TOML
# The thread below works in $work/ws: a root of its own, since `serve` on loopback
# otherwise confines workspaces to the directory it started in (docs/identity.md).
printf 'workspace_roots = ["%s"]\n' "$work/ws" >>"$work/config/agentplane.toml"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
token="schemathesis-$RANDOM$RANDOM"
base="http://127.0.0.1:$port"
AGENTPLANE_CONFIG="$work/config/agentplane.toml" \
  AGENTPLANE_LLM_BASE_URL="$model_url" AGENTPLANE_LLM_MODEL="scripted-model" \
  AGENTPLANE_AUTH_TOKEN="$token" \
  "$bin/agentplane" serve --listen "127.0.0.1:$port" --db "$work/events.db" \
  2>"$work/serve.log" &
server_pid=$!
for _ in $(seq 300); do
  curl -fsS "$base/healthz" >/dev/null 2>&1 && break
  kill -0 "$server_pid" 2>/dev/null || { echo "agentplane serve exited:" >&2; cat "$work/serve.log" >&2; exit 1; }
  sleep 0.1
done
curl -fsS "$base/healthz" >/dev/null || { echo "no /healthz after 30 s" >&2; cat "$work/serve.log" >&2; exit 1; }

# One valid thread, so the fuzzer's calls on a thread reach past "not found" (it learns
# the id from GET /v1/threads). Following a thread's events never ends by design, so
# each such call lasts the request timeout: 2 s bounds them without cutting a turn.
curl -fsS -X POST "$base/v1/threads" -H "X-Client-ID: schemathesis" \
  -H "Authorization: Bearer $token" -H 'content-type: application/json' \
  -d "{\"agent\": \"engineering\", \"cwd\": \"$work/ws\", \"title\": \"fuzz\"}" >/dev/null

if [[ -n "$total" ]]; then
  # Operations whose inputs are few give fewer cases than asked, hence the margin of 2.
  operations="$(curl -fsS "$base/openapi.json" | python3 -c '
import json, sys
doc = json.load(sys.stdin)
verbs = {"get", "put", "post", "delete", "patch", "head", "options"}
print(sum(1 for item in doc["paths"].values() for verb in item if verb in verbs))')"
  examples=$(((2 * total + operations - 1) / operations))
  echo "$operations operations: $examples examples each for at least $total cases" >&2
fi

echo "schemathesis $version against $base/openapi.json (${examples} examples per operation, seed $seed)" >&2
status=0
# From the temp dir: schemathesis keeps its crash cache in ./.schemathesis.
(cd "$work" && "$st" run "$base/openapi.json" \
  --checks not_a_server_error,response_schema_conformance \
  --header "X-Client-ID: schemathesis" \
  --header "Authorization: Bearer $token" \
  --max-examples "$examples" \
  --seed "$seed" \
  --request-timeout 2 \
  --workers 1 \
  --suppress-health-check all \
  --no-color \
  "$@") || status=$?

# A handler that panics leaves two kinds of trace: the panic hook's "thread '…' panicked
# at …" on stderr, and tracing's records of a failed task or connection ("panic" in a
# field or message). Either fails the run, as does a server that no longer answers.
if grep -n -i -E "panicked at|panic" "$work/serve.log" >&2; then
  echo "the server's log shows a panic (lines above)" >&2
  status=1
fi
if ! kill -0 "$server_pid" 2>/dev/null || ! curl -fsS "$base/healthz" >/dev/null; then
  echo "agentplane serve did not survive the run" >&2
  status=1
fi
if [[ -n "${AGENTPLANE_SCHEMATHESIS_LOG:-}" ]]; then
  cp "$work/serve.log" "$AGENTPLANE_SCHEMATHESIS_LOG"
fi
if ((status != 0)); then
  echo "--- agentplane serve log (last 40 lines) ---" >&2
  tail -n 40 "$work/serve.log" >&2
fi
exit "$status"
