#!/usr/bin/env bash
# Runs one reliability suite at full size (docs/reliability.md):
#   scripts/reliability.sh SUITE [more cargo nextest arguments]
# CI runs the same suites in their bounded form through scripts/test.sh. Add a suite by
# adding its case below.
set -euo pipefail
cd "$(dirname "$0")/.."

suite="${1:-}"
[ $# -gt 0 ] && shift
export AGENTPLANE_SUITE_SIZE=full

nextest() {
  # The suites start the real binary, which `-p agentplane-suites` alone does not build.
  cargo build -p agentplane
  cargo nextest run -p agentplane-suites --no-capture "$@"
}

case "$suite" in
  crash)
    # AGENTPLANE_CRASH_SEED=<seed> replays a run; AGENTPLANE_CRASH_KILLS=<n> resizes it.
    nextest --test crash "$@"
    ;;
  chaos)
    # Needs PostgreSQL: AGENTPLANE_TEST_POSTGRES_URL, or the server scripts/postgres.sh
    # starts. AGENTPLANE_CHAOS_SEED=<seed> replays the choices;
    # AGENTPLANE_CHAOS_REPLICAS / AGENTPLANE_CHAOS_SECONDS resize the run.
    if [ -z "${AGENTPLANE_TEST_POSTGRES_URL:-}" ]; then
      eval "$(./scripts/postgres.sh)"
    fi
    nextest --test chaos "$@"
    ;;
  *)
    echo "usage: scripts/reliability.sh SUITE [nextest args]; suites: crash, chaos" >&2
    exit 2
    ;;
esac
