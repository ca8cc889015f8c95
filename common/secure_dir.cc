#include "common/secure_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace propeller {
namespace {

std::string ModeText(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

bool TrustedOwner(uid_t uid) { return uid == 0 || uid == ::geteuid(); }

// "/a/b/c" -> "/", "/a", "/a/b" (the proper ancestors, from the root down).
std::vector<std::string> Ancestors(const std::string& path) {
  std::vector<std::string> out;
  if (path.empty() || path[0] != '/') return out;
  out.push_back("/");
  for (size_t pos = path.find('/', 1); pos != std::string::npos; pos = path.find('/', pos + 1)) {
    out.push_back(path.substr(0, pos));
  }
  if (path.size() > 1 && path.back() == '/') out.pop_back();
  return out;
}

std::string Absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof(cwd)) == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

// One ancestor, as lstat shows it: a directory owned by root or us and writable by nobody
// else unless sticky, or a symbolic link owned by root or us (what it points to is checked
// when the resolved path is).
Status CheckAncestor(const std::string& dir) {
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) return Status::IOError("stat " + dir, errno);
  if (S_ISLNK(st.st_mode)) {
    if (TrustedOwner(st.st_uid)) return Status::OK();
    return Status::PermissionDenied(dir + " is a symbolic link owned by uid " +
                                    std::to_string(st.st_uid) + "; use a path only root or this "
                                    "user controls");
  }
  if (!S_ISDIR(st.st_mode)) return Status::PermissionDenied(dir + " is not a directory");
  if (!TrustedOwner(st.st_uid)) {
    return Status::PermissionDenied(dir + " is owned by uid " + std::to_string(st.st_uid) +
                                    ", who could replace what lies below it; use a directory "
                                    "owned by root or this user");
  }
  if ((st.st_mode & 022) != 0 && (st.st_mode & S_ISVTX) == 0) {
    return Status::PermissionDenied(dir + " may be written by other users (mode " +
                                    ModeText(st.st_mode) + "), who could replace what lies "
                                    "below it; run chmod go-w " + dir + " or choose another "
                                    "directory");
  }
  return Status::OK();
}

// The walk of a data directory's contents (PrepareDataDir). `fd` is an open directory we own,
// already narrowed to 0700, so nobody else can add or swap entries while we look.
Status CheckDataTree(int fd, const std::string& path) {
  const int list_fd = ::dup(fd);
  if (list_fd < 0) return Status::IOError("dup", errno);
  DIR* dir = ::fdopendir(list_fd);
  if (dir == nullptr) {
    ::close(list_fd);
    return Status::IOError("opendir " + path, errno);
  }
  Status result;
  const uid_t me = ::geteuid();
  while (result.ok()) {
    errno = 0;
    struct dirent* e = ::readdir(dir);
    if (e == nullptr) {
      if (errno != 0) result = Status::IOError("readdir " + path, errno);
      break;
    }
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string child = path + "/" + name;
    const std::string refuse = "refusing data directory: " + child;
    const std::string fix = " (another user may have planted it: check it, remove it, and "
                            "start again)";
    struct stat st;
    if (::fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;  // removed by this user's own process meanwhile
      result = Status::IOError("stat " + child, errno);
      break;
    }
    if (S_ISLNK(st.st_mode)) {
      result = Status::PermissionDenied(refuse + " is a symbolic link" + fix);
    } else if (st.st_uid != me) {
      result = Status::PermissionDenied(refuse + " is owned by uid " + std::to_string(st.st_uid) +
                                        fix);
    } else if (S_ISDIR(st.st_mode)) {
      const int sub = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0) {
        result = Status::IOError("open " + child, errno);
        break;
      }
      if ((st.st_mode & 07777) != 0700 && ::fchmod(sub, 0700) != 0) {
        result = Status::IOError("chmod " + child, errno);
      } else {
        result = CheckDataTree(sub, child);
      }
      ::close(sub);
    } else if (S_ISREG(st.st_mode)) {
      if (st.st_nlink > 1) {
        result = Status::PermissionDenied(refuse + " has " + std::to_string(st.st_nlink) +
                                          " hard links" + fix);
      } else if ((st.st_mode & 07777) != 0600 && ::fchmodat(fd, name.c_str(), 0600, 0) != 0) {
        result = Status::IOError("chmod " + child, errno);
      }
    } else {
      result = Status::PermissionDenied(refuse + " is a device, fifo or socket" + fix);
    }
  }
  ::closedir(dir);
  return result;
}

}  // namespace

