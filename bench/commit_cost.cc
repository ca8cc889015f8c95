// propeller_commit_cost: what one committed update costs, in CPU time — a figure that a shared,
// noisy machine disturbs far less than wall-clock throughput, so that two builds can be
// compared run against run. One JSON line per phase.
//
//   propeller_commit_cost [files] [--dir=PATH] [--rounds=R] [--updates=U] [--seed=S]
//
// Steps (default 200,000 files = 20 ACGs of 10,000; background commits off, so every commit
// happens inside a timed CommitAll on this thread):
//   1. "new": Apply the data set's records (kPut of new files) and CommitAll;
//   2. "update" x R (default 3): Apply U (default `files`) kPuts of existing files picked
//      uniformly at random (new size and mtime, as close() sends them) and CommitAll. A small U
//      models a node with many ACGs: at 10 M files, a 1 M-update cache gives each 10,000-file ACG
//      ~1,000 updates per commit, which `200000 --updates=20000` reproduces in 20 ACGs;
//   3. "updates": the R rounds together (totals divided by all their updates);
//   4. "search": the wall time of the first search after the rounds (`size>1g`),
//      which rebuilds the K-D trees the rounds left drifted, and of a second.
// Reported per phase: updates, commit CPU ns per update (the whole process's CPU time during
// CommitAll, which commits ACGs on EngineOptions::commit_threads threads; nothing else runs
// meanwhile), commit wall ns per update, bytes written to storage during the commit per update
// (LMDB rewrites whole 4 KiB pages: copy-on-write), and the Apply (acknowledgement) thread-CPU
// ns per update. The data directory is removed.
#include <time.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <unistd.h>
#include <vector>

#include "bench/dataset.h"
#include "indexnode/engine.h"

