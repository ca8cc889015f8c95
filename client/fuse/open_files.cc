#include "client/fuse/open_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/logging.h"

namespace propeller::fuse {

int OpenFiles::AttachBacking(fuse_req_t req, Handle* h, mode_t mode) {
  if (!passthrough_->enabled()) return 0;
  const bool set_id = (mode & (S_ISUID | S_ISGID)) != 0;
  std::lock_guard<std::mutex> lock(mu_);
  Inode* inode = h->inode;
  if (inode->backing_opens == 0) {
    // An inode without open handles may still be in passthrough mode in the kernel until the
    // RELEASE of its last handle; that release made backing_opens 0, so a new id is fine:
    // the kernel dropped the old one from the inode before sending RELEASE.
    if (set_id || passthrough_failed_) return 0;
    const int32_t id = KernelPassthrough::OpenBacking(dev_fd_, h->fd);
    if (id < 0) {
      passthrough_failed_ = true;
      Log(LogLevel::kWarning, "fuse: kernel passthrough refused (%s); this mount now serves "
                              "reads and writes through the daemon",
          std::strerror(-id));
      return 0;
    }
    inode->backing_id = id;
  } else if (set_id && h->write && fuse_req_ctx(req)->uid != 0) {
    if (const int err = KillPrivileges(req, h->fd); err != 0) return err;
  }
  ++inode->backing_opens;
  h->passthrough = true;
  KernelPassthrough::SetReplyBacking(inode->backing_id);
  ++passthrough_opens_;
  return 0;
}

void OpenFiles::DetachBacking(Handle* h) {
  if (!h->passthrough) return;
  h->passthrough = false;
  std::lock_guard<std::mutex> lock(mu_);
  Inode* inode = h->inode;
  if (--inode->backing_opens > 0) return;
  if (int rc = KernelPassthrough::CloseBacking(dev_fd_, inode->backing_id); rc != 0) {
    Log(LogLevel::kWarning, "fuse: dropping backing id %d: %s", inode->backing_id,
        std::strerror(-rc));
  }
  inode->backing_id = 0;
}

void OpenFiles::Opened(Handle* h) {
  std::lock_guard<std::mutex> lock(mu_);
  h->inode->handles.push_back(h);
}

void OpenFiles::Forget(Handle* h) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase(h->inode->handles, h);
}

void OpenFiles::CloseHandle(Handle* h) {
  Forget(h);  // before the close: DupFdOf must not see a closed (or reused) descriptor
  DetachBacking(h);
  ::close(h->fd);
  delete h;
}

void OpenFiles::CloseDir(Handle* h) {
  Forget(h);
  if (h->dir != nullptr) ::closedir(h->dir);
  delete h;
}

int OpenFiles::DupFdOf(Inode* inode, UniqueFd* out) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Handle* h : inode->handles) {
    const int fd = h->fd >= 0 ? h->fd : h->dir != nullptr ? ::dirfd(h->dir) : -1;
    if (fd < 0) continue;
    const int dup = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (dup < 0) return errno;
    out->Reset(dup);
    return 0;
  }
  return ENOENT;
}

int OpenFiles::KillPrivileges(fuse_req_t req, int fd, int dir, const char* name) {
  struct stat st;
  if ((fd >= 0 ? ::fstat(fd, &st) : ::fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW)) != 0) {
    return errno;
  }
  if (!S_ISREG(st.st_mode)) return 0;
  const mode_t mode = st.st_mode & 07777;
  const mode_t killed = static_cast<mode_t>(KilledMode(mode, CallerInGroup(req, st.st_gid)));
  if (killed == mode) return 0;
  const int rc = fd >= 0 ? ::fchmod(fd, killed) : ChmodAt(dir, name, killed);
  return rc == 0 ? 0 : errno;
}

bool OpenFiles::CallerInGroup(fuse_req_t req, gid_t gid) {
  const struct fuse_ctx* ctx = fuse_req_ctx(req);
  if (ctx->uid == 0 || ctx->gid == gid) return true;
  gid_t groups[64];
  const int n = fuse_req_getgroups(req, 64, groups);
  for (int i = 0; i < std::min(n, 64); ++i) {
    if (groups[i] == gid) return true;
  }
  return false;
}

}  // namespace propeller::fuse
