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

#include "client/fuse/backing_tree.h"
#include "client/fuse/dir_cache.h"
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
#include "common/dir_fd.h"
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

// `name` in directory `parent` (an in-volume path).
std::string ChildPath(const std::string& parent, const char* name) {
  return parent == "/" ? "/" + std::string(name) : parent + "/" + name;
}

}  // namespace

class CaptureFs::Impl {
 public:
  explicit Impl(const CaptureFsOptions& o)
      : options_(o),
        tree_(o.tree),
        dirs_(&inodes_, o.tree, o.dir_cache),
        indexer_(&inodes_, &dirs_, o.tree, o.index, o.volume),
        query_dirs_(QueryDirsOptions{&inodes_, o.client, o.index, o.volume, o.search_wait_ms,
                                      o.mountpoint}),
        edges_(EdgeCaptureOptions{o.client, o.volume, o.edge_flush_interval_ms, o.capture_edges}),
        passthrough_(o.passthrough && !o.writeback),
        open_files_(&passthrough_) {}

  ~Impl() {
    edges_.StopFlusher();
    session_.reset();  // unmounts
  }

  Status Init() {
    PROPELLER_RETURN_IF_ERROR(inodes_.Init(tree_->root_fd()));
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

  // ---- the backing files of inodes ----

  // The backing directory of directory inode `dir`, open (DirCache). 0 or an errno (ENOENT:
  // its name is gone; ELOOP: a symbolic link took a directory's place in the backing tree).
  int DirOf(Inode* dir, BackingDir* out) { return dirs_.Open(dir, out); }

  // The backing file of `inode` as the *at() calls take it: its directory and its name. 0 or
  // an errno as DirOf.
  int NameOf(Inode* inode, BackingName* out) { return dirs_.Locate(inode, out); }

  // The file of `inode` for a call that works on a name or a descriptor: its name when it has
  // one, else (its names were removed while it was open) a descriptor of one of its open
  // handles in *fd. 0 or an errno (ENOENT: neither).
  int NameOrFdOf(Inode* inode, BackingName* name, UniqueFd* fd) {
    const int err = dirs_.Locate(inode, name);
    if (err != ENOENT) return err;
    return open_files_.DupFdOf(inode, fd) == 0 ? 0 : ENOENT;
  }

  // ---- replies ----

  int StatFile(Inode* inode, struct stat* st) {
    // A directory kept open is that directory, whatever now has its name.
    if (BackingDir dir; dirs_.Cached(inode, &dir)) {
      return ::fstat(dir.fd(), st) == 0 ? 0 : errno;
    }
    BackingName at;
    UniqueFd fd;
    if (const int err = NameOrFdOf(inode, &at, &fd); err != 0) return err;
    const int rc = fd.valid() ? ::fstat(fd.get(), st)
                              : ::fstatat(at.dir.fd(), at.name.c_str(), st, AT_SYMLINK_NOFOLLOW);
    return rc == 0 ? 0 : errno;
  }

  // Looks `name` up in directory `parent`, open as `dir`, and fills `e` (one lookup
  // counted). 0 or an errno.
  int DoLookupIn(const BackingDir& dir, Inode* parent, const char* name, fuse_entry_param* e) {
    std::memset(e, 0, sizeof(*e));
    if (::fstatat(dir.fd(), name, &e->attr, AT_SYMLINK_NOFOLLOW) != 0) return errno;
    InternEntry(parent, name, e);
    return 0;
  }

  // DoLookupIn of `name` in the directory inode `parent`.
  int DoLookup(Inode* parent, const char* name, fuse_entry_param* e) {
    BackingDir dir;
    if (const int err = DirOf(parent, &dir); err != 0) return err;
    return DoLookupIn(dir, parent, name, e);
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
    // Plain readdir: readdirplus would take a lookup per entry (docs/pitfalls.md FUSE-9).
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
    // The handle's file when the kernel names one (a read of a file whose attributes it
    // refreshes), else the file's name, else (unlinked while open: fstat) any open handle.
    const int fd = fi != nullptr ? FdOf(HandleOf(fi)) : -1;
    int err = 0;
    if (fd >= 0) {
      if (::fstat(fd, &st) != 0) err = errno;
    } else {
      err = StatFile(inode, &st);
    }
    if (err != 0) return (void)fuse_reply_err(req, err);
    fuse_reply_attr(req, &st, options_.attr_timeout_s);
  }

  // The descriptor of an open file's or directory's handle; -1 for a query directory's.
  static int FdOf(Handle* h) {
    return h->fd >= 0 ? h->fd : h->dir != nullptr ? ::dirfd(h->dir) : -1;
  }

  void OnSetattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int valid,
                 struct fuse_file_info* fi) {
    Client::Deadline deadline(options_.index->timeout_ms());  // all its index calls
    Inode* inode = inodes_.Get(ino);
    if (inode->kind != InodeKind::kFile) return (void)fuse_reply_err(req, EROFS);
    // What to change: the caller's open file when the kernel names it (ftruncate), else the
    // file's name, else — its names were removed while it was open: fchmod, fchown,
    // futimens, truncate of the open file come without a handle — any open handle of it.
    const bool by_handle = fi != nullptr && FdOf(HandleOf(fi)) >= 0;
    BackingName at;
    UniqueFd spare;
    if (!by_handle) {
      if (const int err = NameOrFdOf(inode, &at, &spare); err != 0) {
        return (void)fuse_reply_err(req, err);
      }
    }
    const int fd = by_handle ? FdOf(HandleOf(fi)) : spare.get();  // -1: by name
    const int dir = at.dir.fd();
    const char* name = at.name.c_str();
    if (const int err = options_.index->Admit(); err != 0) return (void)fuse_reply_err(req, err);
    int rc = 0;
    if (valid & FUSE_SET_ATTR_MODE) {
      rc = fd >= 0 ? ::fchmod(fd, attr->st_mode) : ChmodAt(dir, name, attr->st_mode);
      if (rc != 0) return (void)fuse_reply_err(req, errno);
    }
    if (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
      uid_t uid = (valid & FUSE_SET_ATTR_UID) ? attr->st_uid : static_cast<uid_t>(-1);
      gid_t gid = (valid & FUSE_SET_ATTR_GID) ? attr->st_gid : static_cast<gid_t>(-1);
      rc = fd >= 0 ? ::fchown(fd, uid, gid) : ::fchownat(dir, name, uid, gid, AT_SYMLINK_NOFOLLOW);
      if (rc != 0) return (void)fuse_reply_err(req, errno);
    }
    if (valid & FUSE_SET_ATTR_SIZE) {
      if (by_handle) {
        rc = ::ftruncate(fd, attr->st_size);  // the kernel checked it is open for writing
      } else {
        // Another handle may be read-only: truncate(2) through /proc, as for a name.
        UniqueFd file;
        if (fd < 0) file.Reset(::openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC));
        rc = fd < 0 && !file.valid()
                 ? -1
                 : ::truncate(ProcFdPath(fd >= 0 ? fd : file.get()).c_str(), attr->st_size);
      }
      if (rc != 0) return (void)fuse_reply_err(req, errno);
    }
    // FATTR_KILL_SUIDGID (KillprivV2): a chown, or a truncate by a caller without CAP_FSETID.
    if ((valid & FUSE_SET_ATTR_KILL_SUID) && !(valid & FUSE_SET_ATTR_MODE)) {
      const int err = OpenFiles::KillPrivileges(req, fd, dir, name);
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
      rc = fd >= 0 ? ::futimens(fd, tv) : ::utimensat(dir, name, tv, AT_SYMLINK_NOFOLLOW);
      if (rc != 0) return (void)fuse_reply_err(req, errno);
    }
    struct stat st;
    rc = fd >= 0 ? ::fstat(fd, &st) : ::fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW);
    if (rc != 0) return (void)fuse_reply_err(req, errno);
    // Times set through a handle open for writing — the kernel's writeback cache flushing
    // mtime before the close — are indexed by that handle's close (flush), which follows.
    constexpr int kTimes = FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |
                           FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME;
    const bool flushed_by_close = by_handle && HandleOf(fi)->write && (valid & ~kTimes) == 0;
    if (!flushed_by_close) {
      if (const int err = IndexChanged(inode, st); err != 0) return (void)fuse_reply_err(req, err);
    }
    fuse_reply_attr(req, &st, options_.attr_timeout_s);
  }

  // Indexes `inode`, whose attributes are now `st`, after a change: under its name, or, when
  // it has none (open, unlinked), under the names the index knows that still hold it.
  int IndexChanged(Inode* inode, const struct stat& st) {
    std::string path;
    if (inodes_.PathOf(inode, &path)) return indexer_.IndexInode(inode);
    return indexer_.IndexUnnamed(st);
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
    BackingName at;
    if (const int err = NameOf(inode, &at); err != 0) return (void)fuse_reply_err(req, err);
    char buf[PATH_MAX + 1];
    ssize_t n = ::readlinkat(at.dir.fd(), at.name.c_str(), buf, PATH_MAX);
    if (n < 0) return (void)fuse_reply_err(req, errno);
    buf[n] = '\0';
    fuse_reply_readlink(req, buf);
  }

  // Creates through `make` (mkdirat, mknodat, symlinkat: given the parent directory's
  // descriptor) as the caller, then looks the new entry up and indexes it.
  template <typename MakeFn>
  void MakeEntry(fuse_req_t req, fuse_ino_t parent_ino, const char* name, MakeFn make) {
    Client::Deadline deadline(options_.index->timeout_ms());  // all its index calls
    Inode* parent = inodes_.Get(parent_ino);
    if (parent->kind != InodeKind::kFile) return (void)fuse_reply_err(req, EROFS);
    if (IsQueryName(name)) return (void)fuse_reply_err(req, EINVAL);
    BackingDir dir_fd;
    if (const int err = DirOf(parent, &dir_fd); err != 0) return (void)fuse_reply_err(req, err);
    if (const int err = options_.index->Admit(); err != 0) return (void)fuse_reply_err(req, err);
    {
      AsCaller as(this, req);
      if (make(dir_fd.fd()) != 0) return (void)fuse_reply_err(req, errno);
    }
    fuse_entry_param e;
    int err = DoLookupIn(dir_fd, parent, name, &e);
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
    MakeEntry(req, parent, name, [&](int dir) { return ::mknodat(dir, name, mode, rdev); });
  }
  void OnMkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
    MakeEntry(req, parent, name, [&](int dir) { return ::mkdirat(dir, name, mode); });
  }
  void OnSymlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
    MakeEntry(req, parent, name, [&](int dir) { return ::symlinkat(link, dir, name); });
  }

  void OnLink(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent_ino, const char* newname) {
    Client::Deadline deadline(options_.index->timeout_ms());  // all its index calls
    Inode* inode = inodes_.Get(ino);
    Inode* newparent = inodes_.Get(newparent_ino);
    if (inode->kind != InodeKind::kFile || newparent->kind != InodeKind::kFile) {
      return (void)fuse_reply_err(req, EROFS);
    }
    if (IsQueryName(newname)) return (void)fuse_reply_err(req, EINVAL);
    BackingName from;
    BackingDir to_dir;
    if (int err = NameOf(inode, &from); err != 0 || (err = DirOf(newparent, &to_dir)) != 0) {
      return (void)fuse_reply_err(req, err);
    }
    if (const int err = options_.index->Admit(); err != 0) return (void)fuse_reply_err(req, err);
    {
      AsCaller as(this, req);
      if (::linkat(from.dir.fd(), from.name.c_str(), to_dir.fd(), newname, 0) != 0) {
        return (void)fuse_reply_err(req, errno);
      }
    }
    fuse_entry_param e;
    int err = DoLookupIn(to_dir, newparent, newname, &e);
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
    BackingDir dir_fd;
    if (const int err = DirOf(parent, &dir_fd); err != 0) return (void)fuse_reply_err(req, err);
    struct stat st;
    if (::fstatat(dir_fd.fd(), name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      return (void)fuse_reply_err(req, errno);
    }
    if (const int err = options_.index->Admit(); err != 0) return (void)fuse_reply_err(req, err);
    std::string dpath;
    const bool named = inodes_.PathOf(parent, &dpath);
    std::vector<FileUpdate> ups;
    if (named) {
      indexer_.RemovedName(ChildPath(dpath, name), st, &ups);
      indexer_.ResolveRoutes(&ups);
    }
    if (::unlinkat(dir_fd.fd(), name, dir ? AT_REMOVEDIR : 0) != 0) {
      return (void)fuse_reply_err(req, errno);
    }
    if (dir) dirs_.Drop(st.st_dev, st.st_ino);
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
    BackingDir from_dir_fd, other_dir_fd;
    if (const int err = DirOf(parent, &from_dir_fd); err != 0) {
      return (void)fuse_reply_err(req, err);
    }
    if (newparent != parent) {
      if (const int err = DirOf(newparent, &other_dir_fd); err != 0) {
        return (void)fuse_reply_err(req, err);
      }
    }
    const int from_fd = from_dir_fd.fd();
    const int to_fd = newparent != parent ? other_dir_fd.fd() : from_fd;
    struct stat src, dst;
    if (::fstatat(from_fd, name, &src, AT_SYMLINK_NOFOLLOW) != 0) {
      return (void)fuse_reply_err(req, errno);
    }
    if (const int err = options_.index->Admit(); err != 0) return (void)fuse_reply_err(req, err);
    const bool had_dst = ::fstatat(to_fd, newname, &dst, AT_SYMLINK_NOFOLLOW) == 0;
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
    if (::renameat2(from_fd, name, to_fd, newname, flags) != 0) {
      return (void)fuse_reply_err(req, errno);
    }
    // A directory renamed keeps its cached descriptor (the directory, wherever it is); one
    // replaced is gone.
    if (had_dst && !(flags & RENAME_EXCHANGE) && S_ISDIR(dst.st_mode) &&
        !(src.st_ino == dst.st_ino && src.st_dev == dst.st_dev)) {
      dirs_.Drop(dst.st_dev, dst.st_ino);
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
      // docs/pitfalls.md FUSE-7: with the writeback cache the kernel may read a file opened
      // write-only and owns the file's end; open read-write and without O_APPEND.
      if ((flags & O_ACCMODE) == O_WRONLY) flags = (flags & ~O_ACCMODE) | O_RDWR;
      flags &= ~O_APPEND;
    }
    return (flags & ~O_NOFOLLOW) | O_CLOEXEC;
  }

  // Capture for an open of `inode` with `flags` by the caller of `req` (created: by create);
  // fills the handle's owner, and its file's inode generation where something needs it (the
  // edges, or the records a write-open sends): read once here, before the handle is shared.
  void Capture(fuse_req_t req, Inode* inode, Handle* h, int flags, bool created,
               std::vector<FileId>* producers) {
    if (h->write || edges_.capture_edges()) h->generation = InodeGeneration(h->fd);
    if (!edges_.Identify(fuse_req_ctx(req)->pid, &h->owner)) return;
    h->has_owner = true;
    const bool reads = !created && (flags & O_ACCMODE) != O_WRONLY && !(flags & O_TRUNC);
    h->open_mark =
        edges_.OnOpen(h->owner, inode->ino, h->generation, reads, h->write, producers);
  }

  void OnCreate(fuse_req_t req, fuse_ino_t parent_ino, const char* name, mode_t mode,
                struct fuse_file_info* fi) {
    Client::Deadline deadline(options_.index->timeout_ms());  // all its index calls
    Inode* parent = inodes_.Get(parent_ino);
    if (parent->kind != InodeKind::kFile) return (void)fuse_reply_err(req, EROFS);
    if (IsQueryName(name)) return (void)fuse_reply_err(req, EINVAL);
    BackingDir dir_fd;
    if (const int err = DirOf(parent, &dir_fd); err != 0) return (void)fuse_reply_err(req, err);
    int fd;
    // Whether this call made the file (the index then places it afresh: FileUpdate::created).
    // The kernel sends create for a name it believes absent, but the backing directory may
    // have gained it since; an exclusive open tells, and an existing file is opened as the
    // caller asked (O_CREAT without O_EXCL).
    bool created = true;
    if (const int err = options_.index->Admit(); err != 0) return (void)fuse_reply_err(req, err);
    {
      // As the caller: an existing name is opened as their open(2) would, a link there
      // followed with their rights.
      AsCaller as(this, req);
      fd = ::openat(dir_fd.fd(), name, OpenFlags(fi->flags) | O_CREAT | O_EXCL, mode);
      if (fd < 0 && errno == EEXIST && !(fi->flags & O_EXCL)) {
        created = false;
        fd = ::openat(dir_fd.fd(), name, OpenFlags(fi->flags) | O_CREAT, mode);
      }
    }
    if (fd < 0) return (void)fuse_reply_err(req, errno);
    if (!created && KillprivV2::KillRequested()) {  // an existing file, truncated
      const int err = OpenFiles::KillPrivileges(req, fd);
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
    h->write = true;  // create is a write-open (docs/architecture.md §4)
    std::vector<FileId> producers;
    Capture(req, inode, h.get(), fi->flags, /*created=*/true, &producers);
    std::string dir;
    if (inodes_.PathOf(parent, &dir)) {
      const int err = indexer_.IndexOpen(fd, e.attr, h->generation, ChildPath(dir, name),
                                         parent->ino, h->has_owner ? &h->owner : nullptr,
                                         &producers, created, parent);
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
    open_files_.Opened(handle);
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
    BackingName at;
    UniqueFd other;  // another handle's descriptor, when the file has no name any more
    if (const int err = NameOrFdOf(inode, &at, &other); err != 0) {
      return (void)fuse_reply_err(req, err);
    }
    const bool write = (fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC);
    if (write) {
      if (const int err = options_.index->Admit(); err != 0) return (void)fuse_reply_err(req, err);
    }
    // By name, never through a symbolic link: the kernel opens no links, so one there now
    // took the file's place behind the mount's back. A file without a name (an open of
    // /proc/PID/fd/N after its unlink) is opened again through another handle's descriptor.
    int fd = other.valid()
                 ? ::open(ProcFdPath(other.get()).c_str(), OpenFlags(fi->flags))
                 : ::openat(at.dir.fd(), at.name.c_str(), OpenFlags(fi->flags) | O_NOFOLLOW);
    if (fd < 0) return (void)fuse_reply_err(req, errno);
    if (KillprivV2::KillRequested()) {  // O_TRUNC by a caller without CAP_FSETID
      const int err = OpenFiles::KillPrivileges(req, fd);
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
    open_files_.Opened(handle);
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
      const int err = OpenFiles::KillPrivileges(req, HandleOf(fi)->fd);
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
    if (h->has_owner) edges_.OnWriteClose(h->owner, h->inode->ino, h->generation, h->open_mark);
    // The record from the handle's descriptor and the stat just taken.
    std::string path;
    uint64_t parent_ino = 0;
    if (!inodes_.PathOf(h->inode, &path, &parent_ino)) {
      // Its names here were removed while it was open, but it has links elsewhere.
      return (void)fuse_reply_err(req, indexer_.IndexUnnamed(st));
    }
    fuse_reply_err(req, indexer_.IndexOpen(h->fd, st, h->generation, path, parent_ino,
                                           nullptr, nullptr));
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
      // The directory itself (DirCache), open again for its own stream of entries.
      BackingDir dir;
      if (const int err = DirOf(inode, &dir); err != 0) return (void)fuse_reply_err(req, err);
      int fd = ::openat(dir.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
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
    Handle* handle = h.release();
    if (inode->kind == InodeKind::kFile) {
      open_files_.Opened(handle);
      fi->cache_readdir = 0;
    }
    fi->fh = reinterpret_cast<uint64_t>(handle);
    if (fuse_reply_open(req, fi) != 0) open_files_.CloseDir(handle);  // interrupted
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
    open_files_.CloseDir(HandleOf(fi));
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
    if (::fstatvfs(tree_->root_fd(), &sv) != 0) return (void)fuse_reply_err(req, errno);
    fuse_reply_statfs(req, &sv);
  }

  // ---- extended attributes (on the name, never following a symlink) ----

  // Where the xattr calls reach the file of `inode`: its name in its directory (ListXattrAt
  // and its siblings, which do not follow it), or, when its names are gone while it is open,
  // an open handle's descriptor (the f* calls).
  struct XattrTarget {
    BackingName at;
    UniqueFd fd;
    int dir() const { return at.dir.fd(); }
    const char* name() const { return at.name.c_str(); }
  };
  int XattrTargetOf(Inode* inode, XattrTarget* t) { return NameOrFdOf(inode, &t->at, &t->fd); }

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
    XattrTarget t;
    if (const int err = XattrTargetOf(inode, &t); err != 0) return (void)fuse_reply_err(req, err);
    std::vector<char> buf(size);
    void* out = size ? buf.data() : nullptr;
    ssize_t n = t.fd.valid() ? ::fgetxattr(t.fd.get(), name, out, size)
                             : GetXattrAt(t.dir(), t.name(), name, out, size);
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
    XattrTarget t;
    if (const int err = XattrTargetOf(inode, &t); err != 0) return (void)fuse_reply_err(req, err);
    std::vector<char> buf(size);
    char* out = size ? buf.data() : nullptr;
    ssize_t n = t.fd.valid() ? ::flistxattr(t.fd.get(), out, size)
                             : ListXattrAt(t.dir(), t.name(), out, size);
    if (n < 0) return (void)fuse_reply_err(req, errno);
    if (size == 0) return (void)fuse_reply_xattr(req, static_cast<size_t>(n));
    fuse_reply_buf(req, buf.data(), static_cast<size_t>(n));
  }

  // Only user.* attributes are indexed.
  int AdmitXattrChange(const char* name) {
    return std::strncmp(name, "user.", 5) == 0 ? options_.index->Admit() : 0;
  }

  void XattrChanged(fuse_req_t req, Inode* inode, const char* name, const XattrTarget& t) {
    Client::Deadline deadline(options_.index->timeout_ms());  // all its index calls
    if (std::strncmp(name, "user.", 5) != 0) return (void)fuse_reply_err(req, 0);
    if (!t.fd.valid()) return (void)fuse_reply_err(req, indexer_.IndexInode(inode));
    struct stat st;
    if (::fstat(t.fd.get(), &st) != 0) return (void)fuse_reply_err(req, errno);
    fuse_reply_err(req, IndexChanged(inode, st));
  }

  void OnSetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value,
                  size_t size, int flags) {
    Inode* inode = inodes_.Get(ino);
    if (inode->kind != InodeKind::kFile) return (void)fuse_reply_err(req, EROFS);
    XattrTarget t;
    if (const int err = XattrTargetOf(inode, &t); err != 0) return (void)fuse_reply_err(req, err);
    if (const int err = AdmitXattrChange(name); err != 0) return (void)fuse_reply_err(req, err);
    const int rc = t.fd.valid() ? ::fsetxattr(t.fd.get(), name, value, size, flags)
                                : SetXattrAt(t.dir(), t.name(), name, value, size, flags);
    if (rc != 0) return (void)fuse_reply_err(req, errno);
    XattrChanged(req, inode, name, t);
  }

  void OnRemovexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
    Inode* inode = inodes_.Get(ino);
    if (inode->kind != InodeKind::kFile) return (void)fuse_reply_err(req, EROFS);
    XattrTarget t;
    if (const int err = XattrTargetOf(inode, &t); err != 0) return (void)fuse_reply_err(req, err);
    if (const int err = AdmitXattrChange(name); err != 0) return (void)fuse_reply_err(req, err);
    const int rc = t.fd.valid() ? ::fremovexattr(t.fd.get(), name)
                                : RemoveXattrAt(t.dir(), t.name(), name);
    if (rc != 0) return (void)fuse_reply_err(req, errno);
    XattrChanged(req, inode, name, t);
  }

  void OnForget(fuse_ino_t ino, uint64_t n) { inodes_.Forget(inodes_.Get(ino), n); }

  void FlushEdges() { edges_.Flush(); }

  static fuse_lowlevel_ops MakeOps();

  const CaptureFsOptions options_;
  const BackingTree* const tree_;
  InodeTable inodes_;
  DirCache dirs_;
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
  if (options.client == nullptr || options.index == nullptr || options.volume == 0 ||
      options.tree == nullptr) {
    return Status::InvalidArgument(
        "a client, an index writer, a volume and the open backing tree are required");
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
