// Access: who may send which request to a master or an index node (docs/security.md).
//
// A server never takes a sender's word for who it is. The transport says how a request came
// (rpc::PeerInfo), and that alone decides the sender's role:
//
//   transport                           role
//   in-process (direct://, inproc://)   member  (a component of this same service)
//   tcp:// with an admitted CURVE key   member  (the handshake refused every other key)
//   tcp:// without CURVE                member with --insecure (trust_plain_tcp), else nobody
//   ipc://, uid 0 or the service's uid  admin   (credentials from the kernel, SO_PEERCRED)
//   ipc://, any other uid               user    (credentials from the kernel)
//   ipc:// without kernel credentials   nobody
//
// and each message type needs one access level:
//
//   kRead      searches, records, status, lists, pings — members, admins and users; whatever a
//              user gets is filtered by what the kernel's credentials may see (searches,
//              records, edges and volume roots alike)
//   kUserAttr  kApply — members and admins send any update; a user only attribute updates
//              (set, remove) of files the kernel would let them set a user.* xattr on, which
//              the index node checks against the file itself
//   kWrite     every other change: placements, volumes, indexes, splits, moves, membership —
//              members and admins only
//
// Credentials inside a request body (SearchQuery::creds) count only from a member, which
// authenticated the end user itself; an admin's or a user's searches run as the kernel says.
//
// Thread-safe (pure functions).
#ifndef PROPELLER_SCHEMAS_ACCESS_H_
#define PROPELLER_SCHEMAS_ACCESS_H_

#include <cstdint>
#include <optional>

#include "common/credentials.h"
#include "common/rpc/rpc.h"
#include "common/status.h"
#include "schemas/messages.h"

namespace propeller::wire {

enum class Role : uint8_t { kMember, kAdmin, kUser, kNobody };
// "member", "administrator", "user", "unidentified peer".
const char* RoleName(Role role);

struct AccessPolicy {
  // The user the service runs as: a local peer with this uid (or uid 0) is an administrator.
  uint32_t service_uid = 0;
  // --insecure: a tcp:// peer without CURVE is a member. Never the default (docs/security.md).
  bool trust_plain_tcp = false;
};
// The policy of a service running as this process's effective user, without --insecure.
AccessPolicy DefaultAccessPolicy();

struct Caller {
  Role role = Role::kNobody;
  // The kernel's credentials of an admin or user (supplementary groups included); unset for
  // members and nobody.
  std::optional<Credentials> creds;
  // Whether what this caller reads must be filtered by `creds` (everyone but members and
  // uid 0).
  bool filtered() const { return role != Role::kMember && !(creds && creds->uid == 0); }
};

Caller IdentifyCaller(const rpc::PeerInfo& peer, const AccessPolicy& policy);

enum class Access : uint8_t { kRead, kUserAttr, kWrite };
Access AccessOf(MsgType type);

// OK when `caller` may send a request of `type`; PermissionDenied naming both otherwise. For
// kUserAttr a user passes here and each update is checked by the index node.
Status Authorize(const Caller& caller, MsgType type);

}  // namespace propeller::wire

#endif  // PROPELLER_SCHEMAS_ACCESS_H_
