#include "indexnode/open_acgs.h"

#include <algorithm>
#include <utility>

#include "indexnode/acg.h"

namespace propeller {

void OpenAcgs::Opened(Acg* acg) {
  opens_.fetch_add(1, std::memory_order_relaxed);
  Release(acg);
}

void OpenAcgs::Forget(Acg* acg) {
  MutexLock lock(&mu_);
  std::erase(open_, acg);
}

void OpenAcgs::Release(Acg* keep) {
  std::vector<Acg*> victims;
  {
    MutexLock lock(&mu_);
    if (keep != nullptr && std::find(open_.begin(), open_.end(), keep) == open_.end()) {
      open_.push_back(keep);
    }
    // Forget ACGs closed meanwhile (they rejoin when they reopen).
    std::erase_if(open_, [](Acg* a) { return !a->is_open(); });
    size_t count = open_.size();
    uint64_t bytes = 0;
    for (Acg* a : open_) bytes += a->open_bytes();
    auto over = [&] {
      return (max_count_ != 0 && count > max_count_) || (max_bytes_ != 0 && bytes > max_bytes_);
    };
    if (!over()) return;
    // Least recently used first. The stamps change under us (every use stamps its ACG): sort
    // a snapshot, or the comparator would be inconsistent (undefined behaviour in std::sort).
    std::vector<std::pair<uint64_t, Acg*>> by_age;
    for (Acg* a : open_) {
      if (a != keep && !a->pinned()) by_age.emplace_back(a->last_used(), a);
    }
    std::sort(by_age.begin(), by_age.end());
    for (const auto& [stamp, v] : by_age) {
      if (!over()) break;
      // Over the bytes only: closing an ACG without hash tables frees none.
      if (!(max_count_ != 0 && count > max_count_) && v->hash_bytes() == 0) continue;
      std::erase(open_, v);
      --count;
      bytes -= std::min(bytes, v->open_bytes());
      victims.push_back(v);
    }
  }
  for (Acg* v : victims) {
    if (v->TryClose()) continue;
    // In use after all (pinned since): it stays open and accounted (the bound is soft).
    MutexLock lock(&mu_);
    if (v->is_open() && std::find(open_.begin(), open_.end(), v) == open_.end()) {
      open_.push_back(v);
    }
  }
}

}  // namespace propeller
