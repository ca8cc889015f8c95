// Shared pieces of the side-by-side benchmarks (engine_bench.cc, sqlite_bench.cc): the run
// configuration, the scratch directory, the pool of prepared updates and the latency
// percentiles reported as counters. Benchmarks run on Google Benchmark's single thread; none of
// this is thread-safe.
#ifndef PROPELLER_BENCH_BENCH_COMMON_H_
#define PROPELLER_BENCH_BENCH_COMMON_H_

#include <cstdint>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/dataset.h"
#include "common/record.h"

namespace propeller::bench {

// The two durability levels compared (docs/architecture.md §10). Propeller `default` (log fsync by
// group commit every 10 ms) is compared with SQLite WAL + synchronous=NORMAL, which gives the same
// power-loss window guarantee; Propeller `sync` with synchronous=FULL.
enum class Level { kDefault, kSync };
const char* LevelName(Level level);  // "default", "sync"

// The two searches of docs/architecture.md §11, in Propeller's language and as SQL bounds.
enum class SearchKind { kBigRecent, kOver16M };
struct SearchSpec {
  const char* name;   // benchmark name prefix
  const char* query;  // query text (docs/query.md)
  uint64_t min_size;  // size > min_size
  bool recent;        // and mtime > now - 1 day (the data set's now)
};
const SearchSpec& GetSearchSpec(SearchKind kind);

struct BenchConfig {
  // File counts to build a state for; from --files=a,b or PROPELLER_BENCH_FILES; default 100k.
  std::vector<uint64_t> file_counts = {100'000};
  uint64_t seed = 42;                // --seed / PROPELLER_BENCH_SEED
  uint64_t files_per_acg = 10'000;   // --files_per_acg / PROPELLER_BENCH_FILES_PER_ACG
  std::string base_dir;              // PROPELLER_BENCH_DIR, else $TMPDIR, else /tmp
  std::string run_dir;               // <base_dir>/propeller-bench-<pid>: all data of this run
  bool keep = false;                 // PROPELLER_BENCH_KEEP=1: leave run_dir behind
  bool with_sqlite = true;           // --systems=propeller,sqlite
  bool with_propeller = true;
};

// The process-wide configuration, set once by ParseBenchConfig before benchmarks run.
BenchConfig& Config();

// Reads the environment, then consumes our own flags from argv (so Google Benchmark does not
// reject them): --files=N[,N...] (k/m suffixes allowed: 1m, 10m), --seed=S, --files_per_acg=K,
// --systems=propeller,sqlite. Creates run_dir. Returns false and prints the reason on a bad
// value.
bool ParseBenchConfig(int* argc, char** argv);

// Removes run_dir unless keep.
void CleanUpRunDir();

DatasetOptions MakeDatasetOptions();

// A ring of prepared updates of random existing files. Next() returns the next one, changed by
// Dataset::Touch with a fresh version (new size and mtime), so consecutive updates of the same
// file still change it. The returned reference stays valid until the next call.
class UpdatePool {
 public:
  // REQUIRES: files >= 1. Draws `pool_size` file indexes in [0, files) from `seed`.
  UpdatePool(const Dataset& dataset, uint64_t files, size_t pool_size, uint64_t seed);
  Update& Next();
  // The next `n` consecutive updates (touched), as a contiguous span. REQUIRES: n <= size.
  std::vector<Update>& NextBatch(size_t n);

 private:
  const Dataset& dataset_;
  std::vector<Update> updates_;
  std::vector<Update> batch_;
  size_t pos_ = 0;
  uint64_t version_ = 0;
};

// Per-iteration latencies of one benchmark run, reported as counters p50_us, p99_us, p999_us,
// max_us (Google Benchmark itself only reports the mean).
class LatencyRecorder {
 public:
  explicit LatencyRecorder(benchmark::IterationCount expected);
  void Add(int64_t ns) { ns_.push_back(ns); }
  void Report(benchmark::State& state);

 private:
  std::vector<int64_t> ns_;
};

// How many of the data set's first `files` records match `kind` (brute force over
// Dataset::SizeOf/MtimeOf; cached per (files, kind)). The oracle both systems' hit counts are
// checked against while their state is still the freshly populated one.
uint64_t ExpectedHits(const Dataset& dataset, uint64_t files, SearchKind kind);

// Marks the running benchmark failed with `message` (State::SkipWithError) and remembers it, so
// main can exit non-zero (Google Benchmark itself exits 0 after a skipped benchmark). The
// caller must leave the benchmark loop afterwards.
void Fail(benchmark::State& state, const std::string& message);
// True once any benchmark called Fail.
bool AnyBenchmarkFailed();

// Monotonic nanoseconds (CLOCK_MONOTONIC via steady_clock; ~20 ns per call here).
int64_t NowNanos();

// Bytes allocated on disk below `path` (like du: st_blocks * 512), 0 when missing.
uint64_t DiskUsage(const std::string& path);

}  // namespace propeller::bench

#endif  // PROPELLER_BENCH_BENCH_COMMON_H_
