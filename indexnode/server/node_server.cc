#include "indexnode/server/node_server.h"

#include <stdlib.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "common/env.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "common/rpc/rpc.h"
#include "common/secure_dir.h"
#include "indexnode/server/node_service.h"
#include "schemas/messages.h"
#include "schemas/wire_call.h"

namespace propeller {
namespace {

constexpr char kNodeIdFile[] = "node_id";
// Log the first failure to reach the master, then one line per this many: at 1 s intervals a
// down master costs one line every 30 s instead of flooding the log.
constexpr uint64_t kLogEveryFailures = 30;
constexpr int64_t kDefaultIntervalMs = 1000;
// Files per SplitDone request: ~1.2 MB of ids, far below the frame and array limits.
constexpr size_t kSplitReportChunk = 100'000;

// Reads <data_dir>/node_id: 0 when absent, Corruption when it is not a positive 32-bit number.
Result<uint32_t> ReadNodeId(Env* env, const std::string& path) {
  if (!env->FileExists(path)) return uint32_t{0};
  std::string text;
  PROPELLER_RETURN_IF_ERROR(ReadFileToString(env, path, &text));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  uint32_t id = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc() || end != text.data() + text.size() || id == 0) {
    return Status::Corruption(path + ": not a node id (expected a positive decimal number); "
                              "write this node's id into it (propeller status on the master "
                              "lists them)");
  }
  return id;
}

}  // namespace

class IndexNodeServer::Impl {
 public:
  ~Impl() {
    Status s = Stop();
    if (!s.ok()) Log(LogLevel::kError, "index node stop: %s", s.ToString().c_str());
  }

  Status Init(const IndexNodeOptions& options);
  Status Stop();

  const std::string& endpoint() const { return endpoint_; }
  const std::string& advertised() const { return advertised_; }
  uint32_t node_id() const { return node_id_.load(); }
  bool registered() const { return registered_.load(); }
  uint64_t heartbeats() const { return heartbeats_.load(); }
  Engine* engine() { return engine_.get(); }
  NodeService* service() { return service_.get(); }

 private:
  void MembershipLoop();
  void ReconcileLoop();
  Status Register();
  Status Heartbeat();
  // Splits (docs/architecture.md §5): the engine's splitter asks the master for the new ACG's id
  // here, and the membership thread reports committed splits until the master acknowledges them.
  Result<uint64_t> NewSplitTarget(uint64_t source);
  void ReportSplits();
  // Runs the merges the last heartbeat reply asked for (reported by ReportSplits).
  void RunMerges();
  // Starts the first move the last heartbeat reply asked for (a split half to a lighter node,
  // a small ACG to its merge partner's node), on mover_, unless one started here still runs.
  void StartMove(const std::vector<wire::AcgLocation>& moves);
  void NoteMasterFailure(const char* what, const Status& st);
  int64_t IntervalMs() const;

  // Constant after Init.
  IndexNodeOptions options_;
  std::string node_id_path_;
  std::string endpoint_;
  std::string advertised_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<rpc::Channel> master_;
  std::unique_ptr<NodeService> service_;
  std::unique_ptr<rpc::Server> server_;

  // Membership state; used by the membership thread only, except the atomics.
  std::atomic<bool> registered_{false};
  // The node's id, as service_ has it; also read by the engine's splitter, which outlives
  // service_ during Stop.
  std::atomic<uint32_t> node_id_{0};
  std::atomic<uint64_t> heartbeats_{0};
  std::atomic<int64_t> master_interval_ms_{kDefaultIntervalMs};
  uint64_t failures_ = 0;

