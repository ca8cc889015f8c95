// DirTable: every directory's owner, group and mode by (volume, path), for the permission
// filter of searches (docs/architecture.md §10: a path is visible only if every ancestor directory
// grants the caller read and search permission, as `find` would need).
//
// It is updated when an update is logged (not when it is committed), so a chmod that returned
// before a search started is always seen by that search. Missing ancestors deny: a search
// never reveals a path whose directories the index does not know.
// Thread-safe.
#ifndef PROPELLER_INDEXNODE_DIR_TABLE_H_
#define PROPELLER_INDEXNODE_DIR_TABLE_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "common/record.h"
#include "indexnode/engine.h"

namespace propeller {

class DirTable {
 public:
  // Applies a logged update (puts of directories add or replace, puts of other types and
  // deletes remove).
  void Apply(const Update& update);
  // Apply() of each update in order; one shared-lock check when none concerns a directory.
  void ApplyBatch(std::span<const Update> updates);
  void Put(const FileRecord& dir);

  // True when every proper ancestor of `path` in `volume` grants `creds` r and x.
  bool Visible(uint32_t volume, const std::string& path, const Credentials& creds) const;

  size_t size() const;

 private:
  struct Entry {
    uint32_t uid;
    uint32_t gid;
    uint32_t mode;
  };
  using Key = std::pair<uint32_t, std::string>;  // (volume, path)
  void RemoveLocked(FileId id) PROPELLER_REQUIRES(mu_);

  mutable SharedMutex mu_;
  std::map<Key, Entry> by_path_ PROPELLER_GUARDED_BY(mu_);
  std::unordered_map<FileId, std::vector<std::string>, FileIdHash> paths_
      PROPELLER_GUARDED_BY(mu_);
};

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_DIR_TABLE_H_
