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
  *)
    echo "usage: scripts/reliability.sh SUITE [nextest args]; suites: crash" >&2
    exit 2
    ;;
esac
