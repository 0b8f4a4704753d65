#!/usr/bin/env bash
# Starts Debian's redis-server for the tests on 127.0.0.1 (default port 8694; no
# persistence, data in memory only) and prints the environment that points the tests
# at it (`eval "$(scripts/redis.sh)"`; scripts/test.sh does it):
#
#   AGENTPLANE_TEST_REDIS_URL       the server, for tests sharing one Redis
#   AGENTPLANE_TEST_REDIS_SERVER    the redis-server binary, for tests that start,
#                                   stop and restart a Redis of their own
#
# A server already answering on the port is reused. `scripts/redis.sh --stop` stops it.
set -euo pipefail
cd "$(dirname "$0")/.."

port="${AGENTPLANE_TEST_REDIS_PORT:-8694}"
dir="${AGENTPLANE_TEST_REDIS_DIR:-$PWD/.local-model/redis}"
server="$(command -v redis-server || true)"
if [[ -z "$server" ]]; then
  echo "redis: redis-server is needed (scripts/install-deps.sh installs it)" >&2
  exit 1
fi

ping() {
  # PING over bash's /dev/tcp: no redis-cli needed.
  local answer
  answer="$( { exec 3<>"/dev/tcp/127.0.0.1/$port" && printf 'PING\r\n' >&3 \
    && read -r -t 2 line <&3 && echo "$line"; } 2>/dev/null || true)"
  [[ "$answer" == +PONG* ]]
}

if [[ "${1:-}" == "--stop" ]]; then
  if [[ -f "$dir/redis.pid" ]]; then
    kill "$(cat "$dir/redis.pid")" 2>/dev/null || true
    rm -f "$dir/redis.pid"
  fi
  exit 0
fi

if ! ping; then
  mkdir -p "$dir"
  echo "redis: starting redis-server on 127.0.0.1:$port" >&2
  "$server" --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
    --dir "$dir" --daemonize yes --pidfile "$dir/redis.pid" \
    --logfile "$dir/redis.log" >&2
  for _ in $(seq 1 50); do
    ping && break
    sleep 0.1
  done
  if ! ping; then
    echo "redis: redis-server did not answer on 127.0.0.1:$port; see $dir/redis.log" >&2
    exit 1
  fi
fi

echo "export AGENTPLANE_TEST_REDIS_URL=redis://127.0.0.1:$port/"
echo "export AGENTPLANE_TEST_REDIS_SERVER='$server'"
