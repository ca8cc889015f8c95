// MasterServer: the master daemon's core — a Master (store + membership) served over an
// rpc::Server by a MasterService. propeller-master (master_main.cc) is a thin command line
// around it; the embedded mode (`propeller up`) runs one in-process, and tests start one on
// "tcp://127.0.0.1:0" or an inproc:// endpoint.
//
// Threading: Start/destructor from one thread; endpoint(), master() and stats() from any.
#ifndef PROPELLER_MASTER_MASTER_SERVER_H_
#define PROPELLER_MASTER_MASTER_SERVER_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/rpc/rpc.h"
#include "common/status.h"
#include "master/master.h"
#include "master/service.h"

namespace propeller::master {

inline constexpr char kDefaultMasterEndpoint[] = "tcp://127.0.0.1:7470";

struct MasterOptions {
  std::string data_dir;                        // REQUIRED
  // Start() checks and prepares data_dir (PrepareDataDir, common/secure_dir.h) unless the
  // caller did already, for it or a parent.
  bool data_dir_checked = false;
  std::string listen = kDefaultMasterEndpoint; // port 0 = any free port (see endpoint())
  // Link security of a tcp:// listener (rpc.h, docs/security.md): the cluster key by default
  // (made here when missing; "" = rpc::DefaultClusterKeyFile()), or this master's own key
  // pair with an allowlist of client and node keys (both or neither), or --insecure.
  std::string cluster_key_file;
  std::string curve_key_file;
  std::string allow_file;
  bool insecure = false;
  int64_t node_timeout_ms = 5000;
  uint64_t acg_threshold = 50000;
  int64_t merge_after_ms = 300'000;  // MasterConfig::merge_after_ms
  bool move_split_halves = true;     // MasterConfig::move_split_halves
  std::function<void(uint64_t acg)> move_commit_hook;  // MasterConfig::move_commit_hook
  int worker_threads = 4;
  // Also serve on this direct:// endpoint (see IndexNodeOptions::local_alias).
  std::string local_alias;
  uint32_t heartbeat_interval_ms = 1000;
  // Durability of the master's maps (MasterStoreOptions): sync = fsync every mutation before
  // acknowledging it; !sync with sync_interval_ms > 0 = group commit every that many ms (the
  // index nodes' default level); !sync with 0 = never (tests and benchmarks only).
  bool sync = true;
  int64_t sync_interval_ms = 10;
  MasterClock clock;         // unset = real clocks
};

class MasterServer {
 public:
  // Opens the store and binds options.listen. Errors: InvalidArgument (options, key or
  // allowlist file content), NotFound (key or allowlist file), IOError (bind failed, data
  // directory unusable or in use), Corruption (store), NotSupported (CURVE unavailable).
  static Result<std::unique_ptr<MasterServer>> Start(const MasterOptions& options);
  // Stops serving (waits for running requests), then closes the store. Every acknowledged
  // mutation was already committed.
  ~MasterServer();
  MasterServer(const MasterServer&) = delete;
  MasterServer& operator=(const MasterServer&) = delete;

  // The bound endpoint with a wildcard port resolved ("tcp://127.0.0.1:41234").
  const std::string& endpoint() const { return server_->endpoint(); }
  // The master behind the server, for in-process callers (valid for this object's life).
  Master& master() { return *master_; }
  MasterService& service() { return *service_; }
  rpc::ServerStats stats() const { return server_->stats(); }

 private:
  MasterServer() = default;
  // Notices silent nodes promptly (logs "marked down") even when no request arrives.
  void WatchNodes(int64_t period_ms);

  std::unique_ptr<Master> master_;
  std::unique_ptr<MasterService> service_;
  std::unique_ptr<rpc::Server> server_;
  std::thread watcher_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // Under mu_.
};

}  // namespace propeller::master

#endif  // PROPELLER_MASTER_MASTER_SERVER_H_
