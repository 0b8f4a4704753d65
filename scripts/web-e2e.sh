#!/usr/bin/env bash
# The web UI's unit tests (web/test/) and its end-to-end test in headless Chromium
# (web/e2e/e2e.mjs): installs the npm dev dependencies when missing (playwright-core,
# never a browser: it drives Debian's `chromium`), builds the `agentplane` and
# `scripted-llm` binaries, and runs both.
#   scripts/web-e2e.sh                        screenshots go to a temp dir
#   scripts/web-e2e.sh --update-screenshots   screenshots replace docs/ui/*.png
# Needs: chromium (apt-get install -y chromium), node and npm.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"

if [[ "${1:-}" == "--update-screenshots" ]]; then
  export AP_SHOTS="$root/docs/ui"
fi
export CHROMIUM="${CHROMIUM:-$(command -v chromium || true)}"
if [[ -z "$CHROMIUM" ]]; then
  echo "web-e2e: chromium not found; scripts/install-deps.sh installs it, or set CHROMIUM" >&2
  exit 2
fi
if [[ ! -d web/node_modules/playwright-core ]]; then
  (cd web && npm ci --no-audit --no-fund)
fi
# The UI's unit tests (SSE parser, event feed) first: a second, no browser needed.
(cd web && node test/run.mjs >/dev/null) || { (cd web && node test/run.mjs); exit 1; }
cargo build --quiet -p agentplane -p agentplane-testkit --bins
export AP_BIN_DIR="$CARGO_TARGET_DIR/debug"
exec node web/e2e/e2e.mjs
