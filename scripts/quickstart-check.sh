#!/usr/bin/env bash
# Runs the README's quick start, command by command and in order, so the README cannot
# drift: the fenced `sh` blocks between `<!-- quickstart:begin -->` and
# `<!-- quickstart:end -->`. .ci/run runs it after the test suites.
#
#   scripts/quickstart-check.sh                    with the built debug binaries (CI)
#   AGENTPLANE_QUICKSTART_CARGO=1 scripts/quickstart-check.sh   `cargo run --release` as written
#
# How a newcomer's terminal maps onto a script:
# - a block after `<!-- quickstart:background URL -->` is a long-running command (a
#   terminal of its own): it runs in the background until the end, and the next command
#   waits until URL answers; `<!-- quickstart:stop URL -->` is Ctrl-C in that terminal
#   (SIGINT to its process group), and the next command waits until it has exited;
# - a command ending in `&` is ready when it has printed its first line;
# - a block after `<!-- quickstart:exit 0 1 -->` may end with any of those exit codes
#   (a README step whose outcome the model decides: `run` exits 1 when the agent could
#   not finish, which the README says); every other block must exit 0;
# - `thr_…` and `turn_…` stand for the id the commands before printed last, as a reader
#   copies it;
# - `cargo run --release [-p P --bin B] -- ARGS` is the binary it builds, run with ARGS:
#   by default the debug build of the same source (`cargo build -p agentplane -p
#   agentplane-testkit --bins`, which schemathesis.sh and web-e2e.sh build too), because a
#   release build of the workspace on CI's 2 cores adds many minutes for no extra check.
#   That `cargo run` at the root picks the agentplane binary is checked through `cargo
#   metadata` (no build). AGENTPLANE_QUICKSTART_CARGO=1 runs the commands as written.
#
# AGENTPLANE_QUICKSTART_LOG=FILE keeps every command's output, in order.
# Each command is bounded (AGENTPLANE_QUICKSTART_TIMEOUT seconds, default 300); the data
# directory is a fresh temp dir (XDG_DATA_HOME), the working directory the repository's
# root. Fails when a command fails, a background one dies or never answers, a port the
# quick start uses is taken, or the transcript lacks what the README says it shows.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
limit="${AGENTPLANE_QUICKSTART_TIMEOUT:-300}"
work="$(mktemp -d)"
groups=()
declare -A group_of_url
cleanup() {
  local group
  for group in "${groups[@]}"; do
    kill -TERM -- "-$group" 2>/dev/null || true
  done
  for group in "${groups[@]}"; do
    for _ in $(seq 50); do kill -0 -- "-$group" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$group" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The quick start's commands as NUL-separated records: kind (fg CODES, bg URL, amp, stop URL),
# command.
python3 - README.md >"$work/commands" <<'PY'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
try:
    section = text.split("<!-- quickstart:begin -->", 1)[1].split("<!-- quickstart:end -->", 1)[0]
except IndexError:
    sys.exit("README.md: no <!-- quickstart:begin --> … <!-- quickstart:end --> section")
out = sys.stdout
background = None
pattern = r"<!-- quickstart:(background|stop|exit) ([^>]*?) -->|```sh\n(.*?)```"
allowed = "0"
for m in re.finditer(pattern, section, re.S):
    if m.group(1) == "stop":
        out.write(f"stop {m.group(2)}\0\0")
        continue
    if m.group(1) == "exit":
        allowed = ",".join(m.group(2).split())
        continue
    if m.group(1):
        background = m.group(2)
        continue
    body = m.group(3)
    commands, current = [], ""
    for line in body.splitlines():
        if line.lstrip().startswith("#") and not current:
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        if current.strip():
            commands.append(current.strip())
        current = ""
    for command in commands:
        if background:
            out.write(f"bg {background}\0{command}\0")
        elif command.endswith("&"):
            out.write(f"amp\0{command[:-1].strip()}\0")
        else:
            out.write(f"fg {allowed}\0{command}\0")
    background = None
    allowed = "0"
PY

# `cargo run` at the root must resolve to the agentplane binary (the default member).
cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
meta = json.load(sys.stdin)
default = set(meta["workspace_default_members"])
bins = [t["name"] for p in meta["packages"] if p["id"] in default
        for t in p["targets"] if "bin" in t["kind"]]
if bins != ["agentplane"]:
    sys.exit(f"`cargo run` at the root would not run agentplane: default members have binaries {bins}")
'

if [[ -z "${AGENTPLANE_QUICKSTART_CARGO:-}" ]]; then
  cargo build --quiet -p agentplane -p agentplane-testkit --bins
  bin="${CARGO_TARGET_DIR:-$root/target}/debug"
fi
as_run() {
  if [[ -n "${AGENTPLANE_QUICKSTART_CARGO:-}" ]]; then
    printf '%s' "$1"
    return
  fi
  # cargo run --release [-p P] [--bin B] -- ARGS  →  $bin/B ARGS (B defaults to agentplane)
  python3 -c '
import re, sys
command, bin_dir = sys.argv[1], sys.argv[2]
pattern = r"cargo run --release (?:-p \S+ )?(?:--bin (\S+) )?-- "
print(re.sub(pattern, lambda m: bin_dir + "/" + (m.group(1) or "agentplane") + " ", command), end="")
' "$1" "$bin"
}

taken=()
for port in 8686 11434; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then taken+=("$port"); fi
done
if ((${#taken[@]})); then
  echo "quickstart-check: 127.0.0.1 port(s) ${taken[*]} already in use; the quick start needs them free" >&2
  exit 1
fi

export XDG_DATA_HOME="$work/data"
transcript="$work/transcript"
: >"$transcript"
step=0
while IFS= read -r -d '' kind && IFS= read -r -d '' command; do
  if [[ "$kind" == stop\ * ]]; then
    url="${kind#stop }"
    group="${group_of_url[$url]:-}"
    [[ -n "$group" ]] || { echo "quickstart-check: nothing was started for $url to stop" >&2; exit 1; }
    echo "quickstart-check: Ctrl-C to the command serving $url" >&2
    kill -INT -- "-$group" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 -- "-$group" 2>/dev/null || break; sleep 0.1; done
    if kill -0 -- "-$group" 2>/dev/null; then
      echo "quickstart-check: the command serving $url ignored Ctrl-C for 10 s" >&2
      exit 1
    fi
    continue
  fi
  step=$((step + 1))
  ran="$(as_run "$command")"
  # A reader copies the last id printed; so does the check.
  for prefix in thr turn; do
    if [[ "$ran" == *"${prefix}_…"* ]]; then
      id="$(grep -o "${prefix}_[0-9a-f]\{8,\}" "$transcript" | tail -n 1 || true)"
      [[ -n "$id" ]] || { echo "quickstart-check: step $step needs a ${prefix}_ id, none printed yet" >&2; exit 1; }
      ran="${ran//${prefix}_…/$id}"
    fi
  done
  echo "quickstart-check: [$step] $command" >&2
  log="$work/step$step.log"
  case "$kind" in
    bg\ *|amp)
      setsid bash -c "$ran" >"$log" 2>&1 </dev/null &
      group=$!
      groups+=("$group")
      url="${kind#bg }"
      [[ "$kind" == amp ]] || group_of_url[$url]=$group
      deadline=$((SECONDS + limit))
      until if [[ "$kind" == amp ]]; then [[ -s "$log" ]]; else curl -fsS -o /dev/null "$url" 2>/dev/null; fi; do
        if ! kill -0 "$group" 2>/dev/null || ((SECONDS >= deadline)); then
          echo "quickstart-check: [$step] did not become ready in ${limit}s; its output:" >&2
          tail -n 40 "$log" >&2
          exit 1
        fi
        sleep 0.5
      done
      ;;
    fg\ *)
      status=0
      timeout "$limit" bash -c "$ran" >"$log" 2>&1 </dev/null || status=$?
      if [[ ",${kind#fg }," != *",$status,"* ]]; then
        echo "quickstart-check: [$step] exited $status; its output:" >&2
        tail -n 40 "$log" >&2
        exit 1
      fi
      ;;
  esac
  cat "$log" >>"$transcript"
done <"$work/commands"
((step > 0)) || { echo "quickstart-check: no commands found in the quick start" >&2; exit 1; }

# What the README says the quick start shows. Background logs are read at the end.
for ((i = 1; i <= step; i++)); do cat "$work/step$i.log"; done >"$work/all"
[[ -z "${AGENTPLANE_QUICKSTART_LOG:-}" ]] || cp "$work/all" "$AGENTPLANE_QUICKSTART_LOG"
missing=0
for needle in "agentplane is serving" \
  "Next    start a small local model there: ./scripts/local-model.sh" \
  "event: usage" "event: cost" "event: tool_call_planned" '"list_files"' \
  "event: tool_call_result" \
  '"model":"SmolLM2-135M-Instruct"' "event: message_delta" "event: turn_completed" \
  "agent engineering on SmolLM2-135M-Instruct"; do
  if ! grep -qF -- "$needle" "$work/all"; then
    echo "quickstart-check: the quick start's output lacks ${needle@Q}" >&2
    missing=1
  fi
done
if ((missing)); then
  tail -n 80 "$work/all" >&2
  exit 1
fi
echo "quickstart-check: the README's $step quick-start commands ran in order" >&2
