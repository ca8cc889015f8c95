#include "schemas/access.h"

#include <unistd.h>

#include <string>

namespace propeller::wire {

const char* RoleName(Role role) {
  switch (role) {
    case Role::kMember: return "member";
    case Role::kAdmin: return "administrator";
    case Role::kUser: return "user";
    case Role::kNobody: break;
  }
  return "unidentified peer";
}

AccessPolicy DefaultAccessPolicy() {
  AccessPolicy policy;
  policy.service_uid = static_cast<uint32_t>(::geteuid());
  return policy;
}

Caller IdentifyCaller(const rpc::PeerInfo& peer, const AccessPolicy& policy) {
  Caller caller;
  switch (peer.transport) {
    case rpc::PeerTransport::kInProcess:
      caller.role = Role::kMember;
      break;
    case rpc::PeerTransport::kTcp:
      // With CURVE the ZAP handler admitted only listed keys; without it nobody is proven.
      if (!peer.curve_public_key.empty() || policy.trust_plain_tcp) caller.role = Role::kMember;
      break;
    case rpc::PeerTransport::kIpc:
      if (!peer.uid || !peer.gid) break;
      // Root sees everything: its groups would change nothing (and cost a read of /proc).
      caller.creds = *peer.uid == 0 ? Credentials{0, *peer.gid, {}}
                                    : PeerCredentials(*peer.uid, *peer.gid, peer.pid);
      caller.role = *peer.uid == 0 || *peer.uid == policy.service_uid ? Role::kAdmin : Role::kUser;
      break;
  }
  return caller;
}

Access AccessOf(MsgType type) {
  switch (type) {
    case MsgType::kLookupFiles:
    case MsgType::kLocateAcgs:
    case MsgType::kListNodes:
    case MsgType::kListIndexes:
    case MsgType::kClusterStatus:
    case MsgType::kListVolumes:
    case MsgType::kIndexHolders:
    case MsgType::kSearch:
    case MsgType::kWatch:
    case MsgType::kGetRecord:
    case MsgType::kNodeStatus:
    case MsgType::kListEdges:
    case MsgType::kMountStatus:
    case MsgType::kPing:
      return Access::kRead;
    case MsgType::kApply:
      return Access::kUserAttr;
    case MsgType::kRegisterNode:
    case MsgType::kHeartbeat:
    case MsgType::kAssignFiles:
    case MsgType::kForgetFiles:
    case MsgType::kCreateIndex:
    case MsgType::kDropIndex:
    case MsgType::kRegisterVolume:
    case MsgType::kRemoveVolume:
    case MsgType::kNewAcg:
    case MsgType::kSplitDone:
    case MsgType::kMoveAcg:
    case MsgType::kMigrateAcg:
    case MsgType::kAdoptAcg:
    case MsgType::kReleaseAcg:
      break;
  }
  return Access::kWrite;  // and every type added later until it is listed above
}

Status Authorize(const Caller& caller, MsgType type) {
  const Access access = AccessOf(type);
  switch (caller.role) {
    case Role::kMember:
    case Role::kAdmin:
      return Status::OK();
    case Role::kUser:
      if (access != Access::kWrite) return Status::OK();
      return Status::PermissionDenied(std::string(MsgTypeName(type)) +
                                      " changes the index: only root or the service's user may "
                                      "send it (uid " + std::to_string(caller.creds->uid) +
                                      " may not)");
    case Role::kNobody:
      if (type == MsgType::kPing) return Status::OK();
      break;
  }
  return Status::PermissionDenied(
      std::string(MsgTypeName(type)) +
      ": the sender is not authenticated (tcp:// needs an admitted CURVE key; local users use "
      "the unix socket)");
}

}  // namespace propeller::wire
