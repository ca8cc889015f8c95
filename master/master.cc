#include "master/master.h"

#include <algorithm>
#include <optional>
#include <set>

#include "common/logging.h"
#include "common/query/query.h"
#include "common/record.h"
#include "master/placement.h"

namespace propeller::master {

bool IsBuiltinIndex(std::string_view name) {
  return name == "path" || name == "keyword" || name == "inode";
}

Master::Master(const MasterConfig& config) : config_(config) {}

Result<std::unique_ptr<Master>> Master::Open(const MasterConfig& config) {
  if (config.data_dir.empty()) return Status::InvalidArgument("master data directory is empty");
  if (config.node_timeout_ms <= 0) return Status::InvalidArgument("node timeout must be > 0");
  if (config.acg_threshold == 0) return Status::InvalidArgument("ACG threshold must be >= 1");
  MasterConfig c = config;
  c.clock = CompleteClock(c.clock);
  const int64_t cap = std::max<int64_t>(1, c.node_timeout_ms / 3);
  if (c.heartbeat_interval_ms == 0 || c.heartbeat_interval_ms > cap) {
    c.heartbeat_interval_ms = static_cast<uint32_t>(std::min<int64_t>(cap, UINT32_MAX));
  }
  std::unique_ptr<Master> m(new Master(c));
  MasterStoreOptions so;
  so.dir = c.data_dir;
  so.sync = c.sync;
  so.sync_interval_ms = c.sync_interval_ms;
  so.initial_map_bytes = c.initial_map_bytes;
  PROPELLER_ASSIGN_OR_RETURN(m->store_, MasterStore::Open(so));
  m->membership_ = std::make_unique<Membership>(m->store_.get(), c.node_timeout_ms, c.clock);
  return m;
}

Status Master::RegisterNode(const wire::RegisterNodeRequest& req, wire::RegisterNodeReply* reply) {
  PROPELLER_ASSIGN_OR_RETURN(const uint32_t id, membership_->Register(req.node_id, req.endpoint));
  *reply = wire::RegisterNodeReply{};
  reply->node_id = id;
  reply->heartbeat_interval_ms = config_.heartbeat_interval_ms;
  return Status::OK();
}

Status Master::Heartbeat(const wire::HeartbeatRequest& req, wire::HeartbeatReply* reply) {
  *reply = wire::HeartbeatReply{};
  if (!membership_->Heartbeat(req)) {
    reply->reregister = true;
    return Status::OK();
  }
  for (const auto& [name, type] : store_->Indexes()) {
    reply->indexes.push_back(wire::IndexDef{name, type});
  }
  SuggestMerges(req, &reply->merges, &reply->moves);
  SuggestMoves(req, &reply->moves);
  // Copies a crash left behind in a migration (the map names another node): the node drops
  // them after asking again (NodeService::DropNotOwned).
  for (const wire::AcgLoad& a : req.acgs) {
    const std::optional<AcgRecord> rec = store_->GetAcg(a.acg);
    if (rec && rec->node_id != req.node_id && rec->state == AcgState::kActive) {
      reply->not_yours.push_back(wire::AcgLocation{a.acg, rec->node_id, ""});
    }
  }
  return Status::OK();
}

void Master::SuggestMerges(const wire::HeartbeatRequest& req, std::vector<wire::AcgMerge>* out,
                           std::vector<wire::AcgLocation>* moves) {
  if (config_.merge_after_ms <= 0) return;
  const uint64_t small =
      std::min(wire::kMaxMergeFiles, std::max<uint64_t>(1, config_.acg_threshold / 4));
  const int64_t now = config_.clock.monotonic_ns();
  const int64_t wait_ns = config_.merge_after_ms * 1'000'000;
  std::map<uint64_t, uint64_t> reported;
  for (const wire::AcgLoad& a : req.acgs) reported[a.acg] = a.files;
  PlacementContext ctx;
  membership_->FillPlacement(&ctx);
  // Per app, this node's small active ACGs other than the app's current one (that one grows),
  // smallest first; and the same on other up nodes, as their own heartbeats found them.
  using Small = std::pair<uint64_t, uint64_t>;  // (files, acg)
  std::map<std::string, std::vector<Small>> by_app;
  std::map<std::string, std::vector<std::pair<Small, uint32_t>>> elsewhere;  // + node
  std::lock_guard<std::mutex> lock(merge_mu_);
  for (const auto& [acg, rec] : store_->Acgs()) {
    if (rec.node_id != req.node_id) {
      // Another node's: a candidate once its own heartbeats kept it small long enough.
      const auto since = small_since_.find(acg);
      if (since == small_since_.end() || now - since->second < wait_ns ||
          rec.state != AcgState::kActive || ctx.up_nodes.count(rec.node_id) == 0) {
        continue;
      }
      uint64_t files = rec.files;
      if (auto r = ctx.reported.find(rec.node_id); r != ctx.reported.end()) {
        const auto f = r->second->find(acg);
        if (f != r->second->end()) files = std::max(files, f->second);
      }
      if (files < small && store_->AppAcg(rec.app) != acg) {
        elsewhere[rec.app].push_back({{files, acg}, rec.node_id});
      }
      continue;
    }
    const auto r = reported.find(acg);
    const uint64_t files = std::max(rec.files, r == reported.end() ? 0 : r->second);
    const bool candidate = rec.state == AcgState::kActive && files < small &&
                           r != reported.end() && store_->AppAcg(rec.app) != acg;
    if (!candidate) {
      small_since_.erase(acg);
      continue;
    }
    const int64_t since = small_since_.emplace(acg, now).first->second;
    if (now - since >= wait_ns) by_app[rec.app].emplace_back(files, acg);
  }
  // One merge per app per heartbeat: the smallest into the next smallest, while the two
  // together stay below half the threshold (the merged ACG stays small enough to grow).
  for (auto& [app, acgs] : by_app) {
    std::sort(acgs.begin(), acgs.end());
    if (acgs.size() >= 2) {
      if (acgs[0].first + acgs[1].first <= config_.acg_threshold / 2) {
        out->push_back(wire::AcgMerge{acgs[0].second, acgs[1].second});
      }
      continue;
    }
    // The app's only small ACG here: if another node holds a small one of the app and this
    // one is the smaller (files, then id: the two nodes never send theirs to each other), it
    // moves there and that node merges the two (merges happen on one node).
    auto there = elsewhere.find(app);
    if (there == elsewhere.end() || !moves->empty()) continue;
    const auto& [partner, node] = *std::min_element(there->second.begin(), there->second.end());
    if (acgs[0] < partner && acgs[0].first + partner.first <= config_.acg_threshold / 2) {
      std::string endpoint;
      const std::map<uint32_t, std::string> nodes = store_->Nodes();
      if (auto n = nodes.find(node); n != nodes.end()) endpoint = n->second;
      moves->push_back(wire::AcgLocation{acgs[0].second, node, endpoint});
    }
  }
}

void Master::SuggestMoves(const wire::HeartbeatRequest& req,
                          std::vector<wire::AcgLocation>* out) {
  // A node asked this many times (once per heartbeat) that never moved the half gave up on
  // it (its log says why); the half stays.
  constexpr int kMaxAsks = 120;
  std::vector<uint64_t> mine;
  {
    std::lock_guard<std::mutex> lock(halves_mu_);
    std::vector<std::pair<int, uint64_t>> by_asks;
    for (const auto& [acg, half] : halves_) {
      if (half.node_id == req.node_id) by_asks.emplace_back(half.asked, acg);
    }
    // The least asked first: a half the node keeps refusing does not hold up the others.
    std::sort(by_asks.begin(), by_asks.end());
    for (const auto& [asked, acg] : by_asks) mine.push_back(acg);
  }
  if (mine.empty()) return;
  std::map<uint64_t, uint64_t> reported;
  for (const wire::AcgLoad& a : req.acgs) reported[a.acg] = a.files;
  PlacementContext ctx;
  ctx.acg_threshold = config_.acg_threshold;
  membership_->FillPlacement(&ctx);
  const std::map<uint32_t, uint64_t> loads =
      NodeLoads([&](const AcgVisitor& fn) { store_->ForEachAcg(fn); }, ctx);
  const auto self = loads.find(req.node_id);
  // The up node with the fewest files (ties to the lowest id), other than the asking one.
  uint32_t lightest = 0;
  uint64_t lightest_load = 0;
  for (const auto& [node, load] : loads) {
    if (node != req.node_id && (lightest == 0 || load < lightest_load)) {
      lightest = node;
      lightest_load = load;
    }
  }
  std::vector<uint64_t> settled;
  for (uint64_t acg : mine) {
    const std::optional<AcgRecord> rec = store_->GetAcg(acg);
    if (!rec || rec->state != AcgState::kActive || rec->node_id != req.node_id) {
      settled.push_back(acg);  // moved (by this or by hand), merged, or gone
      continue;
    }
    const auto r = reported.find(acg);
    if (r == reported.end()) continue;  // the node does not list it yet
    const uint64_t files = std::max(rec->files, r->second);
    // Moving `files` from the node to the lightest one narrows the gap between them only
    // while the lightest one, with them, stays below the node: the sum of squared loads then
    // falls with every move, so moves never chase each other around.
    const bool lighter = lightest != 0 && self != loads.end() &&
                         lightest_load + files < self->second;
    if (!lighter || !out->empty()) {
      if (!lighter) settled.push_back(acg);  // decided once: it stays
      continue;
    }
    std::string endpoint;
    const std::map<uint32_t, std::string> nodes = store_->Nodes();
    if (auto n = nodes.find(lightest); n != nodes.end()) endpoint = n->second;
    out->push_back(wire::AcgLocation{acg, lightest, endpoint});
  }
  std::lock_guard<std::mutex> lock(halves_mu_);
  for (uint64_t acg : settled) halves_.erase(acg);
  for (const wire::AcgLocation& m : *out) {
    auto it = halves_.find(m.acg);
    if (it != halves_.end() && ++it->second.asked >= kMaxAsks) {
      Log(LogLevel::kWarning, "node %u did not move split half ACG %llu to node %u after %d "
          "requests; it stays", static_cast<unsigned>(req.node_id),
          static_cast<unsigned long long>(m.acg), static_cast<unsigned>(m.node_id), kMaxAsks);
      halves_.erase(it);
    }
  }
}

namespace {

// Fills node_id and endpoint for an ACG from the committed tables, caching per request.
class Locator {
 public:
  explicit Locator(MasterStore* store) : store_(store), nodes_(store->Nodes()) {}
  void Locate(uint64_t acg, uint32_t* node_id, std::string* endpoint) {
    *node_id = 0;
    endpoint->clear();
    if (acg == 0) return;
    auto it = cache_.find(acg);
    if (it == cache_.end()) {
      std::optional<AcgRecord> rec = store_->GetAcg(acg);
      it = cache_.emplace(acg, rec.has_value() ? rec->node_id : 0).first;
    }
    *node_id = it->second;
    auto n = nodes_.find(it->second);
    if (n != nodes_.end()) *endpoint = n->second;
  }

