// partition_bench: the METIS split of a causality-like ACG at the size docs/architecture.md §11
// budgets (60,000 files, 6,000,000 directed edges: split <= 10 s; the paper's Table II: 35 s, 1.33%
// cut), for both METIS algorithms, plus the time to build the symmetrised CSR graph.
//
//   partition_build_graph           CsrGraph::FromDirectedEdges over the 6 M directed edges
//   partition_split/recursive       SplitInTwo with METIS_PartGraphRecursive (the default)
//   partition_split/kway            SplitInTwo with METIS_PartGraphKway
//
// Each runs 1 iteration x 3 repetitions and reports the median (wall time). Split benchmarks
// carry counters cut_weight, cut_percent, half0, half1 and repair_moves. After the benchmarks a
// Table II-style text table and one JSON line per method are printed (from the last run).
// Every flag goes to Google Benchmark (--benchmark_filter, --benchmark_repetitions=5, ...).
// Exit status 1 when a split failed.
//
// The graph (seeded, deterministic): 60 "applications" (modules) of 1,000 files each —
// 350 headers, 250 sources, 300 objects, 100 binaries/libraries — numbered in a random order.
// Within a module, 85% of the edges are compile edges (a header or source -> an object, the
// input drawn with a skew towards popular headers) and 15% link edges (an object -> a binary,
// skewed towards a few big binaries); each distinct edge starts with a log-normal weight
// (median ~2) and gains 1 each time the generator draws it again (a rebuilt target), so weights
// are skewed. 3% of a module's edges go to objects of the 5 modules after it (dependencies on
// other applications' headers). Each module gets exactly 100,000 distinct directed edges, so
// 6,000,000 in all, with no reverse pairs (inputs are never products), i.e. 6 M undirected
// edges after symmetrisation.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <unordered_set>
#include <vector>

#include <benchmark/benchmark.h>

#include "common/random.h"
#include "partitioner/graph.h"
#include "partitioner/split.h"

