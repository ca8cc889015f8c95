// The index node's metrics (docs/metrics.md): NodeRequestMetrics, the few figures counted on
// request paths (relaxed atomics only, recorded by NodeService::Handle), and
// RegisterIndexNodeMetrics, which adds them and the figures read at scrape time from the
// engine's and the service's stats (EngineStats, ListAcgs, NodeServiceStats) to a registry.
//
// Threading: NodeRequestMetrics from any thread; RegisterIndexNodeMetrics from one thread
// before serving, and its collectors from the scraping thread.
#ifndef PROPELLER_INDEXNODE_SERVER_NODE_METRICS_H_
#define PROPELLER_INDEXNODE_SERVER_NODE_METRICS_H_

#include <chrono>
#include <string_view>

#include "common/metrics.h"
#include "schemas/messages.h"
#include "schemas/wire_metrics.h"

namespace propeller {

class IndexNodeServer;

struct NodeRequestMetrics {
  metrics::CounterVec requests = wire::MakeTypeCounters();  // every request, by type
  metrics::CounterVec errors = wire::MakeCodeCounters();    // error replies, by code
  metrics::Counter updates;         // updates in Apply requests acknowledged
  metrics::Counter update_batches;  // Apply requests acknowledged
  // From the request's arrival to its reply: an Apply's acknowledgement latency, a Search's
  // whole answer (its streamed hits included).
  metrics::Histogram apply_seconds{metrics::LatencyBuckets()};
  metrics::Histogram search_seconds{metrics::LatencyBuckets()};

  // One request of `type` answered with `reply` (an encoded reply envelope).
  void Record(wire::MsgType type, std::string_view reply,
              std::chrono::steady_clock::time_point start);
};

// Adds the index node's families (prefix propeller_node_) to `registry`. `server` must outlive
// the registry's use.
void RegisterIndexNodeMetrics(IndexNodeServer* server, metrics::Registry* registry);

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_SERVER_NODE_METRICS_H_
