// Credentials: who a request acts for, and the permission checks Propeller makes on a user's
// behalf (docs/security.md). One definition for the index node's search filter, the master's
// volume list, the mount's query engine and the check behind a user's `attr set`.
//
// The permission model is the one `find` runs into: a path is visible to a user only if every
// proper ancestor directory grants them read and search (r and x) permission, picking the
// owner, group or other class as the kernel does. uid 0 passes every check.
//
// Thread-safety: every function may be called from any thread. ScopedFsCredentials changes the
// file-system identity of the calling thread only.
#ifndef PROPELLER_COMMON_CREDENTIALS_H_
#define PROPELLER_COMMON_CREDENTIALS_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace propeller {

struct Credentials {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups;  // supplementary groups
  bool operator==(const Credentials&) const = default;
};

// Whether `creds` may read and search a directory with this owner, group and mode (owner
// class, else group class, else other class, as POSIX permission checks pick one).
bool CanReadAndSearch(uint32_t uid, uint32_t gid, uint32_t mode, const Credentials& creds);

// The credentials of a local peer the kernel vouched for (SO_PEERCRED: uid, gid, pid), with the
// supplementary groups of its process read from /proc/PID/status. The groups are taken only
// while that process still has `uid` and `gid` as its real and effective ids: a peer that
// exited and whose pid was reused by another process gets no supplementary groups rather than
// someone else's.
Credentials PeerCredentials(uint32_t uid, uint32_t gid, std::optional<uint32_t> pid);

// Whether `creds` could reach the absolute host path `path` by walking from "/": every proper
// ancestor is a directory (symbolic links are not followed) granting r and x. False when an
// ancestor is missing or not a directory.
bool HostPathWalkable(const std::string& path, const Credentials& creds);

// Switches the calling thread's file-system identity (fsuid, fsgid, supplementary groups) to
// `creds` for the object's lifetime, so the kernel's own checks — ACLs included — decide what
// they may do. Only a process with CAP_SETUID/CAP_SETGID can switch: active() tells whether it
// did. The raw system calls change this thread only (glibc's setgroups changes every thread).
class ScopedFsCredentials {
 public:
  explicit ScopedFsCredentials(const Credentials& creds);
  ~ScopedFsCredentials();
  ScopedFsCredentials(const ScopedFsCredentials&) = delete;
  ScopedFsCredentials& operator=(const ScopedFsCredentials&) = delete;
  bool active() const { return active_; }

 private:
  bool active_ = false;
  uid_t old_uid_ = 0;
  gid_t old_gid_ = 0;
  std::vector<gid_t> old_groups_;
  bool groups_set_ = false;
};

// Whether the kernel would let `creds` set or remove a user.* extended attribute of the file
// at host path `path` (docs/security.md: a user's `attr set` is checked against the file, not
// taken from the request): a regular file or directory whose inode number is `ino` (a file
// that replaced it since is refused), writable by `creds` (with ACLs, through the kernel when
// this process may switch identities), and not a sticky directory they do not own. OK or
// PermissionDenied / NotFound naming the path.
Status CheckUserXattrWrite(const std::string& path, uint64_t ino, const Credentials& creds);

}  // namespace propeller

#endif  // PROPELLER_COMMON_CREDENTIALS_H_
