// The on-disk format of an index node's write-ahead log (docs/architecture.md §6).
//
// The log is a directory of segment files named "<first_lsn as 20 decimal digits>.wal"; a new
// segment is started when the current one exceeds the configured size. Segments are deleted
// whole once every ACG has durably committed all of their records.
//
// Segment header (16 bytes):
//   offset size field
//   0      8    magic "PRPLWAL1"
//   8      4    format version, u32 little-endian (kWalFormatVersion)
//   12     4    CRC-32C (masked, common/crc32c.h) of bytes 0..11, u32 little-endian
// Then records, back to back:
//   0      4    payload length N, u32 little-endian (at most kWalMaxPayload)
//   4      4    masked CRC-32C of bytes 8..(16+N-1) (lsn and payload), u32 little-endian
//   8      8    LSN, u64 little-endian; strictly increasing across the whole log
//   16     N    payload: EncodeUpdateBatch (schemas/record_format.h)
//
// A segment is preallocated: after its last record the file may hold zeros up to its reserved
// size (a zero length with a zero CRC never checks, so zeros cannot pass for a record).
// Writers roll a segment only once its records fill the reserved size, and cut the last one
// to its records at a clean close.
// Recovery rule: a record that is short or fails its CRC at the END of the last segment is a
// write torn by a crash, or the start of the unused zeros; the log is truncated there and the
// record was never acknowledged (an acknowledgement requires the complete record to have been
// written). A last segment whose header is all zeros was never completed and is removed. A
// bad record anywhere else is Corruption and the node refuses to start, naming the file and
// offset. Version 1 readers that predate preallocation read the same files the same way.
// Compatibility rule: a reader accepts segment versions <= its own; payload versions follow
// record_format.h.
#ifndef PROPELLER_SCHEMAS_WAL_FORMAT_H_
#define PROPELLER_SCHEMAS_WAL_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace propeller {

inline constexpr char kWalMagic[8] = {'P', 'R', 'P', 'L', 'W', 'A', 'L', '1'};
inline constexpr uint32_t kWalFormatVersion = 1;
inline constexpr size_t kWalHeaderSize = 16;
inline constexpr size_t kWalRecordHeaderSize = 16;
inline constexpr uint32_t kWalMaxPayload = 256u << 20;

// Appends the 16-byte segment header to *out.
void AppendWalHeader(std::string* out);
// Checks a segment header. Corruption with a reason on failure.
Status CheckWalHeader(std::string_view header);
// Appends one complete record (header + payload) to *out.
void AppendWalRecord(uint64_t lsn, std::string_view payload, std::string* out);

// Result of parsing the record at the front of `data`.
enum class WalParse : uint8_t {
  kOk,         // *lsn, *payload set; *consumed = bytes of the record
  kTruncated,  // `data` ends inside the record
  kBadRecord,  // length out of range or CRC mismatch
};
WalParse ParseWalRecord(std::string_view data, uint64_t* lsn, std::string_view* payload,
                        size_t* consumed);

// "00000000000000000042.wal" for 42; ParseWalSegmentName is its inverse (false on others).
std::string WalSegmentName(uint64_t first_lsn);
bool ParseWalSegmentName(std::string_view name, uint64_t* first_lsn);

}  // namespace propeller

#endif  // PROPELLER_SCHEMAS_WAL_FORMAT_H_
