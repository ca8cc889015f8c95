// SplitInTwo (split.h): validation, the trivial case, packing whole components, METIS on the
// graph without its isolated vertices, the balance check and repair, and the report.
#include "partitioner/split.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>
#include <utility>

#include "partitioner/metis_bisect.h"

namespace propeller {
namespace {

using Clock = std::chrono::steady_clock;

int UFactor(double imbalance) { return static_cast<int>(std::lround(imbalance * 1000.0)); }

// LPT greedy over items (components or vertices): heaviest first (ties: lower number), each
// to the lighter half (ties: half 0), starting from halves that already weigh sum[0], sum[1].
// With equal starting halves they end differing by at most the heaviest item.
// Stores the half of item i in (*half_of_item)[i] and updates sum.
void GreedyByWeight(const std::vector<int64_t>& item_weight, int64_t sum[2],
                    std::vector<uint8_t>* half_of_item) {
  const auto count = static_cast<uint32_t>(item_weight.size());
  std::vector<uint32_t> order(count);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return item_weight[a] > item_weight[b]; });
  half_of_item->assign(count, 0);
  for (uint32_t i : order) {
    const uint8_t s = sum[1] < sum[0] ? 1 : 0;
    (*half_of_item)[i] = s;
    sum[s] += item_weight[i];
  }
}

// Tries to split without cutting anything: whole connected components, packed by LPT. Returns
// false (leaving *side unspecified) when the heavier half would exceed `limit`. Succeeds for
// every graph without edges (isolated vertices are components), and whenever the components
// are small compared to the limit, e.g. a grouped ACG of several applications.
bool PackComponents(const CsrGraph& graph, const std::vector<int64_t>& weight, int64_t limit,
                    std::vector<uint8_t>* side) {
  uint32_t count = 0;
  const std::vector<uint32_t> component = ConnectedComponents(graph, &count);
  std::vector<int64_t> component_weight(count, 0);
  for (uint32_t v = 0; v < graph.num_vertices(); ++v) component_weight[component[v]] += weight[v];
  for (int64_t w : component_weight) {
    if (w > limit) return false;  // it would have to be cut
  }
  int64_t sum[2] = {0, 0};
  std::vector<uint8_t> half_of_component;
  GreedyByWeight(component_weight, sum, &half_of_component);
  if (sum[0] > limit || sum[1] > limit) return false;
  side->resize(graph.num_vertices());
  for (uint32_t v = 0; v < graph.num_vertices(); ++v) (*side)[v] = half_of_component[component[v]];
  return true;
}

// The vertices with at least one edge, and the CSR arrays of the graph they induce (empty
// arrays when every vertex has an edge: the caller then uses the graph's own arrays).
struct Core {
  std::vector<uint32_t> vertices;  // core vertex i is graph vertex vertices[i]
  std::vector<int32_t> xadj;
  std::vector<int32_t> adjncy;
  std::vector<int32_t> adjwgt;
};

Core ExtractCore(const CsrGraph& graph) {
  Core core;
  const uint32_t n = graph.num_vertices();
  const std::vector<int32_t>& xadj = graph.xadj();
  for (uint32_t v = 0; v < n; ++v) {
    if (xadj[v + 1] > xadj[v]) core.vertices.push_back(v);
  }
  if (core.vertices.size() == n) return core;
  constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  std::vector<uint32_t> core_index(n, kNone);
  for (uint32_t i = 0; i < core.vertices.size(); ++i) core_index[core.vertices[i]] = i;
  // Only isolated vertices are dropped, so every edge survives and the arrays keep their size.
  core.xadj.reserve(core.vertices.size() + 1);
  core.xadj.push_back(0);
  core.adjncy.reserve(graph.adjncy().size());
  core.adjwgt.reserve(graph.adjwgt().size());
  for (uint32_t v : core.vertices) {
    for (auto k = static_cast<size_t>(xadj[v]); k < static_cast<size_t>(xadj[v + 1]); ++k) {
      core.adjncy.push_back(static_cast<int32_t>(core_index[graph.adjncy()[k]]));
      core.adjwgt.push_back(graph.adjwgt()[k]);
    }
    core.xadj.push_back(static_cast<int32_t>(core.adjncy.size()));
  }
  return core;
}

