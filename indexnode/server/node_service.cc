#include "indexnode/server/node_service.h"

#include <algorithm>
#include <exception>
#include <new>
#include <utility>

#include "common/logging.h"
#include "schemas/wire_call.h"

namespace propeller {
namespace {

using wire::MsgType;

// Rough encoded size of one hit, to bound a chunk near max_chunk_bytes without encoding twice.
// Over-estimates the msgpack overhead (a few bytes per field) on purpose.
size_t EstimateHitBytes(const SearchHit& hit) {
  size_t n = 96 + hit.path.size();
  for (const std::string& p : hit.record.paths) n += p.size() + 5;
  for (const auto& [name, value] : hit.record.attrs) {
    n += name.size() + 12;
    if (const auto* s = std::get_if<std::string>(&value)) n += s->size();
  }
  return n;
}

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
    : options_(options), engine_(options.engine), node_id_(options.node_id) {
  for (const AcgInfo& info : engine_->ListAcgs()) owned_.insert(info.id);
  std::lock_guard<std::mutex> lock(index_mu_);
  RefreshIndexListLocked();
}

NodeService::~NodeService() = default;

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
    return HandleRequest(env, peer, out);
  } catch (const std::bad_alloc&) {
    return ErrorReply(Status::ResourceExhausted("out of memory handling the request"));
  } catch (const std::exception& e) {
    return ErrorReply(Status::Internal(std::string("unexpected exception: ") + e.what()));
  } catch (...) {
    return ErrorReply(Status::Internal("unexpected exception"));
  }
}

