#include "common/dir_fd.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <string>

namespace propeller {
namespace {

// O_NOFOLLOW matters where openat2 is missing (one component at a time); with it, a link as
// the last component gives ENOTDIR, which OpenPiece turns into RESOLVE_NO_SYMLINKS' ELOOP.
constexpr int kDirFlags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
constexpr int kReadableDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

// -errno of a failed openat of `name` in `dir`: ELOOP for a symbolic link (O_NOFOLLOW |
// O_DIRECTORY reports ENOTDIR), as RESOLVE_NO_SYMLINKS would.
int OpenError(int dir, const char* name) {
  const int err = errno;
  struct stat st;
  if (err == ENOTDIR && ::fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISLNK(st.st_mode)) {
    return -ELOOP;
  }
  return -err;
}

// Cleared at the first ENOSYS: the kernel predates openat2 (or a sandbox hides it).
std::atomic<bool> have_openat2{true};

// Opens `piece` (at most kMaxPathChunk bytes) below `dir` with `flags` (kDirFlags or
// kReadableDirFlags). A descriptor or -errno.
int OpenPiece(int dir, const std::string& piece, int flags) {
  if (have_openat2.load(std::memory_order_relaxed)) {
    struct open_how how = {};
    how.flags = static_cast<uint64_t>(flags & ~O_NOFOLLOW);  // a link anywhere: ELOOP
    how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH;
    const long fd = ::syscall(SYS_openat2, dir, piece.c_str(), &how, sizeof(how));
    if (fd >= 0) return static_cast<int>(fd);
    if (errno != ENOSYS) return -errno;
    have_openat2.store(false, std::memory_order_relaxed);
  }
  // One component at a time: O_NOFOLLOW guards only the last component of a path.
  UniqueFd cur;
  int at = dir;
  size_t start = 0;
  while (start <= piece.size()) {
    size_t end = piece.find('/', start);
    if (end == std::string::npos) end = piece.size();
    const std::string name = piece.substr(start, end - start);
    start = end + 1;
    if (name.empty() || name == ".") continue;
    if (name == "..") return -EXDEV;  // as RESOLVE_BENEATH: never above `dir`
    const int fd = ::openat(at, name.c_str(), start > piece.size() ? flags : kDirFlags);
    if (fd < 0) return OpenError(at, name.c_str());
    cur.Reset(fd);
    at = fd;
  }
  if (!cur.valid()) {
    const int fd = ::openat(dir, ".", flags);
    return fd >= 0 ? fd : -errno;
  }
  return cur.Release();
}

// Opens `piece` as OpenPiece, readable where allowed (`*readable` says whether it is).
int OpenLastPiece(int dir, const std::string& piece, bool* readable) {
  if (readable != nullptr) {
    const int fd = OpenPiece(dir, piece, kReadableDirFlags);
    *readable = fd >= 0;
    if (fd != -EACCES) return fd;  // no read permission: O_PATH needs search permission only
  }
  return OpenPiece(dir, piece, kDirFlags);
}

// fchmodat2 (Linux 6.6) and the *xattrat system calls (Linux 6.13), which the C library
// here does not wrap; their numbers are the same on every architecture that uses the common
// table. Each flag is cleared at the first ENOSYS.
#if defined(__linux__) && !defined(__alpha__)
constexpr long kFchmodat2 = 452;
constexpr long kSetXattrAt = 463, kGetXattrAt = 464, kListXattrAt = 465, kRemoveXattrAt = 466;
std::atomic<bool> have_fchmodat2{true};
std::atomic<bool> have_xattrat{true};
#else
constexpr long kFchmodat2 = -1;
constexpr long kSetXattrAt = -1, kGetXattrAt = -1, kListXattrAt = -1, kRemoveXattrAt = -1;
std::atomic<bool> have_fchmodat2{false};
std::atomic<bool> have_xattrat{false};
#endif

struct XattrArgs {  // struct xattr_args of <linux/xattr.h> (6.13)
  alignas(8) uint64_t value;
  uint32_t size;
  uint32_t flags;
};

// Runs the *xattrat call `call` while the kernel has them: true with its result in *rc, false
// when the caller must use the path calls instead.
template <typename Call>
bool TryXattrAt(Call call, long* rc) {
  if (!have_xattrat.load(std::memory_order_relaxed)) return false;
  *rc = call();
  if (*rc >= 0 || errno != ENOSYS) return true;
  have_xattrat.store(false, std::memory_order_relaxed);
  return false;
}

}  // namespace

namespace dir_fd_internal {
void UseNewSyscallsForTest(bool use) {
  have_openat2.store(use);
#if defined(__linux__) && !defined(__alpha__)
  have_fchmodat2.store(use);
  have_xattrat.store(use);
#endif
}
}  // namespace dir_fd_internal

int OpenDirBeneath(int dir, std::string_view rel, UniqueFd* out, bool* readable) {
  while (!rel.empty() && rel.back() == '/') rel.remove_suffix(1);
  if (rel.empty()) {
    const int fd = OpenLastPiece(dir, ".", readable);
    if (fd < 0) return -fd;
    out->Reset(fd);
    return 0;
  }
  UniqueFd cur;
  int at = dir;
  do {
    // The longest prefix of whole components that the kernel takes in one call.
    size_t len = rel.size();
    if (len > kMaxPathChunk) {
      len = rel.rfind('/', kMaxPathChunk);
      if (len == std::string_view::npos || len == 0) return ENAMETOOLONG;
    }
    const bool last = len == rel.size();
    const std::string piece(rel.substr(0, len));
    const int fd = last ? OpenLastPiece(at, piece, readable) : OpenPiece(at, piece, kDirFlags);
    if (fd < 0) return -fd;
    cur.Reset(fd);
    at = fd;
    rel.remove_prefix(len);
    while (!rel.empty() && rel.front() == '/') rel.remove_prefix(1);
  } while (!rel.empty());
  *out = std::move(cur);
  return 0;
}

std::string ProcFdPath(int dir, std::string_view name) {
  std::string path = "/proc/self/fd/" + std::to_string(dir);
  if (!name.empty()) {
    path += '/';
    path += name;
  }
  return path;
}

ssize_t ListXattrAt(int dir, const char* name, char* list, size_t size) {
  long rc = 0;
  if (TryXattrAt([&] {
        return ::syscall(kListXattrAt, dir, name, AT_SYMLINK_NOFOLLOW, list, size);
      }, &rc)) {
    return rc;
  }
  return ::llistxattr(ProcFdPath(dir, name).c_str(), list, size);
}

ssize_t GetXattrAt(int dir, const char* name, const char* attr, void* value, size_t size) {
  long rc = 0;
  XattrArgs args{reinterpret_cast<uintptr_t>(value), static_cast<uint32_t>(size), 0};
  if (size > UINT32_MAX) args.size = UINT32_MAX;
  if (TryXattrAt([&] {
        return ::syscall(kGetXattrAt, dir, name, AT_SYMLINK_NOFOLLOW, attr, &args, sizeof(args));
      }, &rc)) {
    return rc;
  }
  return ::lgetxattr(ProcFdPath(dir, name).c_str(), attr, value, size);
}

int SetXattrAt(int dir, const char* name, const char* attr, const void* value, size_t size,
               int flags) {
  long rc = 0;
  XattrArgs args{reinterpret_cast<uintptr_t>(value), static_cast<uint32_t>(size),
                 static_cast<uint32_t>(flags)};
  if (size <= UINT32_MAX && TryXattrAt([&] {
        return ::syscall(kSetXattrAt, dir, name, AT_SYMLINK_NOFOLLOW, attr, &args, sizeof(args));
      }, &rc)) {
    return static_cast<int>(rc);
  }
  return ::lsetxattr(ProcFdPath(dir, name).c_str(), attr, value, size, flags);
}

int RemoveXattrAt(int dir, const char* name, const char* attr) {
  long rc = 0;
  if (TryXattrAt([&] {
        return ::syscall(kRemoveXattrAt, dir, name, AT_SYMLINK_NOFOLLOW, attr);
      }, &rc)) {
    return static_cast<int>(rc);
  }
  return ::lremovexattr(ProcFdPath(dir, name).c_str(), attr);
}

int ChmodAt(int dir, const char* name, mode_t mode) {
  if (have_fchmodat2.load(std::memory_order_relaxed)) {
    const long rc = ::syscall(kFchmodat2, dir, name, mode, AT_SYMLINK_NOFOLLOW);
    if (rc == 0 || errno != ENOSYS) return static_cast<int>(rc);
    have_fchmodat2.store(false, std::memory_order_relaxed);
  }
  return ::fchmodat(dir, name, mode, AT_SYMLINK_NOFOLLOW);
}

}  // namespace propeller
