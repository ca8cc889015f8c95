// Tests for split.h: SplitInTwo against brute-force optimal balanced cuts on small graphs,
// planted two-community graphs, edge cases, option validation, determinism and concurrency.
// Every cut, half size and balance bound is recomputed here from the input edge list, not
// from the CSR graph or the report.
#include "partitioner/split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "common/random.h"

namespace propeller {
namespace {

using u128 = unsigned __int128;

struct Instance {
  uint32_t n = 0;
  std::vector<WeightedEdge> edges;     // directed input edges
  std::vector<uint32_t> vertex_weights;  // empty: all 1
};

uint64_t VertexWeight(const Instance& in, uint32_t v) {
  return in.vertex_weights.empty() ? 1 : in.vertex_weights[v];
}

// The balance bound of split.h, written out independently in integer arithmetic.
uint64_t OracleLimit(const Instance& in, double imbalance) {
  uint64_t total = 0;
  uint64_t heaviest = 0;
  for (uint32_t v = 0; v < in.n; ++v) {
    total += VertexWeight(in, v);
    heaviest = std::max(heaviest, VertexWeight(in, v));
  }
  const auto thousandths = static_cast<uint64_t>(std::llround(imbalance * 1000));
  return std::max(total * (1000 + thousandths) / 2000, (total + heaviest) / 2);
}

// Cut weight straight from the directed input edges (self-loops never cut).
u128 OracleCut(const Instance& in, const std::vector<uint8_t>& side, uint64_t* cut_pairs) {
  u128 cut = 0;
  std::map<std::pair<uint32_t, uint32_t>, bool> pairs;
  for (const WeightedEdge& e : in.edges) {
    if (e.src >= in.n || e.dst >= in.n || e.src == e.dst || e.weight == 0) continue;
    if (side[e.src] != side[e.dst]) {
      cut += e.weight;
      if (cut_pairs != nullptr) pairs[{std::min(e.src, e.dst), std::max(e.src, e.dst)}] = true;
    }
  }
  if (cut_pairs != nullptr) *cut_pairs = pairs.size();
  return cut;
}

uint64_t Clamp(u128 x) {
  return x > std::numeric_limits<uint64_t>::max() ? std::numeric_limits<uint64_t>::max()
                                                  : static_cast<uint64_t>(x);
}

// Checks everything SplitInTwo promises about one result, against the oracle.
void ExpectValidSplit(const Instance& in, const SplitOptions& options, const Split& split) {
  ASSERT_EQ(split.side.size(), in.n);
  uint64_t weight[2] = {0, 0};
  uint32_t count[2] = {0, 0};
  for (uint32_t v = 0; v < in.n; ++v) {
    ASSERT_LE(split.side[v], 1) << v;
    weight[split.side[v]] += VertexWeight(in, v);
    ++count[split.side[v]];
  }
  const uint64_t limit = OracleLimit(in, options.imbalance);
  EXPECT_LE(weight[0], limit);
  EXPECT_LE(weight[1], limit);
  EXPECT_GE(weight[0], weight[1]);
  if (in.n > 0 && weight[0] == weight[1]) {
    EXPECT_EQ(split.side[0], 0);
  }
  const SplitReport& r = split.report;
  EXPECT_EQ(r.vertices, in.n);
  EXPECT_EQ(r.max_side_weight, limit);
  EXPECT_EQ(r.side_weight[0], weight[0]);
  EXPECT_EQ(r.side_weight[1], weight[1]);
  EXPECT_EQ(r.side_vertices[0], count[0]);
  EXPECT_EQ(r.side_vertices[1], count[1]);
  EXPECT_EQ(r.vertex_weight, weight[0] + weight[1]);
  uint64_t cut_pairs = 0;
  const uint64_t cut = Clamp(OracleCut(in, split.side, &cut_pairs));
  EXPECT_EQ(r.cut_weight, cut);
  EXPECT_EQ(r.cut_edges, cut_pairs);
  if (r.total_weight == 0) {
    EXPECT_EQ(r.cut_percent, 0.0);
  } else {
    EXPECT_NEAR(r.cut_percent, 100.0 * static_cast<double>(cut) / r.total_weight, 1e-9);
  }
  EXPECT_EQ(r.seed, options.seed);
  EXPECT_GE(r.partition_seconds, 0.0);
}

// The minimal cut over all balanced splits, by enumeration (vertex 0 fixed on one side).
u128 OptimalBalancedCut(const Instance& in, double imbalance) {
  const uint64_t limit = OracleLimit(in, imbalance);
  u128 best = ~u128{0};
  std::vector<uint8_t> side(in.n);
  const uint32_t masks = in.n == 0 ? 1 : 1u << (in.n - 1);
  for (uint32_t mask = 0; mask < masks; ++mask) {
    uint64_t weight[2] = {0, 0};
    for (uint32_t v = 0; v < in.n; ++v) {
      side[v] = v == 0 ? 0 : (mask >> (v - 1)) & 1;
      weight[side[v]] += VertexWeight(in, v);
    }
    if (weight[0] > limit || weight[1] > limit) continue;
    best = std::min(best, OracleCut(in, side, nullptr));
  }
  return best;
}

Split MustSplit(const Instance& in, const SplitOptions& options) {
  Result<Split> split = SplitInTwo(CsrGraph::FromDirectedEdges(in.n, in.edges), options,
                                   in.vertex_weights);
  EXPECT_TRUE(split.ok()) << split.status().ToString();
  return split.ok() ? std::move(split).value() : Split{};
}

// Two communities of `half` vertices each (vertices randomly assigned, so vertex order gives
// METIS no hint), intra edges with probability `p` and weights 1..20, plus `cross` light
// edges (weight 1) between them, plus `isolated` vertices without edges. *planted receives
// the planted cut's weight.
Instance PlantedPartition(Random* rnd, uint32_t half, double p, int cross, uint64_t* planted,
                          std::vector<uint8_t>* truth, uint32_t isolated = 0) {
  Instance in;
  in.n = 2 * half + isolated;
  std::vector<uint32_t> perm(in.n);
  std::iota(perm.begin(), perm.end(), 0u);
  for (uint32_t i = in.n; i > 1; --i) std::swap(perm[i - 1], perm[rnd->Uniform(i)]);
  truth->assign(in.n, 0);
  for (uint32_t i = half; i < 2 * half; ++i) (*truth)[perm[i]] = 1;
  for (uint32_t c = 0; c < 2; ++c) {
    for (uint32_t i = 0; i < half; ++i) {
      for (uint32_t j = i + 1; j < half; ++j) {
        if (rnd->UniformDouble() < p) {
          in.edges.push_back({perm[c * half + i], perm[c * half + j],
                              static_cast<uint64_t>(rnd->Range(1, 20))});
        }
      }
      // A ring keeps each community connected.
      in.edges.push_back({perm[c * half + i], perm[c * half + (i + 1) % half], 1});
    }
  }
  *planted = 0;
  for (int k = 0; k < cross; ++k) {
    const uint32_t a = perm[rnd->Uniform(half)];
    const uint32_t b = perm[half + rnd->Uniform(half)];
    in.edges.push_back(rnd->OneIn(2) ? WeightedEdge{a, b, 1} : WeightedEdge{b, a, 1});
    *planted += 1;
  }
  return in;
}

TEST(SplitTest, BruteForceOracleOnSmallRandomGraphs) {
  const uint64_t seed = TestSeed();
  int runs = 0;
  int optimal = 0;
  int repaired = 0;
  for (int round = 0; round < 400; ++round) {
    SCOPED_TRACE("seed=" + std::to_string(seed) + " round=" + std::to_string(round));
    Random rnd(seed * 31 + static_cast<uint64_t>(round));
    Instance in;
    in.n = static_cast<uint32_t>(rnd.Range(2, 14));
    const int num_edges = static_cast<int>(rnd.Uniform(3 * in.n));
    for (int i = 0; i < num_edges; ++i) {
      in.edges.push_back({static_cast<uint32_t>(rnd.Uniform(in.n)),
                          static_cast<uint32_t>(rnd.Uniform(in.n)),
                          static_cast<uint64_t>(rnd.Range(1, 30))});
    }
    if (rnd.OneIn(3)) {
      for (uint32_t v = 0; v < in.n; ++v) {
        in.vertex_weights.push_back(static_cast<uint32_t>(rnd.Range(1, 6)));
      }
    }
    SplitOptions options;
    options.imbalance = rnd.OneIn(2) ? 0.05 : 0.2;
    options.seed = static_cast<int>(rnd.Uniform(1000));
    options.use_kway = rnd.OneIn(2);
    const Split split = MustSplit(in, options);
    ExpectValidSplit(in, options, split);
    if (HasFailure()) return;
    const u128 best = OptimalBalancedCut(in, options.imbalance);
    ASSERT_GE(u128{split.report.cut_weight}, best);
    ++runs;
    if (u128{split.report.cut_weight} == best) ++optimal;
    if (split.report.repair_moves > 0) ++repaired;
  }
  // METIS is a heuristic, but on graphs this small it should nearly always find the optimum.
  // Measured: 327-336 of 400 optimal over seeds 5, 6 and the default, 30-48 repairs.
  std::printf("brute force: %d runs, %d optimal, %d needed a balance repair\n", runs, optimal,
              repaired);
  EXPECT_GE(optimal, runs * 3 / 4);
}

TEST(SplitTest, PlantedPartitionIsFoundAndDeterministic) {
  const uint64_t seed = TestSeed();
  for (int round = 0; round < 6; ++round) {
    SCOPED_TRACE("seed=" + std::to_string(seed) + " round=" + std::to_string(round));
    Random rnd(seed + 1000 + static_cast<uint64_t>(round));
    uint64_t planted = 0;
    std::vector<uint8_t> truth;
    const Instance in = PlantedPartition(&rnd, /*half=*/150 + 50 * round, /*p=*/0.15,
                                         /*cross=*/10 + round, &planted, &truth);
    for (bool kway : {false, true}) {
      SCOPED_TRACE(kway ? "kway" : "recursive");
      SplitOptions options;
      options.use_kway = kway;
      options.seed = 7;
      const Split first = MustSplit(in, options);
      ExpectValidSplit(in, options, first);
      EXPECT_LE(first.report.cut_weight, planted);
      EXPECT_EQ(first.report.method, kway ? SplitMethod::kKway : SplitMethod::kRecursive);
      const Split second = MustSplit(in, options);
      EXPECT_EQ(first.side, second.side);
      EXPECT_EQ(first.report.cut_weight, second.report.cut_weight);
    }
  }
}

TEST(SplitTest, ImbalanceZeroGivesExactHalvesAndLargerToleranceIsUsed) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  Random rnd(seed + 77);
  Instance in;
  in.n = 200;
  // A "lollipop": a clique of 120 with a path of 80. With 0% the halves are 100/100 and the
  // clique must be cut; with 30% (limit 130) the clique fits on one side.
  for (uint32_t i = 0; i < 120; ++i) {
    for (uint32_t j = i + 1; j < 120; ++j) in.edges.push_back({i, j, 1});
  }
  for (uint32_t i = 119; i + 1 < 200; ++i) in.edges.push_back({i, i + 1, 1});
  SplitOptions strict;
  strict.imbalance = 0;
  const Split exact = MustSplit(in, strict);
  ExpectValidSplit(in, strict, exact);
  EXPECT_EQ(exact.report.side_vertices[0], 100u);
  EXPECT_EQ(exact.report.side_vertices[1], 100u);
  EXPECT_GE(exact.report.cut_weight, 20u * 100u);  // >= 20 clique vertices cut from 100 others
  for (bool kway : {false, true}) {
    SplitOptions loose;
    loose.imbalance = 0.3;
    loose.use_kway = kway;
    const Split relaxed = MustSplit(in, loose);
    ExpectValidSplit(in, loose, relaxed);
    EXPECT_EQ(relaxed.report.max_side_weight, 130u);
    // The optimum is 1 (one path edge); METIS's recursive bisection stops at 236 (measured),
    // its k-way finds 1. Either way the slack is used: far below the 2000 of exact halves.
    EXPECT_LE(relaxed.report.cut_weight, 300u);
    EXPECT_GT(relaxed.report.side_vertices[0], 100u);
  }
}

TEST(SplitTest, ZeroOneAndTwoVertices) {
  const SplitOptions options;
  {
    const Instance in;
    const Split split = MustSplit(in, options);
    ExpectValidSplit(in, options, split);
    EXPECT_TRUE(split.side.empty());
    EXPECT_EQ(split.report.method, SplitMethod::kTrivial);
    EXPECT_EQ(split.report.max_side_weight, 0u);
  }
  {
    Instance in;
    in.n = 1;
    in.edges = {{0, 0, 3}};
    const Split split = MustSplit(in, options);
    ExpectValidSplit(in, options, split);
    EXPECT_EQ(split.side, std::vector<uint8_t>{0});
    EXPECT_EQ(split.report.method, SplitMethod::kTrivial);
  }
  for (bool kway : {false, true}) {
    SplitOptions o;
    o.use_kway = kway;
    Instance connected;
    connected.n = 2;
    connected.edges = {{0, 1, 5}, {1, 0, 2}};
    const Split split = MustSplit(connected, o);
    ExpectValidSplit(connected, o, split);
    // Balance forces one vertex per side.
    EXPECT_EQ(split.side, (std::vector<uint8_t>{0, 1}));
    EXPECT_EQ(split.report.cut_weight, 7u);
    EXPECT_EQ(split.report.cut_percent, 100.0);
    Instance apart;
    apart.n = 2;
    const Split split2 = MustSplit(apart, o);
    ExpectValidSplit(apart, o, split2);
    EXPECT_EQ(split2.side, (std::vector<uint8_t>{0, 1}));
    EXPECT_EQ(split2.report.method, SplitMethod::kComponents);
  }
}

TEST(SplitTest, AllIsolatedVertices) {
  for (uint32_t n : {3u, 7u, 1000u}) {
    Instance in;
    in.n = n;
    in.edges = {{0, 0, 9}};  // a self-loop only: no edges after symmetrisation
    const SplitOptions options;
    const Split split = MustSplit(in, options);
    ExpectValidSplit(in, options, split);
    EXPECT_EQ(split.report.method, SplitMethod::kComponents);
    EXPECT_EQ(split.report.side_vertices[0], (n + 1) / 2);
    EXPECT_EQ(split.report.cut_weight, 0u);
    EXPECT_EQ(split.report.cut_percent, 0.0);
  }
  // Weighted: LPT greedy keeps the heavier half within (W + w_max) / 2.
  Instance in;
  in.n = 5;
  in.vertex_weights = {9, 1, 1, 1, 1};  // W = 13: best is 9 | 4
  const SplitOptions options;
  const Split split = MustSplit(in, options);
  ExpectValidSplit(in, options, split);
  EXPECT_EQ(split.report.side_weight[0], 9u);
  EXPECT_EQ(split.side, (std::vector<uint8_t>{0, 1, 1, 1, 1}));
}

TEST(SplitTest, DisconnectedGraphsAndIsolatedFilesCostNothing) {
  for (bool kway : {false, true}) {
    SCOPED_TRACE(kway ? "kway" : "recursive");
    SplitOptions options;
    options.use_kway = kway;
    // A 40-clique and 40 isolated vertices: the clique fits in one half, so the cut is 0.
    Instance in;
    in.n = 80;
    for (uint32_t i = 0; i < 40; ++i) {
      for (uint32_t j = i + 1; j < 40; ++j) in.edges.push_back({2 * i, 2 * j, 3});
    }
    Split split = MustSplit(in, options);
    ExpectValidSplit(in, options, split);
    EXPECT_EQ(split.report.cut_weight, 0u);
    // Four 20-cliques: two per half, cut 0.
    Instance four;
    four.n = 80;
    for (uint32_t c = 0; c < 4; ++c) {
      for (uint32_t i = 0; i < 20; ++i) {
        for (uint32_t j = i + 1; j < 20; ++j) four.edges.push_back({i * 4 + c, j * 4 + c, 1});
      }
    }
    split = MustSplit(four, options);
    ExpectValidSplit(four, options, split);
    EXPECT_EQ(split.report.cut_weight, 0u);
    EXPECT_EQ(split.report.side_vertices[0], 40u);
  }
}

// One connected core of 2 x 500 (two planted communities) and 500 isolated files: the core
// (1000) exceeds the bound (787), so METIS must cut it.
void CheckCoreWithIsolatedVertices(uint64_t generator_seed, int metis_seed) {
  SCOPED_TRACE("generator seed=" + std::to_string(generator_seed) +
               " metis seed=" + std::to_string(metis_seed));
  Random rnd(generator_seed);
  uint64_t planted = 0;
  std::vector<uint8_t> truth;
  const Instance in = PlantedPartition(&rnd, /*half=*/500, /*p=*/0.05, /*cross=*/50, &planted,
                                       &truth, /*isolated=*/500);
  for (bool kway : {false, true}) {
    SCOPED_TRACE(kway ? "kway" : "recursive");
    SplitOptions options;
    options.use_kway = kway;
    options.seed = metis_seed;
    const Split split = MustSplit(in, options);
    ExpectValidSplit(in, options, split);
    EXPECT_EQ(split.report.method, kway ? SplitMethod::kKway : SplitMethod::kRecursive);
    EXPECT_LE(split.report.cut_weight, planted);
  }
}

TEST(SplitTest, IsolatedVerticesAroundACoreThatMustBeCut) {
  // Regression: with the isolated vertices inside METIS's graph, k-way returned cut 200 for
  // this instance's planted cut of 50 (found by searching seeds; about 1 instance in 100).
  CheckCoreWithIsolatedVertices(/*generator_seed=*/356, /*metis_seed=*/0);
  const uint64_t seed = TestSeed();
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE("seed=" + std::to_string(seed) + " round=" + std::to_string(round));
    CheckCoreWithIsolatedVertices(seed + 300 + static_cast<uint64_t>(round), round);
  }
}

