#include "indexnode/server/node_service.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <new>
#include <thread>
#include <unordered_map>
#include <utility>

#include "common/crc32c.h"
#include "common/env.h"
#include "common/logging.h"
#include "schemas/wire_call.h"

namespace propeller {
namespace {

using wire::MsgType;

std::string ErrorReply(const Status& st) { return wire::EncodeReply(st, {}); }

std::string AcgList(const std::vector<wire::AcgLocation>& locs) {
  std::string out;
  for (size_t i = 0; i < locs.size() && i < 8; ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(locs[i].acg);
    out += locs[i].node_id == 0 ? " (unknown)" : " (node " + std::to_string(locs[i].node_id) + ")";
  }
  if (locs.size() > 8) out += ", ...";
  return out;
}

std::string RedirectReply(uint32_t self, const std::vector<wire::AcgLocation>& elsewhere) {
  Status st = Status::Redirect("ACG " + AcgList(elsewhere) + " not owned by node " +
                               std::to_string(self));
  return wire::EncodeReply(st, {}, elsewhere);
}

}  // namespace

NodeService::NodeService(const NodeServiceOptions& options)
    : options_(options),
      env_(options.env != nullptr ? options.env : Env::Default()),
      engine_(options.engine),
      volume_roots_(options.master, options.master_timeout_ms),
      node_id_(options.node_id) {
  if (!options_.scratch_dir.empty()) {
    // Copies in transit that a crash left behind: a move does not outlive its process (an
    // adopted copy was renamed into the engine's directory before the adoption's commit).
    Status removed = env_->RemoveRecursively(options_.scratch_dir);
    if (!removed.ok()) {
      Log(LogLevel::kWarning, "removing copies in transit: %s", removed.ToString().c_str());
    }
  }
  for (const AcgInfo& info : engine_->ListAcgs()) owned_.insert(info.id);
  MutexLock lock(&index_mu_);
  RefreshIndexListLocked();
}

NodeService::~NodeService() = default;

Status NodeService::LocateAtMaster(const std::vector<uint64_t>& acgs,
                                   std::vector<wire::AcgLocation>* out) {
  wire::LocateAcgsRequest req;
  req.acgs = acgs;
  wire::AcgLocationsReply rep;
  rpc::CallOptions call;
  call.timeout_ms = options_.master_timeout_ms;
  call.idempotent = true;
  call.retries = 1;
  master_lookups_.fetch_add(1);
  PROPELLER_RETURN_IF_ERROR(
      wire::WireCall(*options_.master, MsgType::kLocateAcgs, req, &rep, call));
  if (rep.locations.size() != acgs.size()) {
    return Status::Corruption("the master answered " + std::to_string(rep.locations.size()) +
                              " ACG locations for " + std::to_string(acgs.size()) + " ACGs");
  }
  // In request order by contract; the reply is never trusted to name another ACG.
  for (size_t i = 0; i < acgs.size(); ++i) rep.locations[i].acg = acgs[i];
  *out = std::move(rep.locations);
  return Status::OK();
}

void NodeService::ConfirmOwnership() {
  const uint32_t self = node_id_.load();
  if (self == 0 || options_.master == nullptr) return;
  std::vector<uint64_t> acgs;
  for (const AcgInfo& info : engine_->ListAcgs()) acgs.push_back(info.id);
  if (acgs.empty()) return;
  std::vector<wire::AcgLocation> locations;
  Status st = LocateAtMaster(acgs, &locations);
  if (!st.ok()) {
    Log(LogLevel::kWarning, "cannot confirm with the master which of the %zu ACGs on disk are "
        "still this node's (%s); serving them all", acgs.size(), st.ToString().c_str());
    return;
  }
  size_t elsewhere = 0;
  WriterLock lock(&owned_mu_);
  for (const wire::AcgLocation& loc : locations) {
    if (loc.node_id != 0 && loc.node_id != self) {
      owned_.erase(loc.acg);
      ++elsewhere;
    }
  }
  if (elsewhere > 0) {
    Log(LogLevel::kWarning, "%zu of the ACGs on disk belong to other nodes now (left behind by "
        "an interrupted migration); not serving them", elsewhere);
  }
}

std::string NodeService::Handle(std::string_view request, const rpc::PeerInfo& peer,
                                rpc::ReplyStream& out) {
  requests_.fetch_add(1);
  // Nothing below throws on purpose; this only guards against std::bad_alloc and the like
  // turning a hostile request into a dead daemon (rpc::Handler must not throw).
  try {
    wire::RequestEnvelope env;
    Status st = wire::DecodeRequest(request, &env);
    if (!st.ok()) {
      bad_requests_.fetch_add(1);
      return ErrorReply(st);
    }
    const wire::Caller caller = wire::IdentifyCaller(peer, options_.access);
    st = wire::Authorize(caller, env.type);
    if (!st.ok()) return ErrorReply(st);
    CallerAccess access(caller, engine_, &volume_roots_);
    const auto start = std::chrono::steady_clock::now();
    std::string reply = HandleRequest(env, access, out);
    metrics_.Record(env.type, reply, start);
    return reply;
  } catch (const std::bad_alloc&) {
    return ErrorReply(Status::ResourceExhausted("out of memory handling the request"));
  } catch (const std::exception& e) {
    return ErrorReply(Status::Internal(std::string("unexpected exception: ") + e.what()));
  } catch (...) {
    return ErrorReply(Status::Internal("unexpected exception"));
  }
}

std::string NodeService::HandleRequest(const wire::RequestEnvelope& env, CallerAccess& caller,
                                       rpc::ReplyStream& out) {
  switch (env.type) {
    case MsgType::kApply: return HandleApply(env.body, caller);
    case MsgType::kSearch: return HandleSearch(env.body, caller, out);
    case MsgType::kWatch: return HandleWatch(env.body, caller, out);
    case MsgType::kGetRecord: return HandleGetRecord(env.body, caller);
    case MsgType::kNodeStatus: return HandleNodeStatus(env.body);
    case MsgType::kListEdges: return HandleListEdges(env.body, caller);
    case MsgType::kCreateIndex: return HandleCreateIndex(env.body);
    case MsgType::kDropIndex: return HandleDropIndex(env.body);
    case MsgType::kListIndexes: return HandleListIndexes(env.body);
    case MsgType::kPing: return HandlePing(env.body);
    case MsgType::kMigrateAcg: return HandleMigrate(env.body);
    case MsgType::kAdoptAcg: return HandleAdopt(env.body);
    case MsgType::kReleaseAcg: return HandleRelease(env.body);
    default: break;
  }
  return ErrorReply(Status::NotSupported(
      std::string("an index node does not serve message type ") +
      std::to_string(static_cast<unsigned>(env.type)) + " (" + wire::MsgTypeName(env.type) + ")"));
}

std::string NodeService::BadRequest(const char* what, const Status& st) {
  bad_requests_.fetch_add(1);
  return ErrorReply(st.WithContext(std::string("bad ") + what + " request"));
}

// ---- ownership ------------------------------------------------------------------------------

Result<NodeService::Ownership> NodeService::CheckOwnership(std::vector<uint64_t> acgs) {
  std::sort(acgs.begin(), acgs.end());
  acgs.erase(std::unique(acgs.begin(), acgs.end()), acgs.end());
  std::vector<uint64_t> unknown;
  {
    ReaderLock lock(&owned_mu_);
    for (uint64_t acg : acgs) {
      if (owned_.count(acg) == 0) unknown.push_back(acg);
    }
  }
  Ownership result;
  if (unknown.empty()) return result;

  const uint32_t self = node_id_.load();
  if (options_.master == nullptr) {
    for (uint64_t acg : unknown) result.elsewhere.push_back(wire::AcgLocation{acg, 0, ""});
    return result;
  }
  std::vector<wire::AcgLocation> locations;
  Status st = LocateAtMaster(unknown, &locations);
  if (!st.ok()) {
    return Status::Unavailable("cannot confirm the owner of ACG " + std::to_string(unknown[0]) +
                               " with the master (" + st.ToString() + "); retry later");
  }
  std::vector<uint64_t> confirmed;
  for (wire::AcgLocation& loc : locations) {
    if (self != 0 && loc.node_id == self) {
      confirmed.push_back(loc.acg);
    } else {
      result.elsewhere.push_back(std::move(loc));
    }
  }
  MarkOwned(confirmed);
  return result;
}

void NodeService::MarkOwned(const std::vector<uint64_t>& acgs) {
  if (acgs.empty()) return;
  WriterLock lock(&owned_mu_);
  owned_.insert(acgs.begin(), acgs.end());
}

// ---- handlers -------------------------------------------------------------------------------

std::string NodeService::HandleApply(std::string_view body, CallerAccess& caller) {
  wire::ApplyRequest req;
  Status st = wire::Decode(body, &req);
  if (!st.ok()) return BadRequest("apply", st);
  if (req.updates.empty()) return wire::EncodeOkReply(wire::Empty{});
  std::vector<uint64_t> acgs;
  acgs.reserve(req.updates.size());
  for (const Update& u : req.updates) {
    if (u.acg == 0) return ErrorReply(Status::InvalidArgument("apply: update with ACG 0"));
    if (acgs.empty() || acgs.back() != u.acg) acgs.push_back(u.acg);
  }
  Result<Ownership> own = CheckOwnership(std::move(acgs));
  if (!own.ok()) return ErrorReply(own.status());
  if (!own->elsewhere.empty()) {
    redirects_.fetch_add(1);
    return RedirectReply(node_id_.load(), own->elsewhere);
  }
  st = caller.CheckUpdates(req.updates);
  if (!st.ok()) return ErrorReply(st);
  st = engine_->Apply(req.updates);
  if (st.code() == StatusCode::kRedirect) {
    // An ACG of the batch, or one its routes lead to, moved to another node meanwhile: the
    // client asks the master again (for the ACG, and for the files' ACGs).
    redirects_.fetch_add(1);
    std::vector<wire::AcgLocation> moved;
    for (const Update& u : req.updates) {
      const uint64_t to = engine_->MovedTo(u.acg);
      if (to != 0 && (moved.empty() || moved.back().acg != u.acg)) {
        moved.push_back(wire::AcgLocation{u.acg, static_cast<uint32_t>(to), ""});
      }
    }
    return wire::EncodeReply(st, {}, moved);
  }
  if (!st.ok()) return ErrorReply(st);
  metrics_.updates.Add(req.updates.size());
  metrics_.update_batches.Add();
  return wire::EncodeOkReply(wire::Empty{});
}


std::string NodeService::HandleGetRecord(std::string_view body, CallerAccess& caller) {
  wire::GetRecordRequest req;
  Status st = wire::Decode(body, &req);
  if (!st.ok()) return BadRequest("get-record", st);
  if (req.acg == 0) return ErrorReply(Status::InvalidArgument("get-record: ACG 0"));
  Result<Ownership> own = CheckOwnership({req.acg});
  if (!own.ok()) return ErrorReply(own.status());
  if (!own->elsewhere.empty()) {
    redirects_.fetch_add(1);
    return RedirectReply(node_id_.load(), own->elsewhere);
  }
  Result<FileRecord> rec = engine_->Get(req.acg, req.file);
  if (!rec.ok() && rec.status().code() == StatusCode::kRedirect) {
    redirects_.fetch_add(1);
    return ErrorReply(rec.status());
  }
  // A record the caller may not see is answered as an absent one.
  if (rec.ok() && !caller.Restrict(&rec.value())) rec = Status::NotFound("hidden");
  if (Status v = caller.volume_error(); !v.ok()) return ErrorReply(v);
  if (!rec.ok()) {
    if (rec.status().IsNotFound()) {
      return ErrorReply(Status::NotFound("no file " + std::to_string(req.file.volume) + ":" +
                                         std::to_string(req.file.ino) + " in ACG " +
                                         std::to_string(req.acg)));
    }
    return ErrorReply(rec.status());
  }
  wire::RecordReply reply;
  reply.record = std::move(rec).value();
  return wire::EncodeOkReply(reply);
}

// The captured ACG edges of one ACG or of every ACG here (committed first: Engine::ListEdges).
std::string NodeService::HandleListEdges(std::string_view body, CallerAccess& caller) {
  wire::ListEdgesRequest req;
  Status st = wire::Decode(body, &req);
  if (!st.ok()) return BadRequest("list-edges", st);
  std::vector<uint64_t> acgs;
  if (req.acg != 0) {
    acgs.push_back(req.acg);
  } else {
    for (const AcgInfo& a : engine_->ListAcgs()) acgs.push_back(a.id);
  }
  wire::EdgesReply reply;
  std::vector<StoredEdge> edges;
  for (uint64_t acg : acgs) {
    edges.clear();
    st = engine_->ListEdges(acg, &edges);
    if (st.code() == StatusCode::kNotFound && req.acg == 0) continue;  // gone meanwhile
    if (!st.ok()) return ErrorReply(st);
    // A filtered caller gets the edges between files it may see (both ends).
    std::unordered_map<FileId, bool, FileIdHash> visible;
    auto sees = [&](const FileId& id) {
      auto it = visible.find(id);
      if (it != visible.end()) return it->second;
      Result<FileRecord> rec = engine_->Get(acg, id);
      const bool yes = rec.ok() && caller.Restrict(&rec.value());
      visible.emplace(id, yes);
      return yes;
    };
    for (const StoredEdge& e : edges) {
      if (caller.filtered() && (!sees(e.src) || !sees(e.dst))) continue;
      if (reply.edges.size() >= wire::kMaxEdgesPerReply) {
        reply.truncated = true;
        break;
      }
      reply.edges.push_back(
          wire::WireEdge{acg, e.src, e.dst, e.weight, e.src_generation, e.dst_generation});
    }
  }
  if (Status v = caller.volume_error(); !v.ok()) return ErrorReply(v);
  return wire::EncodeOkReply(reply);
}

std::string NodeService::HandleNodeStatus(std::string_view body) {
  wire::Empty empty;
  Status st = wire::Decode(body, &empty);
  if (!st.ok()) return BadRequest("node-status", st);
  const EngineStats es = engine_->Stats();
  wire::NodeStatusReply reply;
  reply.node_id = node_id_.load();
  reply.acgs = es.acgs;
  reply.files = es.files;
  reply.cached_updates = es.cached_updates;
  reply.wal_bytes = es.wal_bytes;
  reply.disk_bytes = es.disk_bytes;
  reply.index_memory_bytes = es.index_memory_bytes;
  reply.commit_error = es.commit_error;
  reply.failing_since_ns = es.commit_failing_since_ns;
  for (const auto& [acg, why] : options_.engine->DamagedAcgs()) {
    reply.damaged_acgs.push_back("ACG " + std::to_string(acg) + ": " + why);
  }
  for (const AcgInfo& a : engine_->ListAcgs()) reply.acg_list.push_back({a.id, a.files});
  return wire::EncodeOkReply(reply);
}

std::string NodeService::HandleCreateIndex(std::string_view body) {
  wire::IndexDef def;
  Status st = wire::Decode(body, &def);
  if (!st.ok()) return BadRequest("create-index", st);
  if (def.type != IndexType::kBTree && def.type != IndexType::kHash &&
      def.type != IndexType::kKdTree) {
    return ErrorReply(Status::InvalidArgument(
        "create-index: unknown index type " + std::to_string(static_cast<unsigned>(def.type))));
  }
  MutexLock lock(&index_mu_);
  st = engine_->CreateIndex(def.name, def.type);
  if (st.code() == StatusCode::kAlreadyExists) {
    for (const IndexInfo& info : engine_->ListIndexes()) {
      if (info.name != def.name || info.builtin) continue;
      if (info.type == def.type) {
        st = Status::OK();  // idempotent: the client re-sends creates after the master's ack
      } else {
        st = Status::AlreadyExists("index '" + def.name + "' exists with type " +
                                   IndexTypeName(info.type));
      }
    }
  }
  if (!st.ok()) return ErrorReply(st);
  index_changed_[def.name] = index_seq_.fetch_add(1) + 1;
  RefreshIndexListLocked();
  return wire::EncodeOkReply(wire::Empty{});
}

std::string NodeService::HandleDropIndex(std::string_view body) {
  wire::IndexName name;
  Status st = wire::Decode(body, &name);
  if (!st.ok()) return BadRequest("drop-index", st);
  MutexLock lock(&index_mu_);
  st = engine_->DropIndex(name.name);
  if (!st.ok()) return ErrorReply(st);
  index_changed_[name.name] = index_seq_.fetch_add(1) + 1;
  RefreshIndexListLocked();
  return wire::EncodeOkReply(wire::Empty{});
}

std::string NodeService::HandleListIndexes(std::string_view body) {
  wire::Empty empty;
  Status st = wire::Decode(body, &empty);
  if (!st.ok()) return BadRequest("list-indexes", st);
  wire::IndexesReply reply;
  reply.indexes = UserIndexes();
  return wire::EncodeOkReply(reply);
}

std::string NodeService::HandlePing(std::string_view body) {
  wire::Ping ping;
  Status st = wire::Decode(body, &ping);
  if (!st.ok()) return BadRequest("ping", st);
  return wire::EncodeOkReply(ping);
}

// ---- migration (docs/architecture.md §5) ----------------------------------------------------

namespace {

constexpr int64_t kPeerTimeoutMs = 15'000;  // per copy part (8 MiB) and per adoption
constexpr int64_t kPeerPingMs = 2'000;      // the destination answers before a freeze

std::string CopyPath(const std::string& dir, const char* what, uint64_t acg, uint32_t node) {
  return JoinPath(dir, std::string(what) + "-" + std::to_string(acg) + "-" +
                           std::to_string(node) + ".mdb");
}

}  // namespace

std::string NodeService::HandleMigrate(std::string_view body) {
  wire::MigrateAcgRequest req;
  Status st = wire::Decode(body, &req);
  if (!st.ok()) return BadRequest("migrate-acg", st);
  wire::MigrateAcgReply reply;
  st = Migrate(req, &reply);
  if (!st.ok()) return ErrorReply(st.WithContext("moving ACG " + std::to_string(req.acg)));
  return wire::EncodeOkReply(reply);
}

uint32_t NodeService::MasterOwnerOf(uint64_t acg) {
  std::vector<wire::AcgLocation> locations;
  if (!LocateAtMaster({acg}, &locations).ok()) return 0;
  return locations[0].node_id;
}

uint32_t NodeService::OwnerAfterFailure(uint64_t acg, std::chrono::milliseconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (int attempt = 0;; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::seconds(1));
    const uint32_t owner = MasterOwnerOf(acg);
    if (owner != 0) return owner;
    if (std::chrono::steady_clock::now() >= deadline) return 0;
  }
}

