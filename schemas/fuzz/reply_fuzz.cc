// libFuzzer target: the reply envelope and every reply body decoder (fuzz_targets.h).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "schemas/fuzz/fuzz_targets.h"
#include "schemas/fuzz/fuzz_util.h"
#include "schemas/messages.h"
#include "schemas/watch_messages.h"

namespace propeller::fuzz {
namespace {

// The reply messages (and the SearchHitsChunk and WatchEventsChunk partial frames) in
// kReplyTypeNames order; `pick` chooses one, or every one when it is out of range.
void CheckReplyBody(size_t pick, std::string_view body) {
  using namespace wire;  // NOLINT: the message names read better unqualified here
  switch (pick) {
    case 0: return CheckMessage<Empty>("Empty", body);
    case 1: return CheckMessage<RegisterNodeReply>("RegisterNodeReply", body);
    case 2: return CheckMessage<HeartbeatReply>("HeartbeatReply", body);
    case 3: return CheckMessage<NodesReply>("NodesReply", body);
    case 4: return CheckMessage<LocationsReply>("LocationsReply", body);
    case 5: return CheckMessage<AcgLocationsReply>("AcgLocationsReply", body);
    case 6: return CheckMessage<IndexesReply>("IndexesReply", body);
    case 7: return CheckMessage<VolumeInfo>("VolumeInfo", body);
    case 8: return CheckMessage<VolumesReply>("VolumesReply", body);
    case 9: return CheckMessage<ClusterStatusReply>("ClusterStatusReply", body);
    case 10: return CheckMessage<SearchHitsChunk>("SearchHitsChunk", body);
    case 11: return CheckMessage<SearchDone>("SearchDone", body);
    case 12: return CheckMessage<RecordReply>("RecordReply", body);
    case 13: return CheckMessage<NodeStatusReply>("NodeStatusReply", body);
    case 14: return CheckMessage<Ping>("Ping", body);
    case 15: return CheckMessage<EdgesReply>("EdgesReply", body);
    case 16: return CheckMessage<NewAcgReply>("NewAcgReply", body);
    case 17: return CheckMessage<SplitDoneReply>("SplitDoneReply", body);
    case 18: return CheckMessage<MountStatusReply>("MountStatusReply", body);
    case 19: return CheckMessage<WatchEventsChunk>("WatchEventsChunk", body);
    default:
      for (size_t i = 0; i < kNumReplyTypes; ++i) CheckReplyBody(i, body);
  }
}

bool SameLocations(const std::vector<wire::AcgLocation>& a,
                   const std::vector<wire::AcgLocation>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].acg != b[i].acg || a[i].node_id != b[i].node_id || a[i].endpoint != b[i].endpoint) {
      return false;
    }
  }
  return true;
}

}  // namespace

int FuzzReply(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  wire::ReplyEnvelope envelope;
  const Status s = wire::DecodeReply(input, &envelope);
  if (!s.ok() && s.code() != StatusCode::kCorruption && s.code() != StatusCode::kNotSupported) {
    Fail("DecodeReply", "unexpected status " + s.ToString());
  }
  if (s.ok()) {
    // Re-encoding keeps the status (unknown codes already became kInternal), the redirects,
    // and the body of an OK reply.
    const std::string again =
        wire::EncodeReply(envelope.status, envelope.body, envelope.redirects);
    wire::ReplyEnvelope second;
    const Status s2 = wire::DecodeReply(again, &second);
    if (!s2.ok() || second.status.code() != envelope.status.code() ||
        second.status.message() != envelope.status.message() ||
        !SameLocations(second.redirects, envelope.redirects) ||
        (envelope.status.ok() && second.body != envelope.body)) {
      Fail("DecodeReply", "re-encoded envelope differs: " + s2.ToString());
    }
    if (envelope.status.ok()) CheckReplyBody(kNumReplyTypes, envelope.body);
  }
  if (size > 0) CheckReplyBody(data[0] % kNumReplyTypes, input.substr(1));
  return 0;
}

}  // namespace propeller::fuzz

#ifndef PROPELLER_FUZZ_NO_MAIN
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return propeller::fuzz::FuzzReply(data, size);
}
#endif
