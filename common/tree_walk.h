// WalkTree: reads an existing directory tree into file records (DESIGN §9 `import`): lstat of
// every entry, user.* extended attributes as user attributes, hard links merged into one record
// with several paths. Used by `propeller import`, the propeller-engine tool and the mount.
//
// Every entry is read relative to its open directory (fstatat, and the xattrs through
// /proc/self/fd: common/dir_fd.h), so a tree of any depth is read whole, whatever the length
// of its paths, and no symbolic link inside it is followed.
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
  uint64_t skipped = 0;  // entries that vanished or could not be read
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
// WalkTree of the directory open as `dir` (any descriptor of it, O_PATH too; it stays the
// caller's): for a root reached without a path the kernel takes, or without following links.
Status WalkTreeAt(int dir, const TreeWalkOptions& options,
                  const std::function<Status(FileRecord&& record)>& on_record,
                  TreeWalkStats* stats);

// The record of one file from its lstat: id, path, type, size, times, owner, mode, nlink and
// user.* xattrs (integers become int64, other numbers double, the rest strings).
// `abs_path` is where to read it, `path` the in-volume path to store. IOError when the file
// cannot be read.
Status ReadFileRecord(const std::string& abs_path, const std::string& path, uint32_t volume,
                      uint64_t parent_ino, FileRecord* record);
// ReadFileRecord of `name` in the directory open as `dir` (not following `name` when it is a
// symbolic link; "." for the directory itself).
Status ReadFileRecordAt(int dir, const std::string& name, const std::string& path,
                        uint32_t volume, uint64_t parent_ino, FileRecord* record);

// The inode generation of the file open as `fd` (ioctl FS_IOC_GETVERSION: ext4, XFS, btrfs),
// which tells apart two files that had the same inode number one after the other; 0 when the
// file system keeps none (or `fd` is an O_PATH descriptor).
uint32_t InodeGeneration(int fd);

// Sets record's type, size, times, owner, mode and nlink from `st` (what ReadFileRecord takes
// from the lstat; the mount uses it with an open file's fstat).
void FillRecordFromStat(const struct stat& st, FileRecord* record);

// Components-wise path order: true when `a` comes before `b` in WalkTree's order
// ("/a/b" < "/a-c", unlike a bytewise compare).
bool WalkOrderLess(std::string_view a, std::string_view b);

}  // namespace propeller

#endif  // PROPELLER_COMMON_TREE_WALK_H_
