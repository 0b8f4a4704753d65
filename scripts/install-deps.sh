#!/usr/bin/env bash
# The one list of what the tests and scripts need from the system, each entry with the
# check that shows it is there. `scripts/test.sh` and `.ci/run` run this first:
#
#   nothing missing        exits 0 at once
#   missing, as root       installs the missing Debian/Ubuntu packages with apt-get
#   missing, not root      prints the one command to run and exits 1, before anything builds
#
#   scripts/install-deps.sh           check, and install as root
#   scripts/install-deps.sh --list    print every package of the list, one a line
#
# Add a package with one `need` line below: the package's name, then a command that
# succeeds when it is installed (prefer the program the scripts run, so a package
# installed some other way, such as Node.js from NodeSource, counts).
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
all=()
# need PACKAGE CHECK…: PACKAGE is missing when CHECK fails.
need() {
  local package="$1"
  shift
  all+=("$package")
  "$@" >/dev/null 2>&1 || missing+=("$package")
}
has() { command -v "$1"; }
# Where Debian puts PostgreSQL's servers (AGENTPLANE_POSTGRES_LIB: for the script's test).
postgres_server() { compgen -G "${AGENTPLANE_POSTGRES_LIB:-/usr/lib/postgresql}/*/bin/initdb"; }

# A C and C++ toolchain: Rust's linker, the bundled SQLite, libFuzzer (scripts/fuzz.sh).
need build-essential has cc
need build-essential has c++
# curl probes every server the scripts start; git checks the committed web build.
need curl has curl
need git has git
# The local llama.cpp model, schemathesis and the MCP/OpenAI clients are pip-installed
# into venvs (scripts/local-model.sh, schemathesis.sh, test-peers.sh).
need python3 has python3
need python3-venv python3 -c 'import venv, ensurepip'
need python3-pip python3 -m pip --version
# The MCP server peers and the web UI's build and tests come from npm.
need nodejs has node
need npm has npm
# `promtool check metrics` validates /metrics (crates/testkit/src/promtool.rs).
need prometheus has promtool
# The web UI's end-to-end test drives Debian's Chromium (scripts/web-e2e.sh).
need chromium has chromium
# Shared rate limits are tested against a real Redis (scripts/redis.sh).
need redis-server has redis-server
# The PostgreSQL store's tests run against Debian's server (scripts/postgres.sh).
need postgresql postgres_server

if [[ "${1:-}" == "--list" ]]; then
  printf '%s\n' "${all[@]}" | awk '!seen[$0]++'
  exit 0
elif (($# > 0)); then
  echo "usage: scripts/install-deps.sh [--list]" >&2
  exit 2
fi

if ((${#missing[@]} == 0)); then
  # Not a package: Rust comes from rustup (Debian's is too old for this workspace);
  # cargo-nextest is optional (scripts/test.sh falls back to cargo test). Under sudo,
  # root's PATH rarely has the user's cargo, so only a plain run asks for it.
  if [[ -z "${SUDO_USER:-}" ]] && ! command -v cargo >/dev/null; then
    echo "install-deps: cargo is needed; install Rust with rustup: https://rustup.rs" >&2
    exit 1
  fi
  exit 0
fi
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | awk '!seen[$0]++')
echo "install-deps: missing for the tests: ${missing[*]}" >&2
if ! command -v apt-get >/dev/null; then
  echo "install-deps: no apt-get here; install the equivalents of: ${missing[*]}" >&2
  exit 1
fi
if [[ "$(id -u)" != 0 ]]; then
  echo "install-deps: run this once (it installs them with apt-get), then run the tests again:" >&2
  echo "  sudo $PWD/scripts/install-deps.sh" >&2
  exit 1
fi
echo "install-deps: apt-get install ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
apt-get install -y -q "${missing[@]}" >&2
