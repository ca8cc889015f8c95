// kernel_io: what the capture file system reads from and patches in the raw /dev/fuse traffic,
// for two protocol features libfuse 3.14 cannot ask for: FUSE_HANDLE_KILLPRIV_V2 and kernel
// passthrough (KernelPassthrough, below).
//
// Why it matters: without it the kernel asks the daemon for `security.capability` before
// every write(2) to a file (GETXATTR; the VFS must know whether the write has to remove file
// capabilities), one extra round trip per write call. With it the kernel marks the super block
// SB_NOSEC, remembers per inode that there is nothing to remove, and asks once per inode until
// its attributes are next refreshed. In exchange the file system takes over killing the
// set-user-ID and set-group-ID bits, which the kernel then flags on the requests concerned:
//   WRITE    write_flags & FUSE_WRITE_KILL_SUIDGID   (writer lacks CAP_FSETID)
//   OPEN     open_flags  & FUSE_OPEN_KILL_SUIDGID    (O_TRUNC by a caller lacking CAP_FSETID)
//   CREATE   open_flags  & FUSE_OPEN_KILL_SUIDGID    (the same, for an existing file)
//   SETATTR  valid & FATTR_KILL_SUIDGID              (truncate without CAP_FSETID; any chown)
// libfuse 3.14 passes the SETATTR flag on (FUSE_SET_ATTR_KILL_SUID, same bit) but drops the
// other two, so they are read here from the request as it comes off /dev/fuse, on the worker
// thread that then runs the handler (libfuse's loop reads and dispatches on one thread).
// File capabilities need nothing: the daemon's own write, truncate and chown on the backing
// file make the backing kernel remove them.
//
// libfuse 3.14 lets a session read and write /dev/fuse through custom functions
// (fuse_session_custom_io); capture_fs installs ones that call these.
#ifndef PROPELLER_CLIENT_FUSE_KERNEL_IO_H_
#define PROPELLER_CLIENT_FUSE_KERNEL_IO_H_

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace propeller::fuse {

class KillprivV2 {
 public:
  // Looks at one request just read from /dev/fuse (`len` bytes at `buf`): remembers the INIT
  // request (its unique id and whether the kernel offers FUSE_HANDLE_KILLPRIV_V2) and sets
  // KillRequested() for this thread's request.
  void OnRequest(const void* buf, size_t len);

  // Before a reply is written: adds FUSE_HANDLE_KILLPRIV_V2 to the INIT reply when the kernel
  // offered it. Other replies are left alone; after the INIT reply this returns at once.
  void OnReply(struct iovec* iov, int count);

  // Whether the request this thread read last asks the file system to kill suid/sgid
  // (a WRITE, OPEN or CREATE flag; see above).
  static bool KillRequested();

 private:
  std::atomic<uint64_t> init_unique_{0};  // 0: no INIT seen
  std::atomic<bool> offered_{false};
  std::atomic<bool> init_replied_{false};  // the INIT reply went out (patched or not)
};

// Kernel passthrough (FUSE_PASSTHROUGH, Linux 6.9+): reads, writes and mmap of an open regular
// file go from the kernel straight to the backing file, without a round trip to the daemon.
// libfuse 3.14 cannot ask for it (it arrived in 3.17), so, as for KILLPRIV_V2, the INIT reply
// is patched on its way out: FUSE_PASSTHROUGH in flags2 and max_stack_depth = 1 (the backing
// file system must not itself be stacked, e.g. overlayfs; its files then fail to register and
// the mount falls back to serving I/O itself).
//
// Protocol, as the kernel enforces it (fs/fuse/iomode.c, backing.c):
//   - the daemon registers an open descriptor of the backing file with
//     ioctl(/dev/fuse, FUSE_DEV_IOC_BACKING_OPEN) and gets a backing id (needs CAP_SYS_ADMIN);
//   - an OPEN or CREATE reply with FOPEN_PASSTHROUGH names that id in fuse_open_out (the
//     field libfuse 3.14 calls padding and zeroes); FOPEN_KEEP_CACHE must then be clear;
//   - all opens of one inode that are open at the same time must name the same id, and an
//     inode open in passthrough mode cannot also be open through the page cache (EIO);
//   - the id is dropped with FUSE_DEV_IOC_BACKING_CLOSE; files already open keep working.
// The kernel refuses passthrough together with the writeback cache, and still sends FLUSH on
// every close (the inline index update of a written file is unchanged).
class KernelPassthrough {
 public:
  // want: ask the kernel for passthrough at INIT if it offers it.
  explicit KernelPassthrough(bool want) : want_(want) {}

  // Looks at one request just read from /dev/fuse: the INIT offer, and which request this
  // thread now serves (for SetReplyBacking).
  void OnRequest(const void* buf, size_t len);

  // Before a reply is written: asks for passthrough in the INIT reply (when wanted, offered
  // and the reply does not turn the writeback cache on); turns the OPEN or CREATE reply of
  // this thread's request into a passthrough open when SetReplyBacking named an id. Returns
  // true for the INIT reply that asked for passthrough.
  bool OnReply(struct iovec* iov, int count);

  // Whether the INIT reply asked for passthrough (the kernel may still refuse: then
  // OpenBacking fails).
  bool enabled() const { return enabled_.load(std::memory_order_acquire); }

  // The OPEN or CREATE request this thread serves is answered in passthrough mode to
  // `backing_id` (> 0), if its reply succeeds.
  static void SetReplyBacking(int32_t backing_id);

  // Registers `fd` with the connection of `dev_fd` (/dev/fuse): the backing id (> 0), or
  // -errno.
  static int32_t OpenBacking(int dev_fd, int fd);
  // Drops a backing id. 0 or -errno.
  static int CloseBacking(int dev_fd, int32_t backing_id);

 private:
  const bool want_;
  std::atomic<uint64_t> init_unique_{0};
  std::atomic<bool> offered_{false};
  std::atomic<bool> init_replied_{false};
  std::atomic<bool> enabled_{false};
};

// The mode `mode` keeps after a kill of privileges the kernel asked for, as the Linux VFS
// does it (setattr_should_drop_suidgid): set-user-ID goes; set-group-ID goes when group
// execute is set, or when the caller is not in the file's group (nor root: CAP_FSETID).
unsigned KilledMode(unsigned mode, bool caller_in_group);

}  // namespace propeller::fuse

#endif  // PROPELLER_CLIENT_FUSE_KERNEL_IO_H_