  // A leaf.
  Mutex mu_;
  CondVar cv_;  // stop_ or report_due_ set (the membership thread waits)
  bool stop_ PROPELLER_GUARDED_BY(mu_) = false;
  // A split committed: report it without waiting.
  bool report_due_ PROPELLER_GUARDED_BY(mu_) = false;
  uint64_t report_failures_ = 0;  // membership thread only
  std::vector<wire::AcgMerge> merges_;  // from the last heartbeat reply; membership thread only
  // The latest catalogue from a heartbeat reply and the index change counter read before that
  // heartbeat was sent; the reconciler thread takes it.
  std::optional<std::pair<std::vector<wire::IndexDef>, uint64_t>> pending_catalogue_
      PROPELLER_GUARDED_BY(mu_);
  CondVar reconcile_cv_;  // stop_ or pending_catalogue_ set (the reconciler waits)
  std::thread membership_;
  // Index builds can take minutes on a large node and hold the engine's catalogue lock; they
  // run here so heartbeats keep flowing and the master does not declare the node down.
  std::thread reconciler_;
  // Moves the master asked for (a large copy takes seconds); one at a time.
  std::thread mover_;
  std::atomic<bool> moving_{false};
  std::set<uint64_t> move_warned_;  // ACGs whose failed move was logged; mover_ only
};

