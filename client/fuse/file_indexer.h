// FileIndexer: the index updates of the mount's file operations (capture_fs.h). After an
// operation changed the backing tree, it reads what changed — the file's record from its
// descriptor, or by name in its directory (DirCache) or by in-volume path (BackingTree: any
// length, no symbolic link followed), the directories whose entries changed — and hands the
// updates to the IndexWriter, which sends them or queues them (index_writer.h). A file with
// several links keeps its other paths, which only the index knows (IndexWriter::Get).
//
// Thread-safe (stateless but for a counter; the inode table and the writer are).
#ifndef PROPELLER_CLIENT_FUSE_FILE_INDEXER_H_
#define PROPELLER_CLIENT_FUSE_FILE_INDEXER_H_

#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "client/fuse/backing_tree.h"
#include "client/fuse/dir_cache.h"
#include "client/fuse/index_writer.h"
#include "client/fuse/inode_table.h"
#include "client/fuse/process_table.h"
#include "client/lib/propeller.h"
#include "common/status.h"

namespace propeller::fuse {

class FileIndexer {
 public:
  FileIndexer(InodeTable* inodes, DirCache* dirs, const BackingTree* tree, IndexWriter* index,
              uint32_t volume)
      : inodes_(inodes), dirs_(dirs), tree_(tree), index_(index), volume_(volume) {}

  // Indexes the file at in-volume `path` (kPut of its current record); with `creator`, the
  // placement hints of the creating process; `created`: this call just created it
  // (FileUpdate::created). With `changed_dir` — the directory holding the name, which gained
  // it — that directory is re-indexed in the same request. 0 or an errno (ErrnoOf: the file
  // could not be read).
  int IndexPath(const std::string& path, uint64_t parent_ino, const ProcessInfo* creator,
                const std::vector<FileId>* producers, bool created = false,
                Inode* changed_dir = nullptr);
  // IndexPath for the file open as `fd` with attributes `st` and inode generation
  // `generation` (InodeGeneration, read once per open handle; create, close after writing).
  int IndexOpen(int fd, const struct stat& st, uint32_t generation, const std::string& path,
                uint64_t parent_ino,
                const ProcessInfo* creator, const std::vector<FileId>* producers,
                bool created = false, Inode* changed_dir = nullptr);
  // Indexes `inode` under its current name (nothing when it has none). 0 or an errno.
  int IndexInode(Inode* inode);
  // Indexes the file `st` (the fstat of an open handle) of an inode the mount knows no name
  // of any more — its names were removed through the mount while it was open — under the
  // names the index has for it that still hold it (hard links made elsewhere). Nothing when
  // it has no link left: its last unlink sent its delete. 0 or an errno.
  int IndexUnnamed(const struct stat& st);
  // After a rename: the file `st` now at `path`, no longer at `old`, in directory `dir` (a
  // directory's whole subtree: every descendant's path changed). 0 or an errno.
  int IndexRenamed(const struct stat& st, const std::string& path, const std::string& old,
                   Inode* dir);

  // Appends the re-indexing of directory `dir` to `ups`: an entry was created or removed in
  // it, which changed its mtime, ctime and (for subdirectories) nlink. Nothing when the
  // directory has no name or is gone; it travels in the same request as the entry's update.
  void AddDirUpdate(Inode* dir, std::vector<FileUpdate>* ups);
  // The update for a name that is about to stop referring to file `st` (unlink, rename over
  // it): a delete when it is the last link, else the record with that path removed. Called
  // before the name goes, so a delete can carry its route (ResolveRoutes) and its condition
  // (DeleteApplies: the path and the ctime seen now): a create elsewhere that reuses the
  // inode number right after the unlink then keeps its own mapping and record.
  void RemovedName(const std::string& path, const struct stat& st, std::vector<FileUpdate>* ups);
  // Takes the routes of the deletes in `ups` now, before the names go (RemovedName).
  void ResolveRoutes(std::vector<FileUpdate>* ups) { index_->ResolveRoutes(ups); }
  // Sends `ups`, or queues them (IndexWriter::Send). 0 or EIO.
  int Send(std::vector<FileUpdate>& ups, const std::string& what,
           const std::vector<std::string>& touched = {}) {
    return index_->Send(ups, what, touched);
  }

  // Calls failed because the changed file could not be read.
  uint64_t read_errors() const { return read_errors_.load(); }

 private:
  Status RecordAt(const std::string& path, uint64_t parent_ino, Inode* holder, FileRecord* rec);
  Status RecordOfOpen(int fd, const struct stat& st, uint32_t generation,
                      const std::string& path, uint64_t parent_ino, Inode* holder,
                      FileRecord* rec);
  void AddOtherLinks(const std::string& path, FileRecord* rec);
  int SendRecord(const Status& read, FileUpdate u, const std::string& path,
                 const ProcessInfo* creator, const std::vector<FileId>* producers,
                 Inode* changed_dir);
  int IndexSubtree(const std::string& dir, const std::string& old, uint64_t parent_ino);

  InodeTable* const inodes_;
  DirCache* const dirs_;
  const BackingTree* const tree_;
  IndexWriter* const index_;
  const uint32_t volume_;
  std::atomic<uint64_t> read_errors_{0};
};

// True unless the open file `fd` (or `name` in the directory open as `dir`, not following a
// symlink) certainly has no user.* extended attribute: one listxattr into a stack buffer.
bool MayHaveUserXattrs(int fd);
bool MayHaveUserXattrsAt(int dir, const char* name);

}  // namespace propeller::fuse

#endif  // PROPELLER_CLIENT_FUSE_FILE_INDEXER_H_
