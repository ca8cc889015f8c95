// WalkTree: reads an existing directory tree into file records (DESIGN §9 `import`): lstat of
// every entry, user.* extended attributes as user attributes, hard links merged into one record
// with several paths. Used by `propeller import` and the propeller-engine tool.
//
// Single-threaded; the callback runs on the calling thread.
#ifndef PROPELLER_COMMON_TREE_WALK_H_
#define PROPELLER_COMMON_TREE_WALK_H_

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <string>

#include "common/record.h"
#include "common/status.h"

namespace propeller {

struct TreeWalkOptions {
  uint32_t volume = 1;  // FileId::volume of every record
};

struct TreeWalkStats {
  uint64_t files = 0;    // non-directories reported
  uint64_t dirs = 0;     // directories reported (the root included)
  uint64_t skipped = 0;  // entries that vanished, could not be read, or have unusable names
};

// Walks `root` (not following symlinks, staying on its file system) and calls `on_record` for
// the root ("/") and every entry below it, in depth-first pre-order with names sorted bytewise —
// which is the lexicographic order of the paths' component lists, so a resumed walk can skip
// what an earlier one reported. Records of files with several hard links are reported once,
// after the walk, with all their paths. Paths are relative to `root`. An error from `on_record`
// stops the walk and is returned; an unreadable root is IOError, a non-directory
// InvalidArgument. `stats` may be null.
Status WalkTree(const std::string& root, const TreeWalkOptions& options,
                const std::function<Status(FileRecord&& record)>& on_record,
                TreeWalkStats* stats);

// The record of one file from its lstat: id, path, type, size, times, owner, mode, nlink and
// user.* xattrs (integers become int64, other numbers double, the rest strings).
// `abs_path` is where to read it, `path` the in-volume path to store.
Status ReadFileRecord(const std::string& abs_path, const std::string& path, uint32_t volume,
                      uint64_t parent_ino, FileRecord* record);

// Sets record's type, size, times, owner, mode and nlink from `st` (what ReadFileRecord takes
// from the lstat; the mount uses it with an open file's fstat).
void FillRecordFromStat(const struct stat& st, FileRecord* record);

// Components-wise path order: true when `a` comes before `b` in WalkTree's order
// ("/a/b" < "/a-c", unlike a bytewise compare).
bool WalkOrderLess(std::string_view a, std::string_view b);

}  // namespace propeller

#endif  // PROPELLER_COMMON_TREE_WALK_H_
