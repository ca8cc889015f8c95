// propeller_memory_report: the memory and disk footprint per indexed file (docs/architecture.md §11
// budget: <= 200 bytes resident per file at 10 M files) and the ingest throughput, as one JSON
// line.
//
//   propeller_memory_report <files> [default|sync] [--dir=PATH] [--seed=S]
//                           [--files_per_acg=K] [--batch=B] [--keep]
//
// Steps: read /proc/self/status (baseline), open a fresh engine in <dir>/propeller-mem-<pid>
// (default $TMPDIR or /tmp; default EngineOptions, so the cache of open ACGs has its default
// bounds), Apply the data set's records in batches of B (10,000) with background commits on,
// CommitAll, run `size>1g & mtime<1d` twice (the first search after ingest; then warm: it
// opens only the ACGs whose K-D tree has a candidate), then read /proc/self/status again, and
// once more after malloc_trim(0) (freed heap returned to the kernel, as a long-running
// daemon's would be); then close and reopen the engine (`reopen_s`) and run the search once
// more (`search_after_reopen_ms`: it loads the K-D trees, as after a node's restart); then a
// child process opens it, has 100,000 updates acknowledged and is killed with SIGKILL, and the
// engine is opened once more (`reopen_after_kill9_s`, `search_after_kill9_ms`).
// Memory figures are reported both as totals and as the growth over the baseline per file;
// RssAnon is the heap and in-memory indexes, RssFile the LMDB pages mapped in (page cache that
// the kernel can drop). The data directory is removed afterwards unless --keep.
#include <malloc.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <unistd.h>
#include <vector>

#include "bench/dataset.h"
#include "bench/proc_status.h"
#include "indexnode/engine.h"

