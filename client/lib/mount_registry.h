// Where a Propeller mount's query engine listens (docs/architecture.md §9: `propeller search
// --scope MOUNTPOINT/dir` and libpropeller find it on their own).
//
// A mount writes one small record file per mount point into the registry directory
// <runtime dir>/mounts (common/secure_dir.h: /run/propeller/mounts when running as root, else
// $XDG_RUNTIME_DIR/propeller/mounts or /tmp/propeller-<uid>/mounts), named after the mount
// point. A client resolves a path to its mount through /proc/self/mountinfo (the longest mount
// point of type fuse.propeller that contains it), then reads that record from its own
// registry, then root's. The registry lives outside every mount; only its owner may write it
// (checked before use), and its records are public (0644): they name unix sockets, which
// authorize every request by the caller's kernel credentials (docs/security.md).
#ifndef PROPELLER_CLIENT_LIB_MOUNT_REGISTRY_H_
#define PROPELLER_CLIENT_LIB_MOUNT_REGISTRY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace propeller {

struct MountRecord {
  std::string mountpoint;       // absolute
  std::string backing;          // absolute
  std::string engine_endpoint;  // ipc:// of the mount's query engine
  std::string master_endpoint;
  uint32_t volume = 0;
  uint32_t pid = 0;             // the mount process
};

// A path as one file name: '%' -> "%25", '/' -> "%2F" (registry files, query-directory
// entries).
std::string PathAsFileName(std::string_view path);

// The registry directory for this process's user (see above).
std::string MountRegistryDir();
// Creates the registry directory (and its parent, where engine sockets go) if missing.
Status MakeRegistryDirs();
// Writes (replaces) the record of record.mountpoint. IOError on failure.
Status WriteMountRecord(const MountRecord& record);
// Removes the record of `mountpoint` (no error if absent).
void RemoveMountRecord(const std::string& mountpoint);
// The Propeller mount containing absolute path `path`: nullopt when `path` is not inside a
// mounted Propeller file system; NotFound when it is but no registry (root's, then this
// user's) has a live record for it; Corruption for an unreadable record.
Result<std::optional<MountRecord>> FindMountFor(const std::string& path);
// Every Propeller file system mounted in this namespace that has a readable record.
std::vector<MountRecord> ListMounts();

// Encodes/decodes the record file's text ("key value" lines).
std::string EncodeMountRecord(const MountRecord& record);
Status DecodeMountRecord(const std::string& text, MountRecord* record);

}  // namespace propeller

#endif  // PROPELLER_CLIENT_LIB_MOUNT_REGISTRY_H_