 private:
  MasterStore* store_;
  std::map<uint32_t, std::string> nodes_;
  std::map<uint64_t, uint32_t> cache_;
};

}  // namespace

Status Master::LookupFiles(const wire::FilesRequest& req, wire::LocationsReply* reply) {
  *reply = wire::LocationsReply{};
  std::vector<uint64_t> acgs, gens;
  PROPELLER_RETURN_IF_ERROR(store_->LookupFiles(req.files, &acgs, &gens));
  Locator locator(store_.get());
  reply->locations.resize(req.files.size());
  for (size_t i = 0; i < req.files.size(); ++i) {
    wire::FileLocation& loc = reply->locations[i];
    loc.file = req.files[i];
    loc.acg = acgs[i];
    loc.generation = gens[i];
    locator.Locate(loc.acg, &loc.node_id, &loc.endpoint);
  }
  return Status::OK();
}

Status Master::AssignFiles(const wire::AssignFilesRequest& req, wire::LocationsReply* reply) {
  *reply = wire::LocationsReply{};
  PlacementContext ctx;
  ctx.acg_threshold = config_.acg_threshold;
  membership_->FillPlacement(&ctx);
  std::vector<uint64_t> acgs, gens;
  PROPELLER_RETURN_IF_ERROR(store_->Update([&](MasterStore::Txn& txn) -> Status {
    for (const wire::AssignItem& item : req.items) {
      if (!txn.HasVolume(item.file.volume)) {
        return Status::InvalidArgument("volume " + std::to_string(item.file.volume) +
                                       " is not registered");
      }
    }
    return PlaceFiles(txn, ctx, req.items, &acgs, &gens);
  }));
  Locator locator(store_.get());
  reply->locations.resize(req.items.size());
  for (size_t i = 0; i < req.items.size(); ++i) {
    wire::FileLocation& loc = reply->locations[i];
    loc.file = req.items[i].file;
    loc.acg = acgs[i];
    loc.generation = gens[i];
    locator.Locate(loc.acg, &loc.node_id, &loc.endpoint);
  }
  return Status::OK();
}

Status Master::ForgetFiles(const wire::FilesRequest& req) {
  if (req.files.empty()) return Status::OK();
  const bool checked = !req.generations.empty();
  if (checked && req.generations.size() != req.files.size()) {
    return Status::InvalidArgument("forget: " + std::to_string(req.files.size()) + " files but " +
                                   std::to_string(req.generations.size()) + " generations");
  }
  return store_->Update([&](MasterStore::Txn& txn) -> Status {
    for (size_t i = 0; i < req.files.size(); ++i) {
      std::optional<uint64_t> only;
      if (checked) only = req.generations[i];
      PROPELLER_RETURN_IF_ERROR(txn.UnmapFile(req.files[i], nullptr, only));
    }
    return Status::OK();
  });
}

Status Master::LocateAcgs(const wire::LocateAcgsRequest& req, wire::AcgLocationsReply* reply) {
  *reply = wire::AcgLocationsReply{};
  Locator locator(store_.get());
  reply->locations.resize(req.acgs.size());
  for (size_t i = 0; i < req.acgs.size(); ++i) {
    wire::AcgLocation& loc = reply->locations[i];
    loc.acg = req.acgs[i];
    locator.Locate(loc.acg, &loc.node_id, &loc.endpoint);
  }
  return Status::OK();
}

namespace {

// OK when `acg` exists and `node_id` owns it; else PermissionDenied naming the owner.
Status CheckOwner(const MasterStore::Txn& txn, uint64_t acg, uint32_t node_id) {
  const AcgRecord* rec = txn.FindAcg(acg);
  if (rec == nullptr) return Status::NotFound("no ACG " + std::to_string(acg));
  if (rec->node_id != node_id) {
    return Status::PermissionDenied("ACG " + std::to_string(acg) + " is owned by node " +
                                      std::to_string(rec->node_id) + ", not node " +
                                      std::to_string(node_id));
  }
  return Status::OK();
}

}  // namespace

Status Master::NewAcg(const wire::NewAcgRequest& req, wire::NewAcgReply* reply) {
  *reply = wire::NewAcgReply{};
  if (req.node_id == 0 || req.source == 0) {
    return Status::InvalidArgument("new ACG: node id and source ACG must be non-zero");
  }
  uint64_t acg = 0;
  PROPELLER_RETURN_IF_ERROR(store_->Update([&](MasterStore::Txn& txn) -> Status {
    PROPELLER_RETURN_IF_ERROR(CheckOwner(txn, req.source, req.node_id));
    const std::string app = txn.FindAcg(req.source)->app;  // copy: the pointer dies below
    PROPELLER_ASSIGN_OR_RETURN(acg, txn.CreateAcg(req.node_id, app));
    return Status::OK();
  }));
  reply->acg = acg;
  return Status::OK();
}

Status Master::SplitDone(const wire::SplitDoneRequest& req, wire::SplitDoneReply* reply) {
  *reply = wire::SplitDoneReply{};
  if (req.node_id == 0 || req.source == 0 || req.target == 0 || req.source == req.target) {
    return Status::InvalidArgument(
        "split report: node id and ACGs must be non-zero and the ACGs distinct");
  }
  uint64_t remapped = 0;
  PROPELLER_RETURN_IF_ERROR(store_->Update([&](MasterStore::Txn& txn) -> Status {
    remapped = 0;  // Update may run this again (map growth)
    PROPELLER_RETURN_IF_ERROR(CheckOwner(txn, req.source, req.node_id));
    PROPELLER_RETURN_IF_ERROR(CheckOwner(txn, req.target, req.node_id));
    for (const FileId& file : req.files) {
      bool moved = false;
      PROPELLER_RETURN_IF_ERROR(txn.MoveFile(file, req.source, req.target, &moved));
      remapped += moved;
    }
    if (req.merged) {
      const std::string app = txn.FindAcg(req.source)->app;
      PROPELLER_RETURN_IF_ERROR(txn.RetireAcg(req.source));
      if (txn.AppAcg(app) == req.source) {
        PROPELLER_RETURN_IF_ERROR(txn.SetAppAcg(app, req.target));
      }
    }
    return Status::OK();
  }));
  if (req.merged) {
    // A merge moves everything. The node's report lists what it held at the merge; a file the
    // master had mapped to the source whose first update had not reached the node yet is not
    // in it (the node routes that update to the target). Such files move now, so no file stays
    // mapped to a retired ACG. Rare, and the scan runs outside the write transaction.
    const std::optional<AcgRecord> left = store_->GetAcg(req.source);
    if (left && left->files > 0) {
      std::vector<FileId> files;
      PROPELLER_RETURN_IF_ERROR(store_->FilesOf(req.source, &files));
      uint64_t swept = 0;
      PROPELLER_RETURN_IF_ERROR(store_->Update([&](MasterStore::Txn& txn) -> Status {
        swept = 0;
        for (const FileId& file : files) {
          bool moved = false;
          PROPELLER_RETURN_IF_ERROR(txn.MoveFile(file, req.source, req.target, &moved));
          swept += moved;
        }
        return Status::OK();
      }));
      remapped += swept;
    }
  }
  reply->remapped = remapped;
  {
    std::lock_guard<std::mutex> lock(halves_mu_);
    // The source of a split or merge keeps routes for its moved files, and a node never moves
    // an ACG with routes (docs/architecture.md §5): a half that was split again stays.
    halves_.erase(req.source);
    // The new half may go to a lighter node (SuggestMoves, with the node's next heartbeats).
    if (!req.merged && config_.move_split_halves) {
      halves_.try_emplace(req.target, Half{req.node_id, 0});
    }
  }
  return Status::OK();
}

Status Master::MoveAcg(const wire::MoveAcgRequest& req) {
  if (req.acg == 0 || req.from_node == 0 || req.to_node == 0 || req.from_node == req.to_node) {
    return Status::InvalidArgument("move ACG: ids must be non-zero and the nodes distinct");
  }
  PROPELLER_RETURN_IF_ERROR(store_->Update([&](MasterStore::Txn& txn) -> Status {
    const AcgRecord* rec = txn.FindAcg(req.acg);
    if (rec == nullptr) return Status::NotFound("no ACG " + std::to_string(req.acg));
    if (rec->node_id == req.to_node) return Status::OK();  // asked again
    if (rec->state != AcgState::kActive) {
      return Status::InvalidArgument("ACG " + std::to_string(req.acg) + " is retired");
    }
    PROPELLER_RETURN_IF_ERROR(CheckOwner(txn, req.acg, req.from_node));
    if (txn.FindNode(req.to_node) == nullptr) {
      return Status::InvalidArgument("move ACG: no node " + std::to_string(req.to_node));
    }
    return txn.SetAcgNode(req.acg, req.to_node);
  }));
  if (config_.move_commit_hook) config_.move_commit_hook(req.acg);
  return Status::OK();
}

namespace {

// Whether two node tables give the same NodeInfos (every field NodeInfos reads).
bool SameForInfos(const std::vector<NodeState>& a, const std::vector<NodeState>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const NodeState& x = a[i];
    const NodeState& y = b[i];
    // `acgs` is replaced whole by each heartbeat, never changed in place: the pointer names
    // its content.
    if (x.node_id != y.node_id || x.endpoint != y.endpoint || x.up != y.up ||
        x.acgs != y.acgs || x.free_disk_bytes != y.free_disk_bytes || x.load != y.load ||
        x.last_heartbeat_wall_ns != y.last_heartbeat_wall_ns) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::vector<wire::NodeInfo> Master::NodeInfos() {
  const std::vector<NodeState> nodes = membership_->Nodes();
  {
    // The pass below visits every ACG, and every search asks for this (before this cache the
    // master spent ~150 µs of CPU per search at 1,000 ACGs, request handling included): reuse
    // the last answer while neither the node table nor the ACG table changed. A commit racing
    // with this check is no different from one that lands just after the call.
    std::lock_guard<std::mutex> lock(infos_mu_);
    if (infos_cache_.valid && infos_cache_.store_version == store_->mirror_version() &&
        SameForInfos(infos_cache_.nodes, nodes)) {
      return infos_cache_.infos;
    }
  }
  PlacementContext ctx;
  for (const NodeState& n : nodes) {
    ctx.up_nodes.insert(n.node_id);  // loads of every node, up or down, for display
    if (n.acgs != nullptr && !n.acgs->empty()) ctx.reported.emplace(n.node_id, n.acgs);
  }
  // The committed tables suffice for display; a pass inside Update would wait for writers.
  // Every search asks for this (Client::Search's targets): one pass, nothing copied.
  std::map<uint32_t, uint64_t> acg_counts;
  uint64_t store_version = 0;
  std::map<uint32_t, uint64_t> loads = NodeLoads(
      [&](const AcgVisitor& fn) {
        store_version = store_->ForEachAcg([&](uint64_t acg, const AcgRecord& rec) {
          ++acg_counts[rec.node_id];
          fn(acg, rec);
        });
      },
      ctx);
  std::vector<wire::NodeInfo> out;
  out.reserve(nodes.size());
  for (const NodeState& n : nodes) {
    wire::NodeInfo info;
    info.node_id = n.node_id;
    info.endpoint = n.endpoint;
    info.up = n.up;
    info.acgs = acg_counts[n.node_id];
    info.files = loads[n.node_id];
    info.free_disk_bytes = n.free_disk_bytes;
    info.load = n.load;
    info.last_heartbeat_ns = n.last_heartbeat_wall_ns;
    out.push_back(std::move(info));
  }
  std::lock_guard<std::mutex> lock(infos_mu_);
  infos_cache_.valid = true;
  infos_cache_.store_version = store_version;
  infos_cache_.nodes = nodes;
  infos_cache_.infos = out;
  return out;
}

Status Master::ListNodes(wire::NodesReply* reply) {
  *reply = wire::NodesReply{};
  reply->nodes = NodeInfos();
  return Status::OK();
}

Status Master::CreateIndex(const wire::IndexDef& req) {
  const std::string why = CheckNewIndexName(req.name);
  if (!why.empty()) return Status::InvalidArgument("bad index name: " + why);
  if (req.type == IndexType::kKdTree) {
    // The K-D tree is the built-in `inode` index's; a user attribute has one value, which a
    // btree index ranges over (a user kdtree index was offered once and never fed).
    return Status::InvalidArgument("a user index is btree (ranges, prefixes) or hash "
                                   "(equality); kdtree is only the built-in inode index's");
  }
  if (req.type != IndexType::kBTree && req.type != IndexType::kHash) {
    return Status::InvalidArgument("unknown index type");
  }
  if (IsBuiltinIndex(req.name)) {
    return Status::AlreadyExists("'" + req.name + "' is a built-in index");
  }
  return store_->Update([&](MasterStore::Txn& txn) -> Status {
    if (txn.FindIndex(req.name).has_value()) {
      return Status::AlreadyExists("index '" + req.name + "' exists");
    }
    return txn.PutIndex(req.name, req.type);
  });
}

Status Master::DropIndex(const wire::IndexName& req) {
  if (IsBuiltinIndex(req.name)) {
    return Status::InvalidArgument("'" + req.name + "' is a built-in index and cannot be dropped");
  }
  return store_->Update([&](MasterStore::Txn& txn) -> Status {
    if (!txn.FindIndex(req.name).has_value()) {
      return Status::NotFound("no index named '" + req.name + "'");
    }
    return txn.DeleteIndex(req.name);
  });
}

Status Master::ListIndexes(wire::IndexesReply* reply) {
  *reply = wire::IndexesReply{};
  for (const auto& [name, type] : store_->Indexes()) {
    reply->indexes.push_back(wire::IndexDef{name, type});
  }
  return Status::OK();
}

Status Master::ClusterStatus(wire::ClusterStatusReply* reply) {
  *reply = wire::ClusterStatusReply{};
  reply->nodes = NodeInfos();
  for (const auto& [acg, rec] : store_->Acgs()) reply->acgs += rec.state == AcgState::kActive;
  reply->files = store_->FileCount();
  for (const auto& [name, type] : store_->Indexes()) {
    reply->indexes.push_back(wire::IndexDef{name, type});
  }
  for (const auto& [id, root] : store_->Volumes()) {
    reply->volumes.push_back(wire::VolumeInfo{id, root});
  }
  return Status::OK();
}

Status Master::RegisterVolume(const wire::RegisterVolumeRequest& req, wire::VolumeInfo* reply) {
  *reply = wire::VolumeInfo{};
  const std::string why = ValidatePath(req.root);
  if (!why.empty()) return Status::InvalidArgument("bad volume root '" + req.root + "': " + why);
  uint32_t id = 0;
  PROPELLER_RETURN_IF_ERROR(store_->Update([&](MasterStore::Txn& txn) -> Status {
    id = txn.FindVolume(req.root);
    if (id != 0) return Status::OK();
    // Volumes never overlap: a file has one volume and one path in it, so a search never
    // prints a file twice and its identity does not depend on how it was reached.
    for (const auto& [other, root] : store_->Volumes()) {
      const bool inside = PathInScope(req.root, root);
      if (inside || PathInScope(root, req.root)) {
        return Status::InvalidArgument(req.root + (inside ? " is inside" : " holds") +
                                       " volume " + std::to_string(other) + " (" + root +
                                       "); volumes cannot overlap: import or mount " + root +
                                       " instead");
      }
    }
    PROPELLER_ASSIGN_OR_RETURN(id, txn.AddVolume(req.root));
    return Status::OK();
  }));
  reply->volume = id;
  reply->root = req.root;
  return Status::OK();
}

Status Master::RemoveVolume(const wire::VolumeInfo& req) {
  uint64_t unmapped = 0;
  PROPELLER_RETURN_IF_ERROR(store_->Update([&](MasterStore::Txn& txn) -> Status {
    const uint32_t id = txn.FindVolume(req.root);
    if (id == 0 || id != req.volume) {
      return Status::NotFound("no volume " + std::to_string(req.volume) + " with root " +
                              req.root);
    }
    return txn.RemoveVolume(id, &unmapped);
  }));
  Log(LogLevel::kInfo, "volume %u (%s) removed: %llu file mappings dropped", req.volume,
      req.root.c_str(), static_cast<unsigned long long>(unmapped));
  return Status::OK();
}

Status Master::ListVolumes(wire::VolumesReply* reply) {
  *reply = wire::VolumesReply{};
  for (const auto& [id, root] : store_->Volumes()) {
    reply->volumes.push_back(wire::VolumeInfo{id, root});
  }
  return Status::OK();
}

Status Master::IndexHolders(const wire::IndexName& req, wire::NodesReply* reply) {
  *reply = wire::NodesReply{};
  if (!IsBuiltinIndex(req.name)) {
    const std::map<std::string, IndexType> catalogue = store_->Indexes();
    if (catalogue.count(req.name) == 0) {
      return Status::NotFound("no index named '" + req.name + "'");
    }
  }
  for (wire::NodeInfo& n : NodeInfos()) {
    if (n.up) reply->nodes.push_back(std::move(n));
  }
  return Status::OK();
}

}  // namespace propeller::master
