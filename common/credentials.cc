#include "common/credentials.h"

#include <fcntl.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace propeller {
namespace {

// The ids of one "Uid:"/"Gid:" line of /proc/PID/status: real, effective, saved, fs.
bool ParseIds(const std::string& rest, uint32_t out[4]) {
  std::istringstream in(rest);
  for (int i = 0; i < 4; ++i) {
    if (!(in >> out[i])) return false;
  }
  return true;
}

// The permission bits (rwx, 0-7) of the class `creds` falls in for this owner and group.
uint32_t ClassBits(uint32_t uid, uint32_t gid, uint32_t mode, const Credentials& creds) {
  if (creds.uid == uid) return (mode >> 6) & 7;
  if (creds.gid == gid ||
      std::find(creds.groups.begin(), creds.groups.end(), gid) != creds.groups.end()) {
    return (mode >> 3) & 7;
  }
  return mode & 7;
}

}  // namespace

bool CanReadAndSearch(uint32_t uid, uint32_t gid, uint32_t mode, const Credentials& creds) {
  if (creds.uid == 0) return true;
  return (ClassBits(uid, gid, mode, creds) & 5) == 5;  // r (4) and x (1)
}

Credentials PeerCredentials(uint32_t uid, uint32_t gid, std::optional<uint32_t> pid) {
  Credentials creds{uid, gid, {}};
  if (!pid) return creds;
  std::ifstream in("/proc/" + std::to_string(*pid) + "/status");
  std::string line;
  bool uid_ok = false, gid_ok = false;
  std::vector<uint32_t> groups;
  bool have_groups = false;
  while (std::getline(in, line)) {
    uint32_t ids[4];
    if (line.rfind("Uid:", 0) == 0) {
      uid_ok = ParseIds(line.substr(4), ids) && ids[0] == uid && ids[1] == uid;
    } else if (line.rfind("Gid:", 0) == 0) {
      gid_ok = ParseIds(line.substr(4), ids) && ids[0] == gid && ids[1] == gid;
    } else if (line.rfind("Groups:", 0) == 0) {
      std::istringstream fields(line.substr(7));
      uint32_t g;
      while (fields >> g) groups.push_back(g);
      have_groups = true;
      break;  // Groups: follows Uid: and Gid:
    }
  }
  if (uid_ok && gid_ok && have_groups) creds.groups = std::move(groups);
  return creds;
}

bool HostPathWalkable(const std::string& path, const Credentials& creds) {
  if (creds.uid == 0) return true;
  if (path.empty() || path[0] != '/') return false;
  // Proper ancestors, from "/" down.
  size_t end = 0;
  while (end < path.size()) {
    const std::string dir = end == 0 ? "/" : path.substr(0, end);
    struct stat st;
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
    if (!CanReadAndSearch(st.st_uid, st.st_gid, st.st_mode, creds)) return false;
    const size_t next = path.find('/', end + 1);
    if (next == std::string::npos) break;
    end = next;
  }
  return true;
}

ScopedFsCredentials::ScopedFsCredentials(const Credentials& creds) {
  // Only root can switch; anyone else keeps its identity and the caller falls back.
  if (::geteuid() != 0) return;
  old_uid_ = static_cast<uid_t>(::setfsuid(static_cast<uid_t>(-1)));
  old_gid_ = static_cast<gid_t>(::setfsgid(static_cast<gid_t>(-1)));
  const long n = ::syscall(SYS_getgroups, 0, nullptr);
  if (n > 0) {
    old_groups_.resize(static_cast<size_t>(n));
    if (::syscall(SYS_getgroups, n, old_groups_.data()) != n) old_groups_.clear();
  }
  std::vector<gid_t> groups(creds.groups.begin(), creds.groups.end());
  if (::syscall(SYS_setgroups, groups.size(), groups.data()) != 0) return;
  groups_set_ = true;
  ::setfsgid(creds.gid);
  ::setfsuid(creds.uid);
  // setfsuid reports the old value, not failure: check that the switch took.
  active_ = static_cast<uint32_t>(::setfsuid(static_cast<uid_t>(-1))) == creds.uid &&
            static_cast<uint32_t>(::setfsgid(static_cast<gid_t>(-1))) == creds.gid;
}

ScopedFsCredentials::~ScopedFsCredentials() {
  if (!groups_set_) return;
  ::setfsuid(old_uid_);
  ::setfsgid(old_gid_);
  (void)::syscall(SYS_setgroups, old_groups_.size(), old_groups_.data());
}

Status CheckUserXattrWrite(const std::string& path, uint64_t ino, const Credentials& creds) {
  const std::string denied = "you may not set user attributes of " + path;
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    return errno == ENOENT ? Status::NotFound(path + " does not exist")
                           : Status::PermissionDenied(denied + " (" + std::strerror(errno) + ")");
  }
  if (static_cast<uint64_t>(st.st_ino) != ino) {
    return Status::NotFound(path + " is not the indexed file any more");
  }
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    return Status::PermissionDenied(denied + " (only regular files and directories have them)");
  }
  if (creds.uid == 0) return Status::OK();
  if (S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) && st.st_uid != creds.uid) {
    return Status::PermissionDenied(denied + " (a sticky directory you do not own)");
  }
  {
    ScopedFsCredentials as(creds);
    if (as.active()) {
      // The kernel decides, path walk and ACLs included; the descriptor pins the inode.
      const int fd = ::open(path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) return Status::PermissionDenied(denied + " (" + std::strerror(errno) + ")");
      struct stat fst;
      bool ok = ::fstat(fd, &fst) == 0 && static_cast<uint64_t>(fst.st_ino) == ino &&
                ::faccessat(fd, "", W_OK, AT_EMPTY_PATH | AT_EACCESS) == 0;
      const int err = errno;
      ::close(fd);
      if (!ok) return Status::PermissionDenied(denied + " (" + std::strerror(err) + ")");
      return Status::OK();
    }
  }
  // Without the right to switch identities: the mode bits alone (no ACLs), after the walk.
  const size_t slash = path.rfind('/');
  const std::string parent = slash == 0 ? "/" : path.substr(0, slash);
  struct stat pst;
  if (::lstat(parent.c_str(), &pst) != 0 || !HostPathWalkable(parent, creds) ||
      (ClassBits(pst.st_uid, pst.st_gid, pst.st_mode, creds) & 1) == 0 ||
      (ClassBits(st.st_uid, st.st_gid, st.st_mode, creds) & 2) == 0) {
    return Status::PermissionDenied(denied);
  }
  return Status::OK();
}

}  // namespace propeller
