// SplitInTwo: the 2-way split of an ACG that has outgrown the threshold (docs/architecture.md §5):
// two balanced halves with a minimal weight of cut, computed by METIS, plus the report the paper's
// Table II prints for each partitioning (vertices, edges, total weight, time, halves, cut).
//
// Balance. Every vertex has a weight (default 1, i.e. "number of files"); W is their sum and
// w_max the largest. A split is balanced when each half weighs at most
//     MaxSideWeight(W, w_max, imbalance) = max(floor((1 + imbalance) * W / 2),
//                                              floor((W + w_max) / 2)).
// The first term is the requested tolerance (METIS_OPTION_UFACTOR = imbalance * 1000). The
// second is what is always achievable: with 3 unit vertices one half must hold 2 > 1.05 * 1.5.
// METIS is a heuristic and does not promise its own bound (it misses it on tiny or weighted
// graphs: 30-48 of 400 random graphs of <= 14 vertices in split_test), so every METIS answer is
// checked, and a half that is too heavy is repaired by greedily moving its vertex with the
// best cut gain to the other half until the bound holds.
//
// Steps, cheapest first:
//  1. n <= 1: nothing to split (and METIS must not see nparts > n; docs/pitfalls.md METIS-3:
//     SIGFPE).
//  2. Whole connected components packed into the halves (largest first, each to the lighter
//     half): if that meets the bound the cut is 0, optimal, and METIS is not called. This
//     covers graphs without edges, all-isolated files, and groups of small components.
//  3. METIS on the graph without its isolated vertices, which are then added to the lighter
//     half. Isolated vertices cost nothing wherever they go, so they are "free" balance:
//     METIS may leave the rest as uneven as the bound allows once they are added (UFACTOR is
//     raised accordingly), and METIS's k-way refinement, which misplaces them (a clique plus
//     as many isolated vertices came back with the clique cut), never sees them.
//  4. The balance check and repair above.
//
// Determinism. The same graph, vertex weights and options give the same `side` vector in
// every run and on every thread: METIS reseeds its generator from SplitOptions::seed on each
// call, and the repair breaks ties by vertex number.
//
// Threads. Any thread may call SplitInTwo. METIS keeps global state and is not thread-safe
// (docs/pitfalls.md METIS-4), so calls into it are serialised by one process-wide mutex; everything
// else (copying weights, checking, repairing, reporting) runs outside it.
#ifndef PROPELLER_PARTITIONER_SPLIT_H_
#define PROPELLER_PARTITIONER_SPLIT_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "partitioner/graph.h"

