// propeller_split_cost: what splitting one ACG costs (docs/architecture.md §5,
// Engine::PlanSplit/SplitAcg) and what updates and searches see while it runs. One JSON line.
//
//   propeller_split_cost [files] [--edges-per-file=E] [--rate=U] [--merge] [--dir=PATH]
//                        [--seed=S]
//
// Steps (default 50,000 files, the default split threshold, in ONE ACG):
//   1. create the files and E (default 4) causality edges per file, each to a file at most
//      200 positions away (the locality a build has: objects near their sources), commit;
//   2. start a writer (batches of 100 attribute updates of random files, U per second, default
//      20,000 (0 = as fast as it can), addressed to the ACG as a client with an old map would)
//      and a searcher (`size>1g & mtime<1d` in a loop);
//   3. PlanSplit (METIS) and SplitAcg, timed; stop both threads, check that every file is in
//      exactly one ACG.
//   4. with --merge (Engine::MergeAcg; at most 20,000 files), merge the new half back into
//      the source while the writer and searcher go on, timed.
// Reported: plan and split seconds, cut %, halves, and for searches and Apply calls the median
// before the split and the maximum during it (the switch holds searches); with --merge the
// same for the merge.
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <unistd.h>
#include <vector>

#include "bench/dataset.h"
#include "indexnode/engine.h"

