// BackingTree: how the mount reaches the files of its backing directory (capture_fs.h).
//
// Every call on the backing tree starts from one descriptor of the backing directory, opened
// at mount, and an in-volume path ("/" is the backing directory itself, "/a/b" a file in it).
// The directory holding the file is opened with OpenDirBeneath (common/dir_fd.h) and the call
// made with the *at() form and the last component, so
//   - every path the backing file system takes works, however long: the backing directory's
//     own path plus an in-volume path of 4,096 bytes or more is no absolute path the kernel
//     accepts (ENAMETOOLONG), but each piece handed to it is shorter than PATH_MAX;
//   - no symbolic link inside the backing tree is followed on the way to a file, nor at the
//     file itself where the call has a no-follow form. The mount shows the tree's links as
//     links (the kernel follows them itself, as the caller), so where the inode table knows a
//     directory or a file, the tree had one; a link there now was put behind the mount's back
//     — by someone who may write in the backing tree — and following it would have the daemon
//     (root) act on a file elsewhere. Such a call fails with ELOOP (docs/security.md, "The
//     backing tree").
// The xattr calls take the directory and the name too (ListXattrAt and its siblings), and
// truncate a descriptor's /proc/self/fd link (ProcFdPath). The backing directory itself is
// opened once, following links on its way as the administrator named it. The directories the
// mount works in most are kept open by the DirCache (dir_cache.h), which resolves each once.
//
// Thread-safe (immutable after Open).
#ifndef PROPELLER_CLIENT_FUSE_BACKING_TREE_H_
#define PROPELLER_CLIENT_FUSE_BACKING_TREE_H_

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/dir_fd.h"
#include "common/record.h"
#include "common/status.h"
#include "common/tree_walk.h"

namespace propeller::fuse {

// A directory of the backing tree held open: its own descriptor, a DirCache entry's (kept
// open while this holds it), or the backing directory's, borrowed from the BackingTree.
class BackingDir {
 public:
  int fd() const { return fd_; }
  // Whether fd() is open O_RDONLY (which flistxattr takes), not O_PATH.
  bool readable() const { return readable_; }

 private:
  friend class BackingTree;
  friend class DirCache;
  UniqueFd owned_;
  std::shared_ptr<const UniqueFd> shared_;
  int fd_ = -1;
  bool readable_ = false;
};

// A file of the backing tree as the *at() calls take it: its directory, open, and its name
// there ("." for the backing directory itself).
struct BackingName {
  BackingDir dir;
  std::string name;
};

class BackingTree {
 public:
  // Opens the backing directory `backing` (absolute). IOError naming it when it cannot be
  // opened or is no directory.
  static Result<std::unique_ptr<BackingTree>> Open(const std::string& backing);
  BackingTree(const BackingTree&) = delete;
  BackingTree& operator=(const BackingTree&) = delete;

  const std::string& backing() const { return backing_; }
  // The backing directory, open (O_RDONLY where the daemon may read it, else O_PATH). Valid
  // while the BackingTree lives.
  int root_fd() const { return root_.get(); }
  // The backing directory, borrowed.
  void Root(BackingDir* out) const;

  // The directory at in-volume `dir`, open in `*out` (the backing directory for "/", at no
  // cost); with `readable`, O_RDONLY where the daemon may read it. 0 or an errno (ELOOP: a
  // symbolic link on the way; ENOENT, ENOTDIR, EACCES).
  int OpenDir(std::string_view dir, BackingDir* out, bool readable = false) const;
  // The directory holding in-volume `path` and the last component of `path`. 0 or an errno
  // as OpenDir.
  int Locate(std::string_view path, BackingName* out) const;

  // lstat of in-volume `path`. 0 or an errno.
  int Lstat(std::string_view path, struct stat* st) const;
  // The record of the file at in-volume `path` (ReadFileRecordAt). IOError when it cannot be
  // read.
  Status ReadRecord(const std::string& path, uint32_t volume, uint64_t parent_ino,
                    FileRecord* record) const;
  // WalkTreeAt of the directory at in-volume `dir`; paths in the records are relative to it.
  Status Walk(const std::string& dir, const TreeWalkOptions& options,
              const std::function<Status(FileRecord&& record)>& on_record) const;

 private:
  BackingTree(std::string backing, UniqueFd root, bool readable)
      : backing_(std::move(backing)), root_(std::move(root)), root_readable_(readable) {}

  const std::string backing_;
  const UniqueFd root_;
  const bool root_readable_;
};

}  // namespace propeller::fuse

#endif  // PROPELLER_CLIENT_FUSE_BACKING_TREE_H_
