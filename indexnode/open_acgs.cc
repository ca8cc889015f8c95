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
  struct Victim {
    Acg* acg;
    bool close;  // else trim
  };
  std::vector<Victim> victims;
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
      const bool close = (max_count_ != 0 && count > max_count_) || v->hash_bytes() > 0;
      if (close) {
        std::erase(open_, v);
        --count;
        bytes -= std::min(bytes, v->open_bytes());
      } else {
        const uint64_t mapped = v->mapped_bytes();
        if (mapped == 0) continue;  // trimmed already, nothing read since
        bytes -= std::min(bytes, mapped);
      }
      victims.push_back(Victim{v, close});
    }
  }
  for (const Victim& v : victims) {
    if (!v.close) {
      // In use after all: it stays mapped and accounted (the bound is soft).
      if (v.acg->TryTrim()) trims_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (v.acg->TryClose()) continue;
    // In use after all (pinned since): it stays open and accounted (the bound is soft).
    MutexLock lock(&mu_);
    if (v.acg->is_open() && std::find(open_.begin(), open_.end(), v.acg) == open_.end()) {
      open_.push_back(v.acg);
    }
  }
}

}  // namespace propeller
