// Byte encodings of the data model (common/record.h): the FileRecord stored in an ACG's
// `files` database, and the Update batches written to the write-ahead log.
//
// Both are msgpack arrays (array form: ~5x faster to decode than maps, docs/pitfalls.md MP-2) whose
// first element is a format version. Compatibility rule: a reader accepts its own version and any
// older one it knows; fields are only ever appended at the end, and a reader ignores trailing
// fields it does not know. A version newer than the reader's is Corruption ("unsupported version
// N"). The field tables are in record_format.cc next to the code, and golden bytes are pinned in
// record_format_test.cc.
//
// Decoders take untrusted bytes: they never throw, never crash, and never allocate more than
// a small multiple of the input size (unpack limits); garbage gives Corruption.
// All functions are thread-safe.
#ifndef PROPELLER_SCHEMAS_RECORD_FORMAT_H_
#define PROPELLER_SCHEMAS_RECORD_FORMAT_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/record.h"
#include "common/status.h"

namespace propeller {

inline constexpr uint32_t kRecordFormatVersion = 2;
inline constexpr uint32_t kUpdateBatchFormatVersion = 1;

// Appends the encoding of `record` to *out.
void EncodeRecord(const FileRecord& record, std::string* out);
// Overwrites *record (reusing its strings' capacity). On error *record is valid but unspecified.
Status DecodeRecord(std::string_view bytes, FileRecord* record);
// Only the fields before `attrs`, without copying the paths: *record gets the id, parent_ino,
// type, size, the times, uid, gid, mode and nlink; its paths and attrs are left empty and its
// inode_generation 0. Checks
// those fields as DecodeRecord does; what follows them is not read. (An ACG's K-D tree loads
// its points this way.)
Status DecodeRecordHead(std::string_view bytes, FileRecord* record);
// As DecodeRecordHead, calling on_path with each of the record's paths (views into `bytes`),
// still without copying them. (The K-D tree's tags are the keywords of the paths.)
using PathVisitor = std::function<void(std::string_view)>;
Status DecodeRecordHead(std::string_view bytes, FileRecord* record, const PathVisitor& on_path);

// A record as an ACG stores it (the `files` and `dirs` databases), since ACG format 2: the
// byte 0xC1, the masked CRC-32C (common/crc32c.h) of the record's bytes (4 bytes, little-
// endian), then EncodeRecord's bytes. 0xC1 is the one byte msgpack never uses, so a stored
// value that does not start with it is a format-1 record without a checksum (read as is).
// Damage in a stored record — a flipped bit LMDB cannot see — is caught at every read.
inline constexpr char kStoredRecordMark = '\xC1';
inline constexpr size_t kStoredRecordHeader = 5;
// Appends the stored form of the record encoded as `record` (EncodeRecord's bytes).
void EncodeStoredRecord(std::string_view record, std::string* out);
// The record bytes of stored value `stored`; Corruption when its checksum does not match.
Status UnwrapStoredRecord(std::string_view stored, std::string_view* record);

// A batch of updates, as one WAL record payload.
void EncodeUpdateBatch(std::span<const Update> updates, std::string* out);
// The same bytes, reusing encodings the caller already has: records(i) returns
// EncodeRecord(updates[i].record) exactly, or an empty view to have it encoded here. (The
// engine encodes each record once for its write cache and hands those bytes to the log.)
void EncodeUpdateBatch(std::span<const Update> updates,
                       const std::function<std::string_view(size_t)>& records,
                       std::string* out);
Status DecodeUpdateBatch(std::string_view bytes, std::vector<Update>* updates);

}  // namespace propeller

#endif  // PROPELLER_SCHEMAS_RECORD_FORMAT_H_
