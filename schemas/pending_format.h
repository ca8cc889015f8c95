// The on-disk format of a mount's queue of pending index updates (client/fuse/pending_updates.h):
// file changes that happened on the backing tree while the index could not take them (its
// node down, its disk full), kept in the mount's data directory and delivered in order later.
//
// Queue file "<data>/pending/queue", a sequence of records back to back:
//   offset size field
//   0      4    payload length N, u32 little-endian (at most kPendingMaxRecord)
//   4      4    masked CRC-32C (common/crc32c.h) of the payload, u32 little-endian
//   8      N    payload: one pending batch (below)
// Recovery rule: a record that is short or fails its CRC at the end of the file is a write
// torn by a crash (it was never acknowledged to the application: the FUSE call fails when its
// record cannot be written) and is cut off; the queue starts after "<data>/pending/head", an
// 8-byte little-endian offset of the first undelivered record, written atomically once a
// batch is delivered. A bad record followed by intact ones is Corruption (never cut away).
//
// Pending batch, a msgpack array, version 1:
//   index field    msgpack type                   notes
//   0     version  uint                           1 (kPendingFormatVersion); 0 is invalid
//   1     updates  bin                            EncodeUpdateBatch of the updates
//   2     extras   array, one per update:         what the client adds to an Update
//                  [app: str, producers: array of [volume: uint, ino: uint],
//                   created: bool, generation: uint]
//   3     touched  array of str                   in-volume paths the batch changes besides
//                                                 its records' (a rename's old name)
//   4..   ignored (appended by later versions)
// Compatibility rule: as record_format.h (fields appended only; newer versions refused).
//
// Decoders take untrusted bytes and return Corruption on garbage. Thread-safe.
#ifndef PROPELLER_SCHEMAS_PENDING_FORMAT_H_
#define PROPELLER_SCHEMAS_PENDING_FORMAT_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/record.h"
#include "common/status.h"

namespace propeller {

inline constexpr uint32_t kPendingFormatVersion = 1;
inline constexpr size_t kPendingRecordHeader = 8;
inline constexpr uint32_t kPendingMaxRecord = 64u << 20;

// What the client library adds to an Update (client/lib/propeller.h, FileUpdate).
struct PendingExtra {
  std::string app;
  std::vector<FileId> producers;
  bool created = false;
  uint64_t generation = 0;
  bool operator==(const PendingExtra&) const = default;
};

// Appends one queue record (header and payload) holding `updates` and `extras` (one each)
// and `touched`.
void AppendPendingRecord(std::span<const Update> updates, std::span<const PendingExtra> extras,
                         std::span<const std::string> touched, std::string* out);

enum class PendingParse : uint8_t { kOk, kTruncated, kBadRecord };
// Parses the record at the front of `data`: *payload and *consumed on kOk.
PendingParse ParsePendingRecord(std::string_view data, std::string_view* payload,
                                size_t* consumed);
// Decodes a record's payload. Corruption on garbage, or when the counts differ.
Status DecodePendingBatch(std::string_view payload, std::vector<Update>* updates,
                          std::vector<PendingExtra>* extras, std::vector<std::string>* touched);

}  // namespace propeller

#endif  // PROPELLER_SCHEMAS_PENDING_FORMAT_H_
