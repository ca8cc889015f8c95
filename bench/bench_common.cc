#include "bench/bench_common.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <utility>
#include <string_view>
#include <system_error>

namespace propeller::bench {
namespace {

// "100000", "100k", "1m", "10M" -> count; false on garbage.
bool ParseCount(std::string_view text, uint64_t* out) {
  if (text.empty()) return false;
  uint64_t multiplier = 1;
  char last = text.back();
  if (last == 'k' || last == 'K') {
    multiplier = 1'000;
  } else if (last == 'm' || last == 'M') {
    multiplier = 1'000'000;
  }
  if (multiplier != 1) text.remove_suffix(1);
  if (text.empty()) return false;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9' || value > (UINT64_MAX - 9) / 10) return false;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  if (value == 0 || value > UINT64_MAX / multiplier) return false;
  *out = value * multiplier;
  return true;
}

bool ParseCountList(std::string_view text, std::vector<uint64_t>* out) {
  std::vector<uint64_t> counts;
  while (!text.empty()) {
    size_t comma = text.find(',');
    uint64_t n = 0;
    if (!ParseCount(text.substr(0, comma), &n)) return false;
    counts.push_back(n);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  if (counts.empty()) return false;
  *out = std::move(counts);
  return true;
}

bool ApplySetting(std::string_view key, std::string_view value, BenchConfig* config) {
  if (key == "files") return ParseCountList(value, &config->file_counts);
  if (key == "seed") {
    if (value == "0") {
      config->seed = 0;
      return true;
    }
    return ParseCount(value, &config->seed);
  }
  if (key == "files_per_acg") return ParseCount(value, &config->files_per_acg);
  if (key == "systems") {
    config->with_propeller = value.find("propeller") != std::string_view::npos;
    config->with_sqlite = value.find("sqlite") != std::string_view::npos;
    return config->with_propeller || config->with_sqlite;
  }
  return false;
}

}  // namespace

const char* LevelName(Level level) { return level == Level::kSync ? "sync" : "default"; }

const SearchSpec& GetSearchSpec(SearchKind kind) {
  static const SearchSpec kBigRecent = {"SearchBigRecent", "size>1g & mtime<1d",
                                        uint64_t{1} << 30, true};
  static const SearchSpec kOver16M = {"SearchOver16M", "size>16m", uint64_t{16} << 20, false};
  return kind == SearchKind::kBigRecent ? kBigRecent : kOver16M;
}

BenchConfig& Config() {
  static BenchConfig* config = new BenchConfig();  // never destroyed: used until exit
  return *config;
}

bool ParseBenchConfig(int* argc, char** argv) {
  BenchConfig& config = Config();
  struct EnvSetting {
    const char* env;
    const char* key;
  };
  for (EnvSetting s : {EnvSetting{"PROPELLER_BENCH_FILES", "files"},
                       EnvSetting{"PROPELLER_BENCH_SEED", "seed"},
                       EnvSetting{"PROPELLER_BENCH_FILES_PER_ACG", "files_per_acg"},
                       EnvSetting{"PROPELLER_BENCH_SYSTEMS", "systems"}}) {
    const char* value = std::getenv(s.env);
    if (value != nullptr && *value != '\0' && !ApplySetting(s.key, value, &config)) {
      std::fprintf(stderr, "bad %s=%s\n", s.env, value);
      return false;
    }
  }
  const char* keep = std::getenv("PROPELLER_BENCH_KEEP");
  config.keep = keep != nullptr && std::strcmp(keep, "1") == 0;

  int kept = 1;
  for (int i = 1; i < *argc; ++i) {
    std::string_view arg = argv[i];
    bool ours = false;
    for (std::string_view key : {"files", "seed", "files_per_acg", "systems"}) {
      std::string prefix = "--" + std::string(key) + "=";
      if (arg.starts_with(prefix)) {
        if (!ApplySetting(key, arg.substr(prefix.size()), &config)) {
          std::fprintf(stderr, "bad flag %s\n", argv[i]);
          return false;
        }
        ours = true;
      }
    }
    if (!ours) argv[kept++] = argv[i];
  }
  *argc = kept;
  argv[kept] = nullptr;

  const char* base = std::getenv("PROPELLER_BENCH_DIR");
  if (base == nullptr || *base == '\0') base = std::getenv("TMPDIR");
  if (base == nullptr || *base == '\0') base = "/tmp";
  config.base_dir = base;
  config.run_dir = config.base_dir + "/propeller-bench-" + std::to_string(getpid());
  std::error_code ec;
  std::filesystem::create_directories(config.run_dir, ec);
  if (ec) {
    std::fprintf(stderr, "cannot create %s: %s\n", config.run_dir.c_str(), ec.message().c_str());
    return false;
  }
  return true;
}

void CleanUpRunDir() {
  const BenchConfig& config = Config();
  if (config.keep || config.run_dir.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(config.run_dir, ec);
}

DatasetOptions MakeDatasetOptions() {
  DatasetOptions options;
  options.seed = Config().seed;
  options.files_per_acg = Config().files_per_acg;
  return options;
}

UpdatePool::UpdatePool(const Dataset& dataset, uint64_t files, size_t pool_size, uint64_t seed)
    : dataset_(dataset) {
  updates_.reserve(pool_size);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < pool_size; ++i) {
    // xorshift64*: a uniform-enough pick of which files get updated.
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    updates_.push_back(dataset.Put((x * 0x2545F4914F6CDD1Dull) % files));
  }
}

Update& UpdatePool::Next() {
  Update& u = updates_[pos_];
  pos_ = (pos_ + 1) % updates_.size();
  dataset_.Touch(++version_, &u.record);
  return u;
}

std::vector<Update>& UpdatePool::NextBatch(size_t n) {
  // Copy out so the span is contiguous even when it wraps around the ring. The copy reuses
  // batch_'s strings after the first call, so it is cheap and outside the timed region anyway.
  batch_.resize(n);
  for (size_t i = 0; i < n; ++i) batch_[i] = Next();
  return batch_;
}

LatencyRecorder::LatencyRecorder(benchmark::IterationCount expected) {
  ns_.reserve(static_cast<size_t>(std::min<benchmark::IterationCount>(expected, 50'000'000)));
}

void LatencyRecorder::Report(benchmark::State& state) {
  if (ns_.empty()) return;
  std::sort(ns_.begin(), ns_.end());
  auto at = [&](double q) {
    size_t k = static_cast<size_t>(q * static_cast<double>(ns_.size()));
    return static_cast<double>(ns_[std::min(k, ns_.size() - 1)]) / 1e3;
  };
  state.counters["p50_us"] = at(0.50);
  state.counters["p99_us"] = at(0.99);
  state.counters["p999_us"] = at(0.999);
  state.counters["max_us"] = static_cast<double>(ns_.back()) / 1e3;
}

uint64_t ExpectedHits(const Dataset& dataset, uint64_t files, SearchKind kind) {
  static std::map<std::pair<uint64_t, SearchKind>, uint64_t>* cache =
      new std::map<std::pair<uint64_t, SearchKind>, uint64_t>();
  auto it = cache->find({files, kind});
  if (it != cache->end()) return it->second;
  const SearchSpec& spec = GetSearchSpec(kind);
  const int64_t since = dataset.options().now_ns - kNanosPerDay;
  uint64_t hits = 0;
  for (uint64_t i = 0; i < files; ++i) {
    if (dataset.SizeOf(i) > spec.min_size && (!spec.recent || dataset.MtimeOf(i) > since)) {
      ++hits;
    }
  }
  cache->emplace(std::make_pair(files, kind), hits);
  return hits;
}

namespace {
bool any_failure = false;  // benchmarks run on one thread
}  // namespace

void Fail(benchmark::State& state, const std::string& message) {
  any_failure = true;
  std::fprintf(stderr, "FAILED: %s\n", message.c_str());
  state.SkipWithError(message.c_str());
}

bool AnyBenchmarkFailed() { return any_failure; }

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t DiskUsage(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  uint64_t total = 0;
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return 0;
  total += static_cast<uint64_t>(st.st_blocks) * 512;
  if (!S_ISDIR(st.st_mode)) return total;
  for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    if (::lstat(it->path().c_str(), &st) == 0) total += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return total;
}

}  // namespace propeller::bench