TEST(SplitTest, HugeWeightsAreCutExactly) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  Random rnd(seed + 99);
  uint64_t planted = 0;
  std::vector<uint8_t> truth;
  Instance in = PlantedPartition(&rnd, 60, 0.3, 5, &planted, &truth);
  // Scale every weight by ~2^40 so METIS sees scaled weights; cross edges get 2^40 too.
  for (WeightedEdge& e : in.edges) e.weight <<= 40;
  for (bool kway : {false, true}) {
    SplitOptions options;
    options.use_kway = kway;
    const Split split = MustSplit(in, options);
    ExpectValidSplit(in, options, split);
    EXPECT_LE(split.report.cut_weight, planted << 40);
  }
  // Saturation: a total past 2^64 - 1 is reported as 2^64 - 1 and the cut clamps the same way.
  Instance sat;
  sat.n = 4;
  const uint64_t big = std::numeric_limits<uint64_t>::max() / 2;
  sat.edges = {{0, 1, big}, {2, 3, big}, {1, 2, big}, {3, 0, big}};
  const Split split = MustSplit(sat, SplitOptions{});
  ExpectValidSplit(sat, SplitOptions{}, split);
  EXPECT_EQ(split.report.total_weight, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(split.report.cut_weight, std::numeric_limits<uint64_t>::max() - 1);  // 2 * big
}