namespace propeller::bench {
namespace {

int64_t ThreadCpuNanos() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

int64_t ProcessCpuNanos() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Bytes this process caused to be written to storage so far (/proc/self/io write_bytes; the
// page cache's later writeback of LMDB pages and the fsyncs count here), or -1.
int64_t WriteBytes() {
  FILE* f = std::fopen("/proc/self/io", "r");
  if (f == nullptr) return -1;
  char line[128];
  int64_t v = -1;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::strncmp(line, "write_bytes:", 12) == 0) v = std::strtoll(line + 12, nullptr, 10);
  }
  std::fclose(f);
  return v;
}

int64_t WallNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

struct Phase {
  const char* name;
  uint64_t updates = 0;
  int64_t apply_cpu_ns = 0;
  int64_t commit_cpu_ns = 0;
  int64_t commit_wall_ns = 0;
  int64_t commit_write_bytes = 0;
};

void Print(const Phase& p, uint64_t files) {
  const double n = static_cast<double>(p.updates);
  std::printf("{\"phase\":\"%s\",\"files\":%" PRIu64 ",\"updates\":%" PRIu64
              ",\"apply_cpu_ns_per_update\":%.0f,\"commit_cpu_ns_per_update\":%.0f,"
              "\"commit_wall_ns_per_update\":%.0f,\"commit_cpu_updates_per_s\":%.0f,"
              "\"commit_write_bytes_per_update\":%.0f}\n",
              p.name, files, p.updates, static_cast<double>(p.apply_cpu_ns) / n,
              static_cast<double>(p.commit_cpu_ns) / n,
              static_cast<double>(p.commit_wall_ns) / n,
              n * 1e9 / static_cast<double>(p.commit_cpu_ns),
              static_cast<double>(p.commit_write_bytes) / n);
  std::fflush(stdout);
}

int Run(uint64_t files, uint64_t updates, const std::string& base_dir, int rounds,
        uint64_t seed) {
  DatasetOptions dopt;
  dopt.seed = seed;
  const Dataset dataset(dopt);
  const std::string dir = base_dir + "/propeller-commit-" + std::to_string(getpid());
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  EngineOptions options;
  options.data_dir = dir;
  options.background_commit = false;
  // Nothing may commit before CommitAll: the bounds are above what one phase applies.
  options.cache_bound_updates = files + 1;
  options.total_cache_bound_updates = files + 1;
  options.max_cache_bytes = 0;
  Result<std::unique_ptr<Engine>> opened = Engine::Open(options);
  if (!opened.ok()) {
    std::fprintf(stderr, "open %s: %s\n", dir.c_str(), opened.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<Engine> engine = std::move(opened).value();
  auto commit = [&](Phase* p) {
    const int64_t c0 = ProcessCpuNanos(), w0 = WallNanos(), b0 = WriteBytes();
    Status s = engine->CommitAll();
    p->commit_cpu_ns += ProcessCpuNanos() - c0;
    p->commit_write_bytes += WriteBytes() - b0;
    p->commit_wall_ns += WallNanos() - w0;
    if (!s.ok()) std::fprintf(stderr, "CommitAll: %s\n", s.ToString().c_str());
    return s.ok();
  };
  constexpr uint64_t kBatch = 1000;
  std::vector<Update> batch;
  Phase fresh{"new"};
  for (uint64_t begin = 0; begin < files; begin += kBatch) {
    batch.clear();
    dataset.AppendPuts(begin, std::min(files, begin + kBatch), &batch);
    const int64_t c0 = ThreadCpuNanos();
    Status s = engine->Apply(batch);
    fresh.apply_cpu_ns += ThreadCpuNanos() - c0;
    if (!s.ok()) {
      std::fprintf(stderr, "Apply: %s\n", s.ToString().c_str());
      return 1;
    }
    fresh.updates += batch.size();
  }
  if (!commit(&fresh)) return 1;
  Print(fresh, files);

  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  uint64_t version = 0;
  // Every round summed: restructurings that come every few commits (the K-D trees' compaction)
  // fall in some rounds and not in others, so the rounds' median would miss them.
  Phase all{"updates"};
  for (int r = 0; r < rounds; ++r) {
    Phase update{"update"};
    for (uint64_t done = 0; done < updates; done += kBatch) {
      batch.clear();
      for (uint64_t k = 0; k < std::min(kBatch, updates - done); ++k) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        Update u = dataset.Put((x * 0x2545F4914F6CDD1Dull) % files);
        dataset.Touch(++version, &u.record);
        batch.push_back(std::move(u));
      }
      const int64_t c0 = ThreadCpuNanos();
      Status s = engine->Apply(batch);
      update.apply_cpu_ns += ThreadCpuNanos() - c0;
      if (!s.ok()) {
        std::fprintf(stderr, "Apply: %s\n", s.ToString().c_str());
        return 1;
      }
      update.updates += batch.size();
    }
    if (!commit(&update)) return 1;
    Print(update, files);
    all.updates += update.updates;
    all.apply_cpu_ns += update.apply_cpu_ns;
    all.commit_cpu_ns += update.commit_cpu_ns;
    all.commit_wall_ns += update.commit_wall_ns;
    all.commit_write_bytes += update.commit_write_bytes;
  }
  if (all.updates > 0) Print(all, files);
  if (rounds > 0) {
    // What the rounds leave to the next search: K-D trees that drifted are rebuilt by the
    // first search that needs them (kdtree_index.h), so it is timed apart from a second one.
    // About 0.05% of the data set's files are above 1 GiB: a few in every ACG, so no ACG's
    // summary rules the query out and every tree answers it.
    SearchRequest request;
    request.query = "size>1g";
    double ms[2] = {0, 0};
    SearchStats stats;
    for (double& m : ms) {
      stats = SearchStats();
      const int64_t w0 = WallNanos();
      Result<std::vector<SearchHit>> found = engine->SearchAll(request, &stats);
      m = static_cast<double>(WallNanos() - w0) / 1e6;
      if (!found.ok()) {
        std::fprintf(stderr, "Search: %s\n", found.status().ToString().c_str());
        return 1;
      }
    }
    std::printf("{\"phase\":\"search\",\"files\":%" PRIu64 ",\"acgs\":%" PRIu64
                ",\"acgs_skipped\":%" PRIu64 ",\"hits\":%" PRIu64
                ",\"first_search_ms\":%.2f,\"second_search_ms\":%.2f}\n",
                files, stats.acgs_total, stats.acgs_skipped, stats.hits, ms[0], ms[1]);
  }
  engine.reset();
  std::filesystem::remove_all(dir, ec);
  return 0;
}

}  // namespace
}  // namespace propeller::bench

int main(int argc, char** argv) {
  uint64_t files = 200'000;
  uint64_t updates = 0;  // 0 = files
  int rounds = 3;
  uint64_t seed = 42;
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("usage: %s [files] [--dir=PATH] [--rounds=R] [--updates=U] [--seed=S]\n"
                  "Commit cost per update in CPU time (see bench/README.md).\n"
                  "  files       files created first (default 200000; ACGs of 10000)\n"
                  "  --rounds    rounds of random attribute updates, each committed (default 3)\n"
                  "  --updates   updates per round (default: files)\n",
                  argv[0]);
      return 0;
    }
    if (a.starts_with("--dir=")) {
      dir = std::string(a.substr(6));
    } else if (a.starts_with("--rounds=")) {
      rounds = std::atoi(argv[i] + 9);
    } else if (a.starts_with("--updates=")) {
      updates = std::strtoull(argv[i] + 10, nullptr, 10);
    } else if (a.starts_with("--seed=")) {
      seed = std::strtoull(argv[i] + 7, nullptr, 10);
    } else if (!a.empty() && a[0] >= '0' && a[0] <= '9') {
      files = std::strtoull(argv[i], nullptr, 10);
    } else {
      std::fprintf(stderr, "unknown argument '%s' (try --help)\n", argv[i]);
      return 2;
    }
  }
  if (files == 0 || rounds < 0) {
    std::fprintf(stderr, "files must be >= 1 and rounds >= 0\n");
    return 2;
  }
  if (updates == 0) updates = files;
  return propeller::bench::Run(files, updates, dir, rounds, seed);
}
