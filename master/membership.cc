#include "master/membership.h"

#include "common/env.h"
#include "common/logging.h"

namespace propeller::master {

MasterClock CompleteClock(MasterClock clock) {
  if (!clock.monotonic_ns) clock.monotonic_ns = [] { return Env::Default()->MonotonicNanos(); };
  if (!clock.wall_ns) clock.wall_ns = [] { return Env::Default()->NowNanos(); };
  return clock;
}

std::string ValidateEndpoint(std::string_view endpoint) {
  constexpr size_t kMaxEndpointBytes = 1024;
  if (endpoint.empty()) return "endpoint is empty";
  if (endpoint.size() > kMaxEndpointBytes) return "endpoint is longer than 1024 bytes";
  for (char c : endpoint) {
    if (c <= ' ' || c > '~') return "endpoint contains a space or a non-printable byte";
  }
  auto rest_after = [&](std::string_view scheme) -> std::optional<std::string_view> {
    if (endpoint.substr(0, scheme.size()) != scheme) return std::nullopt;
    return endpoint.substr(scheme.size());
  };
  if (auto rest = rest_after("tcp://")) {
    const size_t colon = rest->rfind(':');
    if (colon == std::string_view::npos) return "tcp endpoint has no port";
    const std::string_view host = rest->substr(0, colon);
    const std::string_view port = rest->substr(colon + 1);
    if (host.empty()) return "tcp endpoint has no host";
    if (host == "*") return "tcp endpoint '*' is a bind wildcard, not an address to reach";
    if (port.empty() || port.size() > 5) return "tcp endpoint has a bad port";
    uint32_t p = 0;
    for (char c : port) {
      if (c < '0' || c > '9') return "tcp endpoint has a bad port";
      p = p * 10 + static_cast<uint32_t>(c - '0');
    }
    if (p == 0 || p > 65535) return "tcp endpoint port must be 1-65535";
    return "";
  }
  for (std::string_view scheme : {"ipc://", "inproc://"}) {
    if (auto rest = rest_after(scheme)) {
      if (rest->empty()) return std::string(scheme) + " endpoint has no name";
      return "";
    }
  }
  return "endpoint must start with tcp://, ipc:// or inproc://";
}

Membership::Membership(MasterStore* store, int64_t node_timeout_ms, MasterClock clock)
    : store_(store), timeout_ns_(node_timeout_ms * 1000000), clock_(std::move(clock)) {
  for (auto& [id, endpoint] : store_->Nodes()) {
    NodeState n;
    n.node_id = id;
    n.endpoint = std::move(endpoint);
    nodes_.emplace(id, std::move(n));
  }
}

void Membership::RefreshLocked(int64_t now_mono) {
  for (auto& [id, n] : nodes_) {
    if (n.up && now_mono - n.last_heartbeat_mono_ns > timeout_ns_) {
      n.up = false;
      Log(LogLevel::kWarning, "node %u (%s) missed heartbeats for %lld ms: marked down", id,
          n.endpoint.c_str(), static_cast<long long>(timeout_ns_ / 1000000));
    }
  }
}

Result<uint32_t> Membership::Register(uint32_t node_id, std::string_view endpoint) {
  const std::string why = ValidateEndpoint(endpoint);
  if (!why.empty()) return Status::InvalidArgument(why);
  std::lock_guard<std::mutex> lock(mu_);
  // A first registration (id 0) from an endpoint whose node owns no ACG yet is a retry of a
  // registration whose reply was lost: hand back that id instead of creating a ghost node.
  uint32_t retried = 0;
  if (node_id == 0) {
    for (const auto& [other_id, other] : nodes_) {
      if (other.endpoint == endpoint) retried = other_id;
    }
    if (retried != 0) {
      for (const auto& [acg, rec] : store_->Acgs()) {
        if (rec.node_id == retried) retried = 0;
        if (retried == 0) break;
      }
    }
  }
  // A node that comes back with an id this master never gave holds an index this master's
  // map knows nothing of (the map was lost, or the node is another cluster's): accepting it
  // would place every file again. It is refused with what to do; nothing is recorded.
  if (node_id != 0 && nodes_.count(node_id) == 0) {
    return Status::NotFound("node id " + std::to_string(node_id) + " is unknown to this master: "
                            "its map was lost, or the node belongs to another cluster. Restore "
                            "the master's data directory, or start the node afresh (move its "
                            "data directory away)");
  }
  uint32_t id = 0;
  PROPELLER_RETURN_IF_ERROR(store_->Update([&](MasterStore::Txn& txn) -> Status {
    id = node_id != 0 ? node_id : retried;
    if (id == 0) {
      PROPELLER_ASSIGN_OR_RETURN(id, txn.NewNodeId());
    }
    return txn.PutNode(id, endpoint);
  }));
  const int64_t now = clock_.monotonic_ns();
  RefreshLocked(now);
  for (auto& [other_id, other] : nodes_) {
    if (other_id != id && other.up && other.endpoint == endpoint) {
      other.up = false;
      Log(LogLevel::kWarning, "node %u registered at %s: node %u, which had it, marked down", id,
          other.endpoint.c_str(), other_id);
    }
  }
  NodeState& n = nodes_[id];
  const bool known = n.node_id != 0;
  n.node_id = id;
  n.endpoint.assign(endpoint);
  n.up = true;
  n.last_heartbeat_mono_ns = now;
  n.last_heartbeat_wall_ns = clock_.wall_ns();
  Log(LogLevel::kInfo, "node %u %s at %s", id,
      node_id == 0 ? "registered" : (known ? "re-registered" : "adopted"), n.endpoint.c_str());
  return id;
}

bool Membership::Heartbeat(const wire::HeartbeatRequest& hb) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(hb.node_id);
  if (it == nodes_.end()) return false;
  const int64_t now = clock_.monotonic_ns();
  RefreshLocked(now);
  NodeState& n = it->second;
  if (!n.up) Log(LogLevel::kInfo, "node %u (%s) is up", n.node_id, n.endpoint.c_str());
  n.up = true;
  n.last_heartbeat_mono_ns = now;
  n.last_heartbeat_wall_ns = clock_.wall_ns();
  auto acgs = std::make_shared<std::map<uint64_t, uint64_t>>();
  for (const wire::AcgLoad& a : hb.acgs) (*acgs)[a.acg] += a.files;
  n.acgs = std::move(acgs);
  n.free_disk_bytes = hb.free_disk_bytes;
  n.load = hb.load;
  n.cached_updates = hb.cached_updates;
  n.indexes = hb.indexes;
  return true;
}

std::vector<NodeState> Membership::Nodes() {
  std::lock_guard<std::mutex> lock(mu_);
  RefreshLocked(clock_.monotonic_ns());
  std::vector<NodeState> out;
  out.reserve(nodes_.size());
  for (const auto& [id, n] : nodes_) out.push_back(n);
  return out;
}

std::optional<NodeState> Membership::Node(uint32_t node_id) {
  std::lock_guard<std::mutex> lock(mu_);
  RefreshLocked(clock_.monotonic_ns());
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return std::nullopt;
  return it->second;
}

void Membership::FillPlacement(PlacementContext* ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  RefreshLocked(clock_.monotonic_ns());
  ctx->up_nodes.clear();
  ctx->reported.clear();
  for (const auto& [id, n] : nodes_) {
    if (!n.up) continue;
    ctx->up_nodes.insert(id);
    if (n.acgs != nullptr && !n.acgs->empty()) ctx->reported.emplace(id, n.acgs);
  }
}

}  // namespace propeller::master
