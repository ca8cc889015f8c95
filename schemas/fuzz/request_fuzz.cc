// libFuzzer target: the request envelope and every request body decoder (fuzz_targets.h).
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>

#include "schemas/fuzz/fuzz_targets.h"
#include "schemas/fuzz/fuzz_util.h"
#include "schemas/messages.h"
#include "schemas/watch_messages.h"

namespace propeller::fuzz {
namespace {

using wire::MsgType;

// Decodes `body` as the request message of `type` (messages.h's MsgType comments).
void CheckRequestBody(MsgType type, std::string_view body) {
  switch (type) {
    case MsgType::kRegisterNode:
      return CheckMessage<wire::RegisterNodeRequest>("RegisterNodeRequest", body);
    case MsgType::kHeartbeat:
      return CheckMessage<wire::HeartbeatRequest>("HeartbeatRequest", body);
    case MsgType::kLookupFiles:
    case MsgType::kForgetFiles:
      return CheckMessage<wire::FilesRequest>("FilesRequest", body);
    case MsgType::kAssignFiles:
      return CheckMessage<wire::AssignFilesRequest>("AssignFilesRequest", body);
    case MsgType::kLocateAcgs:
      return CheckMessage<wire::LocateAcgsRequest>("LocateAcgsRequest", body);
    case MsgType::kCreateIndex:
      return CheckMessage<wire::IndexDef>("IndexDef", body);
    case MsgType::kDropIndex:
    case MsgType::kIndexHolders:
      return CheckMessage<wire::IndexName>("IndexName", body);
    case MsgType::kRegisterVolume:
      return CheckMessage<wire::RegisterVolumeRequest>("RegisterVolumeRequest", body);
    case MsgType::kRemoveVolume:
      return CheckMessage<wire::VolumeInfo>("VolumeInfo", body);
    case MsgType::kApply:
      return CheckMessage<wire::ApplyRequest>("ApplyRequest", body);
    case MsgType::kSearch:
      return CheckMessage<wire::SearchQuery>("SearchQuery", body);
    case MsgType::kWatch:
      return CheckMessage<wire::WatchRequest>("WatchRequest", body);
    case MsgType::kGetRecord:
      return CheckMessage<wire::GetRecordRequest>("GetRecordRequest", body);
    case MsgType::kPing:
      return CheckMessage<wire::Ping>("Ping", body);
    case MsgType::kListEdges:
      return CheckMessage<wire::ListEdgesRequest>("ListEdgesRequest", body);
    case MsgType::kNewAcg:
      return CheckMessage<wire::NewAcgRequest>("NewAcgRequest", body);
    case MsgType::kSplitDone:
      return CheckMessage<wire::SplitDoneRequest>("SplitDoneRequest", body);
    case MsgType::kMoveAcg:
      return CheckMessage<wire::MoveAcgRequest>("MoveAcgRequest", body);
    case MsgType::kMigrateAcg:
      return CheckMessage<wire::MigrateAcgRequest>("MigrateAcgRequest", body);
    case MsgType::kAdoptAcg:
      return CheckMessage<wire::AdoptAcgChunk>("AdoptAcgChunk", body);
    case MsgType::kReleaseAcg:
      return CheckMessage<wire::ReleaseAcgRequest>("ReleaseAcgRequest", body);
    case MsgType::kListNodes:
    case MsgType::kListIndexes:
    case MsgType::kClusterStatus:
    case MsgType::kListVolumes:
    case MsgType::kNodeStatus:
    case MsgType::kMountStatus:
      return CheckMessage<wire::Empty>("Empty", body);
  }
  // Unknown numbers: a dispatcher answers NotSupported without decoding the body.
}

}  // namespace

int FuzzRequest(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  wire::RequestEnvelope envelope;
  const Status s = wire::DecodeRequest(input, &envelope);
  if (!s.ok() && s.code() != StatusCode::kCorruption && s.code() != StatusCode::kNotSupported) {
    Fail("DecodeRequest", "unexpected status " + s.ToString());
  }
  if (s.code() == StatusCode::kNotSupported &&
      envelope.version / 1000 == wire::kProtocolVersion / 1000) {
    Fail("DecodeRequest", "NotSupported for a same-major version: " + s.ToString());
  }
  if (s.ok()) {
    // The body must point into the input, and the envelope must re-encode to one that decodes
    // to the same type and body.
    if (!envelope.body.empty() && (envelope.body.data() < input.data() ||
                                   envelope.body.data() + envelope.body.size() >
                                       input.data() + input.size())) {
      Fail("DecodeRequest", "body does not point into the input");
    }
    const std::string again = wire::EncodeRequest(envelope.type, envelope.body);
    wire::RequestEnvelope second;
    const Status s2 = wire::DecodeRequest(again, &second);
    if (!s2.ok() || second.type != envelope.type || second.body != envelope.body ||
        second.version != wire::kProtocolVersion) {
      Fail("DecodeRequest", "re-encoded envelope differs: " + s2.ToString());
    }
    CheckRequestBody(envelope.type, envelope.body);
  }
  if (size > 0) {
    CheckRequestBody(kRequestTypes[data[0] % std::size(kRequestTypes)], input.substr(1));
  }
  return 0;
}

}  // namespace propeller::fuzz

#ifndef PROPELLER_FUZZ_NO_MAIN
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return propeller::fuzz::FuzzRequest(data, size);
}
#endif