namespace propeller {

struct SplitOptions {
  // Allowed imbalance: each half weighs at most (1 + imbalance) * W / 2 (see MaxSideWeight for
  // the floor that keeps tiny graphs feasible). Must be in [0, 1]. Passed to METIS as
  // METIS_OPTION_UFACTOR = round(imbalance * 1000); set explicitly because METIS's own defaults
  // differ between its two algorithms (0.1% recursive, 3% k-way; docs/pitfalls.md METIS-5).
  double imbalance = 0.05;
  // METIS_OPTION_SEED. The same seed gives the same split. Any int is valid.
  int seed = 1;
  // false: METIS_PartGraphRecursive (the default: ~30% faster for 2 parts, similar cut;
  // docs/pitfalls.md METIS-5). true: METIS_PartGraphKway.
  bool use_kway = false;
};

// How a split was computed.
enum class SplitMethod : uint8_t {
  kTrivial = 0,     // 0 or 1 vertices: nothing to split, METIS not called (nparts=1 SIGFPE)
  kComponents = 1,  // whole connected components fit in balanced halves: cut 0, no METIS call
  kRecursive = 2,   // METIS_PartGraphRecursive
  kKway = 3,        // METIS_PartGraphKway
};

// Returns "trivial", "components", "recursive" or "kway"; never null.
const char* SplitMethodName(SplitMethod method);

// The paper's Table II columns for one partitioning, plus what is needed to judge it.
// Weights of edges are exact (the graph's exact_weights(), not METIS's scaled copy).
struct SplitReport {
  uint32_t vertices = 0;       // graph.num_vertices()
  uint64_t edges = 0;          // undirected edges, each counted once
  uint64_t total_weight = 0;   // sum of edge weights (graph.total_weight())
  uint64_t vertex_weight = 0;  // W: sum of vertex weights (== vertices when unweighted)
  SplitMethod method = SplitMethod::kTrivial;
  int seed = 0;
  double imbalance = 0;           // the allowed imbalance (SplitOptions::imbalance)
  uint64_t max_side_weight = 0;   // MaxSideWeight(...) that both halves satisfy
  // Wall time spent partitioning: the METIS call plus the balance check and repair. Excludes
  // waiting for the METIS mutex (reported separately) and building the graph.
  double partition_seconds = 0;
  double lock_wait_seconds = 0;
  uint32_t side_vertices[2] = {0, 0};  // vertices in half 0 and half 1
  uint64_t side_weight[2] = {0, 0};    // vertex weight of half 0 and half 1
  uint64_t cut_edges = 0;              // edges with ends in different halves
  uint64_t cut_weight = 0;             // their total exact weight (saturating)
  // 100 * cut_weight / total_weight; 0 when total_weight is 0.
  double cut_percent = 0;
  // Vertices the balance repair moved after METIS (0 when METIS met the bound itself).
  uint32_t repair_moves = 0;
};

// The result of SplitInTwo.
struct Split {
  // side[v] is 0 or 1 for every vertex v of the graph. Half 0 is never lighter than half 1
  // in vertex weight (the halves are swapped if needed), so callers that keep the heavier half
  // in place and move the other move less.
  std::vector<uint8_t> side;
  SplitReport report;
};

// Splits `graph` into two balanced halves with minimal (heuristically) weight of cut.
// `vertex_weights` is empty (every vertex weighs 1) or holds one weight per vertex.
// Graphs with 0 or 1 vertices return at once (all vertices on side 0); graphs whose whole
// components pack into balanced halves are split without METIS (cut 0); otherwise METIS runs
// under the process-wide METIS mutex (see the steps at the top of this file).
// The result always satisfies: each half's vertex weight <= report.max_side_weight.
// Errors: InvalidArgument when options.imbalance is not in [0, 1], vertex_weights has the wrong
// size, a weight is 0, or the weights sum past INT32_MAX (METIS's idx_t); ResourceExhausted
// when METIS runs out of memory; Internal for any other METIS error. METIS errors carry METIS's
// return code in the message ("METIS error -2 (input)").
Result<Split> SplitInTwo(const CsrGraph& graph, const SplitOptions& options,
                         std::span<const uint32_t> vertex_weights = {});

// The balance bound described at the top of this file, for total vertex weight `total`, the
// heaviest vertex `heaviest` and `imbalance` in [0, 1].
uint64_t MaxSideWeight(uint64_t total, uint64_t heaviest, double imbalance);

// Exact weight of the edges between side 0 and side 1 (saturating at 2^64-1); *cut_edges (if
// not null) receives their number. REQUIRES: side.size() == graph.num_vertices().
uint64_t CutWeight(const CsrGraph& graph, std::span<const uint8_t> side, uint64_t* cut_edges);

// One text row of a Table II-like table, columns aligned under SplitReportHeader():
// vertices, edges, total weight, time (s), half 0, half 1 (vertices), cut weight, cut %, method.
std::string SplitReportHeader();
std::string FormatSplitReportRow(const SplitReport& report);

// The report as one JSON object on one line (every field above, method as its name; times in
// seconds). No trailing newline.
std::string SplitReportToJson(const SplitReport& report);

}  // namespace propeller

#endif  // PROPELLER_PARTITIONER_SPLIT_H_
