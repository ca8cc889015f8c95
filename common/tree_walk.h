// WalkTree: reads an existing directory tree into file records (docs/architecture.md §9 `import`):
// lstat of every entry, user.* extended attributes as user attributes, hard links merged into one
// record with several paths. Used by `propeller import`, the propeller-engine tool and the mount.
// WalkTreeEntries is the same walk reporting each entry's lstat and paths, and reads the user
// attributes only of the entries whose record the caller asks for: reconcile compares the lstat
// with the index first and needs the record of the few entries that changed (docs/reconcile.md).
//
// Every entry is read relative to its open directory (fstatat, and the xattrs by the *xattrat
// calls or through /proc/self/fd: common/dir_fd.h), so a tree of any depth is read whole,
// whatever the length of its paths, and no symbolic link inside it is followed.
//
// WalkTree and WalkTreeEntries are single-threaded: the callback runs on the calling thread.
// WalkTreeEntriesParallel walks on several threads, in no order. Separate walks may run at once.
#ifndef PROPELLER_COMMON_TREE_WALK_H_
#define PROPELLER_COMMON_TREE_WALK_H_

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

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

// One entry as WalkTreeEntries reports it. It, and every view it returns, is valid only
// during the callback that receives it.
class TreeEntry {
 public:
  // The lstat of the entry (for a file with several links, as met at its first path in walk
  // order).
  const struct stat& stat() const { return *stat_; }
  // The inode number of the directory holding the path met first (WalkTree's parent_ino).
  uint64_t parent_ino() const { return parent_ino_; }
  // The thread reporting it: 0 (the calling thread) to threads - 1 in WalkTreeEntriesParallel,
  // for state kept per thread without a lock; always 0 in WalkTreeEntries.
  unsigned worker() const { return worker_; }
  // The in-volume paths ("/" for the root), sorted bytewise, at least one: all the links of a
  // file with several (those met by the walk), else its one path.
  size_t path_count() const { return linked_ != nullptr ? linked_->paths.size() : 1; }
  std::string_view path(size_t i) const {
    return linked_ != nullptr ? std::string_view(linked_->paths[i]) : path_;
  }
  // The record WalkTree reports for this entry: the fields of stat(), the paths, and the
  // user.* attributes, read now (for a file with several links they were read where it was
  // met first: its directory is no longer open when it is reported). An attribute that cannot
  // be read is left out, as in WalkTree. Call it at most once per entry.
  FileRecord TakeRecord();

 private:
  friend class TreeWalker;
  friend class ParallelTreeWalker;
  friend Status EmitLinked(const struct stat& st, FileRecord* record, uint64_t parent_ino,
                           uint32_t volume, const std::function<Status(TreeEntry&)>& emit);
  const struct stat* stat_ = nullptr;
  uint64_t parent_ino_ = 0;
  unsigned worker_ = 0;
  uint32_t volume_ = 0;
  std::string_view path_;      // a single-path entry's path
  int dir_ = -1;               // and the directory it is in, open,
  const char* name_ = nullptr; // under this name ("." for the root)
  FileRecord* linked_ = nullptr;  // a file with several links: its record, attributes read
};

// WalkTree reporting TreeEntry instead of records: the same entries in the same order, with
// the same stats and errors; an entry's user attributes are read only if the callback asks for
// its record (TreeEntry::TakeRecord). The callback may not keep the entry.
Status WalkTreeEntries(const std::string& root, const TreeWalkOptions& options,
                       const std::function<Status(TreeEntry& entry)>& on_entry,
                       TreeWalkStats* stats);
// WalkTreeEntries of the directory open as `dir` (as WalkTreeAt).
Status WalkTreeEntriesAt(int dir, const TreeWalkOptions& options,
                         const std::function<Status(TreeEntry& entry)>& on_entry,
                         TreeWalkStats* stats);
// WalkTreeEntriesAt on `threads` threads (the calling one and threads - 1 more; at least 1):
// the same entries with the same paths, parents and stats, but in no particular order, and
// `on_entry` called on several threads at once (TreeEntry::worker says which). Each directory
// is read whole by one thread, which hands its subdirectories to whichever thread is free; it
// opens each again from the root by its path (a thread holds one open at a time), and skips
// one that moved or was replaced since its parent was read. A file with several links is
// reported once, with all its paths, after every other entry, on the calling thread. The first
// error from `on_entry` stops every thread and is returned. For a caller that needs no order
// (reconcile).
Status WalkTreeEntriesParallel(int dir, const TreeWalkOptions& options, unsigned threads,
                               const std::function<Status(TreeEntry& entry)>& on_entry,
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

// The value of a user attribute from its text (a `user.NAME` extended attribute's bytes, or
// `propeller attr set`'s VALUE): an integer or a floating-point number when the whole text
// reads as one, else the text (docs/query.md "User attributes").
AttrValue ParseAttrValue(const std::string& text);

// Sets record's type, size, times, owner, mode and nlink from `st` (what ReadFileRecord takes
// from the lstat; the mount uses it with an open file's fstat).
void FillRecordFromStat(const struct stat& st, FileRecord* record);
// The record's type for an st_mode (as FillRecordFromStat sets it).
FileType FileTypeOfMode(mode_t mode);

// Components-wise path order: true when `a` comes before `b` in WalkTree's order
// ("/a/b" < "/a-c", unlike a bytewise compare).
bool WalkOrderLess(std::string_view a, std::string_view b);

}  // namespace propeller

#endif  // PROPELLER_COMMON_TREE_WALK_H_
