// Propeller's in-process Engine (indexnode/engine.h) under the workload of
// docs/architecture.md §11.
//
// State: one data directory per file count, populated once per process: kPut of every data-set
// record in Apply batches of 10,000 (one ACG each with the default 10,000 files per ACG) at the
// `default` level with background commits, then CommitAll. The update benchmarks reopen the
// same directory at the level they measure (the destructor commits and syncs first).
//
// - UpdateLatency: one kPut of an existing, changed record (Dataset::Touch: new size and mtime)
//   per Apply call; per-call latencies reported as p50_us/p99_us/p999_us/max_us counters.
// - BatchUpdate: Apply calls of 1000 such updates (random files across all ACGs); items/s.
// - Search*: SearchAll (whole records collected) after CommitAll and one warm-up search, so
//   caches are committed, ACGs open and their in-memory structures built.
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "bench/bench_common.h"
#include "bench/proc_status.h"
#include "bench/suites.h"
#include "indexnode/engine.h"

namespace propeller::bench {
namespace {

Durability ToDurability(Level level) {
  return level == Level::kSync ? Durability::kSync : Durability::kDefault;
}

class EngineWorld {
 public:
  // The world for `files`, populated on the first call; null with *error set on failure (the
  // failure is remembered, so later calls fail fast).
  static EngineWorld* Get(uint64_t files, std::string* error) {
    std::map<uint64_t, std::unique_ptr<EngineWorld>>& worlds = Worlds();
    auto it = worlds.find(files);
    if (it == worlds.end()) {
      auto world = std::unique_ptr<EngineWorld>(new EngineWorld(files));
      world->error_ = world->Build();
      it = worlds.emplace(files, std::move(world)).first;
    }
    if (!it->second->error_.empty()) {
      *error = it->second->error_;
      return nullptr;
    }
    return it->second.get();
  }
  static void ReleaseAll() { Worlds().clear(); }

  // The engine, open at `level` (reopening the directory when it is open at the other one).
  Engine* At(Level level, std::string* error) {
    Durability want = ToDurability(level);
    if (engine_ != nullptr && durability_ == want) return engine_.get();
    engine_.reset();
    Status s = OpenEngine(want);
    if (!s.ok()) {
      *error = "reopen " + dir_ + ": " + s.ToString();
      return nullptr;
    }
    return engine_.get();
  }
  Engine* engine() { return engine_.get(); }

  const Dataset& dataset() const { return dataset_; }
  double populate_seconds() const { return populate_seconds_; }
  bool pristine() const { return pristine_; }
  void set_dirty() { pristine_ = false; }

 private:
  explicit EngineWorld(uint64_t files)
      : files_(files),
        dataset_(MakeDatasetOptions()),
        dir_(Config().run_dir + "/propeller-" + std::to_string(files)) {}

  static std::map<uint64_t, std::unique_ptr<EngineWorld>>& Worlds() {
    static auto* worlds = new std::map<uint64_t, std::unique_ptr<EngineWorld>>();
    return *worlds;
  }

  Status OpenEngine(Durability durability) {
    EngineOptions options;
    options.data_dir = dir_;
    options.durability = durability;
    Result<std::unique_ptr<Engine>> engine = Engine::Open(options);
    if (!engine.ok()) return engine.status();
    engine_ = std::move(engine).value();
    durability_ = durability;
    return Status::OK();
  }