Status NodeService::Migrate(const wire::MigrateAcgRequest& req, wire::MigrateAcgReply* reply) {
  const uint32_t self = node_id_.load();
  if (options_.master == nullptr || !options_.connect_peer || options_.scratch_dir.empty()) {
    return Status::NotSupported("this node is not set up to move ACGs");
  }
  if (req.acg == 0 || req.to_node == 0) return Status::InvalidArgument("ACG and node ids are 0");
  if (self == 0) return Status::Unavailable("not registered with the master yet");
  if (req.to_node == self) return Status::InvalidArgument("the ACG is on that node already");
  MutexLock one_at_a_time(&migrate_mu_);
  uint64_t files = 0;
  bool here = false;
  for (const AcgInfo& a : engine_->ListAcgs()) here = here || a.id == req.acg;
  if (!here) return Status::NotFound("no ACG " + std::to_string(req.acg) + " on this node");
  // The destination's endpoint, from the master.
  wire::NodesReply nodes;
  rpc::CallOptions call;
  call.timeout_ms = options_.master_timeout_ms;
  call.idempotent = true;
  call.retries = 1;
  PROPELLER_RETURN_IF_ERROR(
      wire::WireCall(*options_.master, MsgType::kListNodes, wire::Empty{}, &nodes, call));
  std::string endpoint;
  for (const wire::NodeInfo& n : nodes.nodes) {
    if (n.node_id == req.to_node && n.up) endpoint = n.endpoint;
  }
  if (endpoint.empty()) {
    return Status::InvalidArgument("node " + std::to_string(req.to_node) + " is not up");
  }
  PROPELLER_ASSIGN_OR_RETURN(std::unique_ptr<rpc::Channel> peer, options_.connect_peer(endpoint));
  {
    // Reachable (and, with CURVE, admitted) before anything is frozen: a peer that never
    // answers would otherwise stop the ACG's updates for a whole part timeout.
    wire::Ping pong;
    rpc::CallOptions pc;
    pc.timeout_ms = kPeerPingMs;
    pc.idempotent = true;
    pc.retries = 1;
    Status st = wire::WireCall(*peer, MsgType::kPing, wire::Ping{"migrate"}, &pong, pc);
    if (!st.ok()) {
      return Status::Unavailable("node " + std::to_string(req.to_node) + " at " + endpoint +
                                 " does not answer (" + st.ToString() + "); nothing was moved");
    }
  }

  // Freeze and copy: updates to the ACG wait from here until the drop (or the thaw).
  const auto t0 = std::chrono::steady_clock::now();
  PROPELLER_RETURN_IF_ERROR(env_->CreateDirs(options_.scratch_dir));  // 0700
  const std::string copy = CopyPath(options_.scratch_dir, "out", req.acg, req.to_node);
  PROPELLER_RETURN_IF_ERROR(engine_->FreezeAndCopyAcg(req.acg, copy));
  for (const AcgInfo& a : engine_->ListAcgs()) {
    if (a.id == req.acg) files = a.files;  // committed by the freeze: what the copy holds
  }
  if (options_.migrate_step_hook) options_.migrate_step_hook(3);
  struct RemoveCopy {
    Env* env;
    std::string path;
    ~RemoveCopy() {
      Status s = env->RemoveFile(path);
      if (!s.ok() && !s.IsNotFound()) {
        Log(LogLevel::kWarning, "removing a sent copy: %s", s.ToString().c_str());
      }
    }
  } remove_copy{env_, copy};

  // Send it. Any failure: the master's map decides whether the move happened.
  Status sent = [&]() -> Status {
    PROPELLER_ASSIGN_OR_RETURN(const uint64_t total, env_->GetFileSize(copy));
    PROPELLER_ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> in, env_->NewSequentialFile(copy));
    reply->bytes = total;
    uint32_t crc = 0;
    std::string block;
    wire::AdoptAcgChunk part;
    part.acg = req.acg;
    part.from_node = self;
    part.total_bytes = total;
    uint64_t offset = 0;
    do {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(wire::kAdoptChunkBytes,
                                                              total - offset));
      part.offset = offset;
      part.data.clear();
      while (part.data.size() < n) {
        PROPELLER_RETURN_IF_ERROR(in->Read(n - part.data.size(), &block));
        if (block.empty()) return Status::IOError("reading " + copy + ": it ended early");
        part.data += block;
      }
      crc = Crc32cExtend(crc, part.data.data(), part.data.size());
      offset += n;
      part.crc = offset == total ? Crc32cMask(crc) : 0;
      rpc::CallOptions pc;
      pc.timeout_ms = kPeerTimeoutMs;
      pc.idempotent = false;
      wire::Empty ok;
      PROPELLER_RETURN_IF_ERROR(wire::WireCall(*peer, MsgType::kAdoptAcg, part, &ok, pc));
    } while (offset < total);
    return Status::OK();
  }();
  if (!sent.ok()) {
    const uint32_t owner =
        OwnerAfterFailure(req.acg, std::chrono::milliseconds(options_.owner_wait_ms));
    if (owner != req.to_node) {
      if (owner == 0) {
        // Neither side can be told apart: keep the ACG frozen rather than risk two owners,
        // until the master answers (ResolveStalledMoves, with the heartbeats).
        Log(LogLevel::kError,
            "moving ACG %llu to node %u: %s; the master cannot say who owns it now, so its "
            "updates stay stopped here until it can (asked with every heartbeat)",
            static_cast<unsigned long long>(req.acg), static_cast<unsigned>(req.to_node),
            sent.ToString().c_str());
        MutexLock lock(&adopted_mu_);
        stalled_out_[req.acg] = req.to_node;
        return sent;
      }
      Status thaw = engine_->ThawAcg(req.acg);
      if (!thaw.ok()) Log(LogLevel::kError, "thawing ACG: %s", thaw.ToString().c_str());
      return sent;
    }
    // The destination adopted it and the master names it: the move happened after all.
  }
  // The destination owns it now. Drop it here (updates waiting for it get a Redirect).
  if (options_.migrate_step_hook) options_.migrate_step_hook(1);
  {
    WriterLock lock(&owned_mu_);
    owned_.erase(req.acg);
  }
  PROPELLER_RETURN_IF_ERROR(engine_->DropMovedAcg(req.acg, req.to_node));
  if (options_.migrate_step_hook) options_.migrate_step_hook(5);
  reply->files = files;
  reply->micros = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                            std::chrono::steady_clock::now() - t0)
                                            .count());
  // Let the destination's updates go (its copy and this one were identical until now).
  wire::ReleaseAcgRequest release{req.acg};
  rpc::CallOptions rc;
  rc.timeout_ms = kPeerTimeoutMs;
  rc.idempotent = true;
  rc.retries = 3;
  wire::Empty ok;
  Status released = wire::WireCall(*peer, MsgType::kReleaseAcg, release, &ok, rc);
  if (!released.ok()) {
    Log(LogLevel::kWarning, "ACG %llu moved to node %u, but releasing it there failed: %s",
        static_cast<unsigned long long>(req.acg), static_cast<unsigned>(req.to_node),
        released.ToString().c_str());
  }
  Log(LogLevel::kInfo, "moved ACG %llu (%llu files, %llu bytes) to node %u in %.3f s",
      static_cast<unsigned long long>(req.acg), static_cast<unsigned long long>(files),
      static_cast<unsigned long long>(reply->bytes), static_cast<unsigned>(req.to_node),
      static_cast<double>(reply->micros) / 1e6);
  return Status::OK();
}

