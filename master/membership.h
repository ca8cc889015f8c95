// Membership: the master's table of index nodes (docs/architecture.md §7) — which nodes exist
// (persisted in the MasterStore: id -> endpoint), which are up, and what their last heartbeat said
// (memory only: a restarted master learns it again within one heartbeat interval).
//
// A node is up from its registration or a heartbeat until node_timeout_ms pass without one;
// then it is down (checked on every access against the injected clock, so tests control time
// and no thread is needed). A down node that heartbeats again is up again. Nodes loaded from
// the store at start are down until they heartbeat.
//
// Threading: every method may be called from any thread. Lock order: mu_ before the
// MasterStore's locks.
#ifndef PROPELLER_MASTER_MEMBERSHIP_H_
#define PROPELLER_MASTER_MEMBERSHIP_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "master/placement.h"
#include "master/store.h"
#include "schemas/messages.h"

namespace propeller::master {

// Time seams. Both default to Env::Default(); tests point both at one fake.
struct MasterClock {
  std::function<int64_t()> monotonic_ns;  // liveness deadlines (immune to wall-clock steps)
  std::function<int64_t()> wall_ns;       // times reported to clients (last_heartbeat_ns)
};
// `clock` with every unset function replaced by its default.
MasterClock CompleteClock(MasterClock clock);

// Empty when `endpoint` is an acceptable node endpoint, else the reason: tcp://HOST:PORT
// (HOST not "*", PORT 1-65535), ipc://PATH or inproc://NAME, printable ASCII without spaces,
// at most 1024 bytes.
std::string ValidateEndpoint(std::string_view endpoint);

struct NodeState {
  uint32_t node_id = 0;
  std::string endpoint;
  bool up = false;
  int64_t last_heartbeat_mono_ns = 0;
  int64_t last_heartbeat_wall_ns = 0;  // 0 = none since the master started
  // From the last heartbeat:
  // ACG -> files the node holds. Replaced whole by each heartbeat and never changed in
  // place, so copies of a NodeState (Nodes(), FillPlacement) share it instead of copying
  // ~1,000 entries per search and placement.
  std::shared_ptr<const std::map<uint64_t, uint64_t>> acgs;
  uint64_t free_disk_bytes = 0;
  double load = 0;
  uint64_t cached_updates = 0;
  std::vector<std::string> indexes;
};

class Membership {
 public:
  // Loads the node table from `store` (every node down). `store` must outlive this object.
  // REQUIRES: node_timeout_ms > 0; clock complete (CompleteClock).
  Membership(MasterStore* store, int64_t node_timeout_ms, MasterClock clock);
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  // Registers a node and marks it up. node_id 0 = a new node: it gets a fresh id — unless a
  // known node at the same endpoint holds no ACG, which is this node retrying a registration
  // whose reply it lost; it gets that id back (no ghost nodes). A non-zero
  // id is taken as the node's own (a restart): its endpoint is updated, and an id the master
  // does not know (lost or foreign store) is adopted. Another node that had the same
  // endpoint is marked down (the endpoint now belongs to this one). Committed before return.
  // Errors: InvalidArgument (endpoint), the store's errors.
  Result<uint32_t> Register(uint32_t node_id, std::string_view endpoint);

  // Records a heartbeat. Returns false (and changes nothing) for a node id the master does
  // not know: the node must register again.
  bool Heartbeat(const wire::HeartbeatRequest& heartbeat);

  // Every known node by id, with up/down brought current.
  std::vector<NodeState> Nodes();
  std::optional<NodeState> Node(uint32_t node_id);
  // Fills ctx->up_nodes and ctx->reported from the current state.
  void FillPlacement(PlacementContext* ctx);

 private:
  // Marks nodes whose heartbeat is older than the timeout down. Under mu_.
  void RefreshLocked(int64_t now_mono);

  MasterStore* const store_;
  const int64_t timeout_ns_;
  const MasterClock clock_;

  std::mutex mu_;
  std::map<uint32_t, NodeState> nodes_;  // Under mu_.
};

}  // namespace propeller::master

#endif  // PROPELLER_MASTER_MEMBERSHIP_H_
