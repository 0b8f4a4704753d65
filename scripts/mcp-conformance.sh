#!/usr/bin/env bash
# The official MCP conformance suite (npm `@modelcontextprotocol/conformance`) against
# agentplane's MCP server and client, judged against the expected results kept in
# scripts/conformance/expected.txt (docs/mcp-conformance.md has them as a table).
#
#   scripts/mcp-conformance.sh [AGENTPLANE_BINARY]     # default ${CARGO_TARGET_DIR:-target}/debug/agentplane
#   scripts/mcp-conformance.sh --table                 # expected.txt as docs/mcp-conformance.md's table
#
# Builds nothing: the binary and `scripted-llm` beside it must exist (`cargo build -p
# agentplane -p agentplane-testkit`). Two versions of the suite run, both pinned in
# scripts/conformance/package.json and installed by `npm ci` into .local-model/conformance
# (gitignored; reinstalled only when the lock changes): `latest`, the latest release, and
# `next`, the newest pre-release, which has the 2026-07-28 scenarios.
#
# Targets (see `server_targets` below):
#   mcp      `/mcp` on `agentplane serve` (no credentials configured: the default client `mcp`)
#   stdio    `agentplane mcp serve`, behind scripts/conformance/stdio-bridge.mjs (the suite
#            only speaks HTTP to a server)
#   gateway  `/mcp/gateway` on `agentplane serve` with `[mcp.gateway] servers =
#            ["everything"]`; runs only once the binary accepts that configuration
#   gateway-stdio  `agentplane mcp gateway`, the same gateway on stdio behind the bridge;
#            runs only once the binary has that command
#   client   agentplane's MCP client through the CLI (scripts/conformance/client.sh:
#            `agentplane mcp list`, then a turn calling the suite's tool)
#
# Every scenario of every target is run and given a verdict: pass (no failed check),
# fail, or skipped (every check skipped by the suite itself). The run fails when a
# scenario listed `pass` does not pass, when one listed `na` or `fail` passes (update
# the list), or when a scenario is missing from the list. `ignore` lines are not judged.
#
# Node: the suite declares Node >= 22. On Node 20 scripts/conformance/node20-shim.mjs
# provides its one Node 22 import (`globSync` from `fs`, used by `tier-check` only).
#
# Environment: AGENTPLANE_CONFORMANCE_DIR (the npm cache, default
# .local-model/conformance), AGENTPLANE_CONFORMANCE_KEEP=DIR (keep the suite's results
# and the logs there).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
here="$root/scripts/conformance"
expected="$here/expected.txt"

if [[ "${1:-}" == "--table" ]]; then
  python3 - "$expected" <<'PY'
import sys
rows = []
for line in open(sys.argv[1], encoding="utf-8"):
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    target, version, scenario, verdict, *reason = line.split(None, 4)
    rows.append((target, version, scenario, verdict, reason[0] if reason else ""))
print("| target | suite | scenario | expected | why |")
print("| --- | --- | --- | --- | --- |")
for target, version, scenario, verdict, reason in rows:
    targets = ", ".join(f"`{t}`" for t in target.split(","))
    version = {"*": "both"}.get(version, version)
    print(f"| {targets} | {version} | `{scenario}` | {verdict} | {reason} |")
PY
  exit 0
fi

