#define FUSE_USE_VERSION 314
#include "client/fuse/capture_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <fuse3/fuse_lowlevel.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "client/fuse/edge_capture.h"
#include "client/fuse/errno_map.h"
#include "client/fuse/file_indexer.h"
#include "client/fuse/index_writer.h"
#include "client/fuse/inode_table.h"
#include "client/fuse/kernel_io.h"
#include "client/fuse/open_files.h"
#include "client/fuse/query_dirs.h"
#include "client/fuse/query_listings.h"
#include "client/fuse/session.h"
#include "common/logging.h"
#include "common/query/query.h"
#include "common/record.h"

namespace propeller::fuse {
namespace {

int64_t MonoNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool IsQueryName(const char* name) { return name[0] == '?'; }

// `name` in directory `parent` (an in-volume or an absolute path).
std::string ChildPath(const std::string& parent, const char* name) {
  return parent == "/" ? "/" + std::string(name) : parent + "/" + name;
}

}  // namespace

class CaptureFs::Impl {
 public:
  explicit Impl(const CaptureFsOptions& o)
      : options_(o),
        inodes_(o.backing),
        indexer_(&inodes_, o.index, o.volume),
        query_dirs_(QueryDirsOptions{&inodes_, o.client, o.index, o.volume, o.search_wait_ms}),
        edges_(EdgeCaptureOptions{o.client, o.volume, o.edge_flush_interval_ms, o.capture_edges}),
        passthrough_(o.passthrough && !o.writeback),
        open_files_(&passthrough_) {}

  ~Impl() {
    edges_.StopFlusher();
    session_.reset();  // unmounts
  }

  Status Init() {
    PROPELLER_RETURN_IF_ERROR(inodes_.Init());
    // Modes arrive masked by the kernel; the daemon's own umask must not mask them again.
    ::umask(0);
    am_root_ = ::geteuid() == 0;
    return Status::OK();
  }

  Status MountSession() {
    SessionOptions so;
    so.backing = options_.backing;
    so.mountpoint = options_.mountpoint;
    so.allow_other = options_.allow_other;
    so.debug = options_.debug;
    so.max_threads = options_.max_threads;
    so.poll_us = options_.poll_us;
    static const fuse_lowlevel_ops ops = MakeOps();
    PROPELLER_ASSIGN_OR_RETURN(session_,
                               Session::Mount(so, ops, this, &killpriv_, &passthrough_));
    open_files_.set_dev_fd(session_->dev_fd());
    edges_.StartFlusher();
    return Status::OK();
  }

  Status Run() {
    Status s = session_->Run();
    edges_.Flush();
    return s;
  }

  void Stop() {
    if (session_ != nullptr) session_->Stop();
  }

  CaptureFsStats stats() const {
    CaptureFsStats s;
    s.read_errors = indexer_.read_errors();
    s.edges_sent = edges_.edges_sent();
    s.edge_errors = edges_.edge_errors();
    s.query_dirs = query_dirs_.listings();
    s.processes = edges_.processes();
    s.passthrough_opens = open_files_.passthrough_opens();
    s.polled_requests = session_ != nullptr ? session_->polled_requests() : 0;
    return s;
  }

  // ---- credentials of the caller for creating files ----

  // Runs the enclosing block with the file-system identity of `req`'s caller (uid, gid,
  // groups), so what a create makes is theirs and the kernel checks their rights.
  class AsCaller {
   public:
    AsCaller(Impl* fs, fuse_req_t req) {
      const fuse_ctx* ctx = fuse_req_ctx(req);
      if (fs->am_root_ && !(ctx->uid == 0 && ctx->gid == 0)) as_.emplace(fs->CallerOf(req));
    }

   private:
    std::optional<ScopedFsCredentials> as_;
  };

  // ---- replies ----

  int StatFile(Inode* inode, struct stat* st) {
    std::string abs;
    if (!inodes_.AbsPathOf(inode, &abs)) return ENOENT;
    if (::lstat(abs.c_str(), st) != 0) return errno;
    return 0;
  }

  // Looks `name` up in directory `parent` and fills `e` (one lookup counted). 0 or an errno.
  int DoLookup(Inode* parent, const char* name, fuse_entry_param* e) {
    std::memset(e, 0, sizeof(*e));
    std::string dir;
    if (!inodes_.AbsPathOf(parent, &dir)) return ENOENT;
    if (::lstat(ChildPath(dir, name).c_str(), &e->attr) != 0) return errno;
    InternEntry(parent, name, e);
    return 0;
  }

  // Interns the file of e->attr as `name` in `parent` (one lookup counted) and fills the rest
  // of `e`.
  void InternEntry(Inode* parent, const char* name, fuse_entry_param* e) {
    Inode* inode = inodes_.Intern(parent, name, e->attr);
    e->ino = inodes_.Id(inode);
    e->attr_timeout = options_.attr_timeout_s;
    e->entry_timeout = options_.entry_timeout_s;
  }

  // ---- query directories ----

  // Who sent `req`, as the kernel says: uid, gid and supplementary groups (RecentCallers).
  Credentials CallerOf(fuse_req_t req) {
    const fuse_ctx* ctx = fuse_req_ctx(req);
    Credentials creds{ctx->uid, ctx->gid, {}};
    creds.groups = recent_callers_.Groups(ctx->pid, ctx->uid, ctx->gid, MonoNanos(), [req] {
      gid_t groups[256];
      const int n = fuse_req_getgroups(req, 256, groups);
      return std::vector<uint32_t>(groups, groups + std::clamp(n, 0, 256));
    });
    return creds;
  }

  void LookupQueryDir(fuse_req_t req, Inode* parent, const char* name) {
    // Parse now: a malformed query fails the lookup with EINVAL and a log line naming the
    // position (the search would say the same, later and less visibly).
    Result<Query> q = Query::Parse(name + 1);
    if (!q.ok()) {
      Log(LogLevel::kError, "mount: query directory '%s': %s", name,
          q.status().ToString().c_str());
      fuse_reply_err(req, EINVAL);
      return;
    }
    bool created = false;
    Inode* qdir = inodes_.InternVirtual(parent, name, InodeKind::kQueryDir, &created);
    if (created) qdir->query = name + 1;
    fuse_entry_param e;
    std::memset(&e, 0, sizeof(e));
    e.ino = inodes_.Id(qdir);
    QueryDirs::FillAttr(qdir, nullptr, &e.attr);
    e.attr_timeout = 0;  // fresh at every access
    e.entry_timeout = 0;
    fuse_reply_entry(req, &e);
  }