std::string NodeService::HandleRequest(const wire::RequestEnvelope& env, const rpc::PeerInfo& peer,
                                       rpc::ReplyStream& out) {
  switch (env.type) {
    case MsgType::kApply: return HandleApply(env.body);
    case MsgType::kSearch: return HandleSearch(env.body, peer, out);
    case MsgType::kGetRecord: return HandleGetRecord(env.body);
    case MsgType::kNodeStatus: return HandleNodeStatus(env.body);
    case MsgType::kListEdges: return HandleListEdges(env.body);
    case MsgType::kCreateIndex: return HandleCreateIndex(env.body);
    case MsgType::kDropIndex: return HandleDropIndex(env.body);
    case MsgType::kListIndexes: return HandleListIndexes(env.body);
    case MsgType::kPing: return HandlePing(env.body);
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
    std::shared_lock<std::shared_mutex> lock(owned_mu_);
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
  wire::LocateAcgsRequest req;
  req.acgs = unknown;
  wire::AcgLocationsReply rep;
  rpc::CallOptions call;
  call.timeout_ms = options_.master_timeout_ms;
  call.idempotent = true;
  call.retries = 1;
  master_lookups_.fetch_add(1);
  Status st = wire::WireCall(*options_.master, MsgType::kLocateAcgs, req, &rep, call);
  if (!st.ok()) {
    return Status::Unavailable("cannot confirm the owner of ACG " + std::to_string(unknown[0]) +
                               " with the master (" + st.ToString() + "); retry later");
  }
  if (rep.locations.size() != unknown.size()) {
    return Status::Unavailable("the master answered " + std::to_string(rep.locations.size()) +
                               " ACG locations for " + std::to_string(unknown.size()) +
                               " ACGs; retry later");
  }
  std::vector<uint64_t> confirmed;
  for (size_t i = 0; i < unknown.size(); ++i) {
    wire::AcgLocation loc = rep.locations[i];
    loc.acg = unknown[i];  // in request order by contract; never trust it to name another ACG
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
  std::unique_lock<std::shared_mutex> lock(owned_mu_);
  owned_.insert(acgs.begin(), acgs.end());
}

// ---- handlers -------------------------------------------------------------------------------

std::string NodeService::HandleApply(std::string_view body) {
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
  st = engine_->Apply(req.updates);
  if (!st.ok()) return ErrorReply(st);
  return wire::EncodeOkReply(wire::Empty{});
}

std::string NodeService::HandleSearch(std::string_view body, const rpc::PeerInfo& peer,
                                      rpc::ReplyStream& out) {
  wire::SearchQuery q;
  Status st = wire::Decode(body, &q);
  if (!st.ok()) return BadRequest("search", st);

  SearchRequest req;
  req.query = std::move(q.query);
  req.scope = std::move(q.scope);
  req.volume = q.volume;
  if (q.creds) {
    req.creds = Credentials{q.creds->uid, q.creds->gid, std::move(q.creds->groups)};
  }
  if (peer.uid && *peer.uid != 0) {
    // The kernel vouches for this peer: it sees what its uid may see, whatever it claims.
    req.creds = Credentials{*peer.uid, peer.gid.value_or(UINT32_MAX), {}};
  }
  req.limit = static_cast<size_t>(q.limit);
  req.sort_by = std::move(q.sort_by);
  req.descending = q.descending;
  req.now_ns = q.now_ns;

  wire::SearchHitsChunk chunk;
  size_t chunk_bytes = 0;
  bool stream_closed = false;
  std::string frame;
  auto flush = [&]() -> bool {
    if (chunk.hits.empty()) return true;
    frame.clear();
    wire::Encode(chunk, &frame);
    chunk.hits.clear();
    chunk_bytes = 0;
    if (!out.Send(frame)) {
      stream_closed = true;
      return false;
    }
    return true;
  };
  SearchStats stats;
  st = engine_->Search(
      req,
      [&](const SearchHit& hit) {
        chunk_bytes += EstimateHitBytes(hit);
        chunk.hits.push_back(wire::WireHit{hit.path, hit.record, hit.acg});
        if (chunk.hits.size() >= options_.max_chunk_hits ||
            chunk_bytes >= options_.max_chunk_bytes) {
          return flush();
        }
        return true;
      },
      &stats);
  if (!st.ok()) return ErrorReply(st);
  if (stream_closed || !flush()) return ErrorReply(Status::Aborted("search: server stopping"));
  wire::SearchDone done;
  done.acgs_total = stats.acgs_total;
  done.acgs_skipped = stats.acgs_skipped;
  done.candidates = stats.candidates;
  done.hits = stats.hits;
  return wire::EncodeOkReply(done);
}

std::string NodeService::HandleGetRecord(std::string_view body) {
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
std::string NodeService::HandleListEdges(std::string_view body) {
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
  std::vector<std::tuple<FileId, FileId, uint64_t>> edges;
  for (uint64_t acg : acgs) {
    edges.clear();
    st = engine_->ListEdges(acg, &edges);
    if (st.code() == StatusCode::kNotFound && req.acg == 0) continue;  // gone meanwhile
    if (!st.ok()) return ErrorReply(st);
    for (const auto& [src, dst, weight] : edges) {
      if (reply.edges.size() >= wire::kMaxEdgesPerReply) {
        reply.truncated = true;
        break;
      }
      reply.edges.push_back(wire::WireEdge{acg, src, dst, weight});
    }
  }
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
  std::lock_guard<std::mutex> lock(index_mu_);
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
  std::lock_guard<std::mutex> lock(index_mu_);
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

// ---- indexes --------------------------------------------------------------------------------

void NodeService::RefreshIndexListLocked() {
  std::vector<wire::IndexDef> list;
  for (const IndexInfo& info : engine_->ListIndexes()) {
    if (!info.builtin) list.push_back(wire::IndexDef{info.name, info.type});
  }
  std::sort(list.begin(), list.end(),
            [](const wire::IndexDef& a, const wire::IndexDef& b) { return a.name < b.name; });
  std::lock_guard<std::mutex> lock(list_mu_);
  user_indexes_ = std::move(list);
}

std::vector<wire::IndexDef> NodeService::UserIndexes() const {
  std::lock_guard<std::mutex> lock(list_mu_);
  return user_indexes_;
}

uint64_t NodeService::IndexChangeSeq() const { return index_seq_.load(); }

Status NodeService::ReconcileIndexes(const std::vector<wire::IndexDef>& catalogue,
                                     uint64_t as_of_seq) {
  std::lock_guard<std::mutex> lock(index_mu_);
  auto changed_since = [&](const std::string& name) {
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
  auto note = [&](const Status& st, const char* what, const std::string& name) {
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
