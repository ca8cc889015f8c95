// CsrGraph construction and connected components (graph.h).
//
// Construction normalises every directed edge to (min, max), sorts, and merges equal pairs;
// the sorted unique list then fills the CSR rows in order. Because the list is sorted by
// (low, high), each row receives its lower neighbours (ascending) before its higher ones
// (ascending), so rows come out sorted without a per-row sort. Peak extra memory is one
// 16-byte record per input edge; for the 6 M-edge split budget (docs/architecture.md §11) that is
// ~96 MB, half of what building both directions first and sorting each row would take.
#include "partitioner/graph.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace propeller {
namespace {

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  const uint64_t sum = a + b;
  return sum < a ? std::numeric_limits<uint64_t>::max() : sum;
}

[[noreturn]] void DieTooLarge(const char* what) {
  std::fprintf(stderr, "CsrGraph: %s exceeds METIS's 32-bit index type\n", what);
  std::abort();
}

// Fills `adjwgt` from `exact` so that every entry is >= 1 and the sum of all entries is at most
// INT32_MAX (see graph.h). Exact when it already fits.
void ScaleWeights(const std::vector<uint64_t>& exact, std::vector<int32_t>* adjwgt) {
  using u128 = unsigned __int128;
  constexpr uint64_t kLimit = static_cast<uint64_t>(CsrGraph::kMaxIndex);
  u128 sum = 0;
  for (uint64_t w : exact) sum += w;
  adjwgt->resize(exact.size());
  if (sum <= kLimit) {
    for (size_t i = 0; i < exact.size(); ++i) (*adjwgt)[i] = static_cast<int32_t>(exact[i]);
    return;
  }
  // Each entry becomes max(1, floor(w * budget / sum)); summed over all entries that is at most
  // entries + budget = kLimit. The same w always maps to the same value, so both directions of
  // an edge agree, and a heavier edge never gets a smaller weight than a lighter one.
  const uint64_t budget = kLimit - exact.size();
  for (size_t i = 0; i < exact.size(); ++i) {
    const u128 scaled = u128{exact[i]} * budget / sum;
    (*adjwgt)[i] = static_cast<int32_t>(std::max<u128>(scaled, 1));
  }
}

}  // namespace

CsrGraph CsrGraph::FromDirectedEdges(uint32_t num_vertices, std::span<const WeightedEdge> edges) {
  if (num_vertices > kMaxIndex) DieTooLarge("the number of vertices");

  std::vector<WeightedEdge> pairs;
  pairs.reserve(edges.size());
  for (const WeightedEdge& e : edges) {
    if (e.src == e.dst || e.weight == 0 || e.src >= num_vertices || e.dst >= num_vertices) {
      continue;
    }
    pairs.push_back({std::min(e.src, e.dst), std::max(e.src, e.dst), e.weight});
  }
  std::sort(pairs.begin(), pairs.end(), [](const WeightedEdge& a, const WeightedEdge& b) {
    return a.src != b.src ? a.src < b.src : a.dst < b.dst;
  });
  size_t unique = 0;
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (unique > 0 && pairs[unique - 1].src == pairs[i].src &&
        pairs[unique - 1].dst == pairs[i].dst) {
      pairs[unique - 1].weight = SaturatingAdd(pairs[unique - 1].weight, pairs[i].weight);
    } else {
      pairs[unique++] = pairs[i];
    }
  }
  pairs.resize(unique);
  if (2 * static_cast<uint64_t>(unique) > static_cast<uint64_t>(kMaxIndex)) {
    DieTooLarge("twice the number of edges");
  }

  CsrGraph g;
  g.xadj_.assign(static_cast<size_t>(num_vertices) + 1, 0);
  for (const WeightedEdge& e : pairs) {
    ++g.xadj_[e.src + 1];
    ++g.xadj_[e.dst + 1];
  }
  for (size_t v = 0; v < num_vertices; ++v) g.xadj_[v + 1] += g.xadj_[v];
  g.adjncy_.resize(2 * unique);
  g.exact_weights_.resize(2 * unique);
  std::vector<int32_t> fill(g.xadj_.begin(), g.xadj_.end() - 1);
  for (const WeightedEdge& e : pairs) {
    const auto u = static_cast<size_t>(fill[e.src]++);
    g.adjncy_[u] = static_cast<int32_t>(e.dst);
    g.exact_weights_[u] = e.weight;
    const auto v = static_cast<size_t>(fill[e.dst]++);
    g.adjncy_[v] = static_cast<int32_t>(e.src);
    g.exact_weights_[v] = e.weight;
    g.total_weight_ = SaturatingAdd(g.total_weight_, e.weight);
  }
  ScaleWeights(g.exact_weights_, &g.adjwgt_);
  return g;
}

uint64_t CsrGraph::EdgeWeight(uint32_t u, uint32_t v) const {
  const std::span<const int32_t> row = Neighbors(u);
  const auto it = std::lower_bound(row.begin(), row.end(), static_cast<int32_t>(v));
  if (it == row.end() || *it != static_cast<int32_t>(v)) return 0;
  return exact_weights_[static_cast<size_t>(xadj_[u]) + static_cast<size_t>(it - row.begin())];
}

std::vector<uint32_t> ConnectedComponents(const CsrGraph& graph, uint32_t* num_components) {
  constexpr uint32_t kUnlabelled = std::numeric_limits<uint32_t>::max();
  const uint32_t n = graph.num_vertices();
  std::vector<uint32_t> label(n, kUnlabelled);
  std::vector<uint32_t> stack;
  uint32_t next_id = 0;
  // Scanning seeds in vertex order numbers components by their lowest vertex.
  for (uint32_t seed = 0; seed < n; ++seed) {
    if (label[seed] != kUnlabelled) continue;
    const uint32_t id = next_id++;
    label[seed] = id;
    stack.push_back(seed);
    while (!stack.empty()) {
      const uint32_t v = stack.back();
      stack.pop_back();
      for (int32_t w : graph.Neighbors(v)) {
        const auto u = static_cast<uint32_t>(w);
        if (label[u] == kUnlabelled) {
          label[u] = id;
          stack.push_back(u);
        }
      }
    }
  }
  if (num_components != nullptr) *num_components = next_id;
  return label;
}

}  // namespace propeller
