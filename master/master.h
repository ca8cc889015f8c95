// Master: the master's request semantics (docs/architecture.md §5, §7; master/README.md) on typed
// messages — node registration and heartbeats, file lookup/assignment (placement.h), ACG location,
// the index catalogue, volumes and cluster status — over a MasterStore and a Membership.
// MasterService (service.h) puts the wire encoding around it; MasterServer (master_server.h)
// puts the network around that. In-process users (tests, the embedded mode) may call it
// directly.
//
// Every mutating call has committed its change to the store before it returns OK. Requests
// are validated here; invalid input changes nothing and returns InvalidArgument.
//
// Threading: every method may be called from any thread at once. Mutations are serialised by
// the store; lookups run concurrently with them.
#ifndef PROPELLER_MASTER_MASTER_H_
#define PROPELLER_MASTER_MASTER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "common/status.h"
#include "master/membership.h"
#include "master/store.h"
#include "schemas/messages.h"

namespace propeller::master {

struct MasterConfig {
  std::string data_dir;            // REQUIRED: the store's directory (created if missing)
  int64_t node_timeout_ms = 5000;  // a node silent this long is down; > 0
  uint64_t acg_threshold = 50000;  // files in an app's ACG before a new one is opened; >= 1
  // Small ACGs of one app (fewer than acg_threshold / 4 files, and at most
  // wire::kMaxMergeFiles; not the app's current ACG) that stayed small this long are merged,
  // two at a time, while together below acg_threshold / 2 (HeartbeatReply.merges). Two on
  // different nodes: the smaller moves to the other's node first (HeartbeatReply.moves).
  // 0 = never.
  int64_t merge_after_ms = 300'000;
  // Splits (docs/architecture.md §5): the half a node split off (the new ACG) moves to the up node
  // with the fewest files when that node, even with the half, stays below the splitting node
  // (HeartbeatReply.moves). false = halves stay where they were split.
  bool move_split_halves = true;
  // Tests only: called after a MoveAcg committed, before it returns (a hook may end the
  // process, as a master crashing before its reply).
  std::function<void(uint64_t acg)> move_commit_hook;
  // Told to nodes at registration; capped at node_timeout_ms / 3 so one lost heartbeat does
  // not mark a node down.
  uint32_t heartbeat_interval_ms = 1000;
  bool sync = true;                          // MasterStoreOptions::sync
  int64_t sync_interval_ms = 0;              // MasterStoreOptions::sync_interval_ms
  uint64_t initial_map_bytes = 1ull << 30;   // MasterStoreOptions::initial_map_bytes
  MasterClock clock;                         // unset functions = the real clocks
};

// True for the indexes every node has from the start: path, keyword, inode.
bool IsBuiltinIndex(std::string_view name);

class Master {
 public:
  // Opens the store in config.data_dir. Errors: InvalidArgument (config), the store's.
  static Result<std::unique_ptr<Master>> Open(const MasterConfig& config);
  Master(const Master&) = delete;
  Master& operator=(const Master&) = delete;

  // Each method below answers one MsgType of schemas/messages.h; *reply is replaced.

  // Errors: InvalidArgument (endpoint), store errors.
  Status RegisterNode(const wire::RegisterNodeRequest& req, wire::RegisterNodeReply* reply);
  // Never fails: an unknown node id gets reply->reregister = true. The reply carries the
  // user-index catalogue.
  Status Heartbeat(const wire::HeartbeatRequest& req, wire::HeartbeatReply* reply);
  // One location per file in request order; acg 0 / node 0 / "" for an unmapped file.
  Status LookupFiles(const wire::FilesRequest& req, wire::LocationsReply* reply);
  // Maps every unmapped file (and every `fresh` one, whatever its old mapping) by the
  // placement rule (placement.h), all in one transaction; each location carries its
  // mapping's generation.
  // Errors: InvalidArgument (a file's volume is not registered, app tag too long),
  // Unavailable (a new ACG is needed and no node is up; nothing is kept), store errors.
  Status AssignFiles(const wire::AssignFilesRequest& req, wire::LocationsReply* reply);
  // Unmaps the files (unmapped ones are ignored), in one transaction. With req.generations
  // (one per file) a file is unmapped only while its mapping has that generation: a forget
  // sent late, after the inode number was reused and placed afresh, changes nothing.
  // Errors: InvalidArgument (generations present but not one per file), store errors.
  Status ForgetFiles(const wire::FilesRequest& req);
  // Owner of each ACG in request order; node 0 and "" for an unknown ACG.
  Status LocateAcgs(const wire::LocateAcgsRequest& req, wire::AcgLocationsReply* reply);
  // Every known node (up or down) by id. NodeInfo.acgs and .files count what the store maps
  // to the node, files combined with its heartbeat as in placement.h.
  Status ListNodes(wire::NodesReply* reply);
  // Adds a user index to the catalogue. Errors: InvalidArgument (name, type), AlreadyExists
  // (a built-in or catalogued index of that name, whatever its type).
  Status CreateIndex(const wire::IndexDef& req);
  // Errors: InvalidArgument (a built-in index), NotFound.
  Status DropIndex(const wire::IndexName& req);
  // The user-index catalogue by name.
  Status ListIndexes(wire::IndexesReply* reply);
  Status ClusterStatus(wire::ClusterStatusReply* reply);
  // Idempotent by root: the same root always gets the same id (ids from 1).
  // Errors: InvalidArgument (root not an absolute, normalised path).
  Status RegisterVolume(const wire::RegisterVolumeRequest& req, wire::VolumeInfo* reply);
  Status ListVolumes(wire::VolumesReply* reply);
  // Forgets volume req.volume, whose root must be req.root (a stale id cannot remove another
  // volume), and unmaps its files. The records on the index nodes are the caller's to delete
  // first (propeller volume remove does). NotFound, InvalidArgument on a root mismatch.
  Status RemoveVolume(const wire::VolumeInfo& req);
  // The up nodes that serve the index: every up node for a built-in or catalogued index,
  // since any node may own ACGs with data for it (a node builds a catalogued index within a
  // heartbeat of learning it). Errors: NotFound (no such index).
  Status IndexHolders(const wire::IndexName& req, wire::NodesReply* reply);