Status IndexNodeServer::Impl::Init(const IndexNodeOptions& options) {
  options_ = options;
  if (options_.data_dir.empty()) return Status::InvalidArgument("no data directory given");
  if (options_.master_endpoint.empty()) return Status::InvalidArgument("no master endpoint given");
  if (options_.listen_endpoint.empty()) return Status::InvalidArgument("no listen endpoint given");
  if (options_.worker_threads < 1) {
    return Status::InvalidArgument("worker threads must be at least 1");
  }
  if (options_.heartbeat_interval_ms < 0 || options_.master_timeout_ms <= 0) {
    return Status::InvalidArgument("heartbeat interval and master timeout must be positive");
  }
  if (!options_.master_key_file.empty() && options_.curve_key_file.empty()) {
    return Status::InvalidArgument(
        "the master's public key file needs this node's CURVE key file (the master must admit "
        "this node's public key)");
  }

  // Keys first: a bad or missing key file should fail before anything touches the data
  // directory. tcp:// links are authenticated unless --insecure (docs/security.md).
  rpc::LinkSecurityOptions lo;
  lo.cluster_key_file = options_.cluster_key_file;
  lo.curve_key_file = options_.curve_key_file;
  lo.allow_file = options_.allow_file;
  lo.server_key_file = options_.master_key_file;
  lo.insecure = options_.insecure;
  Result<rpc::LinkSecurity> link =
      rpc::ResolveLinkSecurity(lo, rpc::IsTcpEndpoint(options_.listen_endpoint),
                               rpc::IsTcpEndpoint(options_.master_endpoint),
                               /*create_cluster_key=*/false);
  if (!link.ok()) return link.status();
  if (link->insecure) {
    Log(LogLevel::kWarning, "tcp:// links without authentication (--insecure): anyone who "
        "reaches %s controls this node's index", options_.listen_endpoint.c_str());
  }

  if (!options_.data_dir_checked && options_.engine.env == nullptr) {
    PROPELLER_RETURN_IF_ERROR(PrepareDataDir(options_.data_dir).WithContext("data directory"));
  }
  // An index without its node id would register as a new node, and the master would call
  // every ACG here another node's: refuse instead, before anything is touched.
  {
    Env* env = options_.engine.env ? options_.engine.env : Env::Default();
    node_id_path_ = JoinPath(options_.data_dir, kNodeIdFile);
    if (!env->FileExists(node_id_path_)) {
      // ACGs are made before their first update is logged: none, nothing indexed (a node
      // that never reached its master has a log segment, but no ACG).
      Result<std::vector<std::string>> acgs = env->GetChildren(JoinPath(options_.data_dir, "acg"));
      if (acgs.ok() && !acgs->empty()) {
        return Status::NotFound(
            node_id_path_ + " is missing, but " + options_.data_dir + " holds " +
            std::to_string(acgs->size()) + " ACG directories: started as a new node, it would "
            "lose them. Restore the file (it holds this node's id, as `propeller status` on the "
            "master lists it), or move the data directory away to start afresh");
      }
    }
  }
  EngineOptions eo = options_.engine;
  eo.data_dir = options_.data_dir;
  eo.durability = options_.durability;
  // The master gives split targets their ids and learns of each split (ReportSplits). Both
  // callbacks run on the engine's splitter thread, which the engine joins before master_ and
  // this object go away (Stop).
  eo.split_target_id = [this](uint64_t source) { return NewSplitTarget(source); };
  eo.on_split = [this, user = options_.engine.on_split](
                    uint64_t source, uint64_t target, const std::vector<FileId>& moved) {
    if (user) user(source, target, moved);
    {
      MutexLock lock(&mu_);
      report_due_ = true;
    }
    cv_.NotifyAll();
  };
  Result<std::unique_ptr<Engine>> engine = Engine::Open(eo);
  if (!engine.ok()) {
    return engine.status().WithContext("cannot open data directory " + options_.data_dir);
  }
  engine_ = std::move(engine).value();

  Env* env = eo.env ? eo.env : Env::Default();
  Result<uint32_t> id = ReadNodeId(env, node_id_path_);
  if (!id.ok()) return id.status();

  rpc::ChannelOptions co;
  co.endpoint = options_.master_endpoint;
  link->Apply(&co);
  Result<std::unique_ptr<rpc::Channel>> channel = rpc::Channel::Connect(co);
  if (!channel.ok()) return channel.status().WithContext("master " + options_.master_endpoint);
  master_ = std::move(channel).value();

  NodeServiceOptions so;
  so.engine = engine_.get();
  so.master = master_.get();
  so.node_id = *id;
  node_id_.store(*id);
  so.master_timeout_ms = options_.master_timeout_ms;
  so.scratch_dir = JoinPath(options_.data_dir, "migrate");
  so.stray_dir = JoinPath(options_.data_dir, "stray");
  so.migrate_step_hook = options_.migrate_step_hook;
  so.search_gate = options_.search_gate;
  so.connect_peer = [keys = link->keys](
                        const std::string& endpoint) -> Result<std::unique_ptr<rpc::Channel>> {
    rpc::ChannelOptions peer;
    peer.endpoint = endpoint;
    if (keys && rpc::IsTcpEndpoint(endpoint)) {
      // A CURVE cluster's index nodes share one key pair (the cluster key, or the nodes' own
      // shared pair): clients know one public key for all of them. So this node, as a client
      // of another, expects its own public key there and offers its own pair, which the other
      // node admits (indexnode/server/README.md, "Migration").
      peer.curve = *keys;
      peer.server_public_key = keys->public_key;
    }
    return rpc::Channel::Connect(peer);
  };
  so.access = wire::DefaultAccessPolicy();
  so.access.trust_plain_tcp = link->insecure;
  service_ = std::make_unique<NodeService>(so);
  service_->ConfirmOwnership();

  rpc::ServerOptions ro;
  ro.endpoint = options_.listen_endpoint;
  if (!options_.local_alias.empty()) ro.extra_endpoints.push_back(options_.local_alias);
  // Each live query holds a worker while it runs (NodeServiceOptions::max_watches): requests
  // keep worker_threads of their own.
  ro.worker_threads = options_.worker_threads + static_cast<int>(so.max_watches);
  link->Apply(&ro);
  NodeService* service = service_.get();
  Result<std::unique_ptr<rpc::Server>> server = rpc::Server::Start(
      ro, [service](std::string_view request, const rpc::PeerInfo& peer, rpc::ReplyStream& out) {
        return service->Handle(request, peer, out);
      });
  if (!server.ok()) return server.status();
  server_ = std::move(server).value();
  endpoint_ = server_->endpoint();
  advertised_ = options_.advertised_endpoint.empty() ? endpoint_ : options_.advertised_endpoint;
  if (advertised_.find("://0.0.0.0:") != std::string::npos ||
      advertised_.find("://*:") != std::string::npos) {
    Log(LogLevel::kWarning,
        "advertising %s, which clients cannot dial; set the advertised endpoint",
        advertised_.c_str());
  }
  Log(LogLevel::kInfo, "index node listening on %s (data %s, durability %s, node id %u)",
      endpoint_.c_str(), options_.data_dir.c_str(), DurabilityName(options_.durability),
      static_cast<unsigned>(*id));

  membership_ = std::thread([this] { MembershipLoop(); });
  reconciler_ = std::thread([this] { ReconcileLoop(); });
  return Status::OK();
}

