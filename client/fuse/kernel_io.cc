// The only file that reads the kernel's FUSE wire structures (<linux/fuse.h>): libfuse's
// public headers define some of the same names, so they stay apart.
#include "client/fuse/kernel_io.h"

#include <errno.h>
#include <linux/fuse.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include <cstring>

namespace propeller::fuse {
namespace {

thread_local bool t_kill_requested = false;

// Passthrough's part of the protocol (7.40, Linux 6.9), newer than Debian 12's <linux/fuse.h>
// (7.38). Values from the kernel's include/uapi/linux/fuse.h.
constexpr uint64_t kFusePassthrough = 1ULL << 37;  // INIT flag, in flags2
constexpr uint32_t kFopenPassthrough = 1U << 7;
struct BackingMap {  // struct fuse_backing_map
  int32_t fd;
  uint32_t flags;
  uint64_t padding;
};
constexpr unsigned long kIocBackingOpen = _IOW(229, 1, BackingMap);   // FUSE_DEV_IOC_MAGIC 229
constexpr unsigned long kIocBackingClose = _IOW(229, 2, uint32_t);
// fuse_init_out: 7.40 names the first unused word after flags2 max_stack_depth.
constexpr size_t kInitOutFlags2 = offsetof(struct fuse_init_out, flags2);
constexpr size_t kInitOutMaxStackDepth = offsetof(struct fuse_init_out, unused);
static_assert(kInitOutMaxStackDepth == kInitOutFlags2 + 4);
// fuse_open_out: 7.40 names its padding backing_id.
constexpr size_t kOpenOutFlags = offsetof(struct fuse_open_out, open_flags);
constexpr size_t kOpenOutBackingId = offsetof(struct fuse_open_out, padding);

// The request this thread serves (KernelPassthrough::OnRequest) and the backing id its OPEN
// or CREATE reply names (0: none).
thread_local uint64_t t_unique = 0;
thread_local uint32_t t_opcode = 0;
thread_local int32_t t_backing_id = 0;

uint32_t Load32(const void* base, size_t offset) {
  uint32_t v;
  std::memcpy(&v, static_cast<const char*>(base) + offset, sizeof(v));
  return v;
}

void Store32(void* base, size_t offset, uint32_t v) {
  std::memcpy(static_cast<char*>(base) + offset, &v, sizeof(v));
}

// A field of type T at `offset` of `buf` (`len` bytes), if it is there.
template <typename T>
bool ReadField(const void* buf, size_t len, size_t offset, T* out) {
  if (offset + sizeof(T) > len) return false;
  std::memcpy(out, static_cast<const char*>(buf) + offset, sizeof(T));
  return true;
}

}  // namespace

void KillprivV2::OnRequest(const void* buf, size_t len) {
  t_kill_requested = false;
  struct fuse_in_header in;
  if (!ReadField(buf, len, 0, &in)) return;
  const size_t body = sizeof(struct fuse_in_header);
  uint32_t flags = 0;
  switch (in.opcode) {
    case FUSE_INIT:
      if (ReadField(buf, len, body + offsetof(struct fuse_init_in, flags), &flags)) {
        offered_.store((flags & FUSE_HANDLE_KILLPRIV_V2) != 0, std::memory_order_relaxed);
        init_unique_.store(in.unique, std::memory_order_release);
      }
      break;
    case FUSE_WRITE:
      if (ReadField(buf, len, body + offsetof(struct fuse_write_in, write_flags), &flags)) {
        t_kill_requested = (flags & FUSE_WRITE_KILL_SUIDGID) != 0;
      }
      break;
    case FUSE_OPEN:
      if (ReadField(buf, len, body + offsetof(struct fuse_open_in, open_flags), &flags)) {
        t_kill_requested = (flags & FUSE_OPEN_KILL_SUIDGID) != 0;
      }
      break;
    case FUSE_CREATE:
      if (ReadField(buf, len, body + offsetof(struct fuse_create_in, open_flags), &flags)) {
        t_kill_requested = (flags & FUSE_OPEN_KILL_SUIDGID) != 0;
      }
      break;
    default:
      break;
  }
}

void KillprivV2::OnReply(struct iovec* iov, int count) {
  if (init_replied_.load(std::memory_order_relaxed)) return;
  const uint64_t init = init_unique_.load(std::memory_order_acquire);
  if (init == 0 || count < 1 || iov[0].iov_len < sizeof(struct fuse_out_header)) return;
  struct fuse_out_header out;
  std::memcpy(&out, iov[0].iov_base, sizeof(out));
  if (out.unique != init) return;
  init_replied_.store(true, std::memory_order_relaxed);
  if (out.error != 0 || count < 2 || !offered_.load(std::memory_order_relaxed)) return;
  const size_t at = offsetof(struct fuse_init_out, flags);
  if (iov[1].iov_len < at + sizeof(uint32_t)) return;
  uint32_t flags;
  std::memcpy(&flags, static_cast<char*>(iov[1].iov_base) + at, sizeof(flags));
  flags |= FUSE_HANDLE_KILLPRIV_V2;
  std::memcpy(static_cast<char*>(iov[1].iov_base) + at, &flags, sizeof(flags));
}

bool KillprivV2::KillRequested() { return t_kill_requested; }

void KernelPassthrough::OnRequest(const void* buf, size_t len) {
  t_backing_id = 0;
  struct fuse_in_header in;
  if (!ReadField(buf, len, 0, &in)) return;
  t_unique = in.unique;
  t_opcode = in.opcode;
  if (in.opcode != FUSE_INIT || !want_) return;
  const size_t body = sizeof(struct fuse_in_header);
  uint32_t flags = 0, flags2 = 0;
  if (!ReadField(buf, len, body + offsetof(struct fuse_init_in, flags), &flags)) return;
  if ((flags & FUSE_INIT_EXT) &&
      ReadField(buf, len, body + offsetof(struct fuse_init_in, flags2), &flags2)) {
    offered_.store((flags2 & (kFusePassthrough >> 32)) != 0, std::memory_order_relaxed);
  }
  init_unique_.store(in.unique, std::memory_order_release);
}

bool KernelPassthrough::OnReply(struct iovec* iov, int count) {
  if (count < 1 || iov[0].iov_len < sizeof(struct fuse_out_header)) return false;
  struct fuse_out_header out;
  std::memcpy(&out, iov[0].iov_base, sizeof(out));
  if (t_backing_id > 0 && out.unique == t_unique) {
    const int32_t id = t_backing_id;
    t_backing_id = 0;
    const size_t at = t_opcode == FUSE_CREATE ? sizeof(struct fuse_entry_out) : 0;
    if (out.error != 0 || count < 2 || iov[1].iov_len < at + sizeof(struct fuse_open_out) ||
        (t_opcode != FUSE_OPEN && t_opcode != FUSE_CREATE)) {
      return false;
    }
    void* open_out = static_cast<char*>(iov[1].iov_base) + at;
    uint32_t flags = Load32(open_out, kOpenOutFlags);
    flags = (flags & ~static_cast<uint32_t>(FOPEN_KEEP_CACHE)) | kFopenPassthrough;
    Store32(open_out, kOpenOutFlags, flags);
    Store32(open_out, kOpenOutBackingId, static_cast<uint32_t>(id));
    return false;
  }
  if (!want_ || init_replied_.load(std::memory_order_relaxed)) return false;
  const uint64_t init = init_unique_.load(std::memory_order_acquire);
  if (init == 0 || out.unique != init) return false;
  init_replied_.store(true, std::memory_order_relaxed);
  if (out.error != 0 || count < 2 || !offered_.load(std::memory_order_relaxed)) return false;
  if (iov[1].iov_len < kInitOutMaxStackDepth + sizeof(uint32_t)) return false;
  void* init_out = iov[1].iov_base;
  uint32_t flags = Load32(init_out, offsetof(struct fuse_init_out, flags));
  if (flags & FUSE_WRITEBACK_CACHE) return false;  // the kernel refuses the combination
  Store32(init_out, offsetof(struct fuse_init_out, flags), flags | FUSE_INIT_EXT);
  const uint32_t flags2 = Load32(init_out, kInitOutFlags2);
  Store32(init_out, kInitOutFlags2, flags2 | static_cast<uint32_t>(kFusePassthrough >> 32));
  Store32(init_out, kInitOutMaxStackDepth, 1);
  enabled_.store(true, std::memory_order_release);
  return true;
}

void KernelPassthrough::SetReplyBacking(int32_t backing_id) { t_backing_id = backing_id; }

int32_t KernelPassthrough::OpenBacking(int dev_fd, int fd) {
  BackingMap map{};
  map.fd = fd;
  const int id = ::ioctl(dev_fd, kIocBackingOpen, &map);
  if (id < 0) return -errno;
  if (id == 0) return -EPROTO;  // ids start at 1
  return id;
}

int KernelPassthrough::CloseBacking(int dev_fd, int32_t backing_id) {
  uint32_t id = static_cast<uint32_t>(backing_id);
  return ::ioctl(dev_fd, kIocBackingClose, &id) == 0 ? 0 : -errno;
}

unsigned KilledMode(unsigned mode, bool caller_in_group) {
  mode &= ~static_cast<unsigned>(S_ISUID);
  if ((mode & S_IXGRP) || !caller_in_group) mode &= ~static_cast<unsigned>(S_ISGID);
  return mode;
}

}  // namespace propeller::fuse