Status MakeDirs(const std::string& path, mode_t mode) {
  if (path.empty()) return Status::InvalidArgument("MakeDirs of an empty path");
  for (size_t pos = path.find('/', 1);; pos = path.find('/', pos + 1)) {
    const std::string part = path.substr(0, pos);
    if (!part.empty() && part.back() != '/') {
      if (::mkdir(part.c_str(), mode) == 0) {
        // mkdir applies the umask: set the mode asked for exactly.
        if (::chmod(part.c_str(), mode) != 0) return Status::IOError("chmod " + part, errno);
      } else if (errno != EEXIST) {
        return Status::IOError("mkdir " + part, errno);
      }
    }
    if (pos == std::string::npos) break;
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::IOError("stat " + path, errno);
  if (!S_ISDIR(st.st_mode)) return Status::IOError("mkdir " + path, ENOTDIR);
  return Status::OK();
}

Status CheckAncestorsTrusted(const std::string& path) {
  for (const std::string& dir : Ancestors(Absolute(path))) {
    PROPELLER_RETURN_IF_ERROR(CheckAncestor(dir));
  }
  return Status::OK();
}

namespace {

// PrepareTrustedDir and PrepareDataDir (`walk`: check and narrow the contents too).
Status PrepareDir(const std::string& given, mode_t mode, bool walk) {
  const std::string dir = Absolute(given);
  // The path as written (a symbolic link on the way must be root's or ours, in a directory
  // nobody else may change) and as resolved.
  PROPELLER_RETURN_IF_ERROR(CheckAncestorsTrusted(dir));
  struct stat link;
  if (::lstat(dir.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
    // Followed only when root or this user made it (the ancestors are checked above).
    PROPELLER_RETURN_IF_ERROR(CheckAncestor(dir));
  }
  PROPELLER_RETURN_IF_ERROR(MakeDirs(dir, mode));
  char resolved[PATH_MAX];
  if (::realpath(dir.c_str(), resolved) == nullptr) return Status::IOError("resolve " + dir, errno);
  const std::string real = resolved;
  PROPELLER_RETURN_IF_ERROR(CheckAncestorsTrusted(real));
  const int fd = ::open(real.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Status::IOError("open " + real, errno);
  struct stat st;
  Status result;
  if (::fstat(fd, &st) != 0) {
    result = Status::IOError("stat " + real, errno);
  } else if (st.st_uid != ::geteuid()) {
    result = Status::PermissionDenied(real + " is owned by uid " + std::to_string(st.st_uid) +
                                      ", not by this process's user (uid " +
                                      std::to_string(::geteuid()) + "); use a directory of its own");
  } else if ((st.st_mode & 022) != 0) {
    result = Status::PermissionDenied(
        "refusing " + real + ": other users may write it (mode " + ModeText(st.st_mode) +
        ") and could have planted files; check its contents, then run chmod go-w " + real);
  } else if ((st.st_mode & 07777) != mode && ::fchmod(fd, mode) != 0) {
    result = Status::IOError("chmod " + real, errno);
  }
  if (result.ok() && walk) result = CheckDataTree(fd, real);
  ::close(fd);
  return result;
}

}  // namespace

Status PrepareTrustedDir(const std::string& dir, mode_t mode) {
  return PrepareDir(dir, mode, /*walk=*/false);
}

Status PrepareDataDir(const std::string& dir) {
  return PrepareDir(dir, 0700, /*walk=*/true);
}

std::string DefaultRuntimeDir() {
  if (const char* env = std::getenv("PROPELLER_RUNTIME_DIR"); env != nullptr && *env == '/') {
    return env;
  }
  if (::geteuid() == 0) return "/run/propeller";
  if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x != nullptr && *x == '/') {
    return std::string(x) + "/propeller";
  }
  return "/tmp/propeller-" + std::to_string(::geteuid());
}

Status PrepareRuntimeDir(const std::string& dir) {
  return PrepareTrustedDir(dir, ::geteuid() == 0 ? 0755 : 0700);
}

}  // namespace propeller
