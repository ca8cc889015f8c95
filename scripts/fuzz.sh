#!/usr/bin/env bash
# Fuzzes the decoders of untrusted bytes in schemas/ with libFuzzer: the wire request and reply
# envelopes and bodies (request_fuzz, reply_fuzz), the record and WAL update-batch formats
# (record_fuzz), and the LMDB key and WAL framing decoders (storage_fuzz). Targets and seeds are
# described in schemas/fuzz/fuzz_targets.h.
#
# Builds only the fuzz targets (and what they link) with clang-14 + ASan/UBSan in a separate
# build directory, writes a seed corpus from schemas/fuzz/seeds.cc, then runs each target for
# FUZZ_SECONDS. New corpus entries are kept in the build directory, so later runs start further.
#
# Usage: scripts/fuzz.sh [TARGET...]        TARGET: request reply record storage (default: all)
# Environment:
#   FUZZ_SECONDS    seconds per target (default 20)
#   FUZZ_BUILD_DIR  build directory (default build-fuzz in the repository)
#   FUZZ_JOBS       targets fuzzed at the same time (default 2)
# Needs: apt-get install clang-14 libclang-rt-14-dev (libFuzzer and the sanitizer runtimes).
# Exit codes: 0 no failure found; 1 a target crashed, leaked, hit a limit or a build failed
# (the reproducer is in $FUZZ_BUILD_DIR/fuzz-artifacts/); 2 usage error or clang-14 missing.
# Example: FUZZ_SECONDS=60 scripts/fuzz.sh request reply
set -euo pipefail
cd "$(dirname "$0")/.."

all_targets=(request reply record storage)
seconds="${FUZZ_SECONDS:-20}"
build="${FUZZ_BUILD_DIR:-build-fuzz}"
jobs="${FUZZ_JOBS:-2}"

if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  case " ${all_targets[*]} " in
    *" $t "*) ;;
    *) echo "fuzz.sh: unknown target '$t' (known: ${all_targets[*]})" >&2; exit 2 ;;
  esac
done
case "$seconds$jobs" in
  *[!0-9]*) echo "fuzz.sh: FUZZ_SECONDS and FUZZ_JOBS must be whole numbers" >&2; exit 2 ;;
esac
if ! command -v clang++-14 > /dev/null || ! command -v clang-14 > /dev/null; then
  echo "fuzz.sh: clang-14 not found; install it with: apt-get install clang-14" >&2
  exit 2
fi

start=$(date +%s)
mkdir -p "$build"
echo "fuzz.sh: configuring $build (clang-14, ASan+UBSan, PROPELLER_FUZZ=ON)"
if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
    -DPROPELLER_FUZZ=ON -DPROPELLER_SANITIZE=ON -DPROPELLER_BENCH=OFF \
    > "$build/fuzz-configure.log" 2>&1; then
  tail -n 30 "$build/fuzz-configure.log" >&2
  echo "fuzz.sh: cmake configure failed (log: $build/fuzz-configure.log)" >&2
  exit 1
fi
build_targets=(schemas_fuzz_seeds)
for t in "${targets[@]}"; do build_targets+=("${t}_fuzz"); done
echo "fuzz.sh: building ${build_targets[*]}"
if ! ninja -C "$build" -j "$(nproc)" "${build_targets[@]}" > "$build/fuzz-build.log" 2>&1; then
  tail -n 40 "$build/fuzz-build.log" >&2
  echo "fuzz.sh: build failed (log: $build/fuzz-build.log)" >&2
  exit 1
fi
built=$(date +%s)

corpus="$build/fuzz-corpus"
artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"
rm -rf "$corpus/seeds"
"$build/schemas/schemas_fuzz_seeds" "$corpus/seeds"

# Runs one target; its libFuzzer log goes to $build/fuzz-<target>.log.
run_target() {
  local t="$1"
  mkdir -p "$corpus/$t"
  # malloc_limit_mb: a decode of a <= 4 KiB input must never ask for 64 MiB at once
  # (docs/pitfalls.md MP-1: msgpack-c pre-allocates claimed array sizes).
  "$build/schemas/${t}_fuzz" -max_total_time="$seconds" -max_len=4096 -timeout=10 \
    -rss_limit_mb=1024 -malloc_limit_mb=64 -print_final_stats=1 \
    -artifact_prefix="$artifacts/$t-" "$corpus/$t" "$corpus/seeds/$t" \
    > "$build/fuzz-$t.log" 2>&1
}

failed=()
pids=()
names=()
flush() {  # waits for the running targets and records failures
  local i
  for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then failed+=("${names[$i]}"); fi
  done
  pids=()
  names=()
}
echo "fuzz.sh: fuzzing ${targets[*]} for ${seconds}s each, $jobs at a time"
for t in "${targets[@]}"; do
  run_target "$t" &
  pids+=($!)
  names+=("$t")
  if [ "${#pids[@]}" -ge "$jobs" ]; then flush; fi
done
flush

stat() {  # stat <log> <name>: a libFuzzer final statistic
  sed -n "s/^stat::$2: *//p" "$1" | tail -n 1
}
printf '%-8s %12s %10s %10s %8s %s\n' target execs execs/s corpus rss_mb result
for t in "${targets[@]}"; do
  log="$build/fuzz-$t.log"
  result=ok
  case " ${failed[*]:-} " in *" $t "*) result=FAILED ;; esac
  printf '%-8s %12s %10s %10s %8s %s\n' "$t" "$(stat "$log" number_of_executed_units)" \
    "$(stat "$log" average_exec_per_sec)" "$(find "$corpus/$t" -type f | wc -l)" \
    "$(stat "$log" peak_rss_mb)" "$result"
done
end=$(date +%s)
echo "fuzz.sh: build $((built - start))s, total $((end - start))s"
if [ "${#failed[@]}" -gt 0 ]; then
  for t in "${failed[@]}"; do
    echo "---- $t ($build/fuzz-$t.log) ----" >&2
    grep -E "ERROR|SUMMARY|fuzz check failed|Test unit written|artifact_prefix" \
      "$build/fuzz-$t.log" | head -n 20 >&2 || tail -n 30 "$build/fuzz-$t.log" >&2
  done
  echo "fuzz.sh: FAILED: ${failed[*]}; reproduce with $build/schemas/<target>_fuzz <artifact>" >&2
  exit 1
fi
echo "fuzz.sh: no failures"