namespace propeller::bench {
namespace {

// (allocated bytes like du, apparent bytes like du --apparent-size) below `path`.
std::pair<uint64_t, uint64_t> DiskUsage(const std::string& path) {
  namespace fs = std::filesystem;
  uint64_t allocated = 0, apparent = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    allocated += static_cast<uint64_t>(st.st_blocks) * 512;
    if (S_ISREG(st.st_mode)) apparent += static_cast<uint64_t>(st.st_size);
  }
  return {allocated, apparent};
}

int64_t Monotonic() { return Env::Default()->MonotonicNanos(); }

bool ParseUint(std::string_view text, uint64_t* out) {
  if (text.empty()) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9' || v > UINT64_MAX / 10 - 1) return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

int Usage() {
  std::fprintf(stderr,
               "usage: propeller_memory_report <files> [default|sync] [--dir=PATH] [--seed=S] "
               "[--files_per_acg=K] [--batch=B] [--keep]\n");
  return 2;
}

double PerFile(uint64_t bytes, uint64_t files) {
  return static_cast<double>(bytes) / static_cast<double>(files);
}

int Run(int argc, char** argv) {
  uint64_t files = 0, batch = 10'000;
  Durability durability = Durability::kDefault;
  DatasetOptions dataset_options;
  std::string base;
  bool keep = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (i == 1) {
      if (!ParseUint(arg, &files) || files == 0) return Usage();
    } else if (arg == "default") {
      durability = Durability::kDefault;
    } else if (arg == "sync") {
      durability = Durability::kSync;
    } else if (arg.starts_with("--dir=")) {
      base = std::string(arg.substr(6));
    } else if (arg.starts_with("--seed=")) {
      if (!ParseUint(arg.substr(7), &dataset_options.seed)) return Usage();
    } else if (arg.starts_with("--files_per_acg=")) {
      if (!ParseUint(arg.substr(16), &dataset_options.files_per_acg) ||
          dataset_options.files_per_acg == 0) {
        return Usage();
      }
    } else if (arg.starts_with("--batch=")) {
      if (!ParseUint(arg.substr(8), &batch) || batch == 0) return Usage();
    } else if (arg == "--keep") {
      keep = true;
    } else {
      return Usage();
    }
  }
  if (files == 0) return Usage();
  if (base.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    base = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp";
  }
  const std::string dir = base + "/propeller-mem-" + std::to_string(getpid());
  const Dataset dataset(dataset_options);

  std::map<std::string, uint64_t> baseline = ReadProcStatus();
  EngineOptions options;
  options.data_dir = dir;
  options.durability = durability;
  Result<std::unique_ptr<Engine>> opened = Engine::Open(options);
  if (!opened.ok()) {
    std::fprintf(stderr, "open %s: %s\n", dir.c_str(), opened.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<Engine> engine = std::move(opened).value();

  int64_t apply_ns = 0;
  int64_t wall0 = Monotonic();
  std::vector<Update> chunk;
  for (uint64_t begin = 0; begin < files; begin += batch) {
    chunk.clear();
    dataset.AppendPuts(begin, std::min(files, begin + batch), &chunk);
    int64_t t0 = Monotonic();
    Status s = engine->Apply(chunk);
    apply_ns += Monotonic() - t0;
    if (!s.ok()) {
      std::fprintf(stderr, "Apply at %" PRIu64 ": %s\n", begin, s.ToString().c_str());
      return 1;
    }
  }
  chunk = std::vector<Update>();
  int64_t t0 = Monotonic();
  Status s = engine->CommitAll();
  int64_t commit_ns = Monotonic() - t0;
  int64_t wall_ns = Monotonic() - wall0;
  if (!s.ok()) {
    std::fprintf(stderr, "CommitAll: %s\n", s.ToString().c_str());
    return 1;
  }

  SearchRequest request;
  request.query = "size>1g & mtime<1d";
  request.now_ns = dataset_options.now_ns;
  SearchStats search_stats;
  t0 = Monotonic();
  Result<std::vector<SearchHit>> hits = engine->SearchAll(request, &search_stats);
  int64_t search_ns = Monotonic() - t0;
  if (!hits.ok()) {
    std::fprintf(stderr, "search: %s\n", hits.status().ToString().c_str());
    return 1;
  }
  size_t hit_count = hits->size();
  hits = std::vector<SearchHit>();
  t0 = Monotonic();
  hits = engine->SearchAll(request, &search_stats);
  int64_t search2_ns = Monotonic() - t0;
  if (!hits.ok()) {
    std::fprintf(stderr, "search: %s\n", hits.status().ToString().c_str());
    return 1;
  }
  hits = std::vector<SearchHit>();

  EngineStats stats = engine->Stats();
  std::map<std::string, uint64_t> after = ReadProcStatus();
  malloc_trim(0);
  std::map<std::string, uint64_t> trimmed = ReadProcStatus();
  auto [du_bytes, apparent_bytes] = DiskUsage(dir);

  // A restart: close, open again and search once more. The first search loads every K-D tree
  // its ACG summaries cannot rule out (each a scan of the ACG's records), as a node's first
  // search after a restart does. The data's pages are in the page cache (not dropped).
  engine.reset();
  t0 = Monotonic();
  opened = Engine::Open(options);
  const int64_t reopen_ns = Monotonic() - t0;
  if (!opened.ok()) {
    std::fprintf(stderr, "reopen %s: %s\n", dir.c_str(), opened.status().ToString().c_str());
    return 1;
  }
  engine = std::move(opened).value();
  t0 = Monotonic();
  SearchStats restart_stats;
  hits = engine->SearchAll(request, &restart_stats);
  const int64_t restart_search_ns = Monotonic() - t0;
  if (!hits.ok() || hits->size() != hit_count) {
    std::fprintf(stderr, "search after reopen: %s\n",
                 hits.ok() ? "another hit count" : hits.status().ToString().c_str());
    return 1;
  }
  hits = std::vector<SearchHit>();

  // A crash: a child process opens the engine, has 100,000 updates acknowledged (sizes of
  // existing files, spread over the ACGs, some committed by the background committer, the
  // rest only in the log) and is killed with SIGKILL; then this process opens again (LMDB's
  // check of each shard, the log's replay) and searches once more.
  engine.reset();
  constexpr uint64_t kCrashUpdates = 100'000;
  const pid_t child = fork();
  if (child < 0) {
    std::perror("fork");
    return 1;
  }
  if (child == 0) {
    auto crashing = Engine::Open(options);
    if (!crashing.ok()) _exit(3);
    std::vector<Update> updates;
    dataset.AppendPuts(0, std::min(files, kCrashUpdates), &updates);
    for (Update& u : updates) u.record.size += 1;
    if (!(*crashing)->Apply(updates).ok()) _exit(4);
    ::kill(::getpid(), SIGKILL);
    _exit(5);
  }
  int wstatus = 0;
  ::waitpid(child, &wstatus, 0);
  if (!WIFSIGNALED(wstatus) || WTERMSIG(wstatus) != SIGKILL) {
    std::fprintf(stderr, "the crashing child did not die of SIGKILL (status %d)\n", wstatus);
    return 1;
  }
  t0 = Monotonic();
  opened = Engine::Open(options);
  const int64_t crash_reopen_ns = Monotonic() - t0;
  if (!opened.ok()) {
    std::fprintf(stderr, "open after kill -9: %s\n", opened.status().ToString().c_str());
    return 1;
  }
  engine = std::move(opened).value();
  t0 = Monotonic();
  hits = engine->SearchAll(request, &restart_stats);
  const int64_t crash_search_ns = Monotonic() - t0;
  if (!hits.ok()) {
    std::fprintf(stderr, "search after kill -9: %s\n", hits.status().ToString().c_str());
    return 1;
  }
  hits = std::vector<SearchHit>();

  auto growth = [&](const std::map<std::string, uint64_t>& m, const char* key) {
    uint64_t now = m.count(key) ? m.at(key) : 0;
    uint64_t base_value = baseline.count(key) ? baseline.at(key) : 0;
    return now > base_value ? now - base_value : 0;
  };
  std::printf(
      "{\"files\":%" PRIu64 ",\"durability\":\"%s\",\"files_per_acg\":%" PRIu64
      ",\"seed\":%" PRIu64 ",\"batch\":%" PRIu64 ",\"acgs\":%" PRIu64
      ",\"ingest_apply_files_per_s\":%.0f,\"ingest_files_per_s\":%.0f"
      ",\"commit_all_s\":%.3f,\"ingest_wall_s\":%.3f"
      ",\"first_search_ms\":%.3f,\"warm_search_ms\":%.3f,\"warm_search_hits\":%zu"
      ",\"reopen_s\":%.3f,\"search_after_reopen_ms\":%.3f"
      ",\"reopen_after_kill9_s\":%.3f,\"search_after_kill9_ms\":%.3f"
      ",\"warm_search_acgs_skipped\":%" PRIu64 ",\"warm_search_acgs_answered_closed\":%" PRIu64
      ",\"open_acgs\":%" PRIu64 ",\"acg_opens\":%" PRIu64 ",\"cache_bytes\":%" PRIu64
      ",\"vmrss_bytes\":%" PRIu64 ",\"rss_anon_bytes\":%" PRIu64 ",\"rss_file_bytes\":%" PRIu64
      ",\"vmhwm_bytes\":%" PRIu64 ",\"baseline_vmrss_bytes\":%" PRIu64
      ",\"vmrss_per_file\":%.1f,\"rss_anon_per_file\":%.1f,\"rss_file_per_file\":%.1f"
      ",\"rss_anon_per_file_after_trim\":%.1f,\"vmrss_per_file_after_trim\":%.1f"
      ",\"index_memory_per_file\":%.1f,\"disk_bytes_per_file\":%.1f"
      ",\"du_bytes_per_file\":%.1f,\"apparent_bytes_per_file\":%.1f,\"wal_bytes\":%" PRIu64
      ",\"data_dir\":\"%s\"}\n",
      files, DurabilityName(durability), dataset_options.files_per_acg, dataset_options.seed,
      batch, stats.acgs, static_cast<double>(files) / (static_cast<double>(apply_ns) / 1e9),
      static_cast<double>(files) / (static_cast<double>(apply_ns + commit_ns) / 1e9),
      static_cast<double>(commit_ns) / 1e9, static_cast<double>(wall_ns) / 1e9,
      static_cast<double>(search_ns) / 1e6, static_cast<double>(search2_ns) / 1e6, hit_count,
      static_cast<double>(reopen_ns) / 1e9, static_cast<double>(restart_search_ns) / 1e6,
      static_cast<double>(crash_reopen_ns) / 1e9, static_cast<double>(crash_search_ns) / 1e6,
      search_stats.acgs_skipped, search_stats.acgs_answered_closed, stats.open_acgs,
      stats.acg_opens, stats.cache_bytes, after["VmRSS"], after["RssAnon"],
      after["RssFile"], after["VmHWM"], baseline["VmRSS"],
      PerFile(growth(after, "VmRSS"), files), PerFile(growth(after, "RssAnon"), files),
      PerFile(growth(after, "RssFile"), files), PerFile(growth(trimmed, "RssAnon"), files),
      PerFile(growth(trimmed, "VmRSS"), files), PerFile(stats.index_memory_bytes, files),
      PerFile(stats.disk_bytes, files), PerFile(du_bytes, files), PerFile(apparent_bytes, files),
      stats.wal_bytes, dir.c_str());
  std::fflush(stdout);

  engine.reset();
  if (!keep) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  return 0;
}

}  // namespace
}  // namespace propeller::bench

int main(int argc, char** argv) { return propeller::bench::Run(argc, argv); }