Status IndexNodeServer::Impl::Stop() {
  {
    MutexLock lock(&mu_);
    if (stop_ && !engine_) return Status::OK();
    stop_ = true;
  }
  cv_.NotifyAll();
  reconcile_cv_.NotifyAll();
  if (membership_.joinable()) membership_.join();
  if (reconciler_.joinable()) reconciler_.join();
  if (mover_.joinable()) mover_.join();  // a move in progress finishes first
  server_.reset();   // waits for running handlers, which use service_ and engine_
  service_.reset();
  // Commits and syncs; joins the splitter, which may call the master.
  Status closed = engine_ ? engine_->Close() : Status::OK();
  engine_.reset();
  master_.reset();
  return closed;
}

int64_t IndexNodeServer::Impl::IntervalMs() const {
  if (options_.heartbeat_interval_ms > 0) return options_.heartbeat_interval_ms;
  return master_interval_ms_.load();
}

void IndexNodeServer::Impl::MembershipLoop() {
  // A registration is followed at once by a heartbeat (the master learns the ACG sizes and
  // indexes without waiting an interval), and a heartbeat answered with `reregister` at once
  // by a registration; at most two such steps in a row, so a confused master cannot make
  // this loop spin.
  int immediate = 0;
  for (;;) {
    bool again = false;
    if (registered_.load()) {
      again = Heartbeat().ok() && !registered_.load();
      if (registered_.load()) {
        RunMerges();
        ReportSplits();
      }
    } else {
      again = Register().ok();
    }
    again = again && immediate < 2;
    immediate = again ? immediate + 1 : 0;
    MutexLock lock(&mu_);
    if (!again) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(IntervalMs());
      while (!stop_ && !report_due_) {
        const auto left = until - std::chrono::steady_clock::now();
        if (left <= left.zero()) break;
        cv_.WaitFor(&mu_, left);
      }
    }
    report_due_ = false;
    if (stop_) return;
  }
}

void IndexNodeServer::Impl::NoteMasterFailure(const char* what, const Status& st) {
  if (failures_ % kLogEveryFailures == 0) {
    Log(LogLevel::kWarning, "%s with master %s failed (%llu in a row; retrying every %lld ms): %s",
        what, options_.master_endpoint.c_str(), static_cast<unsigned long long>(failures_ + 1),
        static_cast<long long>(IntervalMs()), st.ToString().c_str());
  }
  ++failures_;
}

Status IndexNodeServer::Impl::Register() {
  {
    MutexLock lock(&mu_);
    if (stop_) return Status::Aborted("stopping");
  }
  wire::RegisterNodeRequest req;
  req.node_id = service_->node_id();
  req.endpoint = advertised_;
  wire::RegisterNodeReply rep;
  rpc::CallOptions call;
  call.timeout_ms = options_.master_timeout_ms;
  call.idempotent = true;
  call.retries = 0;  // the loop retries
  Status st = wire::WireCall(*master_, wire::MsgType::kRegisterNode, req, &rep, call);
  if (st.ok() && rep.node_id == 0) st = Status::Corruption("the master assigned node id 0");
  if (!st.ok()) {
    NoteMasterFailure("registration", st);
    return st;
  }
  if (rep.node_id != req.node_id) {
    // Persist before using it: a node that crashed here must not come back as yet another node.
    Status ws = WriteFileAtomically(options_.engine.env ? options_.engine.env : Env::Default(),
                                    node_id_path_, std::to_string(rep.node_id) + "\n");
    if (!ws.ok()) {
      NoteMasterFailure("saving the node id", ws);
      return ws;
    }
    if (req.node_id != 0) {
      Log(LogLevel::kWarning, "the master gave node id %u instead of %u",
          static_cast<unsigned>(rep.node_id), static_cast<unsigned>(req.node_id));
    }
    service_->set_node_id(rep.node_id);
    node_id_.store(rep.node_id);
  }
  if (rep.heartbeat_interval_ms > 0) master_interval_ms_.store(rep.heartbeat_interval_ms);
  Log(LogLevel::kInfo, "registered with master %s as node %u (%s)",
      options_.master_endpoint.c_str(), static_cast<unsigned>(rep.node_id), advertised_.c_str());
  failures_ = 0;
  registered_.store(true);
  return Status::OK();
}

