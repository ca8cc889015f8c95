// The ACGs found damaged (docs/faults.md, "Damaged files"): before an ACG opens at start its
// data file is checked (CheckLmdbFile: always the quick check, the deep one unless the file is
// as the last clean close left it); a damaged one — or one in which damage was found while
// serving (Acg::kDamagedMark) — is moved to DATA/quarantine/acg-<id>-<time> (never removed)
// and an empty directory marked REBUILD takes its place. Searches that need it fail with the
// reason until MarkRebuilt (a mount re-indexes its backing tree first); updates go on.
//
// Thread-safe; the lock is a leaf.
#ifndef PROPELLER_INDEXNODE_QUARANTINE_H_
#define PROPELLER_INDEXNODE_QUARANTINE_H_

#include <cstdint>
#include <map>
#include <string>

#include "common/env.h"
#include "common/mutex.h"
#include "common/status.h"

namespace propeller {

class Quarantine {
 public:
  // `env` must outlive this object; `data_dir` is the engine's.
  Quarantine(Env* env, std::string data_dir) : env_(env), data_dir_(std::move(data_dir)) {}
  Quarantine(const Quarantine&) = delete;
  Quarantine& operator=(const Quarantine&) = delete;

  // Before ACG `id` opens at start: notes one left to rebuild by an earlier start, and
  // quarantines a damaged one (above). IOError when its files cannot be read.
  Status CheckAtOpen(uint64_t id) PROPELLER_EXCLUDES(mu_);
  // Quarantines ACG `id` because of `why`.
  Status Put(uint64_t id, const std::string& why) PROPELLER_EXCLUDES(mu_);
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
  Mutex mu_;
  std::map<uint64_t, std::string> rebuilding_ PROPELLER_GUARDED_BY(mu_);  // id -> why
};

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_QUARANTINE_H_
