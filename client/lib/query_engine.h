// QueryEngine: the File Query Engine of a mount (docs/architecture.md §2): a local RPC service on a
// unix socket that answers searches scoped to the mount for `propeller search --scope
// MOUNTPOINT/..` and libpropeller (which find it through the mount registry,
// client/lib/mount_registry.h).
//
// It speaks the index node's search messages (kSearch: SearchQuery -> SearchHitsChunk*,
// SearchDone): the scope is an in-volume path, hits carry in-volume paths, and the caller maps
// them under the mount point. kMountStatus answers the mount's queue of index updates
// (`propeller status`). Whatever credentials a request carries, the search runs as the
// peer the kernel names (SO_PEERCRED: uid, gid and the supplementary groups of its process):
// docs/architecture.md §10 — a user sees only what they could find by walking the tree.
//
// Thread-safe; handlers run on the rpc server's workers.
#ifndef PROPELLER_CLIENT_LIB_QUERY_ENGINE_H_
#define PROPELLER_CLIENT_LIB_QUERY_ENGINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "client/lib/propeller.h"
#include "common/status.h"
#include "schemas/messages.h"

namespace propeller {

struct QueryEngineOptions {
  Client* client = nullptr;  // REQUIRED; not owned; outlives the engine
  uint32_t volume = 0;       // REQUIRED: the mount's volume
  std::string backing;
  std::string mountpoint;
  // "" = ipc://<registry dir>/../engine-<pid>.sock (outside every mount).
  std::string endpoint;
  int worker_threads = 4;
  // Asked before each search with its in-volume scope; a failure is the search's answer (the
  // mount: "index catching up" while updates under the scope are queued). Null = none.
  std::function<Status(const std::string& scope)> before_search;
  // kMountStatus's answer. Null = NotSupported.
  std::function<wire::MountStatusReply()> mount_status;
};

class QueryEngine {
 public:
  // Binds the socket (readable and writable by every user: access is per-request, by
  // credentials) and starts serving. IOError when the socket cannot be bound.
  static Result<std::unique_ptr<QueryEngine>> Start(const QueryEngineOptions& options);
  ~QueryEngine();
  QueryEngine(const QueryEngine&) = delete;
  QueryEngine& operator=(const QueryEngine&) = delete;

  const std::string& endpoint() const;

  class Impl;

 private:
  explicit QueryEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace propeller

#endif  // PROPELLER_CLIENT_LIB_QUERY_ENGINE_H_
