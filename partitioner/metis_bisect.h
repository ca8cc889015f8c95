// MetisBisect: the only place that calls METIS (internal to partitioner/; use split.h).
//
// It owns the process-wide METIS mutex: METIS 5.1 keeps global state (its random generator,
// its memory core) and is not thread-safe (docs/pitfalls.md METIS-4), so every call is serialised.
// It never calls METIS with fewer than 2 vertices (METIS_PartGraphKway with nparts = 1 dies
// with SIGFPE, and a 0-vertex graph is an input error).
//
// The CSR arrays are passed to METIS through const_cast: METIS takes `idx_t*` but with
// METIS_OPTION_NUMBERING = 0 it only reads xadj/adjncy/adjwgt/vwgt (split_test.cc checks the
// arrays are unchanged after a split), so a CsrGraph shared by several threads stays safe to
// read while one of them splits it.
//
// METIS rejects UFACTOR 0 ("Input Error: Incorrect ufactor"), so ufactor is raised to >= 1;
// callers enforce their exact bound afterwards.
#ifndef PROPELLER_PARTITIONER_METIS_BISECT_H_
#define PROPELLER_PARTITIONER_METIS_BISECT_H_

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"

namespace propeller::internal {

struct MetisBisectOptions {
  int ufactor = 50;  // METIS_OPTION_UFACTOR: allowed imbalance in thousandths
  int seed = 1;      // METIS_OPTION_SEED
  bool use_kway = false;
};

struct MetisBisectTimes {
  double lock_wait_seconds = 0;  // waiting for the METIS mutex
  double metis_seconds = 0;      // inside the METIS call
};

// A symmetric CSR graph as METIS takes it (the layout of CsrGraph's arrays): n = xadj.size()-1
// vertices, neighbours of v in adjncy[xadj[v] .. xadj[v+1]), weights parallel in adjwgt, the
// sum of adjwgt <= INT32_MAX. `vwgt` is empty (METIS's default: all 1) or has n entries, each
// >= 1, summing to at most INT32_MAX. The spans must stay valid during the call.
struct MetisGraph {
  std::span<const int32_t> xadj;
  std::span<const int32_t> adjncy;
  std::span<const int32_t> adjwgt;
  std::span<const int32_t> vwgt;
};

// Partitions `graph` into 2 parts with METIS and stores 0/1 per vertex in *part.
// METIS's balance is not checked here.
// Errors: InvalidArgument when the graph has < 2 vertices or the spans disagree in size;
// ResourceExhausted for METIS_ERROR_MEMORY; Internal for METIS_ERROR_INPUT, METIS_ERROR and an
// out-of-range part; each message names METIS's return code.
Status MetisBisect(const MetisGraph& graph, const MetisBisectOptions& options,
                   std::vector<uint8_t>* part, MetisBisectTimes* times);

}  // namespace propeller::internal

#endif  // PROPELLER_PARTITIONER_METIS_BISECT_H_
