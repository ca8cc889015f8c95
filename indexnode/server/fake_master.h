// FakeMaster: a stand-in for propeller-master in the index-node tests — an rpc::Server that
// answers RegisterNode, Heartbeat, LocateAcgs, ListNodes and MoveAcg from small in-memory
// tables and records what it was sent. Test-only; not in the library. Thread-safe (the
// handler runs on rpc workers).
#ifndef PROPELLER_INDEXNODE_SERVER_FAKE_MASTER_H_
#define PROPELLER_INDEXNODE_SERVER_FAKE_MASTER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/rpc/rpc.h"
#include "common/status.h"
#include "schemas/messages.h"

namespace propeller::testing {

class FakeMaster {
 public:
  // Binds `endpoint` (tcp port 0 allowed). Null with *error set when binding fails.
  static std::unique_ptr<FakeMaster> Start(const std::string& endpoint,
                                           uint32_t heartbeat_interval_ms = 50,
                                           Status* error = nullptr) {
    std::unique_ptr<FakeMaster> m(new FakeMaster(heartbeat_interval_ms));
    rpc::ServerOptions so;
    so.endpoint = endpoint;
    so.worker_threads = 2;
    FakeMaster* self = m.get();
    auto server = rpc::Server::Start(
        so, [self](std::string_view req, const rpc::PeerInfo&, rpc::ReplyStream&) {
          return self->Handle(req);
        });
    if (!server.ok()) {
      if (error) *error = server.status();
      return nullptr;
    }
    m->server_ = std::move(server).value();
    return m;
  }

  ~FakeMaster() { server_.reset(); }

  const std::string& endpoint() const { return server_->endpoint(); }

  // ACG `acg` belongs to `node` (reachable at `endpoint`, or at the endpoint it registered).
  void SetOwner(uint64_t acg, uint32_t node, const std::string& endpoint = "") {
    MutexLock lock(&mu_);
    owners_[acg] = {node, endpoint};
  }
  void SetCatalogue(std::vector<wire::IndexDef> catalogue) {
    MutexLock lock(&mu_);
    catalogue_ = std::move(catalogue);
  }
  // kMoveAcg (by default NotSupported, a refusal): `commit` flips the owner, then the reply
  // is `reply` (kTimeout stands in for a reply lost with a master that died after its commit).
  void SetMoveOutcome(bool commit, const Status& reply) {
    MutexLock lock(&mu_);
    move_outcome_ = std::make_pair(commit, reply);
  }
  // Node `id` is known (up) at `endpoint`, as if it had registered (ListNodes).
  void AddNode(uint32_t id, const std::string& endpoint) {
    MutexLock lock(&mu_);
    nodes_[id] = endpoint;
    if (id >= next_id_) next_id_ = id + 1;
  }
  // While set, LocateAcgs gets kTimeout (a master that cannot be reached).
  void SetLocateSilent(bool silent) {
    MutexLock lock(&mu_);
    locate_silent_ = silent;
  }
  // The next heartbeat is answered with reregister = true.
  // Volume `id` has its root at `root` (ListVolumes).
  void SetVolume(uint32_t id, const std::string& root) {
    MutexLock lock(&mu_);
    volumes_[id] = root;
  }

  void RequestReregister() {
    MutexLock lock(&mu_);
    reregister_ = true;
  }

  std::vector<wire::RegisterNodeRequest> registrations() const {
    MutexLock lock(&mu_);
    return registrations_;
  }
  std::optional<wire::HeartbeatRequest> last_heartbeat() const {
    MutexLock lock(&mu_);
    return last_heartbeat_;
  }
  uint64_t heartbeats() const {
    MutexLock lock(&mu_);
    return heartbeats_;
  }
  uint64_t locate_calls() const {
    MutexLock lock(&mu_);
    return locate_calls_;
  }
  std::string node_endpoint(uint32_t node) const {
    MutexLock lock(&mu_);
    auto it = nodes_.find(node);
    return it == nodes_.end() ? "" : it->second;
  }

 private:
  explicit FakeMaster(uint32_t interval_ms) : interval_ms_(interval_ms) {}

