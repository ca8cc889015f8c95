// The records of committed splits and merges that the master has not been told of yet
// (Engine::UnreportedSplits, SplitReported; indexnode/README.md, "Splitting an ACG"). A split
// or merge of ACG `source` into `target` writes ACG_DIR/<target>/REPORT.<source> before its
// commit point and notes it here after; the node reports it to the master, which then says so
// (Reported) and the file goes. At Open every ACG directory's reports are found again (Find),
// so a report survives a crash.
//
// The file: "PSR1", source u64, file count u64 (both little-endian), the moved files as
// FileIdKeys (schemas/keys.h), then the masked CRC-32C of everything before it (u32 LE).
//
// Thread-safe; the lock is a leaf.
#ifndef PROPELLER_INDEXNODE_SPLIT_REPORTS_H_
#define PROPELLER_INDEXNODE_SPLIT_REPORTS_H_

#include <cstdint>
#include <functional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/env.h"
#include "common/mutex.h"
#include "common/record.h"
#include "common/status.h"
#include "indexnode/engine.h"

namespace propeller {

class SplitReports {
 public:
  // `env` must outlive this object; `acg_root` is DATA/acg.
  SplitReports(Env* env, std::string acg_root) : env_(env), acg_root_(std::move(acg_root)) {}
  SplitReports(const SplitReports&) = delete;
  SplitReports& operator=(const SplitReports&) = delete;

  // Where the report of `source` into `target` lives.
  std::string PathOf(uint64_t target, uint64_t source) const;
  // Writes it (atomically; not noted yet: Note, after the commit point).
  Status Write(uint64_t target, uint64_t source, std::span<const FileId> files);
  void Note(uint64_t target, uint64_t source) PROPELLER_EXCLUDES(mu_);
  // Removes the file (if any) and the note of an undone merge.
  Status Forget(uint64_t target, uint64_t source) PROPELLER_EXCLUDES(mu_);
  // Notes the reports kept in ACG `id`'s directory (at Open).
  Status Find(uint64_t id) PROPELLER_EXCLUDES(mu_);
  // Every noted report, read from its file; `merged(source, target)` says whether it was a
  // merge. Corruption naming the file when one is damaged.
  Result<std::vector<SplitNotice>> Unreported(
      const std::function<bool(uint64_t source, uint64_t target)>& merged) PROPELLER_EXCLUDES(mu_);
  // The master knows of it: the file and the note go. OK when not noted (asked again).
  Status Reported(uint64_t source, uint64_t target) PROPELLER_EXCLUDES(mu_);
  // The source of a report noted into `target`, or 0.
  uint64_t AnyInto(uint64_t target) PROPELLER_EXCLUDES(mu_);

  static std::string Encode(uint64_t source, std::span<const FileId> files);
  static Status Decode(std::string_view bytes, SplitNotice* notice);

 private:
  std::string DirOf(uint64_t target) const;

  Env* const env_;
  const std::string acg_root_;
  Mutex mu_;
  std::set<std::pair<uint64_t, uint64_t>> noted_ PROPELLER_GUARDED_BY(mu_);  // (target, source)
};

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_SPLIT_REPORTS_H_