std::string NodeService::HandleAdopt(std::string_view body) {
  wire::AdoptAcgChunk part;
  Status st = wire::Decode(body, &part);
  if (!st.ok()) return BadRequest("adopt-acg", st);
  const uint32_t self = node_id_.load();
  if (options_.master == nullptr || options_.scratch_dir.empty()) {
    return ErrorReply(Status::NotSupported("this node is not set up to adopt ACGs"));
  }
  if (part.acg == 0 || part.from_node == 0 || self == 0 || part.from_node == self ||
      part.offset + part.data.size() > part.total_bytes) {
    return ErrorReply(Status::InvalidArgument("adopt-acg: bad part"));
  }
  MutexLock one_at_a_time(&adopt_mu_);
  if (Status made = env_->CreateDirs(options_.scratch_dir); !made.ok()) return ErrorReply(made);
  const std::string path = CopyPath(options_.scratch_dir, "in", part.acg, part.from_node);
  const bool last = part.offset + part.data.size() == part.total_bytes;
  {
    uint64_t have = 0;
    if (part.offset != 0 && env_->FileExists(path)) {
      Result<uint64_t> size = env_->GetFileSize(path);
      if (!size.ok()) return ErrorReply(size.status().WithContext("the copy so far"));
      have = *size;
    }
    if (part.offset != 0 && have != part.offset) {
      return ErrorReply(Status::InvalidArgument(
          "adopt-acg: part at " + std::to_string(part.offset) + " but " + std::to_string(have) +
          " bytes arrived; start again"));
    }
    // Created 0600, never through a symbolic link (docs/security.md). The last part syncs
    // the whole file before the engine takes it (the engine's rename keeps it durable).
    Result<std::unique_ptr<WritableFile>> out =
        part.offset == 0 ? env_->NewWritableFile(path) : env_->NewAppendableFile(path);
    Status written = out.ok() ? (*out)->Append(part.data) : out.status();
    if (written.ok() && last) written = (*out)->Sync();
    if (out.ok()) {
      Status closed = (*out)->Close();
      if (written.ok()) written = closed;
    }
    if (!written.ok()) {
      // Nothing half-written stays behind: the source starts again from the first part.
      (void)env_->RemoveFile(path);
      return ErrorReply(written.WithContext("writing the copy of ACG " +
                                            std::to_string(part.acg)));
    }
  }
  if (!last) return wire::EncodeOkReply(wire::Empty{});

  // The last part: check, adopt (frozen until the source released it), flip the map.
  auto fail = [&](const Status& s) {
    Status removed = env_->RemoveFile(path);
    if (!removed.ok() && !removed.IsNotFound()) {
      Log(LogLevel::kWarning, "removing a refused copy: %s", removed.ToString().c_str());
    }
    return ErrorReply(s.WithContext("adopting ACG " + std::to_string(part.acg)));
  };
  {
    // Streamed: a copy may be far larger than memory allows to hold at once.
    Result<std::unique_ptr<SequentialFile>> in = env_->NewSequentialFile(path);
    if (!in.ok()) return fail(in.status());
    std::string block;
    uint32_t crc = 0;
    uint64_t size = 0;
    for (;;) {
      if (Status read = (*in)->Read(1u << 20, &block); !read.ok()) return fail(read);
      if (block.empty()) break;
      crc = Crc32cExtend(crc, block.data(), block.size());
      size += block.size();
    }
    if (size != part.total_bytes || Crc32cMask(crc) != part.crc) {
      return fail(Status::Corruption("the copy's checksum does not match"));
    }
  }
  st = engine_->AdoptAcg(part.acg, path, /*frozen=*/true);
  if (!st.ok()) return fail(st);
  if (options_.migrate_step_hook) options_.migrate_step_hook(2);
  wire::MoveAcgRequest move{part.acg, part.from_node, self};
  wire::Empty ok;
  rpc::CallOptions call;
  call.timeout_ms = options_.master_timeout_ms;
  call.idempotent = true;  // the master's flip is
  call.retries = 2;
  st = wire::WireCall(*options_.master, MsgType::kMoveAcg, move, &ok, call);
  if (!st.ok()) {
    // A reply (an error) means no flip. No reply may mean the master committed the flip and
    // died before answering: only its map says whether the copy is this node's now, and
    // dropping a copy the map names would lose the ACG once the source, told the same by the
    // master, drops its own.
    const bool answered =
        st.code() != StatusCode::kTimeout && st.code() != StatusCode::kUnavailable;
    const uint32_t owner =
        answered ? part.from_node
                 : OwnerAfterFailure(part.acg,
                                     std::chrono::milliseconds(options_.unsettled_wait_ms));
    if (owner == 0) {
      // Unknown: keep the copy, frozen and out of searches (the source may thaw its own),
      // until the source's release, the master's answer (ThawAbandoned) or a heartbeat's
      // not_yours (DropNotOwned) settles it.
      MutexLock lock(&adopted_mu_);
      unsettled_.insert(part.acg);
      adopted_frozen_[part.acg] = std::chrono::steady_clock::now();
      return ErrorReply(Status::Unavailable(
          "adopting ACG " + std::to_string(part.acg) + ": the master cannot say whether the "
          "move happened (" + st.ToString() + "); the copy waits here, frozen"));
    }
    if (owner != self) {
      // Not this node's: give the copy back (the source still owns and holds the ACG).
      Status undo = engine_->DropMovedAcg(part.acg, owner);
      if (!undo.ok()) Log(LogLevel::kError, "undoing an adoption: %s", undo.ToString().c_str());
      return ErrorReply(st.WithContext("adopting ACG " + std::to_string(part.acg) +
                                       ": the master did not make it this node's"));
    }
    // The master's map names this node: the flip happened, only its reply was lost.
  }
  MarkOwned({part.acg});
  {
    MutexLock lock(&adopted_mu_);
    adopted_frozen_[part.acg] = std::chrono::steady_clock::now();
  }
  if (options_.migrate_step_hook) options_.migrate_step_hook(4);
  return wire::EncodeOkReply(wire::Empty{});
}

