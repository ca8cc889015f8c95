// The bound on the index node's open ACGs (EngineOptions::max_open_acgs, max_open_acg_bytes):
// an open ACG holds its index objects and loaded hash tables (its data is in the node's
// store, whose environments stay open). When an ACG opens, and after operations that used
// many, the least recently used idle ACGs are closed until the bounds hold: beyond the count,
// any; beyond the bytes, those holding hash tables. The victims are chosen under the lock but
// closed after it, so other threads opening ACGs meanwhile do not queue behind that. The
// bounds are soft: an ACG in use stays.
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

  // The bounds (0 = none). Set before the first Opened.
  void SetBounds(size_t max_count, uint64_t max_bytes) {
    max_count_ = max_count;
    max_bytes_ = max_bytes;
  }
  // `acg`'s environment was opened: account for it and release others beyond the bounds.
  void Opened(Acg* acg) PROPELLER_EXCLUDES(mu_);
  // After an operation: ACGs that were in use while others opened may have kept the cache
  // above its bounds; release the least recently used idle ones now.
  void Enforce() PROPELLER_EXCLUDES(mu_) { Release(nullptr); }
  // `acg` is being retired (replaced by an adopted copy): no longer accounted.
  void Forget(Acg* acg) PROPELLER_EXCLUDES(mu_);

  uint64_t opens() const { return opens_.load(std::memory_order_relaxed); }

 private:
  // Releases the least recently used idle ACGs other than `keep` until the bounds hold.
  void Release(Acg* keep) PROPELLER_EXCLUDES(mu_);

  size_t max_count_ = 0;
  uint64_t max_bytes_ = 0;
  std::atomic<uint64_t> opens_{0};
  Mutex mu_;
  std::vector<Acg*> open_ PROPELLER_GUARDED_BY(mu_);  // ACGs accounted as open
};

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_OPEN_ACGS_H_
