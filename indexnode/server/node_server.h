// IndexNodeServer: a running index node (docs/architecture.md §2, §6) — the Engine on its data
// directory, an rpc::Server answering the index-node protocol through NodeService, and a membership
// thread that registers with the master and heartbeats.
//
// Membership:
//   - The node id the master gave is persisted in <data_dir>/node_id (decimal text, written
//     atomically), so a restarted node registers again with the same id and keeps its ACGs.
//   - Registration and heartbeats run on one background thread. Start() does not wait for the
//     master: while it is unreachable the node keeps retrying every interval (logging the
//     first failure and then every 30th) and serves requests for ACGs it already owns.
//   - A heartbeat carries the ACG sizes, free disk of the data directory (statvfs), the host's
//     1-minute load average, the cached-update count and the user indexes built here. Its
//     reply's index catalogue is reconciled into the engine (NodeService::ReconcileIndexes)
//     on a separate thread, because an index build can take minutes and must not delay the
//     heartbeats; `reregister` makes the node register again with its id.
//   - The interval is the master's (RegisterNodeReply) unless options override it.
//
// Security (docs/security.md): tcp:// links — this node's listener, its link to the master
// and to other nodes — are CURVE-authenticated with the cluster key, or with this node's own
// key pair (`curve_key_file`, admitting the keys of `allow_file`, expecting the master's key
// of `master_key_file`); a node asked for tcp:// without keys refuses to start unless
// `insecure`. Every request is authorized by its sender's role (schemas/access.h).
//
// Shutdown (destructor): stops the membership thread, stops the rpc::Server (running handlers
// finish), then closes the engine, which commits every cache and syncs.
//
// Threading: the accessors may be called from any thread while the server runs.
#ifndef PROPELLER_INDEXNODE_SERVER_NODE_SERVER_H_
#define PROPELLER_INDEXNODE_SERVER_NODE_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "indexnode/engine.h"
#include "schemas/messages.h"

namespace propeller {

inline constexpr char kDefaultIndexNodeEndpoint[] = "tcp://127.0.0.1:7471";

struct IndexNodeOptions {
  std::string data_dir;                                   // REQUIRED; created if missing
  // Start() checks and prepares data_dir (PrepareDataDir, common/secure_dir.h) unless the
  // caller did already (for it or a parent) or the engine runs on another Env.
  bool data_dir_checked = false;
  std::string listen_endpoint = kDefaultIndexNodeEndpoint;  // port 0 = any free port
  // What the master hands to clients; "" = the bound endpoint. Set it when listening on a
  // wildcard address (tcp://0.0.0.0:7471 is not an address a client can dial).
  std::string advertised_endpoint;
  std::string master_endpoint;  // REQUIRED
  // Also serve on this direct:// endpoint (rpc.h; embedded mode: a client in
  // this process maps the advertised endpoint to it, ClientOptions::endpoint_aliases, and
  // skips the network stack).
  std::string local_alias;
  Durability durability = Durability::kDefault;
  // Link security of tcp:// links (rpc.h, docs/security.md): the cluster key by default
  // ("" = rpc::DefaultClusterKeyFile(); it must exist: the master makes it), or this node's
  // own key pair with an allowlist and the master's public key, or `insecure`.
  std::string cluster_key_file;
  std::string curve_key_file;   // this node's key pair (needs allow_file to serve tcp://)
  std::string allow_file;       // client public keys admitted (added to the cluster key's)
  std::string master_key_file;  // the master's public key; needs curve_key_file
  bool insecure = false;
  int worker_threads = 4;       // rpc handler threads
  // 0 = the master's interval (RegisterNodeReply.heartbeat_interval_ms; 1000 ms before the
  // first registration), else this many milliseconds.
  int64_t heartbeat_interval_ms = 0;
  int64_t master_timeout_ms = 2000;  // per register/heartbeat/locate call
  // Engine settings other than data_dir and durability (which the fields above override).
  EngineOptions engine;
  // Tests: NodeServiceOptions::migrate_step_hook.
  std::function<void(int step)> migrate_step_hook;
  // NodeServiceOptions::search_gate (the embedded node of a mount).
  std::function<Status(const wire::SearchQuery&)> search_gate;
  // An ACG adopted from another node is thawed this long after its adoption even if the
  // source never sent kReleaseAcg (it died after dropping its copy).
  int64_t release_wait_ms = 30'000;
};

class NodeService;

class IndexNodeServer {
 public:
  // Opens the engine, binds the endpoint and starts the membership thread. Errors:
  // InvalidArgument (missing or contradictory options, unreadable key files), Corruption (a
  // damaged node_id file or engine data), IOError (data directory, bind), NotSupported (CURVE
  // unavailable). Messages are one line, naming the file or endpoint at fault.
  static Result<std::unique_ptr<IndexNodeServer>> Start(const IndexNodeOptions& options);

  // Clean stop (see the header comment); the engine's final commit and sync status
  // (Engine::Close): a daemon whose stop failed exits non-zero. Only destruction is valid
  // after it. The destructor stops when this was not called (and logs the error).
  Status Stop();
  ~IndexNodeServer();
  IndexNodeServer(const IndexNodeServer&) = delete;
  IndexNodeServer& operator=(const IndexNodeServer&) = delete;

  // The bound endpoint, with a wildcard port resolved ("tcp://127.0.0.1:41234").
  const std::string& endpoint() const;
  // What the node registers with the master (advertised_endpoint, or endpoint()).
  const std::string& advertised_endpoint() const;
  // The id from <data_dir>/node_id or the master; 0 before the first registration.
  uint32_t node_id() const;
  // True once the master has accepted a registration (false again after a `reregister`).
  bool registered() const;
  // Number of heartbeats the master acknowledged (tests wait on it).
  uint64_t heartbeats() const;

  // The engine and the request handler, valid until destruction (embedding and tests).
  Engine* engine();
  NodeService* service();

 private:
  class Impl;
  explicit IndexNodeServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_SERVER_NODE_SERVER_H_