namespace propeller::bench {
namespace {

int64_t WallNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

double Median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return static_cast<double>(v[v.size() / 2]);
}

double Max(const std::vector<int64_t>& v) {
  return v.empty() ? 0 : static_cast<double>(*std::max_element(v.begin(), v.end()));
}

int Run(uint64_t files, uint64_t edges_per_file, uint64_t rate, bool merge,
        const std::string& base_dir, uint64_t seed) {
  DatasetOptions dopt;
  dopt.seed = seed;
  dopt.files_per_acg = files;  // one ACG
  const Dataset dataset(dopt);
  const std::string dir = base_dir + "/propeller-split-" + std::to_string(getpid());
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  EngineOptions options;
  options.data_dir = dir;
  Result<std::unique_ptr<Engine>> opened = Engine::Open(options);
  if (!opened.ok()) {
    std::fprintf(stderr, "open %s: %s\n", dir.c_str(), opened.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<Engine> engine = std::move(opened).value();
  const uint64_t acg = dataset.AcgOf(0);
  std::vector<Update> batch;
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&x] {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    return x * 0x2545F4914F6CDD1Dull;
  };
  for (uint64_t begin = 0; begin < files; begin += 1000) {
    batch.clear();
    dataset.AppendPuts(begin, std::min(files, begin + 1000), &batch);
    for (uint64_t i = begin; i < std::min(files, begin + 1000); ++i) {
      for (uint64_t e = 0; e < edges_per_file; ++e) {
        const uint64_t j = (i + files - 200 + next() % 401) % files;
        if (j == i) continue;
        Update u;
        u.op = UpdateOp::kAddEdge;
        u.acg = acg;
        u.record.id = dataset.Record(j).id;  // j was read before i was written
        u.edge_dst = dataset.Record(i).id;
        u.edge_weight = 1;
        batch.push_back(std::move(u));
      }
    }
    Status s = engine->Apply(batch);
    if (!s.ok()) {
      std::fprintf(stderr, "Apply: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  if (Status s = engine->CommitAll(); !s.ok()) {
    std::fprintf(stderr, "CommitAll: %s\n", s.ToString().c_str());
    return 1;
  }

  // 0 before the split, 1 during it, 2 during the merge, 3 stop.
  std::atomic<int> phase{0};
  std::vector<int64_t> search_ns[3], apply_ns[3];
  std::atomic<bool> failed{false};
  std::thread searcher([&] {
    SearchRequest req;
    req.query = "size>1g & mtime<1d";
    req.now_ns = dataset.options().now_ns;
    while (phase.load() < 3) {
      const int p = std::min(phase.load(), 2);  // 3 may come meanwhile: count it as during
      const int64_t t0 = WallNanos();
      auto hits = engine->SearchAll(req);
      if (!hits.ok()) failed = true;
      search_ns[p].push_back(WallNanos() - t0);
    }
  });
  std::thread writer([&] {
    uint64_t y = seed + 7, version = 0;
    std::vector<Update> ups;
    const int64_t start = WallNanos();
    uint64_t sent = 0;
    while (phase.load() < 3) {
      if (rate > 0) {  // pace: batch k goes out at k * 100 / rate seconds
        const int64_t due = start + static_cast<int64_t>(sent * 1'000'000'000 / rate);
        const int64_t now = WallNanos();
        if (due > now) std::this_thread::sleep_for(std::chrono::nanoseconds(due - now));
      }
      sent += 100;
      const int p = std::min(phase.load(), 2);  // 3 may come meanwhile: count it as during
      ups.clear();
      for (int k = 0; k < 100; ++k) {
        y = y * 6364136223846793005ull + 1442695040888963407ull;
        Update u = dataset.Put((y >> 17) % files);
        dataset.Touch(++version, &u.record);
        ups.push_back(std::move(u));
      }
      const int64_t t0 = WallNanos();
      if (!engine->Apply(ups).ok()) failed = true;
      apply_ns[p].push_back(WallNanos() - t0);
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(2));  // the "before" figures
  phase = 1;
  const int64_t t0 = WallNanos();
  SplitReport report;
  Result<std::vector<FileId>> plan = engine->PlanSplit(acg, 0.05, 1, &report);
  const int64_t t1 = WallNanos();
  Status s = plan.ok() ? engine->SplitAcg(acg, acg + 1, *plan) : plan.status();
  const int64_t t2 = WallNanos();
  int64_t t3 = t2;
  if (s.ok() && merge) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    phase = 2;
    const int64_t t = WallNanos();
    s = engine->MergeAcg(acg + 1, acg);
    t3 = WallNanos() - t + t2;
  }
  phase = 3;
  searcher.join();
  writer.join();
  if (!s.ok() || failed) {
    std::fprintf(stderr, "split: %s%s\n", s.ToString().c_str(),
                 failed ? " (a search or Apply failed)" : "");
    return 1;
  }
  if (Status c = engine->CommitAll(); !c.ok()) {
    std::fprintf(stderr, "CommitAll: %s\n", c.ToString().c_str());
    return 1;
  }
  uint64_t total = 0;
  for (const AcgInfo& a : engine->ListAcgs()) total += a.files;
  std::printf("{\"files\":%" PRIu64 ",\"edges_per_file\":%" PRIu64 ",\"update_rate\":%" PRIu64
              ",\"plan_s\":%.3f,\"split_s\":%.3f,\"moved\":%zu,\"cut_percent\":%.3f,"
              "\"files_after\":%" PRIu64 ",\"search_median_ms_before\":%.3f,"
              "\"search_max_ms_during\":%.3f,\"searches_during\":%zu,"
              "\"apply100_median_ms_before\":%.3f,\"apply100_max_ms_during\":%.3f,"
              "\"applies_during\":%zu,\"merge_s\":%.3f,\"search_max_ms_during_merge\":%.3f,"
              "\"apply100_max_ms_during_merge\":%.3f}\n",
              files, edges_per_file, rate, static_cast<double>(t1 - t0) / 1e9,
              static_cast<double>(t2 - t1) / 1e9, plan->size(), report.cut_percent, total,
              Median(search_ns[0]) / 1e6, Max(search_ns[1]) / 1e6, search_ns[1].size(),
              Median(apply_ns[0]) / 1e6, Max(apply_ns[1]) / 1e6, apply_ns[1].size(),
              static_cast<double>(t3 - t2) / 1e9, Max(search_ns[2]) / 1e6,
              Max(apply_ns[2]) / 1e6);
  engine.reset();
  std::filesystem::remove_all(dir, ec);
  return total == files ? 0 : 3;
}

}  // namespace
}  // namespace propeller::bench

int main(int argc, char** argv) {
  uint64_t files = 50'000;
  uint64_t edges = 4;
  uint64_t rate = 20'000;
  uint64_t seed = 42;
  bool merge = false;
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("usage: %s [files] [--edges-per-file=E] [--rate=U] [--merge] [--dir=PATH]\n"
                  "          [--seed=S]\n"
                  "Cost of splitting one ACG of `files` files (default 50000) while a writer\n"
                  "and a searcher run, and with --merge of merging the halves again (at most\n"
                  "20000 files); one JSON line (see bench/README.md).\n",
                  argv[0]);
      return 0;
    }
    if (a == "--merge") {
      merge = true;
    } else if (a.starts_with("--dir=")) {
      dir = std::string(a.substr(6));
    } else if (a.starts_with("--edges-per-file=")) {
      edges = std::strtoull(argv[i] + 17, nullptr, 10);
    } else if (a.starts_with("--rate=")) {
      rate = std::strtoull(argv[i] + 7, nullptr, 10);
    } else if (a.starts_with("--seed=")) {
      seed = std::strtoull(argv[i] + 7, nullptr, 10);
    } else if (!a.empty() && a[0] >= '0' && a[0] <= '9') {
      files = std::strtoull(argv[i], nullptr, 10);
    } else {
      std::fprintf(stderr, "unknown argument '%s' (try --help)\n", argv[i]);
      return 2;
    }
  }
  if (files < 2) {
    std::fprintf(stderr, "files must be >= 2\n");
    return 2;
  }
  return propeller::bench::Run(files, edges, rate, merge, dir, seed);
}