  void LookupQueryEntry(fuse_req_t req, Inode* qdir, const char* name) {
    QueryEntry found;
    if (int err = query_dirs_.FindEntry(CallerOf(req), qdir, name, &found); err != 0) {
      fuse_reply_err(req, err);
      return;
    }
    bool created = false;
    Inode* inode = inodes_.InternVirtual(qdir, name, InodeKind::kQueryEntry, &created);
    fuse_entry_param e;
    std::memset(&e, 0, sizeof(e));
    e.ino = inodes_.Id(inode);
    QueryDirs::FillAttr(inode, &found, &e.attr);
    e.attr_timeout = 0;  // every stat comes back here, with its caller's credentials
    e.entry_timeout = 0;
    fuse_reply_entry(req, &e);
  }

  // ---- operations ----

  static Impl* Self(fuse_req_t req) { return static_cast<Impl*>(Session::AppOf(req)); }

  void OnInit(struct fuse_conn_info* conn) {
    if (options_.writeback && (conn->capable & FUSE_CAP_WRITEBACK_CACHE)) {
      conn->want |= FUSE_CAP_WRITEBACK_CACHE;
    } else {
      conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
    }
    // Plain readdir: readdirplus would take a lookup per entry (PITFALLS).
    conn->want &= ~FUSE_CAP_READDIRPLUS;
    conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
    // Never FUSE_CAP_NO_OPEN_SUPPORT / no-flush: they silently stop open/close tracking.
  }

  void OnLookup(fuse_req_t req, fuse_ino_t parent_ino, const char* name) {
    Inode* parent = inodes_.Get(parent_ino);
    if (parent->kind == InodeKind::kQueryDir) return LookupQueryEntry(req, parent, name);
    if (parent->kind == InodeKind::kQueryEntry) return (void)fuse_reply_err(req, ENOTDIR);
    if (IsQueryName(name)) return LookupQueryDir(req, parent, name);
    fuse_entry_param e;
    int err = DoLookup(parent, name, &e);
    if (err == ENOENT) {
      // Negative entry, cached by the kernel for the entry timeout (creates invalidate it).
      std::memset(&e, 0, sizeof(e));
      e.entry_timeout = options_.entry_timeout_s;
      fuse_reply_entry(req, &e);
      return;
    }
    if (err != 0) return (void)fuse_reply_err(req, err);
    fuse_reply_entry(req, &e);
  }

  void OnGetattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
    Inode* inode = inodes_.Get(ino);
    struct stat st;
    if (inode->kind != InodeKind::kFile) {
      QueryEntry entry;
      if (inode->kind == InodeKind::kQueryEntry) {
        if (int err = query_dirs_.EntryFor(CallerOf(req), inode, &entry); err != 0) {
          return (void)fuse_reply_err(req, err);
        }
      }
      QueryDirs::FillAttr(inode, &entry, &st);
      fuse_reply_attr(req, &st, 0);
      return;
    }
    int err = 0;
    if (fi != nullptr && HandleOf(fi)->fd >= 0) {
      if (::fstat(HandleOf(fi)->fd, &st) != 0) err = errno;
    } else {
      err = StatFile(inode, &st);
    }
    if (err != 0) return (void)fuse_reply_err(req, err);
    fuse_reply_attr(req, &st, options_.attr_timeout_s);
  }

