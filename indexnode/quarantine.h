// The ACGs found damaged (docs/faults.md, "Damaged files"): an ACG in which damage was found
// while serving (Acg::kDamagedMark), one whose store shard failed its check at start
// (Store::Open), and one of layout 3 whose own data file fails its check before conversion
// (CheckLmdbFile: always the quick check, the deep one unless the file is as the last clean
// close left it) is moved to DATA/quarantine/acg-<id>-<time> (never removed; its data from
// the store goes there as data.mdb, Store::ExportAcg) and an empty directory marked REBUILD
// takes its place. Searches that need it fail with the reason until MarkRebuilt (a mount
// re-indexes its backing tree first); updates go on.
//
// Thread-safe; the lock is a leaf.
#ifndef PROPELLER_INDEXNODE_QUARANTINE_H_
#define PROPELLER_INDEXNODE_QUARANTINE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <string>

#include "common/env.h"
#include "common/mutex.h"
#include "common/status.h"
#include "indexnode/store.h"

namespace propeller {

class Quarantine {
 public:
  // `env` must outlive this object; `data_dir` is the engine's.
  Quarantine(Env* env, std::string data_dir) : env_(env), data_dir_(std::move(data_dir)) {}
  Quarantine(const Quarantine&) = delete;
  Quarantine& operator=(const Quarantine&) = delete;
  // Where the ACGs' data lives (set once, before the first Put).
  void SetStore(Store* store) { store_ = store; }

  // Before ACG `id` opens at start: notes one left to rebuild by an earlier start, and
  // quarantines a damaged one (above). IOError when its files cannot be read.
  Status CheckAtOpen(uint64_t id) PROPELLER_EXCLUDES(mu_);
  // Quarantines ACG `id` because of `why`. `keep_data`: its data in the store is exported
  // beside its directory first (false when the store's damaged shard was set aside whole).
  Status Put(uint64_t id, const std::string& why, bool keep_data = true)
      PROPELLER_EXCLUDES(mu_);
  // Why ACG `id` waits for its rebuild, or "".
  std::string WhyOf(uint64_t id) PROPELLER_EXCLUDES(mu_);
  // Every ACG waiting for its rebuild -> why.
  std::map<uint64_t, std::string> All() PROPELLER_EXCLUDES(mu_);
  // The ACG was rebuilt: it answers again. NotFound when it was not waiting.
  Status MarkRebuilt(uint64_t id) PROPELLER_EXCLUDES(mu_);

 private:
  std::string AcgDir(uint64_t id) const;

  Env* const env_;
  const std::string data_dir_;
  Store* store_ = nullptr;
  Mutex mu_;
  std::map<uint64_t, std::string> rebuilding_ PROPELLER_GUARDED_BY(mu_);  // id -> why
  // Whether rebuilding_ ever held an entry (set under mu_; never cleared: a hint).
  std::atomic<bool> any_{false};
};

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_QUARANTINE_H_
