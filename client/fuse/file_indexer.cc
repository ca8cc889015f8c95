#include "client/fuse/file_indexer.h"

#include <fcntl.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "client/fuse/errno_map.h"
#include "common/logging.h"
#include "common/record.h"
#include "common/tree_walk.h"

namespace propeller::fuse {
namespace {

bool HasUserName(const char* names, ssize_t n) {
  if (n < 0) return errno != ENOTSUP;  // ERANGE: a long list; read it the slow way
  for (ssize_t off = 0; off < n;) {
    const char* name = names + off;
    const size_t len = ::strnlen(name, static_cast<size_t>(n - off));
    if (len >= 5 && std::memcmp(name, "user.", 5) == 0) return true;
    off += static_cast<ssize_t>(len) + 1;
  }
  return false;
}

}  // namespace

bool MayHaveUserXattrs(int fd) {
  char names[1024];
  return HasUserName(names, ::flistxattr(fd, names, sizeof(names)));
}

bool MayHaveUserXattrsAt(int dir, const char* name) {
  char names[1024];
  return HasUserName(names, ListXattrAt(dir, name, names, sizeof(names)));
}

// The record of the file at in-volume `path` as it is now, read by name in `holder` (the
// directory inode holding it; null when unknown: by path). Files with several links keep
// their other paths (from the index) that still name this file.
Status FileIndexer::RecordAt(const std::string& path, uint64_t parent_ino, Inode* holder,
                             FileRecord* rec) {
  BackingDir dir;
  if (holder != nullptr && dirs_->Open(holder, &dir) == 0) {
    const size_t slash = path.rfind('/');
    const std::string name = path == "/" ? "." : path.substr(slash + 1);
    PROPELLER_RETURN_IF_ERROR(ReadFileRecordAt(dir.fd(), name, path, volume_, parent_ino, rec));
  } else {
    PROPELLER_RETURN_IF_ERROR(tree_->ReadRecord(path, volume_, parent_ino, rec));
  }
  AddOtherLinks(path, rec);
  return Status::OK();
}

// The record of the file open as `fd` with attributes `st`, known as in-volume `path`: what
// RecordAt reads, without a lookup or a second stat. The user.* attributes are read (by name,
// as RecordAt does) only when the file has some.
Status FileIndexer::RecordOfOpen(int fd, const struct stat& st, uint32_t generation,
                                 const std::string& path, uint64_t parent_ino, Inode* holder,
                                 FileRecord* rec) {
  if (MayHaveUserXattrs(fd)) {
    PROPELLER_RETURN_IF_ERROR(RecordAt(path, parent_ino, holder, rec));
  } else {
    *rec = FileRecord{};
    rec->id = FileId{volume_, static_cast<uint64_t>(st.st_ino)};
    rec->paths = {path};
    rec->parent_ino = parent_ino;
    FillRecordFromStat(st, rec);
    AddOtherLinks(path, rec);
  }
  // Its generation, read from the descriptor when it was opened (a record read by name has
  // none: the index keeps the one it has).
  if (S_ISREG(st.st_mode)) rec->inode_generation = generation;
  return Status::OK();
}

// A file with several links keeps its other paths (from the index) that still name it.
void FileIndexer::AddOtherLinks(const std::string& path, FileRecord* rec) {
  if (rec->nlink > 1 && rec->type != FileType::kDirectory) {
    Result<FileRecord> old = index_->Get(rec->id);
    if (old.ok()) {
      for (const std::string& p : old->paths) {
        if (p == path) continue;
        struct stat st;
        if (tree_->Lstat(p, &st) == 0 && st.st_ino == rec->id.ino) rec->paths.push_back(p);
      }
      std::sort(rec->paths.begin(), rec->paths.end());
    }
  }
}

// Indexes the file at `path` (kPut of its current record); with `creator` set, the placement
// hints of the creating process; `created`: this call just created it (FileUpdate::created).
// 0 or an errno.
// With `changed_dir`, that directory (which gained the entry) is re-indexed in the same
// request.
int FileIndexer::IndexPath(const std::string& path, uint64_t parent_ino, const ProcessInfo* creator,
              const std::vector<FileId>* producers, bool created,
                           Inode* changed_dir) {
  FileUpdate u;
  u.created = created;
  Status s = RecordAt(path, parent_ino, changed_dir, &u.record);
  return SendRecord(s, std::move(u), path, creator, producers, changed_dir);
}

// IndexPath for the file open as `fd` with attributes `st` (create, close after writing).
int FileIndexer::IndexOpen(int fd, const struct stat& st, uint32_t generation,
                           const std::string& path, uint64_t parent_ino,
              const ProcessInfo* creator, const std::vector<FileId>* producers,
                           bool created, Inode* changed_dir) {
  FileUpdate u;
  u.created = created;
  Status s = RecordOfOpen(fd, st, generation, path, parent_ino, changed_dir, &u.record);
  return SendRecord(s, std::move(u), path, creator, producers, changed_dir);
}

// Sends the kPut `u` whose record was read with result `read` (NotFound: the file is gone
// again, nothing to index). 0 or EIO (logged).
int FileIndexer::SendRecord(const Status& read, FileUpdate u, const std::string& path,
               const ProcessInfo* creator, const std::vector<FileId>* producers,
                            Inode* changed_dir) {
  if (read.code() == StatusCode::kNotFound) return 0;
  if (!read.ok()) {
    ++read_errors_;
    Log(LogLevel::kError, "mount: reading %s for the index: %s", path.c_str(),
        read.ToString().c_str());
    return ErrnoOf(read);
  }
  if (creator != nullptr) u.app = creator->app;
  if (producers != nullptr) u.producers = *producers;
  std::vector<FileUpdate> ups;
  ups.push_back(std::move(u));
  if (changed_dir != nullptr) AddDirUpdate(changed_dir, &ups);
  return Send(ups, path);
}

// Appends the re-indexing of directory `dir` to `ups`: an entry was created or removed in
// it, which changed its mtime, ctime and (for subdirectories) nlink. Nothing when the
// directory has no name or is gone; it travels in the same request as the entry's update.
// Like RecordOfOpen, the user.* attributes are read only when one llistxattr shows some.
void FileIndexer::AddDirUpdate(Inode* dir, std::vector<FileUpdate>* ups) {
  std::string path;
  uint64_t parent_ino = 0;
  if (!inodes_->PathOf(dir, &path, &parent_ino)) return;
  FileUpdate u;
  BackingDir d;  // the directory itself, open
  struct stat st;
  if (dirs_->Open(dir, &d) != 0 || ::fstat(d.fd(), &st) != 0) return;
  if (d.readable() ? MayHaveUserXattrs(d.fd()) : MayHaveUserXattrsAt(d.fd(), ".")) {
    // A directory: no other links to add (RecordAt).
    if (!ReadFileRecordAt(d.fd(), ".", path, volume_, parent_ino, &u.record).ok()) return;
  } else {
    u.record.id = FileId{volume_, static_cast<uint64_t>(st.st_ino)};
    u.record.paths = {path};
    u.record.parent_ino = parent_ino;
    FillRecordFromStat(st, &u.record);
  }
  ups->push_back(std::move(u));
}

// Indexes `inode` under its current name (nothing when it has none). 0 or an errno.
int FileIndexer::IndexInode(Inode* inode) {
  std::string path;
  uint64_t parent_ino = 0;
  if (!inodes_->PathOf(inode, &path, &parent_ino)) return 0;
  Inode* holder = nullptr;
  std::string name;
  if (!inodes_->FirstLink(inode, &holder, &name)) holder = nullptr;  // the root
  FileUpdate u;
  Status s = RecordAt(path, parent_ino, holder, &u.record);
  return SendRecord(s, std::move(u), path, nullptr, nullptr, nullptr);
}

int FileIndexer::IndexUnnamed(const struct stat& st) {
  if (st.st_nlink == 0 || S_ISDIR(st.st_mode)) return 0;
  const FileId id{volume_, static_cast<uint64_t>(st.st_ino)};
  Result<FileRecord> old = index_->Get(id);
  if (!old.ok() && old.status().code() == StatusCode::kNotFound) return 0;
  if (!old.ok()) {
    // The index cannot say which names it knows: the update is queued without names, and
    // its delivery reads them (IndexWriter::Refresh), as for a removed name.
    std::vector<FileUpdate> ups(1);
    ups[0].record.id = id;
    return Send(ups, "an open file without a name");
  }
  for (const std::string& p : old->paths) {
    struct stat now;
    if (tree_->Lstat(p, &now) != 0 || now.st_ino != st.st_ino) continue;
    const size_t slash = p.rfind('/');
    struct stat dir;
    const uint64_t parent_ino =
        slash == std::string::npos || tree_->Lstat(slash == 0 ? "/" : p.substr(0, slash), &dir) != 0
            ? 0
            : static_cast<uint64_t>(dir.st_ino);
    return IndexPath(p, parent_ino, nullptr, nullptr);  // with its other names (RecordAt)
  }
  return 0;
}

// The update for a name that is about to stop referring to file `st` (unlink, rename over
// it): a delete when it is the last link, else the record with that path removed. Called
// before the name goes, so a delete can carry its route (Client::ResolveRoutes) and its
// condition (DeleteApplies: the path and the ctime seen now): a create elsewhere that
// reuses the inode number right after the unlink then keeps its own mapping and record.
void FileIndexer::RemovedName(const std::string& path, const struct stat& st, std::vector<FileUpdate>* ups) {
  FileUpdate u;
  const FileId id{volume_, st.st_ino};
  if (S_ISDIR(st.st_mode) || st.st_nlink <= 1) {
    u.op = UpdateOp::kDelete;
    u.record.id = id;
    u.record.paths = {path};
    u.record.ctime = FileTimeOf(st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
    ups->push_back(std::move(u));
    return;
  }
  Result<FileRecord> old = index_->Get(id);
  if (!old.ok() && old.status().code() == StatusCode::kNotFound) return;  // nothing to remove
  if (!old.ok()) {
    // The index cannot say which names it knows: the name's removal is queued, and its
    // delivery re-reads the file's names (IndexWriter::Refresh).
    u.record.id = id;
    ups->push_back(std::move(u));
    return;
  }
  u.record = std::move(*old);
  std::erase(u.record.paths, path);
  u.record.nlink = st.st_nlink - 1;
  if (u.record.paths.empty()) {
    u.op = UpdateOp::kDelete;
    u.record = FileRecord{};
    u.record.id = id;
    u.record.paths = {path};
    u.record.ctime = FileTimeOf(st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
  }
  ups->push_back(std::move(u));
}

// Re-indexes every file under the directory now at in-volume `dir` (after a rename moved
// it from `old`): every descendant's path changed.
int FileIndexer::IndexSubtree(const std::string& dir, const std::string& old, uint64_t parent_ino) {
  const std::vector<std::string> touched = {old};
  std::vector<FileUpdate> ups;
  int err = 0;
  TreeWalkOptions wo;
  wo.volume = volume_;
  Status s = tree_->Walk(dir, wo, [&](FileRecord&& rec) -> Status {
    for (std::string& p : rec.paths) p = p == "/" ? dir : dir + p;
    if (rec.paths.size() == 1 && rec.paths[0] == dir) rec.parent_ino = parent_ino;
    if (rec.nlink > 1 && rec.type != FileType::kDirectory) {
      // Other links outside the subtree keep their paths.
      Result<FileRecord> old = index_->Get(rec.id);
      if (old.ok()) {
        for (const std::string& p : old->paths) {
          if (std::find(rec.paths.begin(), rec.paths.end(), p) != rec.paths.end()) continue;
          if (PathInScope(p, dir)) continue;
          struct stat st;
          if (tree_->Lstat(p, &st) == 0 && st.st_ino == rec.id.ino) rec.paths.push_back(p);
        }
        std::sort(rec.paths.begin(), rec.paths.end());
      }
    }
    FileUpdate u;
    u.record = std::move(rec);
    ups.push_back(std::move(u));
    if (ups.size() >= 1000) {
      err = Send(ups, dir + " (subtree)", touched);
      ups.clear();
      if (err != 0) return Status::IOError("index update failed");
    }
    return Status::OK();
  });
  if (err != 0) return err;
  if (!s.ok()) {
    ++read_errors_;
    Log(LogLevel::kError, "mount: re-indexing %s: %s", dir.c_str(), s.ToString().c_str());
    return ErrnoOf(s);
  }
  return Send(ups, dir + " (subtree)", touched);
}


int FileIndexer::IndexRenamed(const struct stat& st, const std::string& path,
                              const std::string& old, Inode* dir) {
  if (S_ISDIR(st.st_mode)) return IndexSubtree(path, old, dir->ino);
  FileUpdate u;
  Status s = RecordAt(path, dir->ino, dir, &u.record);
  if (s.code() == StatusCode::kNotFound) return 0;
  if (!s.ok()) return ErrnoOf(s);
  std::erase(u.record.paths, old);
  std::vector<FileUpdate> ups;
  ups.push_back(std::move(u));
  return Send(ups, path, {old});
}

}  // namespace propeller::fuse