  std::string Build() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    Status s = OpenEngine(Durability::kDefault);
    if (!s.ok()) return "open " + dir_ + ": " + s.ToString();
    std::fprintf(stderr, "propeller: populating %" PRIu64 " files in %s ...\n", files_,
                 dir_.c_str());
    int64_t timed_ns = 0;
    std::vector<Update> chunk;
    for (uint64_t begin = 0; begin < files_; begin += kPopulateBatch) {
      chunk.clear();
      dataset_.AppendPuts(begin, std::min(files_, begin + kPopulateBatch), &chunk);
      int64_t t0 = NowNanos();
      s = engine_->Apply(chunk);
      timed_ns += NowNanos() - t0;
      if (!s.ok()) return "populate Apply: " + s.ToString();
    }
    int64_t t0 = NowNanos();
    s = engine_->CommitAll();
    int64_t commit_ns = NowNanos() - t0;
    timed_ns += commit_ns;
    if (!s.ok()) return "populate CommitAll: " + s.ToString();
    populate_seconds_ = static_cast<double>(timed_ns) / 1e9;
    EngineStats stats = engine_->Stats();
    std::fprintf(stderr,
                 "propeller: populated %" PRIu64 " files in %.1f s (%.0f files/s; final "
                 "CommitAll %.1f s), %" PRIu64 " ACGs, %.1f MB on disk, %.1f MB index memory\n",
                 files_, populate_seconds_, static_cast<double>(files_) / populate_seconds_,
                 static_cast<double>(commit_ns) / 1e9, stats.acgs,
                 static_cast<double>(stats.disk_bytes) / 1e6,
                 static_cast<double>(stats.index_memory_bytes) / 1e6);
    if (stats.files != files_) {
      return "populate: engine reports " + std::to_string(stats.files) + " files, expected " +
             std::to_string(files_);
    }
    return "";
  }

  const uint64_t files_;
  const Dataset dataset_;
  const std::string dir_;
  std::unique_ptr<Engine> engine_;
  Durability durability_ = Durability::kDefault;
  double populate_seconds_ = 0;
  bool pristine_ = true;
  std::string error_;
};

void BM_PropellerSearch(benchmark::State& state, uint64_t files, SearchKind kind) {
  std::string error;
  EngineWorld* world = EngineWorld::Get(files, &error);
  Engine* engine = world == nullptr ? nullptr : world->At(Level::kDefault, &error);
  if (engine == nullptr) {
    Fail(state, error);
    return;
  }
  const SearchSpec& spec = GetSearchSpec(kind);
  state.SetLabel(spec.query);
  SearchRequest request;
  request.query = spec.query;
  request.now_ns = world->dataset().options().now_ns;
  Status s = engine->CommitAll();
  Result<std::vector<SearchHit>> warm = s.ok() ? engine->SearchAll(request) : s;
  if (!warm.ok()) {
    error = "warm-up: " + warm.status().ToString();
    Fail(state, error);
    return;
  }
  SearchStats stats;
  uint64_t hits = 0;
  const EngineStats before = engine->Stats();
  for (auto _ : state) {
    stats = SearchStats();
    Result<std::vector<SearchHit>> result = engine->SearchAll(request, &stats);
    if (!result.ok()) {
      error = result.status().ToString();
      Fail(state, error);
      return;
    }
    hits = result->size();
    benchmark::DoNotOptimize(result->data());
  }
  state.counters["hits"] = static_cast<double>(hits);
  {
    const EngineStats after = engine->Stats();
    auto per_search = [&](uint64_t count) {
      return static_cast<double>(count) / static_cast<double>(state.iterations());
    };
    state.counters["acg_opens_per_search"] = per_search(after.acg_opens - before.acg_opens);
    // What the cache of open ACGs holds (hash tables), and what the kernel says is mapped
    // (RssFile also counts the binary and libraries, ~10 MB).
    state.counters["open_acg_mb"] = static_cast<double>(after.open_acg_bytes) / 1e6;
    state.counters["rss_file_mb"] = static_cast<double>(ReadProcStatus()["RssFile"]) / 1e6;
  }
  state.counters["candidates"] = static_cast<double>(stats.candidates);
  state.counters["acgs"] = static_cast<double>(stats.acgs_total);
  state.counters["acgs_skipped"] = static_cast<double>(stats.acgs_skipped);
  if (world->pristine()) {
    uint64_t expected = ExpectedHits(world->dataset(), files, kind);
    state.counters["expected_hits"] = static_cast<double>(expected);
    if (hits != expected) {
      error = "wrong hit count " + std::to_string(hits) + ", expected " + std::to_string(expected);
      Fail(state, error);
    }
  }
  EngineStats engine_stats = engine->Stats();
  state.counters["disk_bytes_per_file"] =
      static_cast<double>(engine_stats.disk_bytes) / static_cast<double>(files);
  state.counters["index_memory_per_file"] =
      static_cast<double>(engine_stats.index_memory_bytes) / static_cast<double>(files);
  state.counters["populate_files_per_s"] =
      static_cast<double>(files) / world->populate_seconds();
}

// A live query over every file (Engine::Watch, `size>=0`: each update is an event) with a
// reader draining it, for the cost a watch adds to the apply path. Ends with the object.
class WatchAll {
 public:
  explicit WatchAll(Engine* engine) {
    WatchSpec spec;
    spec.query = "size>=0";
    spec.max_queued = kMaxWatchQueue;
    auto w = engine->Watch(spec);
    if (!w.ok()) {
      error_ = w.status().ToString();
      return;
    }
    watch_ = std::move(w).value();
    reader_ = std::thread([this] {
      std::vector<WatchEvent> events;
      while (!stop_.load()) {
        events.clear();
        Status s = watch_->Next(&events, 10'000'000);
        if (!s.ok()) {
          failed_ = true;
          return;
        }
        seen_ += events.size();
      }
    });
  }
  ~WatchAll() {
    stop_ = true;
    if (reader_.joinable()) reader_.join();
  }
  const std::string& error() const { return error_; }
  bool failed() const { return failed_.load(); }
  uint64_t seen() const { return seen_.load(); }