// Splits with METIS. Isolated vertices are left out of METIS's graph (its k-way refinement
// handles them badly: a 40-clique plus 40 isolated vertices came back with the clique cut,
// cut 432 of 2340, where placing the isolated vertices opposite the clique costs 0) and are
// added afterwards to the lighter half. Because they can fill up whichever half is lighter,
// METIS may leave the core as uneven as `limit` allows, and is told so through UFACTOR.
Status SplitWithMetis(const CsrGraph& graph, const std::vector<int64_t>& weight,
                      const std::vector<int32_t>& metis_weights, int64_t limit,
                      const SplitOptions& options, std::vector<uint8_t>* side,
                      double* lock_wait_seconds) {
  const uint32_t n = graph.num_vertices();
  Core core = ExtractCore(graph);
  const bool whole = core.vertices.size() == n;
  std::vector<int32_t> core_weights;
  if (!metis_weights.empty() && !whole) {
    for (uint32_t v : core.vertices) core_weights.push_back(metis_weights[v]);
  }
  int64_t core_total = 0;
  for (uint32_t v : core.vertices) core_total += weight[v];

  internal::MetisGraph metis_graph;
  metis_graph.xadj = whole ? std::span<const int32_t>(graph.xadj()) : core.xadj;
  metis_graph.adjncy = whole ? std::span<const int32_t>(graph.adjncy()) : core.adjncy;
  metis_graph.adjwgt = whole ? std::span<const int32_t>(graph.adjwgt()) : core.adjwgt;
  metis_graph.vwgt = whole ? std::span<const int32_t>(metis_weights) : core_weights;
  internal::MetisBisectOptions metis;
  // The core's heavier half may weigh up to `limit`: ufactor = 1000 * (limit / (core/2) - 1).
  // At 1000 (ratio 2) METIS may already put the whole core on one side, so cap there.
  const int64_t core_ufactor = 1000 * (2 * limit - core_total) / core_total;
  metis.ufactor = static_cast<int>(
      std::clamp<int64_t>(core_ufactor, UFactor(options.imbalance), 1000));
  metis.seed = options.seed;
  metis.use_kway = options.use_kway;
  internal::MetisBisectTimes times;
  std::vector<uint8_t> core_side;
  PROPELLER_RETURN_IF_ERROR(internal::MetisBisect(metis_graph, metis, &core_side, &times));
  *lock_wait_seconds = times.lock_wait_seconds;

  side->assign(n, 0);
  int64_t sum[2] = {0, 0};
  for (uint32_t i = 0; i < core.vertices.size(); ++i) {
    (*side)[core.vertices[i]] = core_side[i];
    sum[core_side[i]] += weight[core.vertices[i]];
  }
  if (!whole) {
    std::vector<uint32_t> isolated;
    std::vector<int64_t> isolated_weight;
    for (uint32_t v = 0; v < n; ++v) {
      if (graph.xadj()[v + 1] == graph.xadj()[v]) {
        isolated.push_back(v);
        isolated_weight.push_back(weight[v]);
      }
    }
    std::vector<uint8_t> half;
    GreedyByWeight(isolated_weight, sum, &half);
    for (size_t i = 0; i < isolated.size(); ++i) (*side)[isolated[i]] = half[i];
  }
  return Status::OK();
}

