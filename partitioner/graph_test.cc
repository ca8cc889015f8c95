// Tests for graph.h against brute-force models: an adjacency matrix of summed weights for the
// CSR build, and union-find for the components, on random seeded graphs plus small fixed cases.
#include "partitioner/graph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "common/random.h"

namespace propeller {
namespace {

using Matrix = std::vector<std::vector<uint64_t>>;

Matrix BuildMatrix(uint32_t n, const std::vector<WeightedEdge>& edges) {
  Matrix m(n, std::vector<uint64_t>(n, 0));
  for (const WeightedEdge& e : edges) {
    if (e.src >= n || e.dst >= n || e.src == e.dst) continue;
    m[e.src][e.dst] += e.weight;
    m[e.dst][e.src] += e.weight;
  }
  return m;
}

// Checks every structural promise of graph.h against the matrix model.
void ExpectMatchesMatrix(const CsrGraph& g, const Matrix& m) {
  const auto n = static_cast<uint32_t>(m.size());
  ASSERT_EQ(g.num_vertices(), n);
  ASSERT_EQ(g.xadj().size(), n + 1u);
  EXPECT_EQ(g.xadj()[0], 0);
  ASSERT_EQ(g.adjncy().size(), g.adjwgt().size());
  ASSERT_EQ(g.adjncy().size(), g.exact_weights().size());
  ASSERT_EQ(static_cast<size_t>(g.xadj()[n]), g.adjncy().size());
  uint64_t edges = 0;
  uint64_t total = 0;
  for (uint32_t u = 0; u < n; ++u) {
    std::vector<int32_t> expected_row;
    std::vector<uint64_t> expected_weights;
    for (uint32_t v = 0; v < n; ++v) {
      if (m[u][v] == 0) continue;
      expected_row.push_back(static_cast<int32_t>(v));
      expected_weights.push_back(m[u][v]);
      if (u < v) {
        ++edges;
        total += m[u][v];
      }
    }
    const auto begin = static_cast<size_t>(g.xadj()[u]);
    const auto end = static_cast<size_t>(g.xadj()[u + 1]);
    ASSERT_LE(begin, end);
    std::vector<int32_t> row(g.adjncy().begin() + begin, g.adjncy().begin() + end);
    std::vector<uint64_t> weights(g.exact_weights().begin() + begin,
                                  g.exact_weights().begin() + end);
    ASSERT_EQ(row, expected_row) << "vertex " << u;
    ASSERT_EQ(weights, expected_weights) << "vertex " << u;
    auto span = g.Neighbors(u);
    ASSERT_EQ(std::vector<int32_t>(span.begin(), span.end()), expected_row);
    for (uint32_t v = 0; v < n; ++v) ASSERT_EQ(g.EdgeWeight(u, v), m[u][v]) << u << "-" << v;
  }
  EXPECT_EQ(g.num_edges(), edges);
  EXPECT_EQ(g.total_weight(), total);
  int64_t sum = 0;
  for (int32_t w : g.adjwgt()) sum += w;
  if (2 * total <= static_cast<uint64_t>(CsrGraph::kMaxIndex)) {
    for (size_t i = 0; i < g.adjwgt().size(); ++i) {
      ASSERT_EQ(static_cast<uint64_t>(g.adjwgt()[i]), g.exact_weights()[i]);
    }
  }
  EXPECT_LE(sum, CsrGraph::kMaxIndex);
}

struct UnionFind {
  explicit UnionFind(uint32_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0u); }
  uint32_t Find(uint32_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  void Union(uint32_t a, uint32_t b) { parent[Find(a)] = Find(b); }
  std::vector<uint32_t> parent;
};

// Expected component ids: union-find over the model's edges, numbered by lowest vertex.
std::vector<uint32_t> ModelComponents(const Matrix& m, uint32_t* count) {
  const auto n = static_cast<uint32_t>(m.size());
  UnionFind uf(n);
  for (uint32_t u = 0; u < n; ++u) {
    for (uint32_t v = 0; v < n; ++v) {
      if (m[u][v] > 0) uf.Union(u, v);
    }
  }
  std::vector<uint32_t> id_of_root(n, std::numeric_limits<uint32_t>::max());
  std::vector<uint32_t> ids(n);
  uint32_t next = 0;
  for (uint32_t v = 0; v < n; ++v) {
    const uint32_t r = uf.Find(v);
    if (id_of_root[r] == std::numeric_limits<uint32_t>::max()) id_of_root[r] = next++;
    ids[v] = id_of_root[r];
  }
  *count = next;
  return ids;
}

TEST(CsrGraphTest, EmptyGraphs) {
  CsrGraph empty;
  EXPECT_EQ(empty.num_vertices(), 0u);
  EXPECT_EQ(empty.num_edges(), 0u);
  EXPECT_EQ(empty.xadj(), std::vector<int32_t>{0});
  uint32_t count = 99;
  EXPECT_TRUE(ConnectedComponents(empty, &count).empty());
  EXPECT_EQ(count, 0u);

  const CsrGraph zero = CsrGraph::FromDirectedEdges(0, {});
  EXPECT_EQ(zero.num_vertices(), 0u);
  EXPECT_EQ(zero.xadj(), std::vector<int32_t>{0});
  EXPECT_TRUE(ConnectedComponents(zero, nullptr).empty());
}

TEST(CsrGraphTest, OneVertexWithSelfLoop) {
  const std::vector<WeightedEdge> edges = {{0, 0, 5}};
  const CsrGraph g = CsrGraph::FromDirectedEdges(1, edges);
  EXPECT_EQ(g.num_vertices(), 1u);
  EXPECT_EQ(g.num_edges(), 0u);
  EXPECT_EQ(g.total_weight(), 0u);
  EXPECT_EQ(g.xadj(), (std::vector<int32_t>{0, 0}));
  uint32_t count = 0;
  EXPECT_EQ(ConnectedComponents(g, &count), std::vector<uint32_t>{0});
  EXPECT_EQ(count, 1u);
}

TEST(CsrGraphTest, TwoVerticesBothDirectionsAreSummed) {
  const std::vector<WeightedEdge> edges = {{0, 1, 3}, {1, 0, 4}, {0, 1, 1}};
  const CsrGraph g = CsrGraph::FromDirectedEdges(2, edges);
  EXPECT_EQ(g.num_edges(), 1u);
  EXPECT_EQ(g.total_weight(), 8u);
  EXPECT_EQ(g.xadj(), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(g.adjncy(), (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(g.adjwgt(), (std::vector<int32_t>{8, 8}));
  uint32_t count = 0;
  EXPECT_EQ(ConnectedComponents(g, &count), (std::vector<uint32_t>{0, 0}));
  EXPECT_EQ(count, 1u);
}

TEST(CsrGraphTest, TwoVerticesNoEdge) {
  const CsrGraph g = CsrGraph::FromDirectedEdges(2, {});
  uint32_t count = 0;
  EXPECT_EQ(ConnectedComponents(g, &count), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(count, 2u);
}

TEST(CsrGraphTest, IsolatedVerticesZeroWeightsAndOutOfRangeEdges) {
  // 0-3 and 2-5 connected; 1 and 4 isolated; 1-4 has only zero weight; 6 is out of range.
  const std::vector<WeightedEdge> edges = {
      {3, 0, 2}, {2, 5, 1}, {1, 4, 0}, {4, 1, 0}, {0, 6, 9}, {7, 2, 1}};
  const CsrGraph g = CsrGraph::FromDirectedEdges(6, edges);
  EXPECT_EQ(g.num_edges(), 2u);
  EXPECT_EQ(g.Neighbors(1).size(), 0u);
  EXPECT_EQ(g.Neighbors(4).size(), 0u);
  uint32_t count = 0;
  // Numbered by lowest vertex: {0,3} -> 0, {1} -> 1, {2,5} -> 2, {4} -> 3.
  EXPECT_EQ(ConnectedComponents(g, &count), (std::vector<uint32_t>{0, 1, 2, 0, 3, 2}));
  EXPECT_EQ(count, 4u);
}

TEST(CsrGraphTest, RandomGraphsMatchMatrixAndUnionFind) {
  const uint64_t seed = TestSeed();
  for (int round = 0; round < 300; ++round) {
    SCOPED_TRACE("seed=" + std::to_string(seed) + " round=" + std::to_string(round));
    Random rnd(seed * 7919 + static_cast<uint64_t>(round));
    const auto n = static_cast<uint32_t>(rnd.Uniform(40));
    const size_t num_edges = n == 0 ? 0 : rnd.Uniform(3 * n + 1);
    std::vector<WeightedEdge> edges;
    for (size_t i = 0; i < num_edges; ++i) {
      WeightedEdge e;
      e.src = static_cast<uint32_t>(rnd.Uniform(n));
      e.dst = rnd.OneIn(10) ? e.src : static_cast<uint32_t>(rnd.Uniform(n));  // some self-loops
      e.weight = rnd.OneIn(10) ? 0 : rnd.Range(1, 1000);
      edges.push_back(e);
      if (rnd.OneIn(4)) edges.push_back({e.dst, e.src, static_cast<uint64_t>(rnd.Range(1, 50))});
      if (rnd.OneIn(6)) edges.push_back(e);  // exact duplicate
    }
    const CsrGraph g = CsrGraph::FromDirectedEdges(n, edges);
    const Matrix m = BuildMatrix(n, edges);
    ExpectMatchesMatrix(g, m);
    if (HasFatalFailure()) return;
    uint32_t got_count = 0;
    uint32_t want_count = 0;
    const std::vector<uint32_t> got = ConnectedComponents(g, &got_count);
    ASSERT_EQ(got, ModelComponents(m, &want_count));
    ASSERT_EQ(got_count, want_count);
  }
}

TEST(CsrGraphTest, HugeWeightsAreScaledToFitMetis) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  Random rnd(seed);
  const uint32_t n = 30;
  std::vector<WeightedEdge> edges;
  for (int i = 0; i < 200; ++i) {
    const uint64_t weight =
        rnd.OneIn(3) ? rnd.Uniform(10) + 1 : (uint64_t{1} << 40) + rnd.Uniform(1u << 30);
    edges.push_back({static_cast<uint32_t>(rnd.Uniform(n)), static_cast<uint32_t>(rnd.Uniform(n)),
                     weight});
  }
  edges.push_back({0, 1, std::numeric_limits<uint64_t>::max()});
  edges.push_back({1, 0, 5});  // saturates
  const CsrGraph g = CsrGraph::FromDirectedEdges(n, edges);
  EXPECT_EQ(g.EdgeWeight(0, 1), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(g.total_weight(), std::numeric_limits<uint64_t>::max());
  int64_t sum = 0;
  for (size_t i = 0; i < g.adjwgt().size(); ++i) {
    ASSERT_GE(g.adjwgt()[i], 1);
    sum += g.adjwgt()[i];
  }
  EXPECT_LE(sum, CsrGraph::kMaxIndex);
  // Scaling is monotone in the exact weight and symmetric between the two ends of an edge.
  for (size_t i = 0; i < g.adjwgt().size(); ++i) {
    for (size_t j = 0; j < g.adjwgt().size(); ++j) {
      if (g.exact_weights()[i] <= g.exact_weights()[j]) {
        ASSERT_LE(g.adjwgt()[i], g.adjwgt()[j]);
      }
    }
  }
  for (uint32_t u = 0; u < n; ++u) {
    for (auto k = static_cast<size_t>(g.xadj()[u]); k < static_cast<size_t>(g.xadj()[u + 1]); ++k) {
      const auto v = static_cast<uint32_t>(g.adjncy()[k]);
      const auto back = std::lower_bound(g.adjncy().begin() + g.xadj()[v],
                                         g.adjncy().begin() + g.xadj()[v + 1],
                                         static_cast<int32_t>(u));
      ASSERT_EQ(g.adjwgt()[static_cast<size_t>(back - g.adjncy().begin())], g.adjwgt()[k]);
    }
  }
}

TEST(CsrGraphTest, LargerRandomGraphComponentsMatchUnionFind) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  Random rnd(seed + 5);
  const uint32_t n = 20000;
  std::vector<WeightedEdge> edges;
  for (int i = 0; i < 15000; ++i) {
    edges.push_back(
        {static_cast<uint32_t>(rnd.Uniform(n)), static_cast<uint32_t>(rnd.Uniform(n)), 1});
  }
  const CsrGraph g = CsrGraph::FromDirectedEdges(n, edges);
  UnionFind uf(n);
  for (const WeightedEdge& e : edges) uf.Union(e.src, e.dst);
  uint32_t count = 0;
  const std::vector<uint32_t> ids = ConnectedComponents(g, &count);
  // Same partition as union-find, ids dense and in order of first (lowest) vertex.
  std::vector<uint32_t> id_of_root(n, std::numeric_limits<uint32_t>::max());
  uint32_t next = 0;
  for (uint32_t v = 0; v < n; ++v) {
    const uint32_t r = uf.Find(v);
    if (id_of_root[r] == std::numeric_limits<uint32_t>::max()) id_of_root[r] = next++;
    ASSERT_EQ(ids[v], id_of_root[r]) << v;
  }
  EXPECT_EQ(count, next);
}

}  // namespace
}  // namespace propeller