  // Splits (docs/architecture.md §5). NewAcg creates an empty ACG on req.node_id, tagged with the
  // source's app, for half of ACG req.source; the app's current ACG for placement stays the source.
  // SplitDone moves the listed files that are mapped to req.source to req.target, keeping each
  // mapping's generation (files mapped elsewhere or not at all are skipped, so a repeated
  // report changes nothing). Errors (nothing changed): InvalidArgument (zero or equal ids),
  // NotFound (an ACG does not exist), PermissionDenied (an ACG is not the node's), store
  // errors.
  Status NewAcg(const wire::NewAcgRequest& req, wire::NewAcgReply* reply);
  Status SplitDone(const wire::SplitDoneRequest& req, wire::SplitDoneReply* reply);
  // Migration (docs/architecture.md §5): the node req.to_node adopted ACG req.acg from
  // req.from_node and becomes its owner; every later lookup names it. OK when it owns the ACG
  // already (a repeated request). Errors (nothing changed): InvalidArgument (zero ids, equal nodes,
  // an unknown destination node, a retired ACG), NotFound (no such ACG), PermissionDenied
  // (req.from_node does not own it), store errors.
  Status MoveAcg(const wire::MoveAcgRequest& req);

  MasterStore& store() { return *store_; }
  Membership& membership() { return *membership_; }
  const MasterConfig& config() const { return config_; }

 private:
  explicit Master(const MasterConfig& config);
  // Every node with its ACG count and load. Memoised: the answer is a function of the node
  // table (membership) and the committed ACG table, and every search asks for it (ListNodes).
  std::vector<wire::NodeInfo> NodeInfos();
  // The merges to ask of the node sending `req` (MasterConfig::merge_after_ms), and at most
  // one move of a small ACG to the node holding the other small ACG of its app.
  void SuggestMerges(const wire::HeartbeatRequest& req, std::vector<wire::AcgMerge>* out,
                     std::vector<wire::AcgLocation>* moves);
  // At most one move of a split half to ask of the node sending `req`
  // (MasterConfig::move_split_halves).
  void SuggestMoves(const wire::HeartbeatRequest& req, std::vector<wire::AcgLocation>* out);

  const MasterConfig config_;
  std::unique_ptr<MasterStore> store_;
  std::unique_ptr<Membership> membership_;
  std::mutex merge_mu_;
  // When each ACG was first seen as a merge candidate (in memory: a restarted master waits
  // merge_after_ms again). Under merge_mu_.
  std::map<uint64_t, int64_t> small_since_;
  // Split halves (SplitDone targets) that may move to a lighter node: ACG -> the splitting
  // node and how often the move was asked. In memory: a master restarted between a split and
  // its move leaves that half where it was split. Under halves_mu_ (a leaf).
  struct Half {
    uint32_t node_id = 0;
    int asked = 0;
  };
  std::mutex halves_mu_;
  std::map<uint64_t, Half> halves_;
  // NodeInfos' last answer and what it was computed from. Under infos_mu_ (a leaf).
  struct InfosCache {
    bool valid = false;
    uint64_t store_version = 0;  // MasterStore::mirror_version() of the ACG pass
    std::vector<NodeState> nodes;
    std::vector<wire::NodeInfo> infos;
  };
  std::mutex infos_mu_;
  InfosCache infos_cache_;
};

}  // namespace propeller::master

#endif  // PROPELLER_MASTER_MASTER_H_
