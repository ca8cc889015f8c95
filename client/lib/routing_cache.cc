#include "client/lib/routing_cache.h"

namespace propeller {

std::optional<uint64_t> RoutingCache::FileAcg(FileId file) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(file);
  if (it == files_.end()) return std::nullopt;
  return it->second.acg;
}

std::optional<FileRoute> RoutingCache::FileRouteOf(FileId file) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(file);
  if (it == files_.end()) return std::nullopt;
  return it->second;
}

std::optional<NodeAddress> RoutingCache::AcgNode(uint64_t acg) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = acgs_.find(acg);
  if (it == acgs_.end()) return std::nullopt;
  return it->second;
}

void RoutingCache::PutFile(FileId file, uint64_t acg, uint64_t generation) {
  std::lock_guard<std::mutex> lock(mu_);
  if (files_.size() >= max_files_) files_.clear();
  files_[file] = FileRoute{acg, generation};
}

void RoutingCache::PutAcg(uint64_t acg, const NodeAddress& node) {
  std::lock_guard<std::mutex> lock(mu_);
  acgs_[acg] = node;
}

void RoutingCache::ForgetFile(FileId file) {
  std::lock_guard<std::mutex> lock(mu_);
  files_.erase(file);
}

void RoutingCache::ForgetAcg(uint64_t acg) {
  std::lock_guard<std::mutex> lock(mu_);
  acgs_.erase(acg);
}

}  // namespace propeller
