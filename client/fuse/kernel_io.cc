// The only file that reads the kernel's FUSE wire structures (<linux/fuse.h>): libfuse's
// public headers define some of the same names, so they stay apart.
#include "client/fuse/kernel_io.h"

#include <linux/fuse.h>
#include <sys/stat.h>

#include <cstring>

namespace propeller::fuse {
namespace {

thread_local bool t_kill_requested = false;

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

unsigned KilledMode(unsigned mode, bool caller_in_group) {
  mode &= ~static_cast<unsigned>(S_ISUID);
  if ((mode & S_IXGRP) || !caller_in_group) mode &= ~static_cast<unsigned>(S_ISGID);
  return mode;
}

}  // namespace propeller::fuse
