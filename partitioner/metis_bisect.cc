// MetisBisect (metis_bisect.h): option setup, the METIS mutex, error mapping.
#include "partitioner/metis_bisect.h"

#include <metis.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>

namespace propeller::internal {
namespace {

static_assert(sizeof(idx_t) == sizeof(int32_t),
              "CsrGraph's int32_t arrays are handed to METIS as idx_t (Debian: 32-bit idx_t)");

using Clock = std::chrono::steady_clock;

// Process-wide: METIS is not thread-safe. A function-local static so that callers in static
// initialisers of other translation units still find it constructed.
std::mutex& MetisMutex() {
  static std::mutex mu;
  return mu;
}

Status MetisError(int code) {
  std::string message = "METIS error " + std::to_string(code);
  switch (code) {
    case METIS_ERROR_INPUT:
      return Status::Internal(message + " (input)");
    case METIS_ERROR_MEMORY:
      return Status::ResourceExhausted(message + " (out of memory)");
    case METIS_ERROR:
      return Status::Internal(message + " (other)");
    default:
      return Status::Internal(message + " (unknown code)");
  }
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Status MetisBisect(const MetisGraph& graph, const MetisBisectOptions& options,
                   std::vector<uint8_t>* part, MetisBisectTimes* times) {
  if (graph.xadj.size() < 3) {
    return Status::InvalidArgument("METIS bisection needs at least 2 vertices");
  }
  const auto n = static_cast<uint32_t>(graph.xadj.size() - 1);
  if ((!graph.vwgt.empty() && graph.vwgt.size() != n) ||
      graph.adjncy.size() != graph.adjwgt.size() || graph.xadj[0] != 0 ||
      static_cast<size_t>(graph.xadj[n]) != graph.adjncy.size()) {
    return Status::InvalidArgument("METIS bisection: inconsistent CSR arrays");
  }

  idx_t options_array[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options_array);
  options_array[METIS_OPTION_OBJTYPE] = METIS_OBJTYPE_CUT;
  options_array[METIS_OPTION_UFACTOR] = std::max(options.ufactor, 1);
  options_array[METIS_OPTION_SEED] = options.seed;
  options_array[METIS_OPTION_NUMBERING] = 0;

  idx_t nvtxs = static_cast<idx_t>(n);
  idx_t ncon = 1;
  idx_t nparts = 2;
  idx_t edgecut = 0;
  std::vector<idx_t> result(n, 0);
  // Read-only in METIS with 0-based numbering (see metis_bisect.h).
  auto* xadj = const_cast<idx_t*>(graph.xadj.data());
  auto* adjncy = const_cast<idx_t*>(graph.adjncy.data());
  auto* adjwgt = const_cast<idx_t*>(graph.adjwgt.data());
  auto* vwgt = graph.vwgt.empty() ? nullptr : const_cast<idx_t*>(graph.vwgt.data());
  // An empty span's data() may be null, which METIS would take for "no weights" or
  // dereference; give it a valid dummy.
  idx_t dummy = 0;
  if (graph.adjncy.empty()) adjncy = adjwgt = &dummy;

  int rc = METIS_OK;
  const Clock::time_point wait_start = Clock::now();
  {
    std::lock_guard<std::mutex> lock(MetisMutex());
    const Clock::time_point start = Clock::now();
    if (options.use_kway) {
      rc = METIS_PartGraphKway(&nvtxs, &ncon, xadj, adjncy, vwgt, /*vsize=*/nullptr, adjwgt,
                               &nparts, /*tpwgts=*/nullptr, /*ubvec=*/nullptr, options_array,
                               &edgecut, result.data());
    } else {
      rc = METIS_PartGraphRecursive(&nvtxs, &ncon, xadj, adjncy, vwgt, /*vsize=*/nullptr,
                                    adjwgt, &nparts, /*tpwgts=*/nullptr, /*ubvec=*/nullptr,
                                    options_array, &edgecut, result.data());
    }
    const Clock::time_point end = Clock::now();
    if (times != nullptr) {
      times->lock_wait_seconds = Seconds(start - wait_start);
      times->metis_seconds = Seconds(end - start);
    }
  }
  if (rc != METIS_OK) return MetisError(rc);

  part->assign(n, 0);
  for (uint32_t v = 0; v < n; ++v) {
    if (result[v] != 0 && result[v] != 1) {
      return Status::Internal("METIS returned part " + std::to_string(result[v]) +
                              " for a 2-way split");
    }
    (*part)[v] = static_cast<uint8_t>(result[v]);
  }
  return Status::OK();
}

}  // namespace propeller::internal
