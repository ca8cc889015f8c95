// InodeTable: the mount's inodes (capture_fs.h, "Inodes"). Every file the kernel knows is keyed
// by (st_dev, st_ino) and lives while the kernel holds a lookup reference (as in libfuse's
// passthrough_ll) or another inode links into it, but holds no descriptor: the kernel may know
// more inodes than the process may open files — 20,000 on this machine kind — so paths are
// the handles. An inode holds the names it is known by, (directory, name) pairs kept current
// by rename, link and unlink; operations work on the in-volume paths and names they give,
// which the DirCache (dir_cache.h) and the BackingTree (backing_tree.h) resolve at any length.
// An inode whose names are all gone while it is open is reached through its open handles
// (OpenFiles::DupFdOf). Query directories and their entries are virtual inodes of the same
// table.
//
// Thread-safe (one mutex). An Inode's fields are guarded as their comments say.
#ifndef PROPELLER_CLIENT_FUSE_INODE_TABLE_H_
#define PROPELLER_CLIENT_FUSE_INODE_TABLE_H_

#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "client/fuse/query_listings.h"
#include "common/status.h"

namespace propeller::fuse {

enum class InodeKind : uint8_t { kFile, kQueryDir, kQueryEntry };

struct Handle;  // open_files.h
struct Inode;
struct InodeLink {
  Inode* dir = nullptr;
  std::string name;
};

struct Inode {
  InodeKind kind = InodeKind::kFile;
  dev_t dev = 0;
  ino_t ino = 0;
  uint64_t nlookup = 0;   // the kernel's references. Under the table's mutex.
  uint64_t children = 0;  // links of other inodes into this one. Under the table's mutex.
  // The names the inode is known by: (directory, name) pairs seen by lookups and kept up to
  // date by rename, link and unlink. A directory has one; a file with hard links may have
  // several; none when every known name was removed (an open, unlinked file). kQueryDir:
  // its scope directory; kQueryEntry: its query directory. Each link keeps its directory
  // alive (`children`). Under the table's mutex.
  std::vector<InodeLink> links;
  Inode* parent() const { return links.empty() ? nullptr : links.front().dir; }
  // Virtual inodes (query directories and their entries).
  std::string vkey;        // key in the table's virtual map
  uint64_t vino = 0;       // st_ino shown for it
  std::string query;       // kQueryDir
  QueryListings listings;  // kQueryDir: each recent caller's last listing (thread-safe)
  // Kernel passthrough (open_files.h): the backing id every open of this inode names while
  // `backing_opens` handles use it (the kernel requires one id per inode). Under
  // OpenFiles' mutex.
  int32_t backing_id = 0;
  uint32_t backing_opens = 0;
  // The inode's open handles, files and directories (OpenFiles::DupFdOf). Under OpenFiles'
  // mutex.
  std::vector<Handle*> handles;
};

class InodeTable {
 public:
  static constexpr uint64_t kRootId = 1;  // FUSE_ROOT_ID

  InodeTable() = default;
  InodeTable(const InodeTable&) = delete;
  InodeTable& operator=(const InodeTable&) = delete;

  // Takes the root's identity from the backing directory, open as `root_fd`. IOError when it
  // cannot be read.
  Status Init(int root_fd);

  Inode* root() { return &root_; }
  // The inode of a FUSE inode number, and back (the root is kRootId, others their address).
  Inode* Get(uint64_t id) { return id == kRootId ? &root_ : reinterpret_cast<Inode*>(id); }
  uint64_t Id(Inode* inode) {
    return inode == &root_ ? kRootId : reinterpret_cast<uint64_t>(inode);
  }

  // Finds or creates the inode of file `st`, seen as `name` in `parent`, and counts one
  // lookup.
  Inode* Intern(Inode* parent, std::string_view name, const struct stat& st);
  // Finds or creates the virtual inode `name` in `parent` (counting one lookup); *created
  // says which.
  Inode* InternVirtual(Inode* parent, const std::string& name, InodeKind kind, bool* created);
  // The kernel forgot `n` lookups of `inode`.
  void Forget(Inode* inode, uint64_t n);

  // The file `st`, known as `name` in `parent`, lost that name (unlink, rmdir).
  void Unlinked(const struct stat& st, Inode* parent, std::string_view name);
  // `src`, known as `name` in `parent`, is now `newname` in `newparent`; what it replaced
  // there (`dst`, when there was one) lost that name or, with `exchange`, took the old one.
  void Renamed(const struct stat& src, Inode* parent, std::string_view name,
               const struct stat* dst, Inode* newparent, std::string_view newname,
               bool exchange);

  // The in-volume path of a file inode ("/" for the root); false when its name is gone.
  // `parent_ino` (may be null) receives the inode number of the directory holding that name
  // (0 for the root).
  bool PathOf(Inode* inode, std::string* path, uint64_t* parent_ino = nullptr);
  // The first (directory, name) of `inode`; false when it has none.
  bool FirstLink(Inode* inode, Inode** dir, std::string* name);

 private:
  void AddLinkLocked(Inode* inode, Inode* dir, std::string_view name);
  void RemoveLinkLocked(Inode* inode, Inode* dir, std::string_view name);
  Inode* FindLocked(const struct stat& st, Inode* dir, std::string_view name);
  void FreeIfUnusedLocked(Inode* inode);

  Inode root_;

  std::mutex mu_;
  std::map<std::pair<dev_t, ino_t>, std::unique_ptr<Inode>> files_;  // Under mu_.
  std::unordered_map<std::string, std::unique_ptr<Inode>> virtual_;   // Under mu_.
  uint64_t next_vino_ = 1;                                            // Under mu_.
};

}  // namespace propeller::fuse

#endif  // PROPELLER_CLIENT_FUSE_INODE_TABLE_H_