void NodeService::DropNotOwned(const std::vector<wire::AcgLocation>& acgs) {
  if (acgs.empty() || options_.master == nullptr) return;
  // Not while a move runs here: its own steps decide (and the map may be about to change).
  if (!migrate_mu_.TryLock()) return;
  if (!adopt_mu_.TryLock()) {
    migrate_mu_.Unlock();
    return;
  }
  const uint32_t self = node_id_.load();
  std::set<uint64_t> here;
  for (const AcgInfo& a : engine_->ListAcgs()) here.insert(a.id);
  for (const wire::AcgLocation& loc : acgs) {
    if (here.count(loc.acg) == 0) continue;
    // The heartbeat's answer may predate a flip to this node: ask again.
    const uint32_t owner = MasterOwnerOf(loc.acg);
    if (owner == 0 || owner == self) continue;
    {
      WriterLock lock(&owned_mu_);
      owned_.erase(loc.acg);
    }
    // An adoption still waiting for its release (or unsettled) is frozen already.
    bool frozen = false;
    {
      MutexLock lock(&adopted_mu_);
      frozen = adopted_frozen_.count(loc.acg) != 0;
    }
    // Kept, not removed (docs: data is never deleted on the word of a state file or a peer):
    // an administrator can look at it and remove it.
    const std::string aside =
        options_.stray_dir.empty()
            ? ""
            : JoinPath(options_.stray_dir, "acg-" + std::to_string(loc.acg) + "-" +
                                               std::to_string(::time(nullptr)));
    Status st = frozen ? Status::OK() : engine_->FreezeAndCopyAcg(loc.acg, "");
    if (st.ok()) st = engine_->DropMovedAcg(loc.acg, owner, aside);
    if (!st.ok()) {
      Log(LogLevel::kError, "dropping ACG %llu (node %u owns it): %s",
          static_cast<unsigned long long>(loc.acg), static_cast<unsigned>(owner),
          st.ToString().c_str());
      continue;
    }
    {
      MutexLock lock(&adopted_mu_);
      unsettled_.erase(loc.acg);
      adopted_frozen_.erase(loc.acg);
    }
    Log(LogLevel::kWarning,
        "set ACG %llu aside%s%s: node %u owns it (a copy left behind by an interrupted "
        "migration); remove it once checked",
        static_cast<unsigned long long>(loc.acg), aside.empty() ? "" : " in ", aside.c_str(),
        static_cast<unsigned>(owner));
  }
  adopt_mu_.Unlock();
  migrate_mu_.Unlock();
}

