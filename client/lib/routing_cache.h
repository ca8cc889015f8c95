// RoutingCache: the client's memory of where files and ACGs live (docs/architecture.md §2,
// "Routing cache").
//
// file -> ACG and ACG -> node, filled from the master's answers and corrected by redirects.
// Entries may be stale; users of the cache must treat a redirect as "forget and ask again".
// Bounded: beyond `max_files` file entries the cache is cleared (cheap, and refilling costs
// one batched master lookup per update batch).
//
// Thread-safe: every method may be called concurrently.
#ifndef PROPELLER_CLIENT_LIB_ROUTING_CACHE_H_
#define PROPELLER_CLIENT_LIB_ROUTING_CACHE_H_

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/record.h"

namespace propeller {

struct NodeAddress {
  uint32_t node_id = 0;
  std::string endpoint;
};

// Where a file is mapped, as the master said: its ACG and the mapping's generation (0 when
// the master did not say; used to make forgets conditional, see wire::FilesRequest).
struct FileRoute {
  uint64_t acg = 0;
  uint64_t generation = 0;
};

class RoutingCache {
 public:
  explicit RoutingCache(size_t max_files = 1'000'000) : max_files_(max_files) {}

  // The ACG of `file`, if known.
  std::optional<uint64_t> FileAcg(FileId file) const;
  // The route of `file`, if known.
  std::optional<FileRoute> FileRouteOf(FileId file) const;
  // The node holding `acg`, if known.
  std::optional<NodeAddress> AcgNode(uint64_t acg) const;

  void PutFile(FileId file, uint64_t acg, uint64_t generation = 0);
  void PutAcg(uint64_t acg, const NodeAddress& node);
  void ForgetFile(FileId file);
  void ForgetAcg(uint64_t acg);

 private:
  const size_t max_files_;
  mutable std::mutex mu_;
  std::unordered_map<FileId, FileRoute, FileIdHash> files_;  // Under mu_.
  std::unordered_map<uint64_t, NodeAddress> acgs_;          // Under mu_.
};

}  // namespace propeller

#endif  // PROPELLER_CLIENT_LIB_ROUTING_CACHE_H_