// Moves vertices out of a half heavier than `limit` until both halves weigh <= limit, always
// the vertex of the heavy half whose move lowers the cut most (lowest number on ties), using
// METIS's edge weights. Any vertex may move: the light half weighs < W - limit, and
// limit >= floor((W + w_max) / 2) means it stays <= limit after taking any one vertex, while
// every move makes the heavy half strictly lighter. Returns the number of moves.
uint32_t RepairBalance(const CsrGraph& graph, const std::vector<int64_t>& weight, int64_t limit,
                       std::vector<uint8_t>* side) {
  const uint32_t n = graph.num_vertices();
  int64_t sum[2] = {0, 0};
  for (uint32_t v = 0; v < n; ++v) sum[(*side)[v]] += weight[v];
  if (sum[0] <= limit && sum[1] <= limit) return 0;
  const uint8_t heavy = sum[0] > limit ? 0 : 1;

  const std::vector<int32_t>& xadj = graph.xadj();
  const std::vector<int32_t>& adjncy = graph.adjncy();
  const std::vector<int32_t>& adjwgt = graph.adjwgt();
  // gain[v]: cut decrease if v changed halves = (edges to the other half) - (edges to its own).
  std::vector<int64_t> gain(n, 0);
  for (uint32_t v = 0; v < n; ++v) {
    for (auto k = static_cast<size_t>(xadj[v]); k < static_cast<size_t>(xadj[v + 1]); ++k) {
      const auto u = static_cast<uint32_t>(adjncy[k]);
      gain[v] += (*side)[u] != (*side)[v] ? adjwgt[k] : -int64_t{adjwgt[k]};
    }
  }
  // Max-heap on (gain, lowest vertex). An entry is current iff its gain equals gain[v]: a
  // heavy-half vertex's gain only grows (its neighbours only leave its half), and each change
  // pushes a fresh entry, so every heavy-half vertex always has exactly one current entry.
  using Entry = std::pair<int64_t, uint32_t>;
  auto worse = [](const Entry& a, const Entry& b) {
    return a.first != b.first ? a.first < b.first : a.second > b.second;
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(worse)> heap(worse);
  for (uint32_t v = 0; v < n; ++v) {
    if ((*side)[v] == heavy) heap.push({gain[v], v});
  }
  uint32_t moves = 0;
  while (sum[heavy] > limit && !heap.empty()) {
    const auto [g, v] = heap.top();
    heap.pop();
    if ((*side)[v] != heavy || g != gain[v]) continue;
    (*side)[v] = static_cast<uint8_t>(1 - heavy);
    sum[heavy] -= weight[v];
    sum[1 - heavy] += weight[v];
    gain[v] = -gain[v];
    ++moves;
    for (auto k = static_cast<size_t>(xadj[v]); k < static_cast<size_t>(xadj[v + 1]); ++k) {
      const auto u = static_cast<uint32_t>(adjncy[k]);
      if ((*side)[u] == heavy) {
        gain[u] += 2 * int64_t{adjwgt[k]};
        heap.push({gain[u], u});
      } else {
        gain[u] -= 2 * int64_t{adjwgt[k]};
      }
    }
  }
  return moves;
}

}  // namespace

const char* SplitMethodName(SplitMethod method) {
  switch (method) {
    case SplitMethod::kTrivial:
      return "trivial";
    case SplitMethod::kComponents:
      return "components";
    case SplitMethod::kRecursive:
      return "recursive";
    case SplitMethod::kKway:
      return "kway";
  }
  return "unknown";
}

uint64_t MaxSideWeight(uint64_t total, uint64_t heaviest, double imbalance) {
  // Integer arithmetic on METIS's own quantum (thousandths), so the bound is exact.
  // total <= INT32_MAX in SplitInTwo, so neither product overflows; clamp for other callers.
  const auto ufactor = static_cast<uint64_t>(std::clamp(UFactor(imbalance), 0, 1000));
  using u128 = unsigned __int128;
  const u128 tolerated = static_cast<u128>(total) * (1000 + ufactor) / 2000;
  const u128 achievable = (static_cast<u128>(total) + heaviest) / 2;
  return static_cast<uint64_t>(std::max(tolerated, achievable));
}

uint64_t CutWeight(const CsrGraph& graph, std::span<const uint8_t> side, uint64_t* cut_edges) {
  unsigned __int128 weight = 0;
  uint64_t edges = 0;
  const uint32_t n = graph.num_vertices();
  for (uint32_t v = 0; v < n; ++v) {
    const auto begin = static_cast<size_t>(graph.xadj()[v]);
    const auto end = static_cast<size_t>(graph.xadj()[v + 1]);
    for (size_t k = begin; k < end; ++k) {
      const auto u = static_cast<uint32_t>(graph.adjncy()[k]);
      // Count each undirected edge once, from its lower end.
      if (u > v && side[u] != side[v]) {
        weight += graph.exact_weights()[k];
        ++edges;
      }
    }
  }
  if (cut_edges != nullptr) *cut_edges = edges;
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  return weight > kMax ? kMax : static_cast<uint64_t>(weight);
}

