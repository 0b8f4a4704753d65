#!/usr/bin/env bash
# Builds the cargo-fuzz targets in fuzz/ (one per parser of outside input) and runs each
# with libFuzzer. Fails when a target crashes (a panic on any thread, an abort, a
# timeout or running out of memory); the crashing input is kept under
# fuzz/artifacts/<target>/ and the command to replay it is printed.
#
#   scripts/fuzz.sh --ci                 # what .ci/run runs: 15 s per target
#   scripts/fuzz.sh --full               # 10 minutes per target
#   scripts/fuzz.sh --full harmony       # some targets only
#   AGENTPLANE_FUZZ_SECS=60 scripts/fuzz.sh sse_openai
#
# The stable toolchain builds the targets: cargo-fuzz passes flags that need nightly,
# which RUSTC_BOOTSTRAP=1 allows (docs/adr/0022-fuzzing.md). Without a sanitizer: the
# parsers hold no unsafe code, so a target looks for panics, and debug assertions make
# integer overflow one.
#
# Environment: AGENTPLANE_FUZZ_SECS (seconds per target; 15 with --ci, the default
# mode, 600 with --full), AGENTPLANE_FUZZ_TARGET_DIR (Cargo's build and the grown
# corpora, default $CARGO_TARGET_DIR/fuzz, else /tmp/agentplane-fuzz-target: outside the
# clone so runs stay warm).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=ci
case "${1:-}" in
  --ci) shift ;;
  --full) mode=full; shift ;;
  -*) echo "usage: scripts/fuzz.sh [--ci|--full] [target…]" >&2; exit 2 ;;
esac
if [[ "$mode" == full ]]; then
  secs="${AGENTPLANE_FUZZ_SECS:-600}"
else
  secs="${AGENTPLANE_FUZZ_SECS:-15}"
fi
if [[ -n "${AGENTPLANE_FUZZ_TARGET_DIR:-}" ]]; then
  target_dir="$AGENTPLANE_FUZZ_TARGET_DIR"
elif [[ -n "${CARGO_TARGET_DIR:-}" ]]; then
  target_dir="$CARGO_TARGET_DIR/fuzz"
else
  target_dir=/tmp/agentplane-fuzz-target
fi
unset CARGO_TARGET_DIR
export RUSTC_BOOTSTRAP=1

command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz

if (($# == 0)); then
  mapfile -t targets < <(cargo fuzz list)
else
  targets=("$@")
fi

build=(--release --debug-assertions --sanitizer none --target-dir "$target_dir")
# One build of every target: they share all their dependencies.
echo "building the fuzz targets into $target_dir" >&2
cargo fuzz build "${build[@]}"

failed=()
summary=()
for target in "${targets[@]}"; do
  # New inputs go to a corpus beside the build; the committed seeds are only read.
  grown="$target_dir/corpus/$target"
  seeds="fuzz/corpus/$target"
  mkdir -p "$grown" "$seeds" "fuzz/artifacts/$target"
  log="$target_dir/$target.log"
  echo "fuzzing $target for ${secs} s" >&2
  status=0
  cargo fuzz run "${build[@]}" "$target" "$grown" "$seeds" -- \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 >"$log" 2>&1 || status=$?
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)"
  corpus="$(find "$grown" -type f | wc -l)"
  if ((status != 0)); then
    failed+=("$target")
    summary+=("$(printf '%-14s FAILED after %s runs' "$target" "${runs:-?}")")
    echo "--- $target: libFuzzer output (last 40 lines of $log) ---" >&2
    tail -n 40 "$log" >&2
    artifact="$(grep -o 'fuzz/artifacts/[^ ]*' "$log" | tail -n1 || true)"
    [[ -n "$artifact" ]] &&
      echo "replay: RUSTC_BOOTSTRAP=1 cargo fuzz run ${build[*]} $target $artifact" >&2
  else
    summary+=("$(printf '%-14s %10s runs in %s s, corpus %s' "$target" "${runs:-?}" "$secs" "$corpus")")
  fi
done

printf '%s\n' "${summary[@]}" >&2
if ((${#failed[@]})); then
  echo "crashed: ${failed[*]}" >&2
  exit 1
fi