  void OnSetattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int valid,
                 struct fuse_file_info* fi) {
    Client::Deadline deadline(options_.index->timeout_ms());  // all its index calls
    Inode* inode = inodes_.Get(ino);
    if (inode->kind != InodeKind::kFile) return (void)fuse_reply_err(req, EROFS);
    std::string abs;
    if (!inodes_.AbsPathOf(inode, &abs) && fi == nullptr) return (void)fuse_reply_err(req, ENOENT);
    if (const int err = options_.index->Admit(); err != 0) return (void)fuse_reply_err(req, err);
    int rc = 0;
    if (valid & FUSE_SET_ATTR_MODE) {
      rc = fi != nullptr ? ::fchmod(HandleOf(fi)->fd, attr->st_mode)
                         : ::chmod(abs.c_str(), attr->st_mode);
      if (rc != 0) return (void)fuse_reply_err(req, errno);
    }
    if (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
      uid_t uid = (valid & FUSE_SET_ATTR_UID) ? attr->st_uid : static_cast<uid_t>(-1);
      gid_t gid = (valid & FUSE_SET_ATTR_GID) ? attr->st_gid : static_cast<gid_t>(-1);
      rc = fi != nullptr ? ::fchown(HandleOf(fi)->fd, uid, gid) : ::lchown(abs.c_str(), uid, gid);
      if (rc != 0) return (void)fuse_reply_err(req, errno);
    }
    if (valid & FUSE_SET_ATTR_SIZE) {
      if (fi != nullptr) {
        rc = ::ftruncate(HandleOf(fi)->fd, attr->st_size);
      } else {
        rc = ::truncate(abs.c_str(), attr->st_size);
      }
      if (rc != 0) return (void)fuse_reply_err(req, errno);
    }
    // FATTR_KILL_SUIDGID (KillprivV2): a chown, or a truncate by a caller without CAP_FSETID.
    if ((valid & FUSE_SET_ATTR_KILL_SUID) && !(valid & FUSE_SET_ATTR_MODE)) {
      const int err = OpenFiles::KillPrivileges(req, fi != nullptr ? HandleOf(fi)->fd : -1, abs);
      if (err != 0) return (void)fuse_reply_err(req, err);
    }
    if (valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
      struct timespec tv[2];
      tv[0].tv_sec = 0;
      tv[1].tv_sec = 0;
      tv[0].tv_nsec = UTIME_OMIT;
      tv[1].tv_nsec = UTIME_OMIT;
      if (valid & FUSE_SET_ATTR_ATIME_NOW) {
        tv[0].tv_nsec = UTIME_NOW;
      } else if (valid & FUSE_SET_ATTR_ATIME) {
        tv[0] = attr->st_atim;
      }
      if (valid & FUSE_SET_ATTR_MTIME_NOW) {
        tv[1].tv_nsec = UTIME_NOW;
      } else if (valid & FUSE_SET_ATTR_MTIME) {
        tv[1] = attr->st_mtim;
      }
      if (fi != nullptr) {
        rc = ::futimens(HandleOf(fi)->fd, tv);
      } else {
        rc = ::utimensat(AT_FDCWD, abs.c_str(), tv, AT_SYMLINK_NOFOLLOW);
      }
      if (rc != 0) return (void)fuse_reply_err(req, errno);
    }
    struct stat st;
    int err = fi != nullptr ? (::fstat(HandleOf(fi)->fd, &st) == 0 ? 0 : errno)
                            : StatFile(inode, &st);
    if (err != 0) return (void)fuse_reply_err(req, err);
    // Times set through a handle open for writing — the kernel's writeback cache flushing
    // mtime before the close — are indexed by that handle's close (flush), which follows.
    constexpr int kTimes = FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |
                           FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME;
    const bool flushed_by_close = fi != nullptr && HandleOf(fi)->write && (valid & ~kTimes) == 0;
    if (!flushed_by_close) {
      err = indexer_.IndexInode(inode);
      if (err != 0) return (void)fuse_reply_err(req, err);
    }
    fuse_reply_attr(req, &st, options_.attr_timeout_s);
  }

  void OnReadlink(fuse_req_t req, fuse_ino_t ino) {
    Inode* inode = inodes_.Get(ino);
    if (inode->kind == InodeKind::kQueryEntry) {
      QueryEntry entry;
      if (int err = query_dirs_.EntryFor(CallerOf(req), inode, &entry); err != 0) {
        return (void)fuse_reply_err(req, err);
      }
      fuse_reply_readlink(req, entry.target.c_str());
      return;
    }
    if (inode->kind != InodeKind::kFile) return (void)fuse_reply_err(req, EINVAL);
    std::string abs;
    if (!inodes_.AbsPathOf(inode, &abs)) return (void)fuse_reply_err(req, ENOENT);
    char buf[PATH_MAX + 1];
    ssize_t n = ::readlink(abs.c_str(), buf, PATH_MAX);
    if (n < 0) return (void)fuse_reply_err(req, errno);
    buf[n] = '\0';
    fuse_reply_readlink(req, buf);
  }

  // Creates through `make` (mkdir, mknod, symlink) as the caller, then looks the new entry up
  // and indexes it.
  template <typename MakeFn>
  void MakeEntry(fuse_req_t req, fuse_ino_t parent_ino, const char* name, MakeFn make) {
    Client::Deadline deadline(options_.index->timeout_ms());  // all its index calls
    Inode* parent = inodes_.Get(parent_ino);
    if (parent->kind != InodeKind::kFile) return (void)fuse_reply_err(req, EROFS);
    if (IsQueryName(name)) return (void)fuse_reply_err(req, EINVAL);
    std::string dir_abs;
    if (!inodes_.AbsPathOf(parent, &dir_abs)) return (void)fuse_reply_err(req, ENOENT);
    if (const int err = options_.index->Admit(); err != 0) return (void)fuse_reply_err(req, err);
    {
      AsCaller as(this, req);
      if (make(ChildPath(dir_abs, name)) != 0) return (void)fuse_reply_err(req, errno);
    }
    fuse_entry_param e;
    int err = DoLookup(parent, name, &e);
    if (err != 0) return (void)fuse_reply_err(req, err);
    std::string dir;
    if (inodes_.PathOf(parent, &dir)) {
      ProcessInfo creator;
      const bool known = edges_.Identify(fuse_req_ctx(req)->pid, &creator);
      // mkdir, mknod and symlink fail on an existing name: the inode is new.
      err = indexer_.IndexPath(ChildPath(dir, name), parent->ino, known ? &creator : nullptr, nullptr,
                      /*created=*/true, parent);
      if (err != 0) {
        inodes_.Forget(inodes_.Get(e.ino), 1);
        return (void)fuse_reply_err(req, err);
      }
    }
    fuse_reply_entry(req, &e);
  }

  void OnMknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
    MakeEntry(req, parent, name,
              [&](const std::string& abs) { return ::mknod(abs.c_str(), mode, rdev); });
  }
  void OnMkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
    MakeEntry(req, parent, name,
              [&](const std::string& abs) { return ::mkdir(abs.c_str(), mode); });
  }
  void OnSymlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
    MakeEntry(req, parent, name,
              [&](const std::string& abs) { return ::symlink(link, abs.c_str()); });
  }

  void OnLink(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent_ino, const char* newname) {
    Client::Deadline deadline(options_.index->timeout_ms());  // all its index calls
    Inode* inode = inodes_.Get(ino);
    Inode* newparent = inodes_.Get(newparent_ino);
    if (inode->kind != InodeKind::kFile || newparent->kind != InodeKind::kFile) {
      return (void)fuse_reply_err(req, EROFS);
    }
    if (IsQueryName(newname)) return (void)fuse_reply_err(req, EINVAL);
    std::string from, to_dir;
    if (!inodes_.AbsPathOf(inode, &from) || !inodes_.AbsPathOf(newparent, &to_dir)) {
      return (void)fuse_reply_err(req, ENOENT);
    }
    if (const int err = options_.index->Admit(); err != 0) return (void)fuse_reply_err(req, err);
    {
      AsCaller as(this, req);
      if (::link(from.c_str(), ChildPath(to_dir, newname).c_str()) != 0) {
        return (void)fuse_reply_err(req, errno);
      }
    }
    fuse_entry_param e;
    int err = DoLookup(newparent, newname, &e);
    if (err != 0) return (void)fuse_reply_err(req, err);
    std::string dir;
    if (inodes_.PathOf(newparent, &dir)) {
      err = indexer_.IndexPath(ChildPath(dir, newname), newparent->ino, nullptr, nullptr, false, newparent);
      if (err != 0) {
        inodes_.Forget(inodes_.Get(e.ino), 1);
        return (void)fuse_reply_err(req, err);
      }
    }
    fuse_reply_entry(req, &e);
  }

  void OnUnlinkOrRmdir(fuse_req_t req, fuse_ino_t parent_ino, const char* name, bool dir) {
    Client::Deadline deadline(options_.index->timeout_ms());  // all its index calls
    Inode* parent = inodes_.Get(parent_ino);
    if (parent->kind != InodeKind::kFile) return (void)fuse_reply_err(req, EROFS);
    std::string dir_abs;
    if (!inodes_.AbsPathOf(parent, &dir_abs)) return (void)fuse_reply_err(req, ENOENT);
    const std::string abs = ChildPath(dir_abs, name);
    struct stat st;
    if (::lstat(abs.c_str(), &st) != 0) return (void)fuse_reply_err(req, errno);
    if (const int err = options_.index->Admit(); err != 0) return (void)fuse_reply_err(req, err);
    std::string dpath;
    const bool named = inodes_.PathOf(parent, &dpath);
    std::vector<FileUpdate> ups;
    if (named) {
      indexer_.RemovedName(ChildPath(dpath, name), st, &ups);
      indexer_.ResolveRoutes(&ups);
    }
    if ((dir ? ::rmdir(abs.c_str()) : ::unlink(abs.c_str())) != 0) {
      return (void)fuse_reply_err(req, errno);
    }
    inodes_.Unlinked(st, parent, name);
    if (!dir && st.st_nlink <= 1) edges_.Forget(st.st_ino);  // its number may be reused now
    if (!named) return (void)fuse_reply_err(req, 0);
    indexer_.AddDirUpdate(parent, &ups);
    fuse_reply_err(req, indexer_.Send(ups, ChildPath(dpath, name), {ChildPath(dpath, name)}));
  }

  void OnRename(fuse_req_t req, fuse_ino_t parent_ino, const char* name, fuse_ino_t newparent_ino,
                const char* newname, unsigned int flags) {
    Client::Deadline deadline(options_.index->timeout_ms());  // all its index calls
    Inode* parent = inodes_.Get(parent_ino);
    Inode* newparent = inodes_.Get(newparent_ino);
    if (parent->kind != InodeKind::kFile || newparent->kind != InodeKind::kFile) {
      return (void)fuse_reply_err(req, EROFS);
    }
    if (IsQueryName(newname)) return (void)fuse_reply_err(req, EINVAL);
    std::string from_abs, to_abs;
    if (!inodes_.AbsPathOf(parent, &from_abs) || !inodes_.AbsPathOf(newparent, &to_abs)) {
      return (void)fuse_reply_err(req, ENOENT);
    }
    from_abs = ChildPath(from_abs, name);
    to_abs = ChildPath(to_abs, newname);
    struct stat src, dst;
    if (::lstat(from_abs.c_str(), &src) != 0) return (void)fuse_reply_err(req, errno);
    if (const int err = options_.index->Admit(); err != 0) return (void)fuse_reply_err(req, err);
    const bool had_dst = ::lstat(to_abs.c_str(), &dst) == 0;
    // The file replaced at the destination loses that name: its removal is prepared (and its
    // route taken) before the rename, as for an unlink.
    std::vector<FileUpdate> replaced;
    std::string replaced_path;
    if (had_dst && !(flags & RENAME_EXCHANGE) &&
        !(src.st_ino == dst.st_ino && src.st_dev == dst.st_dev) &&
        inodes_.PathOf(newparent, &replaced_path)) {
      replaced_path = ChildPath(replaced_path, newname);
      indexer_.RemovedName(replaced_path, dst, &replaced);
      indexer_.ResolveRoutes(&replaced);
    }
    if (::renameat2(AT_FDCWD, from_abs.c_str(), AT_FDCWD, to_abs.c_str(), flags) != 0) {
      return (void)fuse_reply_err(req, errno);
    }
    // The inode tree follows: the moved file is now newname in newparent; what it replaced
    // lost that name (or, exchanged, took the old one).
    inodes_.Renamed(src, parent, name, had_dst ? &dst : nullptr, newparent, newname,
                    (flags & RENAME_EXCHANGE) != 0);
    if (had_dst && !(flags & RENAME_EXCHANGE) && src.st_ino != dst.st_ino &&
        !S_ISDIR(dst.st_mode) && dst.st_nlink <= 1) {
      edges_.Forget(dst.st_ino);  // replaced: its number may be reused now
    }
    std::string from_dir, to_dir;
    if (!inodes_.PathOf(parent, &from_dir) || !inodes_.PathOf(newparent, &to_dir)) {
      return (void)fuse_reply_err(req, 0);
    }
    const std::string from = ChildPath(from_dir, name), to = ChildPath(to_dir, newname);
    if (had_dst && src.st_ino == dst.st_ino && src.st_dev == dst.st_dev) {
      return (void)fuse_reply_err(req, 0);  // two links of one file: rename does nothing
    }
    int err = indexer_.Send(replaced, replaced_path, {replaced_path});
    // The moved file (or tree) under its new name; with RENAME_EXCHANGE the other one too.
    if (err == 0) err = indexer_.IndexRenamed(src, to, from, newparent);
    if (err == 0 && had_dst && (flags & RENAME_EXCHANGE)) {
      err = indexer_.IndexRenamed(dst, from, to, parent);
    }
    if (err == 0) {
      // Both directories' entries changed (mtime, ctime; nlink when a directory moved).
      std::vector<FileUpdate> ups;
      indexer_.AddDirUpdate(parent, &ups);
      if (newparent != parent) indexer_.AddDirUpdate(newparent, &ups);
      err = indexer_.Send(ups, from_dir);
    }
    fuse_reply_err(req, err);
  }

  // ---- files ----

  static Handle* HandleOf(struct fuse_file_info* fi) { return reinterpret_cast<Handle*>(fi->fh); }

  int OpenFlags(int flags) {
    if (options_.writeback) {
      // PITFALLS: with the writeback cache the kernel may read a file opened write-only and
      // owns the file's end; open read-write and without O_APPEND.
      if ((flags & O_ACCMODE) == O_WRONLY) flags = (flags & ~O_ACCMODE) | O_RDWR;
      flags &= ~O_APPEND;
    }
    return (flags & ~O_NOFOLLOW) | O_CLOEXEC;
  }

  // Capture for an open of `inode` with `flags` by the caller of `req` (created: by create);
  // fills the handle's owner.
  void Capture(fuse_req_t req, Inode* inode, Handle* h, int flags, bool created,
               std::vector<FileId>* producers) {
    if (!edges_.Identify(fuse_req_ctx(req)->pid, &h->owner)) return;
    h->has_owner = true;
    const bool reads = !created && (flags & O_ACCMODE) != O_WRONLY && !(flags & O_TRUNC);
    h->open_mark = edges_.OnOpen(h->owner, inode->ino, reads, h->write, producers);
  }

  void OnCreate(fuse_req_t req, fuse_ino_t parent_ino, const char* name, mode_t mode,
                struct fuse_file_info* fi) {
    Client::Deadline deadline(options_.index->timeout_ms());  // all its index calls
    Inode* parent = inodes_.Get(parent_ino);
    if (parent->kind != InodeKind::kFile) return (void)fuse_reply_err(req, EROFS);
    if (IsQueryName(name)) return (void)fuse_reply_err(req, EINVAL);
    std::string dir_abs;
    if (!inodes_.AbsPathOf(parent, &dir_abs)) return (void)fuse_reply_err(req, ENOENT);
    int fd;
    // Whether this call made the file (the index then places it afresh: FileUpdate::created).
    // The kernel sends create for a name it believes absent, but the backing directory may
    // have gained it since; an exclusive open tells, and an existing file is opened as the
    // caller asked (O_CREAT without O_EXCL).
    bool created = true;
    if (const int err = options_.index->Admit(); err != 0) return (void)fuse_reply_err(req, err);
    {
      AsCaller as(this, req);
      const std::string abs = ChildPath(dir_abs, name);
      fd = ::open(abs.c_str(), OpenFlags(fi->flags) | O_CREAT | O_EXCL, mode);
      if (fd < 0 && errno == EEXIST && !(fi->flags & O_EXCL)) {
        created = false;
        fd = ::open(abs.c_str(), OpenFlags(fi->flags) | O_CREAT, mode);
      }
    }
    if (fd < 0) return (void)fuse_reply_err(req, errno);
    if (!created && KillprivV2::KillRequested()) {  // an existing file, truncated
      const int err = OpenFiles::KillPrivileges(req, fd, "");
      if (err != 0) {
        ::close(fd);
        return (void)fuse_reply_err(req, err);
      }
    }
    // The entry from the new descriptor: no second path lookup.
    fuse_entry_param e;
    std::memset(&e, 0, sizeof(e));
    if (::fstat(fd, &e.attr) != 0) {
      const int err = errno;
      ::close(fd);
      return (void)fuse_reply_err(req, err);
    }
    InternEntry(parent, name, &e);
    Inode* inode = inodes_.Get(e.ino);
    auto h = std::make_unique<Handle>();
    h->fd = fd;
    h->inode = inode;
    h->write = true;  // create is a write-open (DESIGN §4)
    std::vector<FileId> producers;
    Capture(req, inode, h.get(), fi->flags, /*created=*/true, &producers);
    std::string dir;
    if (inodes_.PathOf(parent, &dir)) {
      const int err = indexer_.IndexOpen(fd, e.attr, ChildPath(dir, name), parent->ino,
                                h->has_owner ? &h->owner : nullptr, &producers, created,
                                parent);
      if (err != 0) {
        ::close(fd);
        inodes_.Forget(inode, 1);
        return (void)fuse_reply_err(req, err);
      }
    }
    if (const int err = open_files_.AttachBacking(req, h.get(), e.attr.st_mode); err != 0) {
      ::close(fd);
      inodes_.Forget(inode, 1);
      return (void)fuse_reply_err(req, err);
    }
    Handle* handle = h.release();
    fi->fh = reinterpret_cast<uint64_t>(handle);
    if (options_.writeback) fi->keep_cache = 1;
    if (fuse_reply_create(req, &e, fi) != 0) {
      // The creating call was interrupted: the kernel holds neither the entry nor the open.
      open_files_.CloseHandle(handle);
      inodes_.Forget(inode, 1);
    }
  }

  void OnOpen(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
    Inode* inode = inodes_.Get(ino);
    if (inode->kind != InodeKind::kFile) return (void)fuse_reply_err(req, EISDIR);
    std::string abs;
    if (!inodes_.AbsPathOf(inode, &abs)) return (void)fuse_reply_err(req, ENOENT);
    const bool write = (fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC);
    if (write) {
      if (const int err = options_.index->Admit(); err != 0) return (void)fuse_reply_err(req, err);
    }
    int fd = ::open(abs.c_str(), OpenFlags(fi->flags));
    if (fd < 0) return (void)fuse_reply_err(req, errno);
    if (KillprivV2::KillRequested()) {  // O_TRUNC by a caller without CAP_FSETID
      const int err = OpenFiles::KillPrivileges(req, fd, "");
      if (err != 0) {
        ::close(fd);
        return (void)fuse_reply_err(req, err);
      }
    }
    auto h = std::make_unique<Handle>();
    h->fd = fd;
    h->inode = inode;
    h->write = write;
    Capture(req, inode, h.get(), fi->flags, /*created=*/false, nullptr);
    if (passthrough_.enabled()) {
      struct stat st;
      const int err = ::fstat(fd, &st) != 0 ? errno : open_files_.AttachBacking(req, h.get(), st.st_mode);
      if (err != 0) {
        ::close(fd);
        return (void)fuse_reply_err(req, err);
      }
    }
    Handle* handle = h.release();
    fi->fh = reinterpret_cast<uint64_t>(handle);
    // Data stays in the page cache across opens when the kernel's cache is trusted.
    if (options_.writeback) fi->keep_cache = 1;
    if (fuse_reply_open(req, fi) != 0) open_files_.CloseHandle(handle);  // the open was interrupted
  }

  void OnRead(fuse_req_t req, size_t size, off_t off, struct fuse_file_info* fi) {
    struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
    buf.buf[0].flags = static_cast<fuse_buf_flags>(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
    buf.buf[0].fd = HandleOf(fi)->fd;
    buf.buf[0].pos = off;
    fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
  }

  void OnWriteBuf(fuse_req_t req, struct fuse_bufvec* in, off_t off, struct fuse_file_info* fi) {
    if (KillprivV2::KillRequested()) {
      // Before the data, as the VFS orders it.
      const int err = OpenFiles::KillPrivileges(req, HandleOf(fi)->fd, "");
      if (err != 0) return (void)fuse_reply_err(req, err);
    }
    struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));
    out.buf[0].flags = static_cast<fuse_buf_flags>(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
    out.buf[0].fd = HandleOf(fi)->fd;
    out.buf[0].pos = off;
    ssize_t n = fuse_buf_copy(&out, in, static_cast<fuse_buf_copy_flags>(0));
    if (n < 0) return (void)fuse_reply_err(req, static_cast<int>(-n));
    fuse_reply_write(req, static_cast<size_t>(n));
  }

  void OnFlush(fuse_req_t req, struct fuse_file_info* fi) {
    Client::Deadline deadline(options_.index->timeout_ms());  // all its index calls
    Handle* h = HandleOf(fi);
    // close() of a duplicate releases POSIX locks the caller holds, as a local close would.
    int rc = ::close(::dup(h->fd));
    if (rc != 0) return (void)fuse_reply_err(req, errno);
    if (!h->write) return (void)fuse_reply_err(req, 0);
    struct stat st;
    if (::fstat(h->fd, &st) != 0 || st.st_nlink == 0) return (void)fuse_reply_err(req, 0);
    if (h->has_owner) edges_.OnWriteClose(h->owner, h->inode->ino, h->open_mark);
    // The record from the handle's descriptor and the stat just taken.
    std::string path;
    uint64_t parent_ino = 0;
    if (!inodes_.PathOf(h->inode, &path, &parent_ino)) return (void)fuse_reply_err(req, 0);
    fuse_reply_err(req, indexer_.IndexOpen(h->fd, st, path, parent_ino, nullptr, nullptr));
  }

  void OnRelease(fuse_req_t req, struct fuse_file_info* fi) {
    open_files_.CloseHandle(HandleOf(fi));
    fuse_reply_err(req, 0);
  }

  void OnFsync(fuse_req_t req, int datasync, struct fuse_file_info* fi) {
    int fd = HandleOf(fi)->fd;
    int rc = datasync ? ::fdatasync(fd) : ::fsync(fd);
    fuse_reply_err(req, rc == 0 ? 0 : errno);
  }

  void OnFallocate(fuse_req_t req, int mode, off_t offset, off_t length,
                   struct fuse_file_info* fi) {
    int rc = ::fallocate(HandleOf(fi)->fd, mode, offset, length);
    fuse_reply_err(req, rc == 0 ? 0 : errno);
  }

  // ---- directories ----

  void OnOpendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
    Inode* inode = inodes_.Get(ino);
    auto h = std::make_unique<Handle>();
    h->inode = inode;
    if (inode->kind == InodeKind::kQueryDir) {
      int err = query_dirs_.List(CallerOf(req), inode, &h->entries);
      if (err != 0) return (void)fuse_reply_err(req, err);
    } else if (inode->kind == InodeKind::kFile) {
      std::string abs;
      if (!inodes_.AbsPathOf(inode, &abs)) return (void)fuse_reply_err(req, ENOENT);
      int fd = ::open(abs.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) return (void)fuse_reply_err(req, errno);
      h->dir = ::fdopendir(fd);
      if (h->dir == nullptr) {
        int err = errno;
        ::close(fd);
        return (void)fuse_reply_err(req, err);
      }
    } else {
      return (void)fuse_reply_err(req, ENOTDIR);
    }
    fi->fh = reinterpret_cast<uint64_t>(h.release());
    if (inode->kind == InodeKind::kFile) fi->cache_readdir = 0;
    fuse_reply_open(req, fi);
  }

  void OnReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
                 struct fuse_file_info* fi) {
    Handle* h = HandleOf(fi);
    std::vector<char> buf(size);
    size_t used = 0;
    if (h->dir == nullptr) {
      // A query directory: ".", "..", then the snapshot taken at opendir. Offsets are
      // positions in that list (+1).
      Inode* qdir = inodes_.Get(ino);
      const size_t total = h->entries.size() + 2;
      for (size_t i = static_cast<size_t>(offset); i < total; ++i) {
        struct stat st;
        std::memset(&st, 0, sizeof(st));
        std::string name;
        if (i == 0) {
          name = ".";
          st.st_mode = S_IFDIR;
          st.st_ino = qdir->vino;
        } else if (i == 1) {
          name = "..";
          st.st_mode = S_IFDIR;
        } else {
          name = h->entries[i - 2].name;
          st.st_mode = S_IFLNK;
          st.st_ino = (uint64_t{1} << 61) | i;
        }
        size_t n = fuse_add_direntry(req, buf.data() + used, size - used, name.c_str(), &st,
                                     static_cast<off_t>(i + 1));
        if (n > size - used) break;
        used += n;
      }
      fuse_reply_buf(req, buf.data(), used);
      return;
    }
    if (offset != h->offset) {
      ::seekdir(h->dir, offset);
      h->entry = nullptr;
      h->offset = offset;
    }
    while (true) {
      if (h->entry == nullptr) {
        errno = 0;
        h->entry = ::readdir(h->dir);
        if (h->entry == nullptr) {
          if (errno != 0 && used == 0) return (void)fuse_reply_err(req, errno);
          break;
        }
      }
      struct stat st;
      std::memset(&st, 0, sizeof(st));
      st.st_ino = h->entry->d_ino;
      st.st_mode = static_cast<mode_t>(h->entry->d_type) << 12;
      const off_t next = h->entry->d_off;
      size_t n = fuse_add_direntry(req, buf.data() + used, size - used, h->entry->d_name, &st,
                                   next);
      if (n > size - used) break;
      used += n;
      h->entry = nullptr;
      h->offset = next;
    }
    fuse_reply_buf(req, buf.data(), used);
  }

  void OnReleasedir(fuse_req_t req, struct fuse_file_info* fi) {
    Handle* h = HandleOf(fi);
    if (h->dir != nullptr) ::closedir(h->dir);
    delete h;
    fuse_reply_err(req, 0);
  }

  void OnFsyncdir(fuse_req_t req, int datasync, struct fuse_file_info* fi) {
    Handle* h = HandleOf(fi);
    if (h->dir == nullptr) return (void)fuse_reply_err(req, 0);
    int fd = ::dirfd(h->dir);
    int rc = datasync ? ::fdatasync(fd) : ::fsync(fd);
    fuse_reply_err(req, rc == 0 ? 0 : errno);
  }

  void OnStatfs(fuse_req_t req, fuse_ino_t /*ino*/) {
    struct statvfs sv;
    if (::statvfs(options_.backing.c_str(), &sv) != 0) return (void)fuse_reply_err(req, errno);
    fuse_reply_statfs(req, &sv);
  }

  // ---- extended attributes (on the path, never following a symlink) ----

  std::string XattrPath(Inode* inode) {
    std::string abs;
    return inodes_.AbsPathOf(inode, &abs) ? abs : std::string();
  }

  // A query entry has no extended attributes, and only a caller whose listing has it may
  // learn even that (ENOENT for the others).
  int VirtualXattrError(fuse_req_t req, Inode* inode) {
    QueryEntry entry;
    if (inode->kind == InodeKind::kQueryEntry && query_dirs_.EntryFor(CallerOf(req), inode, &entry) != 0) return ENOENT;
    return 0;
  }

  void OnGetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
    Inode* inode = inodes_.Get(ino);
    if (inode->kind != InodeKind::kFile) {
      const int err = VirtualXattrError(req, inode);
      return (void)fuse_reply_err(req, err != 0 ? err : ENODATA);
    }
    std::vector<char> buf(size);
    ssize_t n = ::lgetxattr(XattrPath(inode).c_str(), name, size ? buf.data() : nullptr, size);
    if (n < 0) return (void)fuse_reply_err(req, errno);
    if (size == 0) return (void)fuse_reply_xattr(req, static_cast<size_t>(n));
    fuse_reply_buf(req, buf.data(), static_cast<size_t>(n));
  }

  void OnListxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
    Inode* inode = inodes_.Get(ino);
    if (inode->kind != InodeKind::kFile) {
      if (int err = VirtualXattrError(req, inode); err != 0) return (void)fuse_reply_err(req, err);
      return (void)(size == 0 ? fuse_reply_xattr(req, 0) : fuse_reply_buf(req, nullptr, 0));
    }
    std::vector<char> buf(size);
    ssize_t n = ::llistxattr(XattrPath(inode).c_str(), size ? buf.data() : nullptr, size);
    if (n < 0) return (void)fuse_reply_err(req, errno);
    if (size == 0) return (void)fuse_reply_xattr(req, static_cast<size_t>(n));
    fuse_reply_buf(req, buf.data(), static_cast<size_t>(n));
  }

  // Only user.* attributes are indexed.
  int AdmitXattrChange(const char* name) {
    return std::strncmp(name, "user.", 5) == 0 ? options_.index->Admit() : 0;
  }

  void XattrChanged(fuse_req_t req, Inode* inode, const char* name) {
    Client::Deadline deadline(options_.index->timeout_ms());  // all its index calls
    if (std::strncmp(name, "user.", 5) != 0) return (void)fuse_reply_err(req, 0);
    fuse_reply_err(req, indexer_.IndexInode(inode));
  }

  void OnSetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value,
                  size_t size, int flags) {
    Inode* inode = inodes_.Get(ino);
    if (inode->kind != InodeKind::kFile) return (void)fuse_reply_err(req, EROFS);
    if (const int err = AdmitXattrChange(name); err != 0) return (void)fuse_reply_err(req, err);
    if (::lsetxattr(XattrPath(inode).c_str(), name, value, size, flags) != 0) {
      return (void)fuse_reply_err(req, errno);
    }
    XattrChanged(req, inode, name);
  }

  void OnRemovexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
    Inode* inode = inodes_.Get(ino);
    if (inode->kind != InodeKind::kFile) return (void)fuse_reply_err(req, EROFS);
    if (const int err = AdmitXattrChange(name); err != 0) return (void)fuse_reply_err(req, err);
    if (::lremovexattr(XattrPath(inode).c_str(), name) != 0) {
      return (void)fuse_reply_err(req, errno);
    }
    XattrChanged(req, inode, name);
  }

  void OnForget(fuse_ino_t ino, uint64_t n) { inodes_.Forget(inodes_.Get(ino), n); }

  void FlushEdges() { edges_.Flush(); }

  static fuse_lowlevel_ops MakeOps();

  const CaptureFsOptions options_;
  InodeTable inodes_;
  FileIndexer indexer_;
  QueryDirs query_dirs_;
  EdgeCapture edges_;
  RecentCallers recent_callers_;  // thread-safe
  bool am_root_ = false;

  KillprivV2 killpriv_;
  KernelPassthrough passthrough_;
  OpenFiles open_files_;
  std::unique_ptr<Session> session_;  // last: destroyed (unmounted) first
};

