// Registration of the per-system benchmarks. bench_main.cc calls these in an interleaved
// order (Propeller, then SQLite, for each benchmark) so a noisy shared machine affects both
// systems of a pair alike. Each system builds one populated state per file count, lazily, the
// first time one of its benchmarks for that count runs, and keeps it for the whole process.
//
// Names: "<Benchmark>/<System>/[<level>/]files:<N>", e.g. "UpdateLatency/SQLite/sync/files:100000".
// run_comparison.sh pairs results by removing the system component.
#ifndef PROPELLER_BENCH_SUITES_H_
#define PROPELLER_BENCH_SUITES_H_

#include <cstdint>

#include "bench/bench_common.h"

namespace propeller::bench {

// Propeller's in-process Engine (engine_bench.cc).
void RegisterPropellerSearch(uint64_t files, SearchKind kind);
void RegisterPropellerUpdateLatency(uint64_t files, Level level);
void RegisterPropellerBatchUpdate(uint64_t files, Level level);
// Closes every engine (committing its caches). Call after the benchmarks ran.
void ReleasePropeller();

// SQLite in WAL mode (sqlite_bench.cc).
void RegisterSqliteSearch(uint64_t files, SearchKind kind);
void RegisterSqliteUpdateLatency(uint64_t files, Level level);
void RegisterSqliteBatchUpdate(uint64_t files, Level level);
void ReleaseSqlite();

// Updates per Apply call / per transaction in the batched benchmarks.
inline constexpr size_t kBatchSize = 1000;
// Records per Apply call / per transaction while populating.
inline constexpr uint64_t kPopulateBatch = 10'000;
// Distinct files in an update pool (random picks among all files), cycled in order. The
// latency benchmark's pool is small (cheap to build). The batched benchmarks' pool is as large
// as the engine's node-wide write cache (1 M updates), so a file comes back only after the cache
// has turned over: cached updates to the same file then (almost) never coalesce in a commit, and
// the sustained figure measures one index update per acknowledged update.
inline constexpr size_t kPoolSize = 1 << 16;
inline constexpr size_t kBatchPoolSize = 1 << 20;

}  // namespace propeller::bench

#endif  // PROPELLER_BENCH_SUITES_H_
