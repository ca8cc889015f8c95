// Descriptor-relative access to directory trees deeper than PATH_MAX.
//
// A path handed to a system call must be shorter than PATH_MAX (4096 bytes with its NUL), but
// a file system takes names of up to 255 bytes at any depth: a file under a long enough chain
// of directories has no absolute path the kernel accepts. Such a file is reached from an open
// directory near it, with the *at() calls (fstatat, openat, mkdirat, unlinkat, ...) and the
// last component of its path. OpenDirBeneath opens that directory for a relative path of any
// length, in pieces the kernel takes, and never through a symbolic link: whoever may write in
// the tree cannot redirect a privileged caller elsewhere by swapping a directory for a link.
//
// Calls that have no *at() form take ProcFdPath: "/proc/self/fd/N/name" names `name` in the
// directory open as N with a path of bounded length (procfs must be mounted). The xattr calls
// have *at() forms since Linux 6.13 (ListXattrAt and its siblings use them, or ProcFdPath).
#ifndef PROPELLER_COMMON_DIR_FD_H_
#define PROPELLER_COMMON_DIR_FD_H_

#include <sys/types.h>
#include <unistd.h>

#include <string>
#include <string_view>
#include <utility>

namespace propeller {

// An owned file descriptor, closed at destruction. Move-only.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.Release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) Reset(other.Release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives up ownership: the caller closes the descriptor.
  int Release() { return std::exchange(fd_, -1); }
  void Reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// The longest relative path OpenDirBeneath hands the kernel at once (PATH_MAX - 1: the
// kernel counts the NUL).
inline constexpr size_t kMaxPathChunk = 4095;

// Opens the directory `rel` below the open directory `dir` as an O_PATH descriptor
// (O_CLOEXEC). `rel` is relative and '/'-separated, of any length ("" opens `dir` again). Each
// piece of at most kMaxPathChunk bytes is resolved with openat2(RESOLVE_NO_SYMLINKS |
// RESOLVE_BENEATH), or one component at a time with O_NOFOLLOW where the kernel lacks openat2
// (before Linux 5.6). With `readable`, the directory is opened O_RDONLY instead where the
// caller may read it (*readable says whether it was): a readable descriptor also serves
// flistxattr and fdopendir, which refuse O_PATH ones. 0, or an errno: ELOOP (or ENOTDIR) when a
// component is a symbolic link, ENOTDIR, ENOENT, EACCES, EXDEV for a ".." that would leave
// `dir`, ENAMETOOLONG for a component longer than the kernel takes.
int OpenDirBeneath(int dir, std::string_view rel, UniqueFd* out, bool* readable = nullptr);

// "/proc/self/fd/<dir>/<name>", or "/proc/self/fd/<dir>" when `name` is empty: a short path to
// `name` in (or to) the directory open as `dir`, for calls without an *at() form (truncate).
// Following the descriptor's link lands on the directory itself, whatever its path; `name` is
// then looked up as usual (l* calls do not follow it).
std::string ProcFdPath(int dir, std::string_view name = {});

// The extended-attribute calls on `name` in the directory open as `dir`, never following
// `name` when it is a symbolic link ("." for the directory itself): llistxattr, lgetxattr,
// lsetxattr and lremovexattr by descriptor and name. The *xattrat system calls where the
// kernel has them (Linux 6.13), else the l* calls on ProcFdPath. Results and errno as theirs.
ssize_t ListXattrAt(int dir, const char* name, char* list, size_t size);
ssize_t GetXattrAt(int dir, const char* name, const char* attr, void* value, size_t size);
int SetXattrAt(int dir, const char* name, const char* attr, const void* value, size_t size,
               int flags);
int RemoveXattrAt(int dir, const char* name, const char* attr);

// fchmodat(dir, name, mode, AT_SYMLINK_NOFOLLOW): one fchmodat2 system call where the kernel
// has it (Linux 6.6), else the C library's emulation (through /proc/self/fd). EOPNOTSUPP for
// a symbolic link, which has no mode of its own.
int ChmodAt(int dir, const char* name, mode_t mode);

namespace dir_fd_internal {
// Tests only: `false` makes the calls above behave as on a kernel without openat2 and the
// *xattrat calls (one component at a time, /proc/self/fd paths); `true` uses them again where
// the kernel has them.
void UseNewSyscallsForTest(bool use);
}  // namespace dir_fd_internal

}  // namespace propeller

#endif  // PROPELLER_COMMON_DIR_FD_H_
