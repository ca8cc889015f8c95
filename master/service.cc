#include "master/service.h"

#include <exception>
#include <new>

#include "common/credentials.h"
#include "common/logging.h"
#include "schemas/messages.h"

namespace propeller::master {
namespace {

using wire::MsgType;

// Decodes a Req body, runs fn(req, &rep) and encodes the reply.
template <typename Req, typename Rep, typename Fn>
std::string Run(MsgType type, std::string_view body, Status* status, Fn&& fn) {
  Req req;
  *status = wire::Decode(body, &req);
  if (!status->ok()) {
    // A peer's garbage: answered, counted, logged at debug level only (no log flooding).
    *status = status->WithContext(std::string("bad ") + wire::MsgTypeName(type) + " request");
    Log(LogLevel::kDebug, "master: %s", status->ToString().c_str());
    return wire::EncodeReply(*status, {});
  }
  Rep rep;
  *status = fn(req, &rep);
  if (!status->ok()) {
    const StatusCode c = status->code();
    if (c == StatusCode::kInternal || c == StatusCode::kIOError || c == StatusCode::kCorruption) {
      Log(LogLevel::kWarning, "master: %s: %s", wire::MsgTypeName(type),
          status->ToString().c_str());
    }
  }
  if (!status->ok()) return wire::EncodeReply(*status, {});
  return wire::EncodeOkReply(rep);
}

// Keeps the volumes whose root `caller` could walk to (docs/security.md: a user sees no path
// they could not find by walking the tree).
void FilterVolumes(const wire::Caller& caller, std::vector<wire::VolumeInfo>* volumes) {
  if (!caller.filtered()) return;
  std::erase_if(*volumes, [&](const wire::VolumeInfo& v) {
    return !caller.creds || !HostPathWalkable(v.root, *caller.creds);
  });
}

}  // namespace

std::string MasterService::Handle(std::string_view request, const rpc::PeerInfo& peer) {
  // Nothing below throws by contract; this is the last line against allocation failure
  // (a reply to a huge batch) taking the daemon down.
  try {
    return Dispatch(request, wire::IdentifyCaller(peer, policy_));
  } catch (const std::bad_alloc&) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    return wire::EncodeReply(Status::ResourceExhausted("out of memory"), {});
  } catch (const std::exception& e) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    Log(LogLevel::kError, "master: request failed with an exception: %s", e.what());
    return wire::EncodeReply(Status::Internal(e.what()), {});
  } catch (...) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    return wire::EncodeReply(Status::Internal("unknown exception"), {});
  }
}

