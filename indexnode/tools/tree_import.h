// Reads an existing directory tree into file records (docs/architecture.md §9 `import`): lstat of
// every entry, user.* extended attributes as user attributes, hard links merged into one record
// with several paths. Single-threaded; used by the propeller-engine tool.
#ifndef PROPELLER_INDEXNODE_TOOLS_TREE_IMPORT_H_
#define PROPELLER_INDEXNODE_TOOLS_TREE_IMPORT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/record.h"
#include "common/status.h"

namespace propeller {

struct ImportOptions {
  uint32_t volume = 1;
  uint64_t files_per_acg = 10'000;  // without causality data, a new ACG per this many files
  uint64_t first_acg = 1;
};

struct ImportStats {
  uint64_t files = 0;
  uint64_t dirs = 0;
  uint64_t skipped = 0;  // entries that vanished or could not be read
  uint64_t acgs = 0;
};

// Walks `root` (not following symlinks, staying on its file system) and calls `emit` with
// batches of kPut updates in depth-first order, so each ACG holds neighbouring directories.
// Paths in the records are relative to `root` ("/" is `root` itself). `emit` errors abort
// the walk and are returned.
Status ImportTree(const std::string& root, const ImportOptions& options,
                  const std::function<Status(std::vector<Update>&)>& emit, ImportStats* stats);

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_TOOLS_TREE_IMPORT_H_
