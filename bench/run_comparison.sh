#!/usr/bin/env bash
# Runs the Propeller-vs-SQLite comparison in ONE process (benchmarks interleaved pairwise, so
# the machine's noise hits both systems alike), writes the JSON to bench/results/ and prints
# the Markdown table (bench/compare_results.py). See bench/README.md.
#
# usage: bench/run_comparison.sh FILES [google-benchmark flags...]
#   FILES          file count(s): 100k, 1m, 10m or a comma list (1m,10m)
# environment:
#   BUILD_DIR      build tree holding bench/propeller_bench (default: <repo>/build)
#   MIN_TIME       --benchmark_min_time in plain seconds (default 0.5; no "s" suffix:
#                  docs/pitfalls.md GB-1)
#   REPETITIONS    --benchmark_repetitions (default 3; the table uses the median)
#   MEMORY_REPORT  1 = also run propeller_memory_report for both levels and add its table
#   PROPELLER_BENCH_DIR  where the data directories go (default $TMPDIR or /tmp)
set -euo pipefail

if [[ $# -lt 1 ]]; then
  sed -n '6,13p' "$0" >&2
  exit 2
fi
files="$1"
shift

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
build="${BUILD_DIR:-$repo/build}"
bin="$build/bench/propeller_bench"
mem_bin="$build/bench/propeller_memory_report"
if [[ ! -x "$bin" ]]; then
  echo "missing $bin; build it first:" >&2
  echo "  cmake -S $repo -B $build -G Ninja && ninja -C $build propeller_bench propeller_memory_report" >&2
  exit 2
fi

results="$here/results"
mkdir -p "$results"
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
tag="${files//,/_}"
json="$results/comparison-$tag-$stamp.json"
table="$results/comparison-$tag-$stamp.md"
memory="$results/memory-$tag-$stamp.jsonl"

echo "== free space and memory before the run" >&2
df -h "${PROPELLER_BENCH_DIR:-${TMPDIR:-/tmp}}" >&2
free -h >&2

"$bin" --files="$files" \
  --benchmark_min_time="${MIN_TIME:-0.5}" \
  --benchmark_repetitions="${REPETITIONS:-3}" \
  --benchmark_out="$json" --benchmark_out_format=json \
  "$@"

memory_arg=()
if [[ "${MEMORY_REPORT:-0}" == "1" ]]; then
  : >"$memory"
  IFS=',' read -r -a counts <<<"$files"
  for n in "${counts[@]}"; do
    n="${n/k/000}"; n="${n/K/000}"; n="${n/m/000000}"; n="${n/M/000000}"
    for level in default sync; do
      "$mem_bin" "$n" "$level" ${PROPELLER_BENCH_DIR:+--dir="$PROPELLER_BENCH_DIR"} | tee -a "$memory"
    done
  done
  memory_arg=("$memory")
fi

status=0
python3 "$here/compare_results.py" "$json" "${memory_arg[@]}" | tee "$table" || status=$?
echo >&2
echo "JSON:  $json" >&2
echo "Table: $table" >&2
exit "$status"