TEST(SplitTest, VertexWeightsAreBalanced) {
  const uint64_t seed = TestSeed();
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE("seed=" + std::to_string(seed) + " round=" + std::to_string(round));
    Random rnd(seed + 5000 + static_cast<uint64_t>(round));
    uint64_t planted = 0;
    std::vector<uint8_t> truth;
    Instance in = PlantedPartition(&rnd, 100, 0.1, 8, &planted, &truth);
    // Skewed file weights with a few very heavy vertices, to provoke METIS's imbalance.
    for (uint32_t v = 0; v < in.n; ++v) {
      in.vertex_weights.push_back(rnd.OneIn(50) ? static_cast<uint32_t>(rnd.Range(50, 400))
                                                : static_cast<uint32_t>(rnd.Range(1, 10)));
    }
    SplitOptions options;
    options.use_kway = round % 2 == 1;
    options.seed = round;
    const Split split = MustSplit(in, options);
    ExpectValidSplit(in, options, split);
    if (HasFailure()) return;
  }
}

TEST(SplitTest, InvalidArguments) {
  const CsrGraph g = CsrGraph::FromDirectedEdges(3, std::vector<WeightedEdge>{{0, 1, 1}});
  for (double bad : {-0.01, 1.01, std::nan("")}) {
    SplitOptions options;
    options.imbalance = bad;
    const Result<Split> r = SplitInTwo(g, options);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
  const std::vector<uint32_t> two = {1, 1};
  EXPECT_EQ(SplitInTwo(g, {}, two).status().code(), StatusCode::kInvalidArgument);
  const std::vector<uint32_t> zero = {1, 0, 1};
  EXPECT_EQ(SplitInTwo(g, {}, zero).status().code(), StatusCode::kInvalidArgument);
  const std::vector<uint32_t> huge = {0x7fffffffu, 1, 1};
  EXPECT_EQ(SplitInTwo(g, {}, huge).status().code(), StatusCode::kInvalidArgument);
  const std::vector<uint32_t> fits = {0x7fffffffu - 2, 1, 1};
  EXPECT_TRUE(SplitInTwo(g, {}, fits).ok());
}

TEST(SplitTest, MetisDoesNotModifyTheGraph) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  Random rnd(seed + 3);
  uint64_t planted = 0;
  std::vector<uint8_t> truth;
  const Instance in = PlantedPartition(&rnd, 200, 0.1, 20, &planted, &truth);
  const CsrGraph g = CsrGraph::FromDirectedEdges(in.n, in.edges);
  const std::vector<int32_t> xadj = g.xadj();
  const std::vector<int32_t> adjncy = g.adjncy();
  const std::vector<int32_t> adjwgt = g.adjwgt();
  std::vector<uint32_t> weights(in.n, 2);
  for (bool kway : {false, true}) {
    SplitOptions options;
    options.use_kway = kway;
    ASSERT_TRUE(SplitInTwo(g, options).ok());
    ASSERT_TRUE(SplitInTwo(g, options, weights).ok());
  }
  EXPECT_EQ(g.xadj(), xadj);
  EXPECT_EQ(g.adjncy(), adjncy);
  EXPECT_EQ(g.adjwgt(), adjwgt);
  EXPECT_EQ(weights, std::vector<uint32_t>(in.n, 2));
}

