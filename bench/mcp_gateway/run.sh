#!/usr/bin/env bash
# What the MCP gateway adds to a tool call, side by side in one run: npm's
# server-everything over streamable HTTP on 127.0.0.1, called directly and through
# `agentplane serve`'s /mcp/gateway (release build, SQLite) by PyPI's `mcp` client
# (bench/mcp_gateway/echo.py). Needs the test peers (scripts/test-peers.sh).
#   bench/mcp_gateway/run.sh [CALLS] [ROUNDS]
#   BENCH_BASELINE=/path/to/older/agentplane bench/mcp_gateway/run.sh   # two builds side by side
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
calls="${1:-300}"
rounds="${2:-3}"
eval "$(./scripts/test-peers.sh)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
cargo build --quiet --release -p agentplane
bin="$CARGO_TARGET_DIR/release/agentplane"
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
free_port() { "$AGENTPLANE_TEST_PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

upstream_port=$(free_port)
PORT=$upstream_port "$AGENTPLANE_TEST_NODE" \
  "$AGENTPLANE_TEST_NODE_PEERS/node_modules/@modelcontextprotocol/server-everything/dist/index.js" \
  streamableHttp >"$work/upstream.log" 2>&1 &
pids+=($!)
cat >"$work/agentplane.toml" <<TOML
[store]
path = "$work/events.db"
[mcp.servers.everything]
url = "http://127.0.0.1:$upstream_port/mcp"
[mcp.gateway]
servers = ["everything"]
TOML
targets=()
start_gateway() { # NAME BINARY
  local port dir=$work/$1
  port=$(free_port)
  mkdir -p "$dir"
  sed "s|$work/events.db|$dir/events.db|" "$work/agentplane.toml" >"$dir/agentplane.toml"
  local key
  key=$("$2" --config "$dir/agentplane.toml" keys create --client bench --role operator 2>/dev/null | tail -1)
  AGENTPLANE_LOG=warn "$2" --config "$dir/agentplane.toml" serve --listen "127.0.0.1:$port" \
    >"$dir/serve.log" 2>&1 &
  pids+=($!)
  targets+=(--gateway "$1=http://127.0.0.1:$port/mcp/gateway=$!=$key")
  for _ in $(seq 200); do
    curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "bench: $1 did not start" >&2; cat "$dir/serve.log" >&2; exit 1
}
start_gateway gateway "$bin"
if [[ -n "${BENCH_BASELINE:-}" ]]; then
  start_gateway baseline "$BENCH_BASELINE"
fi
for _ in $(seq 200); do
  (exec 3<>"/dev/tcp/127.0.0.1/$upstream_port") 2>/dev/null && break
  sleep 0.1
done
"$AGENTPLANE_TEST_PYTHON" bench/mcp_gateway/echo.py \
  --direct "http://127.0.0.1:$upstream_port/mcp" "${targets[@]}" \
  --calls "$calls" --rounds "$rounds"