 private:
  std::string error_;
  std::unique_ptr<EngineWatch> watch_;
  std::thread reader_;
  std::atomic<bool> stop_{false}, failed_{false};
  std::atomic<uint64_t> seen_{0};
};

// With `watched`: a WatchAll over `engine` in *watch; false (the run failed) when it could
// not start.
bool StartWatch(benchmark::State& state, Engine* engine, std::optional<WatchAll>* watch) {
  watch->emplace(engine);
  if (!(*watch)->error().empty()) {
    Fail(state, "watch: " + (*watch)->error());
    return false;
  }
  return true;
}

void BM_PropellerUpdateLatency(benchmark::State& state, uint64_t files, Level level,
                               bool watched) {
  std::string error;
  EngineWorld* world = EngineWorld::Get(files, &error);
  Engine* engine = world == nullptr ? nullptr : world->At(level, &error);
  if (engine == nullptr) {
    Fail(state, error);
    return;
  }
  world->set_dirty();
  state.SetLabel(std::string("durability=") + LevelName(level) + (watched ? " watched" : ""));
  std::optional<WatchAll> watch;
  if (watched && !StartWatch(state, engine, &watch)) return;
  UpdatePool pool(world->dataset(), files, kPoolSize, /*seed=*/state.max_iterations);
  LatencyRecorder latencies(state.max_iterations);
  for (auto _ : state) {
    Update& u = pool.Next();
    int64_t t0 = NowNanos();
    Status s = engine->Apply(std::span<const Update>(&u, 1));
    int64_t ns = NowNanos() - t0;
    if (!s.ok()) {
      error = s.ToString();
      Fail(state, error);
      break;
    }
    state.SetIterationTime(static_cast<double>(ns) / 1e9);
    latencies.Add(ns);
  }
  latencies.Report(state);
  if (watch && watch->failed()) Fail(state, "the watch fell behind");
}

void BM_PropellerBatchUpdate(benchmark::State& state, uint64_t files, Level level,
                             bool watched) {
  std::string error;
  EngineWorld* world = EngineWorld::Get(files, &error);
  Engine* engine = world == nullptr ? nullptr : world->At(level, &error);
  if (engine == nullptr) {
    Fail(state, error);
    return;
  }
  world->set_dirty();
  state.SetLabel(std::string("durability=") + LevelName(level) + (watched ? " watched" : ""));
  std::optional<WatchAll> watch;
  if (watched && !StartWatch(state, engine, &watch)) return;
  UpdatePool pool(world->dataset(), files, std::min<uint64_t>(files, kBatchPoolSize),
                  /*seed=*/state.max_iterations + 1);
  // Start from empty caches, so the sustained figure below owes nothing to earlier runs.
  Status s = engine->CommitAll();
  if (!s.ok()) {
    Fail(state, "CommitAll before the run: " + s.ToString());
    return;
  }
  const EngineStats start = engine->Stats();
  int64_t applied_ns = 0;
  for (auto _ : state) {
    const std::vector<Update>& batch = pool.NextBatch(kBatchSize);
    int64_t t0 = NowNanos();
    s = engine->Apply(batch);
    int64_t ns = NowNanos() - t0;
    if (!s.ok()) {
      error = s.ToString();
      Fail(state, error);
      break;
    }
    applied_ns += ns;
    state.SetIterationTime(static_cast<double>(ns) / 1e9);
  }
  if (watch && watch->failed()) Fail(state, "the watch fell behind");
  const int64_t updates = state.iterations() * static_cast<int64_t>(kBatchSize);
  state.SetItemsProcessed(updates);
  // items_per_second counts acknowledgements: what the write cache absorbs (up to its bound,
  // 1 M updates) is not committed yet. Committing it is part of the cost of the run, so the
  // sustained figure adds the final CommitAll: updates / (time in Apply + time to commit
  // what is still cached). Background commits meanwhile ran on the other core.
  const EngineStats before = engine->Stats();
  int64_t t0 = NowNanos();
  s = engine->CommitAll();
  const int64_t commit_ns = NowNanos() - t0;
  if (!s.ok()) {
    Fail(state, "CommitAll after the run: " + s.ToString());
    return;
  }
  const EngineStats after = engine->Stats();
  state.counters["cached_at_end"] = static_cast<double>(before.cached_updates);
  // Updates per ACG commit during the run (background commits) and in the final CommitAll.
  if (before.acg_commits > start.acg_commits) {
    state.counters["run_updates_per_commit"] =
        static_cast<double>(before.committed_updates - start.committed_updates) /
        static_cast<double>(before.acg_commits - start.acg_commits);
  }
  if (after.acg_commits > before.acg_commits) {
    state.counters["final_updates_per_commit"] =
        static_cast<double>(after.committed_updates - before.committed_updates) /
        static_cast<double>(after.acg_commits - before.acg_commits);
  }
  state.counters["final_commit_s"] = static_cast<double>(commit_ns) / 1e9;
  if (applied_ns + commit_ns > 0) {
    state.counters["sustained_per_s"] =
        static_cast<double>(updates) * 1e9 / static_cast<double>(applied_ns + commit_ns);
  }
}

std::string Name(const char* bench, const char* level, uint64_t files) {
  std::string name = std::string(bench) + "/Propeller/";
  if (level != nullptr) name += std::string(level) + "/";
  return name + "files:" + std::to_string(files);
}

}  // namespace

void RegisterPropellerSearch(uint64_t files, SearchKind kind) {
  benchmark::RegisterBenchmark(Name(GetSearchSpec(kind).name, nullptr, files).c_str(),
                               BM_PropellerSearch, files, kind)
      ->Unit(benchmark::kMillisecond);
}

// Each also as "<level>+watch": with a live query over every file registered (WatchAll).
void RegisterPropellerUpdateLatency(uint64_t files, Level level) {
  for (bool watched : {false, true}) {
    const std::string label = std::string(LevelName(level)) + (watched ? "+watch" : "");
    benchmark::RegisterBenchmark(Name("UpdateLatency", label.c_str(), files).c_str(),
                                 BM_PropellerUpdateLatency, files, level, watched)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
}

void RegisterPropellerBatchUpdate(uint64_t files, Level level) {
  for (bool watched : {false, true}) {
    const std::string label = std::string(LevelName(level)) + (watched ? "+watch" : "");
    benchmark::RegisterBenchmark(Name("BatchUpdate", label.c_str(), files).c_str(),
                                 BM_PropellerBatchUpdate, files, level, watched)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
}

void ReleasePropeller() { EngineWorld::ReleaseAll(); }

}  // namespace propeller::bench
