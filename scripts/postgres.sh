#!/usr/bin/env bash
# Starts a throwaway PostgreSQL for the tests (Debian's packages: apt-get install
# postgresql) on 127.0.0.1 and prints the environment that points the tests at it
# (`eval "$(scripts/postgres.sh)"`; scripts/test.sh does it):
#
#   AGENTPLANE_TEST_POSTGRES_URL   postgres://postgres@127.0.0.1:8693/postgres
#
# Data lives in .local-pg/ (gitignored), or in /tmp when the postgres user cannot reach
# the repository. Trust authentication, on 127.0.0.1 only; fsync off (the data is
# disposable). A server already answering on the port is reused. PostgreSQL refuses to
# run as root, so as root it runs as the `postgres` user. Stop it with
# `scripts/postgres.sh --stop`.
set -euo pipefail
cd "$(dirname "$0")/.."

port="${AGENTPLANE_POSTGRES_PORT:-8693}"
dir="${AGENTPLANE_POSTGRES_DIR:-$PWD/.local-pg}"
url="postgres://postgres@127.0.0.1:${port}/postgres"

# The newest installed major version; /usr/local/bin may hold anything else.
bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
if [[ -z "$bin" || ! -x "$bin/initdb" ]]; then
  echo "postgres: no PostgreSQL under /usr/lib/postgresql (scripts/install-deps.sh installs it)" >&2
  exit 1
fi

as_owner() {
  if [[ "$(id -u)" == 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

if [[ "$(id -u)" == 0 ]] && ! runuser -u postgres -- test -x "$(dirname "$dir")"; then
  dir="/tmp/agentplane-pg-${port}"
fi
data="$dir/data"

if [[ "${1:-}" == "--stop" ]]; then
  if [[ -f "$data/postmaster.pid" ]]; then
    as_owner "$bin/pg_ctl" -D "$data" -m fast stop >&2
  fi
  exit 0
fi

if ! "$bin/pg_isready" -q -h 127.0.0.1 -p "$port"; then
  mkdir -p "$dir"
  [[ "$(id -u)" == 0 ]] && chown postgres: "$dir"
  if [[ ! -f "$data/PG_VERSION" ]]; then
    echo "postgres: initdb in $data" >&2
    as_owner "$bin/initdb" -D "$data" -U postgres --auth=trust --encoding=UTF8 \
      --locale=C.UTF-8 >/dev/null
  fi
  echo "postgres: starting on 127.0.0.1:$port" >&2
  as_owner "$bin/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 start -o \
    "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$dir \
     -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
     -c max_connections=300" >&2
fi

echo "export AGENTPLANE_TEST_POSTGRES_URL=$url"