Result<Split> SplitInTwo(const CsrGraph& graph, const SplitOptions& options,
                         std::span<const uint32_t> vertex_weights) {
  const uint32_t n = graph.num_vertices();
  if (!(options.imbalance >= 0.0 && options.imbalance <= 1.0)) {  // also rejects NaN
    return Status::InvalidArgument("split imbalance must be in [0, 1]");
  }
  if (!vertex_weights.empty() && vertex_weights.size() != n) {
    return Status::InvalidArgument("split: " + std::to_string(vertex_weights.size()) +
                                   " vertex weights for " + std::to_string(n) + " vertices");
  }
  std::vector<int64_t> weight(n, 1);
  std::vector<int32_t> metis_weights;  // empty: METIS's unit weights
  int64_t total = n;
  int64_t heaviest = n == 0 ? 0 : 1;
  if (!vertex_weights.empty()) {
    total = 0;
    heaviest = 0;
    for (uint32_t v = 0; v < n; ++v) {
      if (vertex_weights[v] == 0) return Status::InvalidArgument("split: vertex weight 0");
      weight[v] = vertex_weights[v];
      total += weight[v];
      heaviest = std::max(heaviest, weight[v]);
      if (total > CsrGraph::kMaxIndex) {
        return Status::InvalidArgument("split: vertex weights sum past INT32_MAX");
      }
    }
    metis_weights.assign(vertex_weights.begin(), vertex_weights.end());
  }

  Split split;
  SplitReport& report = split.report;
  report.vertices = n;
  report.edges = graph.num_edges();
  report.total_weight = graph.total_weight();
  report.vertex_weight = static_cast<uint64_t>(total);
  report.seed = options.seed;
  report.imbalance = options.imbalance;
  report.max_side_weight = MaxSideWeight(static_cast<uint64_t>(total),
                                         static_cast<uint64_t>(heaviest), options.imbalance);

  const Clock::time_point start = Clock::now();
  const auto limit = static_cast<int64_t>(report.max_side_weight);
  if (n <= 1) {
    report.method = SplitMethod::kTrivial;
    split.side.assign(n, 0);
  } else if (PackComponents(graph, weight, limit, &split.side)) {
    report.method = SplitMethod::kComponents;
  } else {
    report.method = options.use_kway ? SplitMethod::kKway : SplitMethod::kRecursive;
    PROPELLER_RETURN_IF_ERROR(SplitWithMetis(graph, weight, metis_weights, limit, options,
                                             &split.side, &report.lock_wait_seconds));
    report.repair_moves = RepairBalance(graph, weight, limit, &split.side);
  }

  // Normalise: half 0 is the heavier one, or holds vertex 0 when both weigh the same.
  int64_t sum[2] = {0, 0};
  for (uint32_t v = 0; v < n; ++v) sum[split.side[v]] += weight[v];
  if (sum[1] > sum[0] || (sum[1] == sum[0] && n > 0 && split.side[0] == 1)) {
    for (uint8_t& s : split.side) s = static_cast<uint8_t>(1 - s);
    std::swap(sum[0], sum[1]);
  }
  if (static_cast<uint64_t>(sum[0]) > report.max_side_weight) {
    return Status::Internal("split: balance repair left a half over the bound");
  }
  report.partition_seconds =
      std::chrono::duration<double>(Clock::now() - start).count() - report.lock_wait_seconds;

  for (uint32_t v = 0; v < n; ++v) ++report.side_vertices[split.side[v]];
  report.side_weight[0] = static_cast<uint64_t>(sum[0]);
  report.side_weight[1] = static_cast<uint64_t>(sum[1]);
  report.cut_weight = CutWeight(graph, split.side, &report.cut_edges);
  report.cut_percent = report.total_weight == 0
                           ? 0.0
                           : 100.0 * static_cast<double>(report.cut_weight) /
                                 static_cast<double>(report.total_weight);
  return split;
}

}  // namespace propeller