TEST(SplitTest, ConcurrentCallsMatchSerialResults) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  Random rnd(seed + 11);
  struct Job {
    CsrGraph graph;
    SplitOptions options;
    std::vector<uint8_t> serial;
  };
  std::vector<Job> jobs;
  for (int i = 0; i < 8; ++i) {
    uint64_t planted = 0;
    std::vector<uint8_t> truth;
    const Instance in = PlantedPartition(&rnd, 120 + 10 * i, 0.1, 15, &planted, &truth);
    Job job;
    job.graph = CsrGraph::FromDirectedEdges(in.n, in.edges);
    job.options.seed = i;
    job.options.use_kway = i % 2 == 0;
    Result<Split> split = SplitInTwo(job.graph, job.options);
    ASSERT_TRUE(split.ok());
    job.serial = split->side;
    jobs.push_back(std::move(job));
  }
  constexpr int kThreads = 4;
  std::vector<std::vector<std::vector<uint8_t>>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Each thread walks the jobs in a different order, several times over.
      for (int rep = 0; rep < 3; ++rep) {
        for (size_t k = 0; k < jobs.size(); ++k) {
          const size_t i = (k + static_cast<size_t>(t) * 3) % jobs.size();
          Result<Split> split = SplitInTwo(jobs[i].graph, jobs[i].options);
          got[t].push_back(split.ok() ? split->side : std::vector<uint8_t>{});
          got[t].back().push_back(static_cast<uint8_t>(i));  // remember which job
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(got[t].size(), 3 * jobs.size());
    for (std::vector<uint8_t> side : got[t]) {
      const size_t i = side.back();
      side.pop_back();
      EXPECT_EQ(side, jobs[i].serial) << "thread " << t << " job " << i;
    }
  }
}