Status IndexNodeServer::Impl::Heartbeat() {
  wire::HeartbeatRequest req;
  req.node_id = service_->node_id();
  for (const AcgInfo& a : engine_->ListAcgs()) {
    req.acgs.push_back(wire::AcgLoad{a.id, a.files});
    req.cached_updates += a.cached_updates;
  }
  struct statvfs vfs;
  if (::statvfs(options_.data_dir.c_str(), &vfs) == 0) {
    req.free_disk_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  }
  double load[1] = {0};
  if (::getloadavg(load, 1) == 1) req.load = load[0];
  for (const wire::IndexDef& def : service_->UserIndexes()) req.indexes.push_back(def.name);
  const uint64_t index_seq = service_->IndexChangeSeq();

  wire::HeartbeatReply rep;
  rpc::CallOptions call;
  call.timeout_ms = options_.master_timeout_ms;
  call.idempotent = true;
  call.retries = 0;
  Status st = wire::WireCall(*master_, wire::MsgType::kHeartbeat, req, &rep, call);
  if (!st.ok()) {
    NoteMasterFailure("heartbeat", st);
    return st;
  }
  if (failures_ > 0) {
    Log(LogLevel::kInfo, "master %s reachable again", options_.master_endpoint.c_str());
    failures_ = 0;
  }
  heartbeats_.fetch_add(1);
  merges_ = std::move(rep.merges);
  StartMove(rep.moves);
  // Copies an interrupted migration left here, and adoptions whose release never came.
  service_->DropNotOwned(rep.not_yours);
  service_->ThawAbandoned(options_.release_wait_ms);
  service_->ResolveStalledMoves();
  if (rep.reregister) {
    Log(LogLevel::kInfo, "master %s asked node %u to register again",
        options_.master_endpoint.c_str(), static_cast<unsigned>(req.node_id));
    registered_.store(false);
    return Status::OK();
  }
  {
    MutexLock lock(&mu_);
    pending_catalogue_.emplace(std::move(rep.indexes), index_seq);
  }
  reconcile_cv_.NotifyOne();
  return Status::OK();
}

Result<uint64_t> IndexNodeServer::Impl::NewSplitTarget(uint64_t source) {
  if (!registered_.load()) {
    return Status::Unavailable("not registered with the master yet: no id for a new ACG");
  }
  wire::NewAcgRequest req;
  req.node_id = node_id_.load();
  req.source = source;
  wire::NewAcgReply rep;
  rpc::CallOptions call;
  call.timeout_ms = options_.master_timeout_ms;
  call.idempotent = false;  // a retry would create a second ACG (harmless, but not needed)
  call.retries = 0;         // the splitter retries later
  Status st = wire::WireCall(*master_, wire::MsgType::kNewAcg, req, &rep, call);
  if (!st.ok()) return st.WithContext("asking the master for a new ACG id");
  if (rep.acg == 0) return Status::Corruption("the master gave ACG id 0 for a split");
  return rep.acg;
}

void IndexNodeServer::Impl::RunMerges() {
  for (const wire::AcgMerge& m : merges_) {
    Status st = engine_->MergeAcg(m.source, m.target);
    if (!st.ok()) {
      // The master asks again while the ACGs stay small; an engine that stopped on an I/O
      // error refuses everything from here on.
      Log(LogLevel::kWarning, "merge of ACG %llu into %llu asked by the master: %s",
          static_cast<unsigned long long>(m.source), static_cast<unsigned long long>(m.target),
          st.ToString().c_str());
    }
  }
  merges_.clear();
}

void IndexNodeServer::Impl::StartMove(const std::vector<wire::AcgLocation>& moves) {
  if (moves.empty() || moving_.load()) return;
  if (mover_.joinable()) mover_.join();  // the previous move is over
  moving_.store(true);
  const wire::MigrateAcgRequest req{moves[0].acg, moves[0].node_id};
  mover_ = std::thread([this, req] {
    wire::MigrateAcgReply rep;
    // Migrate logs a move that happened; a failure is logged here, once per ACG.
    Status st = service_->Migrate(req, &rep);
    if (!st.ok() && move_warned_.insert(req.acg).second) {
      // The master asks again with later heartbeats, then gives up; logged once per ACG.
      Log(LogLevel::kWarning, "moving ACG %llu to node %u, as the master asked: %s",
          static_cast<unsigned long long>(req.acg), static_cast<unsigned>(req.to_node),
          st.ToString().c_str());
    }
    moving_.store(false);
  });
}