fuse_lowlevel_ops CaptureFs::Impl::MakeOps() {
  fuse_lowlevel_ops ops;
  std::memset(&ops, 0, sizeof(ops));
  ops.init = [](void* userdata, struct fuse_conn_info* conn) {
    static_cast<Impl*>(Session::AppOfUserdata(userdata))->OnInit(conn);
  };
  ops.lookup = [](fuse_req_t req, fuse_ino_t parent, const char* name) {
    Self(req)->OnLookup(req, parent, name);
  };
  ops.forget = [](fuse_req_t req, fuse_ino_t ino, uint64_t n) {
    Self(req)->OnForget(ino, n);
    fuse_reply_none(req);
  };
  ops.forget_multi = [](fuse_req_t req, size_t count, struct fuse_forget_data* forgets) {
    for (size_t i = 0; i < count; ++i) {
      Self(req)->OnForget(forgets[i].ino, forgets[i].nlookup);
    }
    fuse_reply_none(req);
  };
  ops.getattr = [](fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
    Self(req)->OnGetattr(req, ino, fi);
  };
  ops.setattr = [](fuse_req_t req, fuse_ino_t ino, struct stat* attr, int valid,
                   struct fuse_file_info* fi) { Self(req)->OnSetattr(req, ino, attr, valid, fi); };
  ops.readlink = [](fuse_req_t req, fuse_ino_t ino) { Self(req)->OnReadlink(req, ino); };
  ops.mknod = [](fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
    Self(req)->OnMknod(req, parent, name, mode, rdev);
  };
  ops.mkdir = [](fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
    Self(req)->OnMkdir(req, parent, name, mode);
  };
  ops.symlink = [](fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
    Self(req)->OnSymlink(req, link, parent, name);
  };
  ops.link = [](fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
    Self(req)->OnLink(req, ino, newparent, newname);
  };
  ops.unlink = [](fuse_req_t req, fuse_ino_t parent, const char* name) {
    Self(req)->OnUnlinkOrRmdir(req, parent, name, /*dir=*/false);
  };
  ops.rmdir = [](fuse_req_t req, fuse_ino_t parent, const char* name) {
    Self(req)->OnUnlinkOrRmdir(req, parent, name, /*dir=*/true);
  };
  ops.rename = [](fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
                  const char* newname, unsigned int flags) {
    Self(req)->OnRename(req, parent, name, newparent, newname, flags);
  };
  ops.create = [](fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
                  struct fuse_file_info* fi) { Self(req)->OnCreate(req, parent, name, mode, fi); };
  ops.open = [](fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
    Self(req)->OnOpen(req, ino, fi);
  };
  ops.read = [](fuse_req_t req, fuse_ino_t, size_t size, off_t off, struct fuse_file_info* fi) {
    Self(req)->OnRead(req, size, off, fi);
  };
  ops.write_buf = [](fuse_req_t req, fuse_ino_t, struct fuse_bufvec* in, off_t off,
                     struct fuse_file_info* fi) { Self(req)->OnWriteBuf(req, in, off, fi); };
  ops.flush = [](fuse_req_t req, fuse_ino_t, struct fuse_file_info* fi) {
    Self(req)->OnFlush(req, fi);
  };
  ops.release = [](fuse_req_t req, fuse_ino_t, struct fuse_file_info* fi) {
    Self(req)->OnRelease(req, fi);
  };
  ops.fsync = [](fuse_req_t req, fuse_ino_t, int datasync, struct fuse_file_info* fi) {
    Self(req)->OnFsync(req, datasync, fi);
  };
  ops.fallocate = [](fuse_req_t req, fuse_ino_t, int mode, off_t offset, off_t length,
                     struct fuse_file_info* fi) {
    Self(req)->OnFallocate(req, mode, offset, length, fi);
  };
  ops.opendir = [](fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
    Self(req)->OnOpendir(req, ino, fi);
  };
  ops.readdir = [](fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                   struct fuse_file_info* fi) { Self(req)->OnReaddir(req, ino, size, off, fi); };
  ops.releasedir = [](fuse_req_t req, fuse_ino_t, struct fuse_file_info* fi) {
    Self(req)->OnReleasedir(req, fi);
  };
  ops.fsyncdir = [](fuse_req_t req, fuse_ino_t, int datasync, struct fuse_file_info* fi) {
    Self(req)->OnFsyncdir(req, datasync, fi);
  };
  ops.statfs = [](fuse_req_t req, fuse_ino_t ino) { Self(req)->OnStatfs(req, ino); };
  ops.getxattr = [](fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
    Self(req)->OnGetxattr(req, ino, name, size);
  };
  ops.listxattr = [](fuse_req_t req, fuse_ino_t ino, size_t size) {
    Self(req)->OnListxattr(req, ino, size);
  };
  ops.setxattr = [](fuse_req_t req, fuse_ino_t ino, const char* name, const char* value,
                    size_t size, int flags) {
    Self(req)->OnSetxattr(req, ino, name, value, size, flags);
  };
  ops.removexattr = [](fuse_req_t req, fuse_ino_t ino, const char* name) {
    Self(req)->OnRemovexattr(req, ino, name);
  };
  return ops;
}

CaptureFs::CaptureFs(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CaptureFs::~CaptureFs() = default;

Result<std::unique_ptr<CaptureFs>> CaptureFs::Mount(const CaptureFsOptions& options) {
  if (options.backing.empty() || options.backing[0] != '/') {
    return Status::InvalidArgument("the backing directory must be an absolute path");
  }
  if (options.mountpoint.empty() || options.mountpoint[0] != '/') {
    return Status::InvalidArgument("the mount point must be an absolute path");
  }
  if (options.client == nullptr || options.index == nullptr || options.volume == 0) {
    return Status::InvalidArgument("a client, an index writer and a volume are required");
  }
  auto impl = std::make_unique<Impl>(options);
  PROPELLER_RETURN_IF_ERROR(impl->Init());
  PROPELLER_RETURN_IF_ERROR(impl->MountSession());
  return std::unique_ptr<CaptureFs>(new CaptureFs(std::move(impl)));
}

Status CaptureFs::Run() { return impl_->Run(); }
void CaptureFs::Stop() { impl_->Stop(); }
void CaptureFs::FlushEdges() { impl_->FlushEdges(); }
CaptureFsStats CaptureFs::stats() const { return impl_->stats(); }

}  // namespace propeller::fuse
