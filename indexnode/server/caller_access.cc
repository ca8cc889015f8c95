#include "indexnode/server/caller_access.h"

#include <algorithm>

#include "common/credentials.h"
#include "schemas/wire_call.h"

namespace propeller {

Result<std::map<uint32_t, std::string>> VolumeRoots::All(bool refresh) {
  MutexLock lock(&mu_);
  if (fetched_ && !refresh) return roots_;
  if (master_ == nullptr) return roots_;
  wire::VolumesReply reply;
  rpc::CallOptions call;
  call.timeout_ms = timeout_ms_;
  call.idempotent = true;
  PROPELLER_RETURN_IF_ERROR(
      wire::WireCall(*master_, wire::MsgType::kListVolumes, wire::Empty{}, &reply, call));
  roots_.clear();
  for (wire::VolumeInfo& v : reply.volumes) roots_[v.volume] = std::move(v.root);
  fetched_ = true;
  return roots_;
}

Result<std::string> VolumeRoots::Root(uint32_t volume) {
  for (bool refresh : {false, true}) {
    PROPELLER_ASSIGN_OR_RETURN(auto roots, All(refresh));
    auto it = roots.find(volume);
    if (it != roots.end()) return it->second;
  }
  return Status::NotFound("volume " + std::to_string(volume) + " is not registered");
}

std::optional<Credentials> CallerAccess::SearchCredentials(
    std::optional<Credentials> claimed) const {
  // Only a member authenticated the end user it names; everyone else is who the kernel says.
  if (caller_.role == wire::Role::kMember) return claimed;
  return caller_.creds ? caller_.creds : std::optional<Credentials>(Credentials{65534, 65534, {}});
}

bool CallerAccess::VolumeVisible(uint32_t volume) {
  if (!filtered()) return true;
  MutexLock lock(&mu_);
  auto it = volume_visible_.find(volume);
  if (it != volume_visible_.end()) return it->second;
  // Root() refreshes its cache from the master for a volume it does not know yet.
  Result<std::string> root = roots_->Root(volume);
  if (!root.ok() && !root.status().IsNotFound() && volume_error_.ok()) {
    volume_error_ = root.status();
  }
  const bool visible = root.ok() && caller_.creds && HostPathWalkable(*root, *caller_.creds);
  volume_visible_[volume] = visible;
  return visible;
}

Status CallerAccess::volume_error() {
  MutexLock lock(&mu_);
  return volume_error_;
}

bool CallerAccess::Restrict(FileRecord* record) {
  if (!filtered()) return true;
  if (!caller_.creds || !VolumeVisible(record->id.volume)) return false;
  return engine_->RestrictToVisible(record, *caller_.creds);
}

Status CallerAccess::CheckUpdates(std::span<const Update> updates) {
  if (caller_.role != wire::Role::kUser) return Status::OK();
  for (const Update& u : updates) {
    if (u.op != UpdateOp::kSetAttrs && u.op != UpdateOp::kRemoveAttrs) {
      return Status::PermissionDenied("only root or the service's user may change file records "
                                      "or access-causality edges; a user may set and remove "
                                      "user attributes only");
    }
    // The messages name the file by id only: its paths may be ones this user may not see.
    const std::string file = std::to_string(u.record.id.volume) + ":" +
                             std::to_string(u.record.id.ino);
    Result<FileRecord> stored = engine_->Get(u.acg, u.record.id);
    if (!stored.ok()) return stored.status();
    Result<std::string> root = roots_->Root(u.record.id.volume);
    if (!root.ok()) return root.status();
    bool allowed = false;
    for (const std::string& p : stored->paths) {
      const std::string host = *root == "/" ? p : p == "/" ? *root : *root + p;
      if (CheckUserXattrWrite(host, u.record.id.ino, *caller_.creds).ok()) {
        allowed = true;
        break;
      }
    }
    if (!allowed) {
      return Status::PermissionDenied("you may not set user attributes of file " + file +
                                      " (the kernel would not let you set its user.* extended "
                                      "attributes)");
    }
  }
  return Status::OK();
}

}  // namespace propeller
