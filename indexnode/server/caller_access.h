// CallerAccess: what one request's sender sees and may change through an index node
// (docs/security.md). NodeService builds one per request from the sender's role
// (schemas/access.h); for members nothing is filtered, for administrators and users searches,
// records and edges are cut to what the kernel's credentials could find by walking the tree,
// and a user's updates are limited to user attributes of files they may write.
//
// VolumeRoots: the host path of each volume's root, from the master (ListVolumes), cached;
// an unknown volume refreshes the cache once. The root's own ancestors decide whether a user
// may see anything of a volume: the index holds only what lies below the root.
//
// Threading: VolumeRoots is thread-safe. A CallerAccess belongs to one request's thread.
#ifndef PROPELLER_INDEXNODE_SERVER_CALLER_ACCESS_H_
#define PROPELLER_INDEXNODE_SERVER_CALLER_ACCESS_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/record.h"
#include "common/rpc/rpc.h"
#include "common/status.h"
#include "indexnode/engine.h"
#include "schemas/access.h"

namespace propeller {

class VolumeRoots {
 public:
  // `master` may be null (then no volume is known); it must outlive this object.
  VolumeRoots(rpc::Channel* master, int64_t timeout_ms) : master_(master), timeout_ms_(timeout_ms) {}
  // Every volume's root, refreshed from the master when `refresh` or never fetched. Errors of
  // the master call (Unavailable, Timeout).
  Result<std::map<uint32_t, std::string>> All(bool refresh = false);
  // The root of `volume`; NotFound when the master does not know it.
  Result<std::string> Root(uint32_t volume);

 private:
  rpc::Channel* const master_;
  const int64_t timeout_ms_;
  // Held across the master call of a refresh (one refresh at a time). A leaf.
  Mutex mu_;
  bool fetched_ PROPELLER_GUARDED_BY(mu_) = false;
  std::map<uint32_t, std::string> roots_ PROPELLER_GUARDED_BY(mu_);
};

class CallerAccess {
 public:
  // `engine` and `roots` outlive this object.
  CallerAccess(const wire::Caller& caller, Engine* engine, VolumeRoots* roots)
      : caller_(caller), engine_(engine), roots_(roots) {}

  // Whether what this caller reads is filtered (wire::Caller::filtered).
  bool filtered() const { return caller_.filtered(); }
  // The credentials searches run with: the kernel's for admins and users, the request's
  // (`claimed`, unset = everything) for members.
  std::optional<Credentials> SearchCredentials(std::optional<Credentials> claimed) const;
  // Whether this caller may see anything of `volume`: they can walk to its root (a volume the
  // master does not know, or cannot be asked about, is not visible). Decided once per volume
  // per request; thread-safe (searches ask from their threads).
  bool VolumeVisible(uint32_t volume);
  // The first error asking the master for a volume's root (Unavailable, Timeout): the answer
  // that used VolumeVisible may lack what the caller could see and must fail instead.
  Status volume_error();
  // Cuts `record` to what the caller may see (its visible paths); false when nothing is.
  bool Restrict(FileRecord* record);
  // For a user's kApply: OK when every update sets or removes user attributes of a file the
  // caller may set user.* extended attributes of (CheckUserXattrWrite, against the file at
  // its volume root + path). PermissionDenied naming the first refused update otherwise.
  // Members and admins pass.
  Status CheckUpdates(std::span<const Update> updates);

 private:
  const wire::Caller caller_;
  Engine* const engine_;
  VolumeRoots* const roots_;
  // Held across roots_->Root (before VolumeRoots::mu_ in the lock order).
  Mutex mu_;
  std::map<uint32_t, bool> volume_visible_ PROPELLER_GUARDED_BY(mu_);
  Status volume_error_ PROPELLER_GUARDED_BY(mu_);
};

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_SERVER_CALLER_ACCESS_H_
