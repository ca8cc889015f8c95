#include "indexnode/open_acgs.h"

#include <algorithm>
#include <utility>

#include "indexnode/acg.h"

namespace propeller {

void OpenAcgs::Loaded(Acg* acg) { Release(acg); }

void OpenAcgs::Forget(Acg* acg) {
  MutexLock lock(&mu_);
  std::erase(loaded_, acg);
}

size_t OpenAcgs::loaded() {
  MutexLock lock(&mu_);
  return loaded_.size();
}

void OpenAcgs::Release(Acg* keep) {
  std::vector<Acg*> victims;
  {
    MutexLock lock(&mu_);
    if (keep != nullptr && std::find(loaded_.begin(), loaded_.end(), keep) == loaded_.end()) {
      loaded_.push_back(keep);
    }
    // Forget ACGs that hold no tables any more (unloaded, closed by a failure, retired); they
    // rejoin when they load again.
    std::erase_if(loaded_, [](Acg* a) { return a->hash_bytes() == 0; });
    size_t count = loaded_.size();
    uint64_t bytes = 0;
    for (Acg* a : loaded_) bytes += a->hash_bytes();
    auto over = [&] {
      return (max_count_ != 0 && count > max_count_) || (max_bytes_ != 0 && bytes > max_bytes_);
    };
    if (!over()) return;
    // Least recently used first. The stamps change under us (every use stamps its ACG): sort
    // a snapshot, or the comparator would be inconsistent (undefined behaviour in std::sort).
    std::vector<std::pair<uint64_t, Acg*>> by_age;
    for (Acg* a : loaded_) {
      if (a != keep && !a->pinned()) by_age.emplace_back(a->last_used(), a);
    }
    std::sort(by_age.begin(), by_age.end());
    for (const auto& [stamp, v] : by_age) {
      if (!over()) break;
      std::erase(loaded_, v);
      --count;
      bytes -= std::min(bytes, v->hash_bytes());
      victims.push_back(v);
    }
  }
  for (Acg* v : victims) {
    if (v->TryUnload()) {
      unloads_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    // In use after all (pinned since): it keeps its tables and stays accounted (the bound is
    // soft).
    MutexLock lock(&mu_);
    if (v->hash_bytes() > 0 && std::find(loaded_.begin(), loaded_.end(), v) == loaded_.end()) {
      loaded_.push_back(v);
    }
  }
}

}  // namespace propeller