void NodeService::ThawAbandoned(int64_t after_ms) {
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::pair<uint64_t, bool>> due;  // ACG, unsettled
  {
    MutexLock lock(&adopted_mu_);
    for (const auto& [acg, since] : adopted_frozen_) {
      if (now - since >= std::chrono::milliseconds(after_ms)) {
        due.emplace_back(acg, unsettled_.count(acg) != 0);
      }
    }
  }
  const uint32_t self = node_id_.load();
  for (const auto& [acg, unsettled] : due) {
    if (unsettled) {
      // The flip's outcome was unknown: thaw only once the master names this node. Another
      // owner's heartbeat not_yours drops the copy; no answer: ask again next time.
      if (MasterOwnerOf(acg) != self) continue;
      MarkOwned({acg});
    }
    {
      MutexLock lock(&adopted_mu_);
      if (adopted_frozen_.erase(acg) == 0) continue;  // released or dropped meanwhile
      unsettled_.erase(acg);
    }
    if (engine_->ThawAcg(acg).ok()) {
      Log(LogLevel::kWarning, "ACG %llu: its source never released it; updates go on",
          static_cast<unsigned long long>(acg));
    }
  }
}

void NodeService::ResolveStalledMoves() {
  std::vector<uint64_t> stalled;
  {
    MutexLock lock(&adopted_mu_);
    for (const auto& [acg, to] : stalled_out_) stalled.push_back(acg);
  }
  if (stalled.empty() || options_.master == nullptr) return;
  // Not while a move runs here (a new one cannot start on a frozen ACG, but keep it simple).
  if (!migrate_mu_.TryLock()) return;
  const uint32_t self = node_id_.load();
  for (uint64_t acg : stalled) {
    const uint32_t owner = MasterOwnerOf(acg);
    if (owner == 0) continue;  // still no answer: next heartbeat
    Status st;
    if (owner == self) {
      st = engine_->ThawAcg(acg);
    } else {
      {
        WriterLock lock(&owned_mu_);
        owned_.erase(acg);
      }
      // The destination adopted it and the flip committed; its own wait for the release
      // (ThawAbandoned there) lets its updates go.
      st = engine_->DropMovedAcg(acg, owner);
    }
    if (!st.ok()) {
      Log(LogLevel::kError, "settling the stalled move of ACG %llu: %s",
          static_cast<unsigned long long>(acg), st.ToString().c_str());
      continue;
    }
    {
      MutexLock lock(&adopted_mu_);
      stalled_out_.erase(acg);
    }
    Log(LogLevel::kWarning, "ACG %llu: the master names node %u after a failed move; %s",
        static_cast<unsigned long long>(acg), static_cast<unsigned>(owner),
        owner == self ? "its updates go on here" : "dropped here");
  }
  migrate_mu_.Unlock();
}

