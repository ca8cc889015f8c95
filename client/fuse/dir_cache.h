// DirCache: descriptors of the backing directories the mount works in (capture_fs.h), kept for
// the directory inodes used most recently.
//
// Nearly every call acts on a name in a directory the kernel names by inode: lookup, create,
// mkdir, unlink, rename take the parent; getattr, setattr and open of a file go to the
// directory holding its name. Resolving that directory from the backing directory for every
// call (BackingTree::OpenDir: an openat2 of its in-volume path, then a close) costs more than
// the one lstat of an absolute path it replaces; a descriptor kept open costs nothing, and the
// call on it walks one component. The InodeTable holds no descriptor per inode (the kernel
// may know more inodes than the process may open files), so the cache is bounded: `capacity`
// directories, the least recently used closed first.
//
// An entry is the directory itself, not a path to it: keyed by (st_dev, st_ino), and made
// only when the path resolved (never through a symbolic link) leads to that very directory.
// It stays right when the directory is renamed; a directory moved or replaced behind the
// mount's back is still the one the kernel's inode means. Users of an entry share its
// descriptor, so eviction never closes one under a call. A directory removed through the
// mount leaves the cache (Drop); one removed behind its back stays until evicted, its calls
// failing with ENOENT as on its old path. Held descriptors keep a file system mounted inside
// the backing tree busy (umount -l still works), as libfuse's passthrough_ll does.
//
// Entries are opened O_RDONLY where the daemon may read the directory (flistxattr serves
// its user.* check then), else O_PATH.
//
// Thread-safe.
#ifndef PROPELLER_CLIENT_FUSE_DIR_CACHE_H_
#define PROPELLER_CLIENT_FUSE_DIR_CACHE_H_

#include <sys/types.h>

#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "client/fuse/backing_tree.h"
#include "client/fuse/inode_table.h"
#include "common/dir_fd.h"

namespace propeller::fuse {

class DirCache {
 public:
  // `inodes` and `tree`: not owned, outlive the cache.
  DirCache(InodeTable* inodes, const BackingTree* tree, size_t capacity)
      : inodes_(inodes), tree_(tree), capacity_(capacity) {}
  DirCache(const DirCache&) = delete;
  DirCache& operator=(const DirCache&) = delete;

  // The backing directory of the directory inode `dir`, open in *out: the cached descriptor,
  // or its in-volume path resolved (BackingTree::OpenDir) and kept when it leads to that
  // directory. 0 or an errno (ENOENT: its name is gone; ELOOP: a symbolic link on the way).
  int Open(Inode* dir, BackingDir* out);
  // The backing file of `inode` as the *at() calls take it: the directory holding its first
  // name (Open) and that name; the backing directory and "." for the root. 0 or an errno
  // (ENOENT: it has no name).
  int Locate(Inode* inode, BackingName* out);
  // The kept descriptor of `inode` in *out, when it is a directory the cache has (the root
  // always); false otherwise. Its attributes are those of the directory the inode means.
  bool Cached(Inode* inode, BackingDir* out);
  // The directory (`dev`, `ino`) was removed: its descriptor goes.
  void Drop(dev_t dev, ino_t ino);

  size_t size();

 private:
  using Key = std::pair<dev_t, ino_t>;
  // Fills *out from the entry of `key`, if any, as most recently used.
  bool FindLocked(const Key& key, BackingDir* out);
  struct Entry {
    std::shared_ptr<const UniqueFd> fd;
    bool readable = false;
    std::list<Key>::iterator lru;
  };

  InodeTable* const inodes_;
  const BackingTree* const tree_;
  const size_t capacity_;
  std::mutex mu_;
  std::map<Key, Entry> entries_;  // Under mu_.
  std::list<Key> lru_;            // Under mu_. Most recently used first.
};

}  // namespace propeller::fuse

#endif  // PROPELLER_CLIENT_FUSE_DIR_CACHE_H_
