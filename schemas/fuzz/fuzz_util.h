// Checks shared by the fuzz targets (see fuzz_targets.h): each aborts, so libFuzzer records a
// crash with the input, when a decoder breaks its contract.
#ifndef PROPELLER_SCHEMAS_FUZZ_FUZZ_UTIL_H_
#define PROPELLER_SCHEMAS_FUZZ_FUZZ_UTIL_H_

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/status.h"
#include "schemas/messages.h"
#include "schemas/watch_messages.h"

namespace propeller::fuzz {

// request_fuzz: data[0] picks the request body decoder of kRequestTypes[data[0] % its size].
inline constexpr wire::MsgType kRequestTypes[] = {
    wire::MsgType::kRegisterNode, wire::MsgType::kHeartbeat,     wire::MsgType::kLookupFiles,
    wire::MsgType::kAssignFiles,  wire::MsgType::kForgetFiles,   wire::MsgType::kLocateAcgs,
    wire::MsgType::kListNodes,    wire::MsgType::kCreateIndex,   wire::MsgType::kDropIndex,
    wire::MsgType::kListIndexes,  wire::MsgType::kClusterStatus, wire::MsgType::kRegisterVolume,
    wire::MsgType::kListVolumes,  wire::MsgType::kIndexHolders,  wire::MsgType::kApply,
    wire::MsgType::kSearch,       wire::MsgType::kGetRecord,     wire::MsgType::kNodeStatus,
    wire::MsgType::kPing,         wire::MsgType::kListEdges,     wire::MsgType::kNewAcg,
    wire::MsgType::kSplitDone,
};
// reply_fuzz: data[0] % kNumReplyTypes picks the reply body decoder of this message.
inline constexpr const char* kReplyTypeNames[] = {
    "Empty",        "RegisterNodeReply",  "HeartbeatReply",  "NodesReply",
    "LocationsReply", "AcgLocationsReply", "IndexesReply",   "VolumeInfo",
    "VolumesReply", "ClusterStatusReply", "SearchHitsChunk", "SearchDone",
    "RecordReply",  "NodeStatusReply",    "Ping",            "EdgesReply",
    "NewAcgReply",  "SplitDoneReply",     "MountStatusReply", "WatchEventsChunk",
};
inline constexpr size_t kNumReplyTypes = 20;
// storage_fuzz: data[0] % 7 picks 0 DecodeFileIdKey, 1 DecodeEdgeKey, 2 SplitIndexEntryKey,
// 3 CheckWalHeader, 4 ParseWalRecord (+ DecodeUpdateBatch of its payload),
// 5 ParseWalSegmentName, 6 DecodeOrdered{U64,I64,Double}.
inline constexpr size_t kNumStorageDecoders = 7;

[[noreturn]] inline void Fail(const char* check, const std::string& detail) {
  std::fprintf(stderr, "fuzz check failed: %s: %s\n", check, detail.c_str());
  std::abort();
}

// A decoder of untrusted bytes may only answer OK or `allowed` (Corruption by default).
inline void CheckStatus(const char* decoder, const Status& s,
                        StatusCode allowed = StatusCode::kCorruption) {
  if (!s.ok() && s.code() != allowed) Fail(decoder, "unexpected status " + s.ToString());
}

// Decodes `bytes` as a T; when that works, the value must re-encode to bytes that decode and
// re-encode to the same bytes (byte comparison, so NaN doubles compare too).
template <typename T>
void CheckMessage(const char* name, std::string_view bytes) {
  T msg;
  Status s = wire::Decode(bytes, &msg);
  CheckStatus(name, s);
  if (!s.ok()) return;
  std::string first;
  wire::Encode(msg, &first);
  T again;
  s = wire::Decode(first, &again);
  if (!s.ok()) Fail(name, "re-encoding does not decode: " + s.ToString());
  std::string second;
  wire::Encode(again, &second);
  if (first != second) Fail(name, "encode(decode(encode(x))) != encode(x)");
}

}  // namespace propeller::fuzz

#endif  // PROPELLER_SCHEMAS_FUZZ_FUZZ_UTIL_H_
