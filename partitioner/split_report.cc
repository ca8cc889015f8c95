// Text and JSON forms of SplitReport (split.h).
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string>

#include "partitioner/split.h"

namespace propeller {
namespace {

// snprintf into a std::string; the formats below are bounded, so 512 bytes always suffice.
template <typename... Args>
std::string Format(const char* format, Args... args) {
  char buffer[512];
  const int length = std::snprintf(buffer, sizeof(buffer), format, args...);
  if (length < 0) return std::string();
  return std::string(buffer, std::min(static_cast<size_t>(length), sizeof(buffer) - 1));
}

// %.17g round-trips a double; JSON has no NaN or infinity, so those become null.
std::string JsonDouble(double value) {
  return std::isfinite(value) ? Format("%.17g", value) : std::string("null");
}

}  // namespace

std::string SplitReportHeader() {
  return Format("%10s %12s %14s %10s %10s %10s %14s %8s  %s", "vertices", "edges",
                "total_weight", "time_s", "half0", "half1", "cut_weight", "cut_%", "method");
}

std::string FormatSplitReportRow(const SplitReport& r) {
  return Format("%10" PRIu32 " %12" PRIu64 " %14" PRIu64 " %10.3f %10" PRIu32 " %10" PRIu32
                " %14" PRIu64 " %8.3f  %s",
                r.vertices, r.edges, r.total_weight, r.partition_seconds, r.side_vertices[0],
                r.side_vertices[1], r.cut_weight, r.cut_percent, SplitMethodName(r.method));
}

std::string SplitReportToJson(const SplitReport& r) {
  // The method name is one of four fixed identifiers and needs no escaping.
  std::string json = Format("{\"vertices\":%" PRIu32 ",\"edges\":%" PRIu64
                            ",\"total_weight\":%" PRIu64 ",\"vertex_weight\":%" PRIu64
                            ",\"method\":\"%s\",\"seed\":%d,\"imbalance\":",
                            r.vertices, r.edges, r.total_weight, r.vertex_weight,
                            SplitMethodName(r.method), r.seed);
  json += JsonDouble(r.imbalance);
  json += Format(",\"max_side_weight\":%" PRIu64 ",\"partition_seconds\":", r.max_side_weight);
  json += JsonDouble(r.partition_seconds);
  json += ",\"lock_wait_seconds\":";
  json += JsonDouble(r.lock_wait_seconds);
  json += Format(",\"side_vertices\":[%" PRIu32 ",%" PRIu32 "],\"side_weight\":[%" PRIu64
                 ",%" PRIu64 "],\"cut_edges\":%" PRIu64 ",\"cut_weight\":%" PRIu64
                 ",\"cut_percent\":",
                 r.side_vertices[0], r.side_vertices[1], r.side_weight[0], r.side_weight[1],
                 r.cut_edges, r.cut_weight);
  json += JsonDouble(r.cut_percent);
  json += Format(",\"repair_moves\":%" PRIu32 "}", r.repair_moves);
  return json;
}

}  // namespace propeller