binary="${1:-${CARGO_TARGET_DIR:-target}/debug/agentplane}"
[[ "$binary" == /* ]] || binary="$root/$binary"
bin="$(dirname "$binary")"
for program in "$binary" "$bin/scripted-llm"; do
  [[ -x "$program" ]] || { echo "mcp-conformance: $program is missing (cargo build -p agentplane -p agentplane-testkit)" >&2; exit 2; }
done
command -v node >/dev/null && command -v npm >/dev/null || {
  echo "mcp-conformance: node and npm are needed (scripts/install-deps.sh installs them)" >&2
  exit 2
}

# The suite, from the registry, into a cache of its own; `npm ci` only when the lock changed.
cache="${AGENTPLANE_CONFORMANCE_DIR:-$root/.local-model/conformance}"
if ! cmp -s "$here/package-lock.json" "$cache/node_modules/.agentplane-lock" 2>/dev/null; then
  echo "mcp-conformance: npm ci in $cache" >&2
  mkdir -p "$cache"
  cp "$here/package.json" "$here/package-lock.json" "$cache/"
  # --engine-strict=false: the suite declares Node >= 22; on 20 the shim covers the gap.
  (cd "$cache" && npm ci --no-audit --no-fund --loglevel=error --engine-strict=false >&2)
  cp "$here/package-lock.json" "$cache/node_modules/.agentplane-lock"
fi
versions=(latest next)
suite() { # [timeout SECONDS] VERSION ARGS...: the suite's CLI under the Node 20 shim
  local limit=0
  if [[ "$1" == timeout ]]; then limit="$2"; shift 2; fi
  local version="$1"
  shift
  timeout "$limit" node --import "$here/node20-shim.mjs" \
    "$cache/node_modules/conformance-$version/dist/index.js" "$@"
}

work="$(mktemp -d)"
groups=()
cleanup() {
  local group
  for group in "${groups[@]}"; do kill -TERM -- "-$group" 2>/dev/null || true; done
  for group in "${groups[@]}"; do
    for _ in $(seq 50); do kill -0 -- "-$group" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$group" 2>/dev/null || true
  done
  if [[ -n "${AGENTPLANE_CONFORMANCE_KEEP:-}" ]]; then
    mkdir -p "$AGENTPLANE_CONFORMANCE_KEEP"
    cp -r "$work/." "$AGENTPLANE_CONFORMANCE_KEEP/" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# background LOG COMMAND...: a process group of its own, stopped at exit.
background() {
  local log="$1"
  shift
  setsid "$@" >"$log" 2>&1 </dev/null &
  groups+=("$!")
}
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The model: a text answer, forever (the server targets' tools are agents; a scenario
# that calls one gets a finished turn).
cat >"$work/model.json" <<'JSON'
{"repeat": true, "steps": [{"text": "scripted answer", "usage": {"prompt_tokens": 5, "completion_tokens": 2}}]}
JSON
background "$work/model.log" "$bin/scripted-llm" --scenario "$work/model.json"
for _ in $(seq 100); do grep -q '^http' "$work/model.log" 2>/dev/null && break; sleep 0.1; done
model_url="$(grep -m1 '^http' "$work/model.log" || true)"
[[ -n "$model_url" ]] || { echo "mcp-conformance: scripted-llm did not start" >&2; cat "$work/model.log" >&2; exit 1; }
export AGENTPLANE_LLM_BASE_URL="$model_url" AGENTPLANE_LLM_MODEL="scripted-model"

mkdir -p "$work/ws"
base_config() { # DIR: a configuration for a server target, in a folder of its own
  mkdir -p "$1"
  cat >"$1/agentplane.toml" <<TOML
[llm]
max_retries = 0
[server]
shutdown_grace_secs = 2
permission_timeout_secs = 2
workspace_roots = ["$work/ws"]
TOML
}

# start_serve NAME CONFIG_DIR: `agentplane serve` on a free port; sets serve_url to its
# base URL, or fails (the log is $work/NAME.log).
start_serve() {
  local name="$1" config="$2" port
  port="$(free_port)"
  serve_url=""
  background "$work/$name.log" env AGENTPLANE_CONFIG="$config/agentplane.toml" \
    XDG_DATA_HOME="$work/$name-data" "$binary" serve --listen "127.0.0.1:$port" \
    --db "$work/$name.db"
  local group="${groups[-1]}"
  for _ in $(seq 300); do
    if curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then
      serve_url="http://127.0.0.1:$port"
      return 0
    fi
    kill -0 "$group" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# run_server_suite TARGET URL: every server scenario of both versions against URL.
run_server_suite() {
  local target="$1" url="$2" version
  for version in "${versions[@]}"; do
    echo "mcp-conformance: server scenarios ($version) against $target: $url" >&2
    # The suite's own exit status is not the verdict (expected.txt is): it is 1 as soon
    # as one scenario fails.
    suite timeout 600 "$version" server --url "$url" --suite all \
      -o "$work/results/$target/$version" >"$work/$target-$version.log" 2>&1 || true
  done
}

# The server targets. A target is a function that starts what it tests and sets
# target_url to its MCP URL, or returns non-zero to be skipped (saying why on stderr);
# its scenarios are judged against the lines of expected.txt for that target.
target_mcp() {
  base_config "$work/mcp-config"
  start_serve mcp "$work/mcp-config" || {
    echo "mcp-conformance: agentplane serve did not start:" >&2
    tail -n 40 "$work/mcp.log" >&2
    exit 1
  }
  target_url="$serve_url/mcp"
}

# bridge NAME CONFIG_DIR COMMAND...: COMMAND (a stdio MCP server) behind
# stdio-bridge.mjs; sets target_url.
bridge() {
  local name="$1" config="$2"
  shift 2
  local ports="$work/$name.port"
  background "$work/$name.log" env AGENTPLANE_CONFIG="$config/agentplane.toml" \
    node "$here/stdio-bridge.mjs" "$ports" -- "$@"
  for _ in $(seq 100); do [[ -s "$ports" ]] && break; sleep 0.1; done
  [[ -s "$ports" ]] || { echo "mcp-conformance: the stdio bridge did not start:" >&2; cat "$work/$name.log" >&2; exit 1; }
  target_url="http://127.0.0.1:$(cat "$ports")/mcp"
}

target_stdio() {
  base_config "$work/stdio-config"
  bridge stdio "$work/stdio-config" "$binary" mcp serve --workspace "$work/ws"
}

# The MCP gateway's configuration: npm's server-everything (the test peer of
# crates/testkit/peers, installed by scripts/test-peers.sh) behind [mcp.gateway].
gateway_config() { # DIR
  local peers="$root/crates/testkit/peers"
  base_config "$1"
  cat >>"$1/agentplane.toml" <<TOML
[mcp.gateway]
servers = ["everything"]
[mcp.servers.everything]
command = "node"
args = ["$peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js", "stdio"]
TOML
  if [[ ! -d "$peers/node_modules/@modelcontextprotocol/server-everything" ]]; then
    ./scripts/test-peers.sh >/dev/null
  fi
}

# `/mcp/gateway`: runs by itself once `agentplane serve` accepts the configuration and
# answers at /mcp/gateway; until then it is skipped with a notice.
target_gateway() {
  local config="$work/gateway-config"
  gateway_config "$config"
  if ! start_serve gateway "$config"; then
    echo "mcp-conformance: gateway skipped: agentplane serve does not accept [mcp.gateway] yet:" >&2
    grep -v '^\s*$' "$work/gateway.log" | tail -n 3 | sed 's/^/    /' >&2
    return 1
  fi
  if [[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'content-type: application/json' \
    "$serve_url/mcp/gateway" -d '{}')" == 404 ]]; then
    echo "mcp-conformance: gateway skipped: no /mcp/gateway route" >&2
    return 1
  fi
  target_url="$serve_url/mcp/gateway"
}

# `agentplane mcp gateway`: the same gateway on stdio, behind the bridge; runs once the
# binary has that command.
target_gateway_stdio() {
  if ! "$binary" mcp gateway --help >/dev/null 2>&1; then
    echo "mcp-conformance: gateway-stdio skipped: no \`agentplane mcp gateway\` command" >&2
    return 1
  fi
  local config="$work/gateway-stdio-config"
  gateway_config "$config"
  bridge gateway-stdio "$config" "$binary" mcp gateway
}

server_targets=(mcp stdio gateway gateway-stdio)
ran_targets=()
for target in "${server_targets[@]}"; do
  target_url=""
  if "target_${target//-/_}"; then
    run_server_suite "$target" "$target_url"
    ran_targets+=("$target")
  fi
done

# The client scenarios, one at a time: the suite starts its server and runs client.sh.
export AGENTPLANE_CONFORMANCE_BIN="$bin"
for version in "${versions[@]}"; do
  echo "mcp-conformance: client scenarios ($version)" >&2
  mapfile -t scenarios < <(suite timeout 60 "$version" list --client | sed -n 's/^  - \([^ ]*\) .*/\1/p')
  ((${#scenarios[@]})) || { echo "mcp-conformance: the suite ($version) lists no client scenarios" >&2; exit 1; }
  for scenario in "${scenarios[@]}"; do
    slug="${scenario//\//_}"
    out="$work/results/client/$version/$slug"
    mkdir -p "$out"
    status=0
    suite timeout 120 "$version" client --command "$here/client.sh" --scenario "$scenario" \
      --timeout 30000 -o "$out" >"$out/run.log" 2>&1 || status=$?
    echo "$status" >"$out/exit-status"
  done
done
ran_targets+=(client)

# The verdicts, against expected.txt.
status=0
python3 - "$expected" "$work/results" "${ran_targets[@]}" <<'PY' || status=$?
import fnmatch, json, os, re, sys

expected_path, results, *targets = sys.argv[1:]
exact, patterns = {}, []
for number, line in enumerate(open(expected_path, encoding="utf-8"), 1):
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    names, version, scenario, verdict, *reason = line.split(None, 4)
    if verdict not in ("pass", "fail", "na", "ignore"):
        sys.exit(f"{expected_path}:{number}: verdict {verdict!r} is not pass, fail, na or ignore")
    for target in names.split(","):
        for v in (["latest", "next"] if version == "*" else [version]):
            if "*" in scenario:
                patterns.append((target, v, scenario, verdict))
            else:
                exact[(target, v, scenario)] = verdict

def expected_of(key):
    """A scenario's own line, else the first pattern that matches it."""
    if key in exact:
        return exact[key]
    for target, version, pattern, verdict in patterns:
        if (target, version) == key[:2] and fnmatch.fnmatchcase(key[2], pattern):
            return verdict
    return None

def verdict_of(checks):
    statuses = [c.get("status") for c in checks if c.get("id") != "wire-schema-valid"]
    if "FAILURE" in statuses:
        return "fail"
    judged = [s for s in statuses if s not in ("INFO", "SKIPPED")]
    if not judged and "SKIPPED" in statuses:
        return "skipped"
    return "pass"

actual = {}
warnings = {}
for target in targets:
    for version in ("latest", "next"):
        top = os.path.join(results, target, version)
        if not os.path.isdir(top):
            if target != "client":
                print(f"{target} {version}: the suite left no results", file=sys.stderr)
                actual[(target, version, "(suite run)")] = "fail"
            continue
        if target == "client":
            for slug in sorted(os.listdir(top)):
                checks = []
                for dirpath, _, files in os.walk(os.path.join(top, slug)):
                    if "checks.json" in files:
                        checks += json.load(open(os.path.join(dirpath, "checks.json")))
                status = open(os.path.join(top, slug, "exit-status")).read().strip()
                # The client scenarios also count the client's exit: the suite fails one
                # whose client failed even when its checks passed.
                verdict = verdict_of(checks) if checks else "fail"
                if verdict == "pass" and status != "0":
                    verdict = "fail"
                scenario = slug.replace("auth_", "auth/", 1)
                actual[(target, version, scenario)] = verdict
                warnings[(target, version, scenario)] = [c["id"] for c in checks if c.get("status") == "WARNING"]
        else:
            for name in sorted(os.listdir(top)):
                match = re.match(r"^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$", name)
                if not match:
                    continue
                checks = json.load(open(os.path.join(top, name, "checks.json")))
                key = (target, version, match.group(1))
                actual[key] = verdict_of(checks)
                warnings[key] = [c["id"] for c in checks if c.get("status") == "WARNING"]

problems = []
counts = {}
for key, got in sorted(actual.items()):
    target, version, scenario = key
    want = expected_of(key)
    counts.setdefault((target, version), {}).setdefault(got, 0)
    counts[(target, version)][got] += 1
    note = f" (warnings: {', '.join(warnings[key])})" if warnings.get(key) else ""
    if want is None:
        problems.append(f"{target} {version} {scenario}: {got}, and not in expected.txt")
    elif want == "ignore":
        got = f"{got} (not judged)"
    elif want == "pass" and got != "pass":
        problems.append(f"{target} {version} {scenario}: expected to pass, got {got}")
    elif want in ("na", "fail") and got == "pass":
        problems.append(f"{target} {version} {scenario}: listed {want}, now passes{note}: update expected.txt")
    print(f"  {target:13} {version:6} {scenario:48} {got:8} (expected {want}){note}")
for key, want in sorted(exact.items()):
    if key[0] in targets and key not in actual and want != "ignore":
        problems.append(f"{key[0]} {key[1]} {key[2]}: listed {want}, but the suite did not run it")

print()
for (target, version), by in sorted(counts.items()):
    print(f"  {target} ({version}): " + ", ".join(f"{n} {v}" for v, n in sorted(by.items())))
if problems:
    print("\nmcp-conformance: FAILED", file=sys.stderr)
    for problem in problems:
        print(f"  {problem}", file=sys.stderr)
    sys.exit(1)
print("\nmcp-conformance: every scenario as expected")
PY

# A server that panicked fails the run whatever the verdicts.
if grep -l -E "panicked at" "$work"/*.log 2>/dev/null; then
  echo "mcp-conformance: a process panicked (the logs above)" >&2
  exit 1
fi
exit "$status"
