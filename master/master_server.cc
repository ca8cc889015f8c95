#include "master/master_server.h"

#include <algorithm>
#include <chrono>

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
  if (!options.curve_key_file.empty()) {
    PROPELLER_ASSIGN_OR_RETURN(rpc::CurveKeys keys, rpc::ReadKeyFile(options.curve_key_file));
    if (keys.secret_key.empty()) {
      return Status::InvalidArgument(options.curve_key_file + " holds no secret key");
    }
    so.curve = std::move(keys);
    PROPELLER_ASSIGN_OR_RETURN(so.allowed_clients, rpc::ReadAllowlistFile(options.allow_file));
    if (so.allowed_clients.empty()) {
      return Status::InvalidArgument(options.allow_file + " admits no key");
    }
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
  s->service_ = std::make_unique<MasterService>(s->master_.get());
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