std::string NodeService::HandleRelease(std::string_view body) {
  wire::ReleaseAcgRequest req;
  Status st = wire::Decode(body, &req);
  if (!st.ok()) return BadRequest("release-acg", st);
  bool was_unsettled = false;
  {
    MutexLock lock(&adopted_mu_);
    adopted_frozen_.erase(req.acg);
    was_unsettled = unsettled_.erase(req.acg) != 0;
  }
  // The source dropped its copy after the master named this node: an unsettled adoption
  // (HandleAdopt) is settled too.
  if (was_unsettled) MarkOwned({req.acg});
  st = engine_->ThawAcg(req.acg);
  if (st.code() == StatusCode::kInvalidArgument) st = Status::OK();  // released already
  if (!st.ok()) return ErrorReply(st);
  return wire::EncodeOkReply(wire::Empty{});
}

// ---- indexes --------------------------------------------------------------------------------

void NodeService::RefreshIndexListLocked() {
  std::vector<wire::IndexDef> list;
  for (const IndexInfo& info : engine_->ListIndexes()) {
    if (!info.builtin) list.push_back(wire::IndexDef{info.name, info.type});
  }
  std::sort(list.begin(), list.end(),
            [](const wire::IndexDef& a, const wire::IndexDef& b) { return a.name < b.name; });
  MutexLock lock(&list_mu_);
  user_indexes_ = std::move(list);
}