void IndexNodeServer::Impl::ReportSplits() {
  Result<std::vector<SplitNotice>> notices = engine_->UnreportedSplits();
  if (!notices.ok()) {
    if (report_failures_++ % kLogEveryFailures == 0) {
      Log(LogLevel::kError, "cannot read the unreported splits: %s",
          notices.status().ToString().c_str());
    }
    return;
  }
  for (const SplitNotice& n : *notices) {
    wire::SplitDoneRequest req;
    req.node_id = service_->node_id();
    req.source = n.source;
    req.target = n.target;
    req.merged = n.merged;
    uint64_t remapped = 0;
    Status st;
    // Every part is idempotent at the master, so a part sent again after a failure is harmless.
    for (size_t at = 0; at < n.files.size() || at == 0; at += kSplitReportChunk) {
      const size_t end = std::min(n.files.size(), at + kSplitReportChunk);
      req.files.assign(n.files.begin() + static_cast<ptrdiff_t>(at),
                       n.files.begin() + static_cast<ptrdiff_t>(end));
      wire::SplitDoneReply rep;
      rpc::CallOptions call;
      call.timeout_ms = options_.master_timeout_ms;
      call.idempotent = true;
      call.retries = 1;
      st = wire::WireCall(*master_, wire::MsgType::kSplitDone, req, &rep, call);
      if (!st.ok()) break;
      remapped += rep.remapped;
      if (end == n.files.size()) break;
    }
    if (st.ok()) st = engine_->SplitReported(n.source, n.target);
    if (!st.ok()) {
      if (report_failures_++ % kLogEveryFailures == 0) {
        Log(LogLevel::kWarning, "reporting the split of ACG %llu into %llu to the master "
            "failed (%llu in a row; retried every heartbeat): %s",
            static_cast<unsigned long long>(n.source), static_cast<unsigned long long>(n.target),
            static_cast<unsigned long long>(report_failures_), st.ToString().c_str());
      }
      return;
    }
    report_failures_ = 0;
    Log(LogLevel::kInfo, "master remapped %llu of the %zu files %s from ACG %llu into %llu",
        static_cast<unsigned long long>(remapped), n.files.size(),
        n.merged ? "merged" : "split",
        static_cast<unsigned long long>(n.source), static_cast<unsigned long long>(n.target));
  }
}

void IndexNodeServer::Impl::ReconcileLoop() {
  for (;;) {
    std::pair<std::vector<wire::IndexDef>, uint64_t> work;
    {
      MutexLock lock(&mu_);
      while (!stop_ && !pending_catalogue_.has_value()) reconcile_cv_.Wait(&mu_);
      if (stop_) return;
      work = std::move(*pending_catalogue_);
      pending_catalogue_.reset();
    }
    // Failures are logged inside (once per index) and retried with the next heartbeat.
    (void)service_->ReconcileIndexes(work.first, work.second);
  }
}

// ---- IndexNodeServer --------------------------------------------------------------------------

Result<std::unique_ptr<IndexNodeServer>> IndexNodeServer::Start(const IndexNodeOptions& options) {
  auto impl = std::make_unique<Impl>();
  PROPELLER_RETURN_IF_ERROR(impl->Init(options));
  return std::unique_ptr<IndexNodeServer>(new IndexNodeServer(std::move(impl)));
}

IndexNodeServer::IndexNodeServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
IndexNodeServer::~IndexNodeServer() = default;
Status IndexNodeServer::Stop() { return impl_->Stop(); }

const std::string& IndexNodeServer::endpoint() const { return impl_->endpoint(); }
const std::string& IndexNodeServer::advertised_endpoint() const { return impl_->advertised(); }
uint32_t IndexNodeServer::node_id() const { return impl_->node_id(); }
bool IndexNodeServer::registered() const { return impl_->registered(); }
uint64_t IndexNodeServer::heartbeats() const { return impl_->heartbeats(); }
Engine* IndexNodeServer::engine() { return impl_->engine(); }
NodeService* IndexNodeServer::service() { return impl_->service(); }

}  // namespace propeller