std::string MasterService::Dispatch(std::string_view request, const wire::Caller& caller) {
  wire::RequestEnvelope env;
  Status st = wire::DecodeRequest(request, &env);
  if (st.ok()) st = wire::Authorize(caller, env.type);
  if (!st.ok()) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    errors_by_code_.Add(static_cast<size_t>(st.code()));
    return wire::EncodeReply(st, {});
  }
  requests_by_type_.Add(wire::TypeIndex(env.type));
  Master& m = *master_;
  std::string reply;
  using wire::Empty;
  switch (env.type) {
    case MsgType::kRegisterNode:
      reply = Run<wire::RegisterNodeRequest, wire::RegisterNodeReply>(
          env.type, env.body, &st, [&](const auto& q, auto* r) { return m.RegisterNode(q, r); });
      break;
    case MsgType::kHeartbeat:
      reply = Run<wire::HeartbeatRequest, wire::HeartbeatReply>(
          env.type, env.body, &st, [&](const auto& q, auto* r) { return m.Heartbeat(q, r); });
      break;
    case MsgType::kLookupFiles:
      reply = Run<wire::FilesRequest, wire::LocationsReply>(
          env.type, env.body, &st, [&](const auto& q, auto* r) { return m.LookupFiles(q, r); });
      break;
    case MsgType::kAssignFiles:
      reply = Run<wire::AssignFilesRequest, wire::LocationsReply>(
          env.type, env.body, &st, [&](const auto& q, auto* r) { return m.AssignFiles(q, r); });
      break;
    case MsgType::kForgetFiles:
      reply = Run<wire::FilesRequest, Empty>(
          env.type, env.body, &st, [&](const auto& q, auto*) { return m.ForgetFiles(q); });
      break;
    case MsgType::kLocateAcgs:
      reply = Run<wire::LocateAcgsRequest, wire::AcgLocationsReply>(
          env.type, env.body, &st, [&](const auto& q, auto* r) { return m.LocateAcgs(q, r); });
      break;
    case MsgType::kListNodes:
      reply = Run<Empty, wire::NodesReply>(
          env.type, env.body, &st, [&](const auto&, auto* r) { return m.ListNodes(r); });
      break;
    case MsgType::kCreateIndex:
      reply = Run<wire::IndexDef, Empty>(
          env.type, env.body, &st, [&](const auto& q, auto*) { return m.CreateIndex(q); });
      break;
    case MsgType::kDropIndex:
      reply = Run<wire::IndexName, Empty>(
          env.type, env.body, &st, [&](const auto& q, auto*) { return m.DropIndex(q); });
      break;
    case MsgType::kListIndexes:
      reply = Run<Empty, wire::IndexesReply>(
          env.type, env.body, &st, [&](const auto&, auto* r) { return m.ListIndexes(r); });
      break;
    case MsgType::kClusterStatus:
      reply = Run<Empty, wire::ClusterStatusReply>(
          env.type, env.body, &st, [&](const auto&, auto* r) {
            PROPELLER_RETURN_IF_ERROR(m.ClusterStatus(r));
            FilterVolumes(caller, &r->volumes);
            return Status::OK();
          });
      break;
    case MsgType::kRegisterVolume:
      reply = Run<wire::RegisterVolumeRequest, wire::VolumeInfo>(
          env.type, env.body, &st, [&](const auto& q, auto* r) { return m.RegisterVolume(q, r); });
      break;
    case MsgType::kListVolumes:
      reply = Run<Empty, wire::VolumesReply>(
          env.type, env.body, &st, [&](const auto&, auto* r) {
            PROPELLER_RETURN_IF_ERROR(m.ListVolumes(r));
            FilterVolumes(caller, &r->volumes);
            return Status::OK();
          });
      break;
    case MsgType::kRemoveVolume:
      reply = Run<wire::VolumeInfo, wire::Empty>(
          env.type, env.body, &st, [&](const auto& q, auto*) { return m.RemoveVolume(q); });
      break;
    case MsgType::kIndexHolders:
      reply = Run<wire::IndexName, wire::NodesReply>(
          env.type, env.body, &st, [&](const auto& q, auto* r) { return m.IndexHolders(q, r); });
      break;
    case MsgType::kNewAcg:
      reply = Run<wire::NewAcgRequest, wire::NewAcgReply>(
          env.type, env.body, &st, [&](const auto& q, auto* r) { return m.NewAcg(q, r); });
      break;
    case MsgType::kSplitDone:
      reply = Run<wire::SplitDoneRequest, wire::SplitDoneReply>(
          env.type, env.body, &st, [&](const auto& q, auto* r) { return m.SplitDone(q, r); });
      break;
    case MsgType::kMoveAcg:
      reply = Run<wire::MoveAcgRequest, wire::Empty>(
          env.type, env.body, &st, [&](const auto& q, auto*) { return m.MoveAcg(q); });
      break;
    case MsgType::kPing:
      reply = Run<wire::Ping, wire::Ping>(env.type, env.body, &st, [](const auto& q, auto* r) {
        *r = q;
        return Status::OK();
      });
      break;
    default:
      st = Status::NotSupported(std::string("the master does not serve ") +
                                wire::MsgTypeName(env.type) + " (type " +
                                std::to_string(static_cast<unsigned>(env.type)) + ")");
      reply = wire::EncodeReply(st, {});
      break;
  }
  if (!st.ok()) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    errors_by_code_.Add(static_cast<size_t>(st.code()));
  }
  return reply;
}

}  // namespace propeller::master
