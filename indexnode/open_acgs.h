// The bound on the memory of the index node's open ACGs (EngineOptions::max_open_acgs,
// max_open_acg_bytes): the tables of user hash indexes, which an ACG loads when a search first
// probes them (Acg::EnsureLoaded). An open ACG otherwise holds its index objects only (its
// data is in the node's store, whose environments stay open). When an ACG loads tables, and
// after operations that used many, the least recently used idle ACGs holding tables unload
// them (Acg::TryUnload) until at most max_open_acgs hold tables and their bytes stay within
// max_open_acg_bytes. The victims are chosen under the lock but unloaded after it, so other
// threads loading meanwhile do not queue behind that. The bounds are soft: an ACG in use keeps
// its tables. Only ACGs holding tables are tracked, so the work per call does not grow with
// the number of ACGs.
//
// Thread-safe; the lock is a leaf, taken with no ACG lock held (releasing try-locks ACGs
// after it is dropped).
#ifndef PROPELLER_INDEXNODE_OPEN_ACGS_H_
#define PROPELLER_INDEXNODE_OPEN_ACGS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/mutex.h"

namespace propeller {

class Acg;

class OpenAcgs {
 public:
  OpenAcgs() = default;
  OpenAcgs(const OpenAcgs&) = delete;
  OpenAcgs& operator=(const OpenAcgs&) = delete;

  // The bounds (0 = none). Set before the first Loaded.
  void SetBounds(size_t max_count, uint64_t max_bytes) {
    max_count_ = max_count;
    max_bytes_ = max_bytes;
  }
  // `acg` opened (counted for stats).
  void Opened(Acg*) { opens_.fetch_add(1, std::memory_order_relaxed); }
  // `acg` loaded hash tables: account for it and unload others beyond the bounds.
  void Loaded(Acg* acg) PROPELLER_EXCLUDES(mu_);
  // After an operation: ACGs that were in use while others loaded may have kept the tables
  // above their bounds; unload the least recently used idle ones now.
  void Enforce() PROPELLER_EXCLUDES(mu_) { Release(nullptr); }
  // `acg` is being retired (replaced by an adopted copy): no longer accounted.
  void Forget(Acg* acg) PROPELLER_EXCLUDES(mu_);

  uint64_t opens() const { return opens_.load(std::memory_order_relaxed); }
  uint64_t unloads() const { return unloads_.load(std::memory_order_relaxed); }
  // ACGs holding tables (as last accounted).
  size_t loaded() PROPELLER_EXCLUDES(mu_);

 private:
  // Unloads the least recently used idle ACGs other than `keep` until the bounds hold.
  void Release(Acg* keep) PROPELLER_EXCLUDES(mu_);

  size_t max_count_ = 0;
  uint64_t max_bytes_ = 0;
  std::atomic<uint64_t> opens_{0}, unloads_{0};
  Mutex mu_;
  std::vector<Acg*> loaded_ PROPELLER_GUARDED_BY(mu_);  // ACGs accounted as holding tables
};

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_OPEN_ACGS_H_
