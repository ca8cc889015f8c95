// propeller_bench: Propeller's Engine and SQLite side by side in one process
// (docs/architecture.md §11).
//
// Order, for each file count: the two searches (on the freshly populated state, so hit counts
// are checked against the data set), then for each level (default, sync) update latency and
// batched updates. Within each step Propeller runs first, then SQLite, so both meet the same
// machine noise. See bench/README.md for commands and how to read the output.
//
// Own flags (also as environment variables; see bench_common.h):
//   --files=100k[,1m,10m]   file counts (PROPELLER_BENCH_FILES), default 100k
//   --seed=42 --files_per_acg=10000 --systems=propeller,sqlite
// Every other flag goes to Google Benchmark (--benchmark_filter, --benchmark_min_time=0.5, ...).
// Exit status 1 when any benchmark failed (an engine error or a wrong hit count).
#include <cstdio>

#include <benchmark/benchmark.h>

#include "bench/bench_common.h"
#include "bench/suites.h"

namespace propeller::bench {
namespace {

void RegisterAll() {
  const BenchConfig& config = Config();
  for (uint64_t files : config.file_counts) {
    for (SearchKind kind : {SearchKind::kBigRecent, SearchKind::kOver16M}) {
      if (config.with_propeller) RegisterPropellerSearch(files, kind);
      if (config.with_sqlite) RegisterSqliteSearch(files, kind);
    }
    for (Level level : {Level::kDefault, Level::kSync}) {
      if (config.with_propeller) RegisterPropellerUpdateLatency(files, level);
      if (config.with_sqlite) RegisterSqliteUpdateLatency(files, level);
      if (config.with_propeller) RegisterPropellerBatchUpdate(files, level);
      if (config.with_sqlite) RegisterSqliteBatchUpdate(files, level);
    }
  }
}

}  // namespace
}  // namespace propeller::bench

int main(int argc, char** argv) {
  using namespace propeller::bench;
  if (!ParseBenchConfig(&argc, argv)) return 2;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RegisterAll();
  benchmark::AddCustomContext("propeller_bench_seed", std::to_string(Config().seed));
  benchmark::AddCustomContext("propeller_bench_files_per_acg",
                              std::to_string(Config().files_per_acg));
  benchmark::AddCustomContext("propeller_bench_dir", Config().run_dir);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  ReleasePropeller();
  ReleaseSqlite();
  CleanUpRunDir();
  return AnyBenchmarkFailed() ? 1 : 0;
}