namespace propeller::bench {
namespace {

constexpr uint32_t kModules = 60;
constexpr uint32_t kFilesPerModule = 1000;
constexpr uint32_t kVertices = kModules * kFilesPerModule;
constexpr uint64_t kEdgesPerModule = 100000;
constexpr uint64_t kCrossPerModule = 3000;  // 3%
constexpr uint64_t kSeed = 20240501;

// File roles by index within a module.
constexpr uint32_t kInputs = 600;         // [0, 350) headers, [350, 600) sources
constexpr uint32_t kObjectsBegin = 600;   // [600, 900) objects
constexpr uint32_t kObjects = 300;
constexpr uint32_t kBinariesBegin = 900;  // [900, 1000) binaries and libraries
constexpr uint32_t kBinaries = 100;

// Index in [0, n) with density falling like 1/sqrt(x): a few very popular items.
uint32_t Skewed(Random* rnd, uint32_t n) {
  const double u = rnd->UniformDouble();
  return std::min(n - 1, static_cast<uint32_t>(u * u * n));
}

uint64_t FirstWeight(Random* rnd) {
  return 1 + static_cast<uint64_t>(rnd->LogNormal(/*mu=*/0.5, /*sigma=*/1.0));
}

std::vector<WeightedEdge> GenerateEdges() {
  Random rnd(kSeed);
  std::vector<uint32_t> id(kVertices);  // (module, index) -> vertex number, shuffled
  std::iota(id.begin(), id.end(), 0u);
  for (uint32_t i = kVertices; i > 1; --i) std::swap(id[i - 1], id[rnd.Uniform(i)]);

  std::vector<WeightedEdge> edges;
  edges.reserve(kModules * kEdgesPerModule);
  // slot[src * 1000 + dst] = 1 + index in `edges` of the module's intra edge src -> dst, or 0.
  std::vector<uint32_t> slot(kFilesPerModule * kFilesPerModule, 0);
  for (uint32_t m = 0; m < kModules; ++m) {
    const uint32_t base = m * kFilesPerModule;
    uint64_t distinct = 0;
    while (distinct < kEdgesPerModule - kCrossPerModule) {
      uint32_t src;
      uint32_t dst;
      if (rnd.Uniform(100) < 85) {
        src = Skewed(&rnd, kInputs);
        dst = kObjectsBegin + static_cast<uint32_t>(rnd.Uniform(kObjects));
      } else {
        src = kObjectsBegin + static_cast<uint32_t>(rnd.Uniform(kObjects));
        dst = kBinariesBegin + Skewed(&rnd, kBinaries);
      }
      uint32_t& s = slot[src * kFilesPerModule + dst];
      if (s != 0) {
        ++edges[s - 1].weight;
        continue;
      }
      edges.push_back({id[base + src], id[base + dst], FirstWeight(&rnd)});
      s = static_cast<uint32_t>(edges.size());
      ++distinct;
    }
    std::fill(slot.begin(), slot.end(), 0);
    std::unordered_set<uint64_t> cross;
    while (cross.size() < kCrossPerModule) {
      const uint32_t src = base + Skewed(&rnd, kInputs);
      const uint32_t other = (m + 1 + static_cast<uint32_t>(rnd.Uniform(5))) % kModules;
      const uint32_t dst =
          other * kFilesPerModule + kObjectsBegin + static_cast<uint32_t>(rnd.Uniform(kObjects));
      if (!cross.insert(uint64_t{src} << 32 | dst).second) continue;
      edges.push_back({id[src], id[dst], FirstWeight(&rnd)});
    }
  }
  return edges;
}

using Clock = std::chrono::steady_clock;

struct Fixture {
  std::vector<WeightedEdge> edges;
  CsrGraph graph;
  double generate_seconds = 0;
  double build_seconds = 0;
};

Fixture& GetFixture() {
  static Fixture* fixture = [] {
    auto* f = new Fixture;
    Clock::time_point start = Clock::now();
    f->edges = GenerateEdges();
    f->generate_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    start = Clock::now();
    f->graph = CsrGraph::FromDirectedEdges(kVertices, f->edges);
    f->build_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return f;
  }();
  return *fixture;
}

bool g_failed = false;
SplitReport g_reports[2];
bool g_have_report[2] = {false, false};

void BuildGraph(benchmark::State& state) {
  Fixture& f = GetFixture();
  for (auto _ : state) {
    CsrGraph g = CsrGraph::FromDirectedEdges(kVertices, f.edges);
    benchmark::DoNotOptimize(g.num_edges());
  }
  state.counters["directed_edges"] = static_cast<double>(f.edges.size());
  state.counters["undirected_edges"] = static_cast<double>(f.graph.num_edges());
}

void SplitGraph(benchmark::State& state, bool kway) {
  Fixture& f = GetFixture();
  SplitOptions options;
  options.use_kway = kway;
  SplitReport report;
  for (auto _ : state) {
    Result<Split> split = SplitInTwo(f.graph, options);
    if (!split.ok()) {
      state.SkipWithError(split.status().ToString().c_str());
      g_failed = true;
      return;
    }
    report = split->report;
  }
  state.counters["cut_weight"] = static_cast<double>(report.cut_weight);
  state.counters["cut_percent"] = report.cut_percent;
  state.counters["half0"] = report.side_vertices[0];
  state.counters["half1"] = report.side_vertices[1];
  state.counters["repair_moves"] = report.repair_moves;
  g_reports[kway ? 1 : 0] = report;
  g_have_report[kway ? 1 : 0] = true;
}

void RegisterAll() {
  auto common = [](benchmark::internal::Benchmark* b) {
    b->Unit(benchmark::kMillisecond)
        ->Iterations(1)
        ->Repetitions(3)
        ->ReportAggregatesOnly(true)
        ->UseRealTime();
  };
  common(benchmark::RegisterBenchmark("partition_build_graph", BuildGraph));
  common(benchmark::RegisterBenchmark("partition_split/recursive", SplitGraph, false));
  common(benchmark::RegisterBenchmark("partition_split/kway", SplitGraph, true));
}

}  // namespace
}  // namespace propeller::bench

int main(int argc, char** argv) {
  using namespace propeller::bench;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (g_have_report[0] || g_have_report[1]) {
    const Fixture& f = GetFixture();
    std::printf("\ngraph: %u vertices, %zu directed edges -> %llu undirected, total weight %llu; "
                "generated in %.2f s, first build %.2f s\n",
                f.graph.num_vertices(), f.edges.size(),
                static_cast<unsigned long long>(f.graph.num_edges()),
                static_cast<unsigned long long>(f.graph.total_weight()), f.generate_seconds,
                f.build_seconds);
    std::printf("%s\n", propeller::SplitReportHeader().c_str());
    for (int i = 0; i < 2; ++i) {
      if (g_have_report[i]) std::printf("%s\n", propeller::FormatSplitReportRow(g_reports[i]).c_str());
    }
    for (int i = 0; i < 2; ++i) {
      if (g_have_report[i]) std::printf("%s\n", propeller::SplitReportToJson(g_reports[i]).c_str());
    }
  }
  return g_failed ? 1 : 0;
}
