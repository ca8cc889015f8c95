// Open files of the mount (capture_fs.h): the handle of each open file or directory, kernel
// passthrough of open regular files to their backing files (kernel_io.h), and dropping
// set-user-ID and set-group-ID bits as the VFS would (KillprivV2).
//
// Each inode knows its open handles: a file whose names were all removed while it was open
// (an unlinked temporary file) has no path any more, and the calls the kernel still sends for
// it — fstat, fchmod, fchown, futimens and truncate of the open file come without a handle —
// are served from the descriptor of any of its handles (DupFdOf).
//
// Kernel passthrough: the reply to an OPEN or CREATE names the inode's backing id, registered
// with the kernel at the first open and shared by every handle of that inode (the kernel
// requires one id per inode) until the last one is released. Without passthrough (not
// negotiated, --writeback, or registration failed once: the backing file system is stacked,
// or the kernel refused it at INIT) handles are served through the daemon.
//
// Set-ID files stay with the daemon. With KILLPRIV_V2 the kernel leaves dropping set-user-ID
// and set-group-ID on write to the daemon (the WRITE request's flag), and a passthrough write
// sends no WRITE: the bits would stay (Linux 6.18 drops the kernel's own attempt). An inode
// already open in passthrough mode cannot be opened otherwise (the kernel fails the open with
// EIO), so a write-open of a set-ID file that must join one drops the bits now, by the rule a
// write would apply: earlier than the VFS (at open, not at the first write), never more.
//
// Thread-safe.
#ifndef PROPELLER_CLIENT_FUSE_OPEN_FILES_H_
#define PROPELLER_CLIENT_FUSE_OPEN_FILES_H_

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 314  // as capture_fs.cc
#endif
#include <dirent.h>
#include <fuse3/fuse_lowlevel.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "client/fuse/inode_table.h"
#include "client/fuse/kernel_io.h"
#include "client/fuse/process_table.h"
#include "client/fuse/query_listings.h"
#include "common/dir_fd.h"

namespace propeller::fuse {

// An open file or directory.
struct Handle {
  int fd = -1;
  bool write = false;
  bool passthrough = false;  // holds one of inode->backing_opens
  bool has_owner = false;
  ProcessInfo owner;
  uint64_t open_mark = 0;  // EdgeCapture::OnOpen's mark of this open
  // The file's inode generation (InodeGeneration), read at open for a write-open or when
  // edges are captured.
  uint32_t generation = 0;
  Inode* inode = nullptr;
  // Directories.
  DIR* dir = nullptr;
  struct dirent* entry = nullptr;
  off_t offset = 0;
  // Query directories: a snapshot of the listing.
  std::vector<QueryEntry> entries;
};

inline Handle* HandleOf(struct fuse_file_info* fi) { return reinterpret_cast<Handle*>(fi->fh); }

class OpenFiles {
 public:
  explicit OpenFiles(KernelPassthrough* passthrough) : passthrough_(passthrough) {}

  // The session's /dev/fuse descriptor (before the first open).
  void set_dev_fd(int fd) { dev_fd_ = fd; }

  // Kernel passthrough for the open `h` of a regular file (descriptor h->fd, mode `mode`) by
  // the caller of `req`: the reply to the OPEN or CREATE being served will name the inode's
  // backing id (see above). 0, or an errno for the open.
  int AttachBacking(fuse_req_t req, Handle* h, mode_t mode);
  // Records the open handle `h` (a file's or a directory's) with h->inode, until it is
  // closed by CloseHandle or CloseDir.
  void Opened(Handle* h);
  // Closes an open file's handle (RELEASE, or an OPEN or CREATE reply the kernel never got).
  void CloseHandle(Handle* h);
  // Closes a directory's handle (RELEASEDIR).
  void CloseDir(Handle* h);
  // A duplicate of the descriptor of one open handle of `inode` — the file itself, whatever
  // became of its names. 0, ENOENT when it has no handle open, or the dup's errno.
  int DupFdOf(Inode* inode, UniqueFd* out);

  // Drops set-user-ID and set-group-ID from the regular file open as `fd` (or, when fd < 0,
  // `name` in the directory open as `dir`, not following a symbolic link) as the VFS would
  // for the caller of `req` (KilledMode), because the kernel asked (KillprivV2). 0 or an
  // errno.
  static int KillPrivileges(fuse_req_t req, int fd, int dir = -1, const char* name = nullptr);

  uint64_t passthrough_opens() const { return passthrough_opens_.load(); }

 private:
  void DetachBacking(Handle* h);
  void Forget(Handle* h);  // undoes Opened
  // Whether the caller of `req` is root or in group `gid` (primary or supplementary). When
  // the groups cannot be read, no: the set-group-ID bit then goes, the safe side.
  static bool CallerInGroup(fuse_req_t req, gid_t gid);

  KernelPassthrough* const passthrough_;
  int dev_fd_ = -1;
  std::mutex mu_;                    // the inodes' backing ids, counts and handles
  bool passthrough_failed_ = false;  // Under mu_.
  std::atomic<uint64_t> passthrough_opens_{0};
};

}  // namespace propeller::fuse

#endif  // PROPELLER_CLIENT_FUSE_OPEN_FILES_H_
