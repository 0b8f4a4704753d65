#!/usr/bin/env bash
# The test of scripts/install-deps.sh (and of scripts/test.sh stopping before it builds):
# copies of the real scripts run with a PATH that holds only the programs chosen for each
# case, so a package is "missing" when its program is hidden. apt-get and cargo are
# recording stand-ins (this test must not install anything); root is the real root and
# "not root" the real `nobody` user (runuser). Needs root; .ci/run runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

if [[ "$(id -u)" != 0 ]]; then
  echo "test-install-deps: needs root (it runs the script as root and as nobody)" >&2
  exit 2
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
mkdir -p "$work/repo/scripts" "$work/log"
chmod 777 "$work/log"
cp scripts/install-deps.sh scripts/test.sh "$work/repo/scripts/"

# The programs the scripts themselves run, linked from this machine.
base="$work/base"
mkdir -p "$base"
for tool in bash env dirname awk id cat; do
  ln -s "$(command -v "$tool")" "$base/$tool"
done

# A stand-in that records its arguments (and DEBIAN_FRONTEND) and exits with $2.
stub() {
  local dir="$1" name="$2" status="${3:-0}"
  cat >"$dir/$name" <<SH
#!$(command -v bash)
echo "$name \$* DEBIAN_FRONTEND=\${DEBIAN_FRONTEND:-}" >>"$work/log/calls"
exit $status
SH
  chmod 755 "$dir/$name"
}

# A PATH with the given programs present (stand-ins; their checks only ask whether they
# run), apt-get recording and exiting with $APT_STATUS, and cargo recording.
every=(cc c++ curl git python3 node npm promtool chromium redis-server cargo)
present_path() {
  local dir
  dir="$(mktemp -d "$work/path.XXXX")"
  chmod 755 "$dir"
  for name in "$@"; do stub "$dir" "$name"; done
  [[ -n "${NO_APT:-}" ]] || stub "$dir" apt-get "${APT_STATUS:-0}"
  echo "$dir:$base"
}
pg_present="$work/pg-present"
mkdir -p "$pg_present/15/bin"
stub "$pg_present/15/bin" initdb
pg_absent="$work/pg-absent"
mkdir -p "$pg_absent"

failures=0
# run NAME USER PATH PG EXPECTED_STATUS [SCRIPT]: runs a copy of the script, keeps its
# stderr in $out and the recorded calls in $calls.
run() {
  local name="$1" user="$2" path="$3" pg="$4" expected="$5" script="${6:-install-deps.sh}"
  : >"$work/log/calls"
  chmod 666 "$work/log/calls"
  local status=0
  local command=(env -i "PATH=$path" "AGENTPLANE_POSTGRES_LIB=$pg" "HOME=$work"
    "$work/repo/scripts/$script")
  if [[ "$user" == root ]]; then
    out="$("${command[@]}" 2>&1 >/dev/null)" || status=$?
  else
    out="$(runuser -u "$user" -- "${command[@]}" 2>&1 >/dev/null)" || status=$?
  fi
  calls="$(cat "$work/log/calls")"
  if [[ "$status" != "$expected" ]]; then
    fail "$name: exit $status, expected $expected"
  fi
}
fail() {
  echo "FAIL $*" >&2
  echo "  stderr: $out" | sed 's/^/  /' >&2
  echo "  calls: $calls" | sed 's/^/  /' >&2
  failures=$((failures + 1))
}
expect_in() { [[ "$2" == *"$3"* ]] || fail "$1: expected ${3@Q} in ${2@Q}"; }
expect_not_in() { [[ "$2" != *"$3"* ]] || fail "$1: did not expect ${3@Q} in ${2@Q}"; }

# Everything there: nothing to do, nothing called.
run "complete, root" root "$(present_path "${every[@]}")" "$pg_present" 0
expect_not_in "complete, root" "$calls" "apt-get"

# Node, npm, Redis and PostgreSQL gone, as root: one apt-get install of exactly those,
# non-interactive, after an update.
some=(cc c++ curl git python3 promtool chromium cargo)
run "missing, root" root "$(present_path "${some[@]}")" "$pg_absent" 0
expect_in "missing, root" "$calls" "apt-get update -q DEBIAN_FRONTEND=noninteractive"
expect_in "missing, root" "$calls" \
  "apt-get install -y -q nodejs npm redis-server postgresql DEBIAN_FRONTEND=noninteractive"

# The same as nobody: the one command to run, exit 1, apt-get never called.
run "missing, not root" nobody "$(present_path "${some[@]}")" "$pg_absent" 1
expect_in "missing, not root" "$out" "missing for the tests: nodejs npm redis-server postgresql"
expect_in "missing, not root" "$out" "sudo $work/repo/scripts/install-deps.sh"
expect_not_in "missing, not root" "$calls" "apt-get"

# A failed apt-get fails the script.
APT_STATUS=100 run "apt-get fails" root "$(APT_STATUS=100 present_path "${some[@]}")" "$pg_absent" 100

# No apt-get at all: the list, exit 1.
run "no apt-get" root "$(NO_APT=1 present_path "${some[@]}")" "$pg_absent" 1
expect_in "no apt-get" "$out" "install the equivalents of: nodejs npm redis-server postgresql"

# Only cargo missing (not a package): its own message.
run "no cargo" nobody "$(present_path cc c++ curl git python3 node npm promtool chromium redis-server)" \
  "$pg_present" 1
expect_in "no cargo" "$out" "https://rustup.rs"

# scripts/test.sh as nobody with a package missing stops before cargo builds anything.
run "test.sh, not root" nobody "$(present_path "${some[@]}")" "$pg_absent" 1 test.sh
expect_in "test.sh, not root" "$out" "sudo $work/repo/scripts/install-deps.sh"
expect_not_in "test.sh, not root" "$calls" "cargo"
expect_not_in "test.sh, not root" "$calls" "curl"

if ((failures)); then
  echo "test-install-deps: $failures check(s) failed" >&2
  exit 1
fi
echo "test-install-deps: 7 cases passed" >&2
