// CsrGraph: an access-causality graph (docs/architecture.md §3, §5) as an undirected, weighted
// graph in the compressed-sparse-row form METIS takes, plus connected components.
//
// ACG edges are directed (a → b: a process read a, then wrote b). Partitioning cares about how
// strongly two files are tied, not the direction, and METIS silently returns a wrong split on a
// one-way CSR (docs/pitfalls.md METIS-2), so the graph is symmetrised when it is built:
// weight(u, v) = weight(u → v) + weight(v → u), self-loops dropped, duplicates merged.
//
// Pure computation, no I/O. A CsrGraph is immutable after construction: any number of threads
// may read one concurrently. Free functions are thread-safe.
#ifndef PROPELLER_PARTITIONER_GRAPH_H_
#define PROPELLER_PARTITIONER_GRAPH_H_

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace propeller {

// One directed ACG edge between dense vertex numbers (the caller maps file ids to 0..n-1).
struct WeightedEdge {
  uint32_t src = 0;
  uint32_t dst = 0;
  uint64_t weight = 0;
};

class CsrGraph {
 public:
  // METIS's idx_t is 32-bit on Debian (docs/pitfalls.md METIS-1), so vertex numbers, offsets and
  // weights in the CSR arrays are int32_t and must stay below this bound.
  static constexpr int64_t kMaxIndex = std::numeric_limits<int32_t>::max();

  // The empty graph (0 vertices).
  CsrGraph() : xadj_(1, 0) {}

  // Builds the symmetrised graph over vertices 0..num_vertices-1 from directed edges:
  // weight(u, v) = sum of the weights of every u→v and v→u edge (saturating at 2^64-1);
  // self-loops are dropped; a pair whose summed weight is 0 has no edge; an edge with an
  // endpoint >= num_vertices is ignored. O(V + E log(max degree)) time, O(V + E) memory.
  // REQUIRES: num_vertices <= kMaxIndex and 2 * (number of distinct undirected edges) <=
  // kMaxIndex; the process aborts otherwise (such a graph would not fit METIS's types, and a
  // graph that large would not fit in memory anyway).
  static CsrGraph FromDirectedEdges(uint32_t num_vertices, std::span<const WeightedEdge> edges);

  uint32_t num_vertices() const { return static_cast<uint32_t>(xadj_.size() - 1); }
  // Undirected edges, each counted once.
  uint64_t num_edges() const { return adjncy_.size() / 2; }
  // Sum of the exact weights of the undirected edges, each counted once (saturating).
  uint64_t total_weight() const { return total_weight_; }

  // METIS CSR arrays. xadj has num_vertices()+1 entries; the neighbours of v are
  // adjncy[xadj[v] .. xadj[v+1]), sorted ascending, without v itself or duplicates, and each
  // undirected edge appears once from each end. adjwgt[i] is the weight of the edge to
  // adjncy[i]: the exact weight when the sum of all adjwgt entries fits in int32_t, otherwise
  // the exact weights scaled down proportionally (rounded down, at least 1) so that the sum of
  // all entries stays <= INT32_MAX and METIS's internal sums cannot overflow. The weight of an
  // edge is the same from both ends. The arrays live as long as the graph.
  const std::vector<int32_t>& xadj() const { return xadj_; }
  const std::vector<int32_t>& adjncy() const { return adjncy_; }
  const std::vector<int32_t>& adjwgt() const { return adjwgt_; }
  // The exact (unscaled) weights, parallel to adjncy().
  const std::vector<uint64_t>& exact_weights() const { return exact_weights_; }

  // The neighbours of `v`, sorted. REQUIRES: v < num_vertices(). Valid as long as the graph.
  std::span<const int32_t> Neighbors(uint32_t v) const {
    return std::span<const int32_t>(adjncy_).subspan(
        static_cast<size_t>(xadj_[v]), static_cast<size_t>(xadj_[v + 1] - xadj_[v]));
  }
  // The exact weight of edge {u, v}, 0 when there is none. O(log degree).
  // REQUIRES: u, v < num_vertices().
  uint64_t EdgeWeight(uint32_t u, uint32_t v) const;

 private:
  std::vector<int32_t> xadj_;
  std::vector<int32_t> adjncy_;
  std::vector<int32_t> adjwgt_;
  std::vector<uint64_t> exact_weights_;
  uint64_t total_weight_ = 0;
};

// Labels each vertex with its connected component: ids are dense (0..*num_components-1) and
// numbered in increasing order of each component's lowest vertex, so vertex 0 (if any) is in
// component 0. Isolated vertices are components of their own. `num_components` may be null.
std::vector<uint32_t> ConnectedComponents(const CsrGraph& graph, uint32_t* num_components);

}  // namespace propeller

#endif  // PROPELLER_PARTITIONER_GRAPH_H_
