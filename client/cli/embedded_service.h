// The embedded service of `propeller up` and `propeller mount` (docs/security.md): a master and
// one index node in this process, talking to each other and to this process's own client
// through direct:// endpoints (no socket), and reachable by other local processes only through
// unix sockets, where the kernel names every caller. No TCP port is opened unless a tcp://
// endpoint is asked for, and then only with the cluster key (or --insecure).
//
// Threading: Start and destruction from one thread.
#ifndef PROPELLER_CLIENT_CLI_EMBEDDED_SERVICE_H_
#define PROPELLER_CLIENT_CLI_EMBEDDED_SERVICE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "client/lib/propeller.h"
#include "common/status.h"
#include "indexnode/engine.h"
#include "indexnode/server/node_server.h"
#include "master/master_server.h"

namespace propeller::cli {

struct EmbeddedServiceOptions {
  std::string data_dir;       // REQUIRED: DIR/master and DIR/node are kept there
  std::string master_listen;  // REQUIRED: ipc://PATH, or tcp:// (link security below)
  std::string node_listen;    // REQUIRED: likewise
  std::string tag;            // REQUIRED: unique in this process (names direct:// endpoints)
  Durability durability = Durability::kDefault;
  uint64_t acg_threshold = 50'000;
  std::string cluster_key_file;  // for tcp:// endpoints only
  bool insecure = false;
  // The node's NodeServiceOptions::search_gate (a mount: its queue of pending updates).
  std::function<Status(const wire::SearchQuery&)> search_gate;
};

struct EmbeddedService {
  // Destroyed node first (it commits every cache and syncs the log), then the master.
  std::unique_ptr<master::MasterServer> master;
  std::unique_ptr<IndexNodeServer> node;
  // For a Client in this process: the master's endpoint, with both endpoints aliased to
  // their direct:// ones.
  ClientOptions client_options;
  // Stops both (the node commits every cache and syncs its log); the node's status: a failed
  // final sync must make the command exit non-zero. Only destruction is valid after it.
  Status Stop();
  ~EmbeddedService();
};

// Checks and prepares the data directory (PrepareDataDir: 0700, nothing planted), starts the
// master and the node and waits until the node is registered (30 s at most). Errors name the
// part that failed: the data directory, an endpoint in use, keys.
Result<std::unique_ptr<EmbeddedService>> StartEmbeddedService(const EmbeddedServiceOptions& o);

}  // namespace propeller::cli

#endif  // PROPELLER_CLIENT_CLI_EMBEDDED_SERVICE_H_