std::vector<wire::IndexDef> NodeService::UserIndexes() const {
  MutexLock lock(&list_mu_);
  return user_indexes_;
}

uint64_t NodeService::IndexChangeSeq() const { return index_seq_.load(); }

Status NodeService::ReconcileIndexes(const std::vector<wire::IndexDef>& catalogue,
                                     uint64_t as_of_seq) {
  MutexLock lock(&index_mu_);
  auto changed_since = [&](const std::string& name) PROPELLER_REQUIRES(index_mu_) {
    auto it = index_changed_.find(name);
    return it != index_changed_.end() && it->second > as_of_seq;
  };
  std::map<std::string, IndexType> want;
  for (const wire::IndexDef& def : catalogue) want[def.name] = def.type;
  std::map<std::string, IndexType> have;
  for (const IndexInfo& info : engine_->ListIndexes()) {
    if (info.builtin) {
      want.erase(info.name);  // the catalogue cannot redefine a built-in index
    } else {
      have[info.name] = info.type;
    }
  }

  Status first;
  auto note = [&](const Status& st, const char* what, const std::string& name)
                  PROPELLER_REQUIRES(index_mu_) {
    if (st.ok()) {
      Log(LogLevel::kInfo, "index reconciliation: %s index '%s'", what, name.c_str());
      reconcile_warned_.erase(name);
      return;
    }
    // Once per index until it succeeds: the same catalogue comes back every heartbeat.
    if (reconcile_warned_.insert(name).second) {
      Log(LogLevel::kWarning, "index reconciliation: cannot %s index '%s': %s", what,
          name.c_str(), st.ToString().c_str());
    }
    if (first.ok()) first = st;
  };
  for (const auto& [name, type] : have) {
    if (changed_since(name)) continue;
    auto it = want.find(name);
    if (it == want.end() || it->second != type) note(engine_->DropIndex(name), "drop", name);
  }
  for (const auto& [name, type] : want) {
    if (changed_since(name)) continue;
    auto it = have.find(name);
    if (it != have.end() && it->second == type) continue;
    note(engine_->CreateIndex(name, type), "create", name);
  }
  RefreshIndexListLocked();
  return first;
}

NodeServiceStats NodeService::stats() const {
  NodeServiceStats s;
  s.requests = requests_.load();
  s.bad_requests = bad_requests_.load();
  s.redirects = redirects_.load();
  s.master_lookups = master_lookups_.load();
  return s;
}

}  // namespace propeller
