#!/usr/bin/env bash
# Rebuilds the web UI: web/src/ → web/dist/ (committed; the server embeds it, so
# `cargo build` needs no Node). Type-checks first. Needs node and npm.
#   scripts/build-web.sh           build
#   scripts/build-web.sh --check   build and fail if web/dist/ differs from the commit
set -euo pipefail
cd "$(dirname "$0")/../web"
if [[ ! -d node_modules/esbuild || ! -d node_modules/typescript ]]; then
  npm ci --no-audit --no-fund
fi
npx --no-install tsc --noEmit
node build.mjs
if [[ "${1:-}" == "--check" ]]; then
  [[ -z "$(git status --porcelain -- dist/)" ]] || {
    git status --short -- dist/ >&2
    echo "web/dist/ is stale: run scripts/build-web.sh and commit it" >&2
    exit 1
  }
fi