  std::string Handle(std::string_view bytes) {
    wire::RequestEnvelope env;
    Status st = wire::DecodeRequest(bytes, &env);
    if (!st.ok()) return wire::EncodeReply(st, {});
    MutexLock lock(&mu_);
    switch (env.type) {
      case wire::MsgType::kRegisterNode: {
        wire::RegisterNodeRequest req;
        st = wire::Decode(env.body, &req);
        if (!st.ok()) return wire::EncodeReply(st, {});
        registrations_.push_back(req);
        // A new node is recognised by its endpoint: a registration that timed out at the
        // node may still arrive here after the node's retry, and must not create a ghost.
        uint32_t id = req.node_id;
        for (const auto& [known, ep] : nodes_) {
          if (id == 0 && ep == req.endpoint) id = known;
        }
        if (id == 0) id = next_id_++;
        if (id >= next_id_) next_id_ = id + 1;
        nodes_[id] = req.endpoint;
        wire::RegisterNodeReply rep;
        rep.node_id = id;
        rep.heartbeat_interval_ms = interval_ms_;
        return wire::EncodeOkReply(rep);
      }
      case wire::MsgType::kHeartbeat: {
        wire::HeartbeatRequest req;
        st = wire::Decode(env.body, &req);
        if (!st.ok()) return wire::EncodeReply(st, {});
        ++heartbeats_;
        last_heartbeat_ = req;
        wire::HeartbeatReply rep;
        rep.reregister = reregister_ || nodes_.count(req.node_id) == 0;
        reregister_ = false;
        rep.indexes = catalogue_;
        return wire::EncodeOkReply(rep);
      }
      case wire::MsgType::kLocateAcgs: {
        wire::LocateAcgsRequest req;
        st = wire::Decode(env.body, &req);
        if (!st.ok()) return wire::EncodeReply(st, {});
        ++locate_calls_;
        if (locate_silent_) return wire::EncodeReply(Status::Timeout("fake master: silent"), {});
        wire::AcgLocationsReply rep;
        for (uint64_t acg : req.acgs) {
          wire::AcgLocation loc{acg, 0, ""};
          auto it = owners_.find(acg);
          if (it != owners_.end()) {
            loc.node_id = it->second.first;
            loc.endpoint = !it->second.second.empty() ? it->second.second
                                                      : nodes_[it->second.first];
          }
          rep.locations.push_back(loc);
        }
        return wire::EncodeOkReply(rep);
      }
      case wire::MsgType::kListNodes: {
        wire::NodesReply rep;
        for (const auto& [id, ep] : nodes_) {
          wire::NodeInfo n;
          n.node_id = id;
          n.endpoint = ep;
          n.up = true;
          rep.nodes.push_back(n);
        }
        return wire::EncodeOkReply(rep);
      }
      case wire::MsgType::kListVolumes: {
        wire::VolumesReply rep;
        for (const auto& [id, root] : volumes_) rep.volumes.push_back(wire::VolumeInfo{id, root});
        return wire::EncodeOkReply(rep);
      }
      case wire::MsgType::kMoveAcg: {
        if (!move_outcome_) return wire::EncodeReply(Status::NotSupported("fake master"), {});
        wire::MoveAcgRequest req;
        st = wire::Decode(env.body, &req);
        if (!st.ok()) return wire::EncodeReply(st, {});
        if (move_outcome_->first) owners_[req.acg] = {req.to_node, ""};
        if (!move_outcome_->second.ok()) return wire::EncodeReply(move_outcome_->second, {});
        return wire::EncodeOkReply(wire::Empty{});
      }
      default:
        return wire::EncodeReply(Status::NotSupported("fake master"), {});
    }
  }

  const uint32_t interval_ms_;
  std::unique_ptr<rpc::Server> server_;
  // Everything below: Handle runs on the server's threads, the setters on the test's.
  mutable Mutex mu_;
  std::map<uint64_t, std::pair<uint32_t, std::string>> owners_ PROPELLER_GUARDED_BY(mu_);
  std::map<uint32_t, std::string> nodes_ PROPELLER_GUARDED_BY(mu_);
  std::map<uint32_t, std::string> volumes_ PROPELLER_GUARDED_BY(mu_);
  std::vector<wire::IndexDef> catalogue_ PROPELLER_GUARDED_BY(mu_);
  std::vector<wire::RegisterNodeRequest> registrations_ PROPELLER_GUARDED_BY(mu_);
  std::optional<wire::HeartbeatRequest> last_heartbeat_ PROPELLER_GUARDED_BY(mu_);
  uint64_t heartbeats_ PROPELLER_GUARDED_BY(mu_) = 0;
  uint64_t locate_calls_ PROPELLER_GUARDED_BY(mu_) = 0;
  uint32_t next_id_ PROPELLER_GUARDED_BY(mu_) = 1;
  bool reregister_ PROPELLER_GUARDED_BY(mu_) = false;
  std::optional<std::pair<bool, Status>> move_outcome_ PROPELLER_GUARDED_BY(mu_);
  bool locate_silent_ PROPELLER_GUARDED_BY(mu_) = false;
};

// Collects the partial frames a handler sends (NodeService::Handle in tests).
class CollectStream : public rpc::ReplyStream {
 public:
  bool Send(std::string_view chunk) override {
    chunks.emplace_back(chunk);
    return open;
  }
  std::vector<std::string> chunks;
  bool open = true;
};

// Polls `cond` every 10 ms for up to `timeout_ms`; true when it became true.
inline bool WaitFor(const std::function<bool()>& cond, int timeout_ms = 10000) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

}  // namespace propeller::testing

#endif  // PROPELLER_INDEXNODE_SERVER_FAKE_MASTER_H_
