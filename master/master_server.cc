#include "master/master_server.h"

#include <algorithm>
#include <chrono>

#include "common/logging.h"
#include "common/secure_dir.h"

namespace propeller::master {

Result<std::unique_ptr<MasterServer>> MasterServer::Start(const MasterOptions& options) {
  if (options.curve_key_file.empty() != options.allow_file.empty()) {
    return Status::InvalidArgument("a CURVE key file and an allowlist file go together");
  }
  if (options.worker_threads < 1) return Status::InvalidArgument("worker threads must be >= 1");
  rpc::ServerOptions so;
  so.endpoint = options.listen;
  so.worker_threads = options.worker_threads;
  if (!options.local_alias.empty()) so.extra_endpoints.push_back(options.local_alias);
  rpc::LinkSecurityOptions lo;
  lo.cluster_key_file = options.cluster_key_file;
  lo.curve_key_file = options.curve_key_file;
  lo.allow_file = options.allow_file;
  lo.insecure = options.insecure;
  // A master is where a cluster starts: it makes the cluster key when there is none.
  PROPELLER_ASSIGN_OR_RETURN(
      rpc::LinkSecurity link,
      rpc::ResolveLinkSecurity(lo, rpc::IsTcpEndpoint(options.listen), /*dials_tcp=*/false,
                               /*create_cluster_key=*/true));
  link.Apply(&so);
  if (link.created) {
    Log(LogLevel::kInfo, "made the cluster key %s: copy it (mode 0600) to every index node and "
        "client host of this cluster", link.cluster_key_file.c_str());
  }
  if (link.insecure) {
    Log(LogLevel::kWarning, "serving %s without authentication (--insecure): anyone who "
        "reaches it controls the index", options.listen.c_str());
  }
  wire::AccessPolicy policy = wire::DefaultAccessPolicy();
  policy.trust_plain_tcp = link.insecure;

  if (!options.data_dir_checked) {
    PROPELLER_RETURN_IF_ERROR(PrepareDataDir(options.data_dir).WithContext("data directory"));
  }
  MasterConfig config;
  config.data_dir = options.data_dir;
  config.node_timeout_ms = options.node_timeout_ms;
  config.acg_threshold = options.acg_threshold;
  config.merge_after_ms = options.merge_after_ms;
  config.move_split_halves = options.move_split_halves;
  config.move_commit_hook = options.move_commit_hook;
  config.heartbeat_interval_ms = options.heartbeat_interval_ms;
  config.sync = options.sync;
  config.sync_interval_ms = options.sync_interval_ms;
  config.clock = options.clock;
  std::unique_ptr<MasterServer> s(new MasterServer());
  PROPELLER_ASSIGN_OR_RETURN(s->master_, Master::Open(config));
  s->service_ = std::make_unique<MasterService>(s->master_.get(), policy);
  MasterService* service = s->service_.get();
  PROPELLER_ASSIGN_OR_RETURN(
      s->server_,
      rpc::Server::Start(so, [service](std::string_view request, const rpc::PeerInfo& peer,
                                       rpc::ReplyStream&) {
        return service->Handle(request, peer);
      }));
  const int64_t period = std::clamp<int64_t>(options.node_timeout_ms / 4, 10, 1000);
  s->watcher_ = std::thread([raw = s.get(), period] { raw->WatchNodes(period); });
  return s;
}

MasterServer::~MasterServer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  server_.reset();  // no handler runs after this
  service_.reset();
  master_.reset();
}

void MasterServer::WatchNodes(int64_t period_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::milliseconds(period_ms), [&] { return stopping_; })) {
    lock.unlock();
    (void)master_->membership().Nodes();  // marks (and logs) silent nodes down
    lock.lock();
  }
}

}  // namespace propeller::master