TEST(SplitTest, ReportFormats) {
  SplitReport r;
  r.vertices = 60000;
  r.edges = 5990000;
  r.total_weight = 123456789;
  r.vertex_weight = 60000;
  r.method = SplitMethod::kKway;
  r.seed = 3;
  r.imbalance = 0.05;
  r.max_side_weight = 31500;
  r.partition_seconds = 1.5;
  r.lock_wait_seconds = 0.25;
  r.side_vertices[0] = 30001;
  r.side_vertices[1] = 29999;
  r.side_weight[0] = 30001;
  r.side_weight[1] = 29999;
  r.cut_edges = 4242;
  r.cut_weight = 1641975;
  r.cut_percent = 1.33;
  r.repair_moves = 2;
  EXPECT_EQ(SplitReportToJson(r),
            "{\"vertices\":60000,\"edges\":5990000,\"total_weight\":123456789,"
            "\"vertex_weight\":60000,\"method\":\"kway\",\"seed\":3,"
            "\"imbalance\":0.050000000000000003,\"max_side_weight\":31500,"
            "\"partition_seconds\":1.5,\"lock_wait_seconds\":0.25,"
            "\"side_vertices\":[30001,29999],\"side_weight\":[30001,29999],"
            "\"cut_edges\":4242,\"cut_weight\":1641975,\"cut_percent\":1.3300000000000001,"
            "\"repair_moves\":2}");
  EXPECT_EQ(FormatSplitReportRow(r),
            "     60000      5990000      123456789      1.500      30001      29999"
            "        1641975    1.330  kway");
  EXPECT_EQ(SplitReportHeader(),
            "  vertices        edges   total_weight     time_s      half0      half1"
            "     cut_weight    cut_%  method");
  r.cut_percent = std::nan("");
  EXPECT_NE(SplitReportToJson(r).find("\"cut_percent\":null,"), std::string::npos);
  EXPECT_STREQ(SplitMethodName(SplitMethod::kTrivial), "trivial");
  EXPECT_STREQ(SplitMethodName(SplitMethod::kComponents), "components");
  EXPECT_STREQ(SplitMethodName(SplitMethod::kRecursive), "recursive");
}

TEST(SplitTest, MaxSideWeight) {
  EXPECT_EQ(MaxSideWeight(0, 0, 0.05), 0u);
  EXPECT_EQ(MaxSideWeight(2, 1, 0.05), 1u);
  EXPECT_EQ(MaxSideWeight(3, 1, 0.05), 2u);
  EXPECT_EQ(MaxSideWeight(100, 1, 0.05), 52u);   // floor(52.5)
  EXPECT_EQ(MaxSideWeight(60000, 1, 0.05), 31500u);
  EXPECT_EQ(MaxSideWeight(100, 1, 0.0), 50u);
  EXPECT_EQ(MaxSideWeight(100, 60, 0.05), 80u);  // one vertex of 60 forces 60 | 40 at best
  EXPECT_EQ(MaxSideWeight(20, 1, 0.1), 11u);      // exact at a whole number
}

}  // namespace
}  // namespace propeller
