// Order-preserving key encodings for LMDB databases (docs/architecture.md §6, docs/pitfalls.md
// LMDB-6: LMDB keys are at most 511 bytes; signed and composite keys must be big-endian with the
// sign bit flipped).
//
// Every encoding here compares with memcmp in the same order as the values it encodes. The
// layouts are byte tables in keys.cc; golden bytes are pinned in keys_test.cc. Version:
// these layouts are part of the ACG on-disk format version (kAcgFormatVersion below); changing
// one requires a new version and a migration.
// All functions are thread-safe and never throw.
#ifndef PROPELLER_SCHEMAS_KEYS_H_
#define PROPELLER_SCHEMAS_KEYS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/record.h"
#include "common/status.h"

namespace propeller {

// 2: records are stored with a checksum (record_format.h: EncodeStoredRecord). A version-1
// ACG is read as is (its records have none until rewritten) and marked 2 when opened, so an
// older program refuses it rather than misread a checksummed record.
// 3: an edge's value may carry its ends' inode generations (AppendEdgeValue). Older ACGs are
// read as is (their edges have none) and marked 3 when opened, for the same reason.
inline constexpr uint32_t kAcgFormatVersion = 3;

// The layout of an index node's data directory (schemas/LAYOUT.md): 3 = one LMDB environment
// per ACG (acg/<id>/data.mdb); 4 = a few shared environments (store/shard-<k>/), every key of
// an ACG led by AcgKeyPrefix; 5 = as 4, the keyword index in posting chunks (bp.keyword,
// indexnode/index/btree_index.h) instead of one key per entry (bt.keyword). The ACG format
// above is the same in all three.
inline constexpr uint32_t kStoreLayoutVersion = 5;
// The key prefix of ACG `id` in the shared store: its id, u32 big-endian (ids above
// kMaxStoredAcgId do not fit; the store refuses them).
inline constexpr size_t kAcgKeyPrefixSize = 4;
inline constexpr uint64_t kMaxStoredAcgId = 0xffffffffu;
std::string AcgKeyPrefix(uint64_t id);

inline constexpr size_t kFileIdKeySize = 12;
// FileId -> 12 bytes: volume u32 big-endian ‖ ino u64 big-endian.
void AppendFileIdKey(FileId id, std::string* out);
// Corruption unless `bytes` is exactly 12 bytes.
Status DecodeFileIdKey(std::string_view bytes, FileId* id);

// Fixed-width, memcmp-ordered numbers.
void AppendOrderedU64(uint64_t v, std::string* out);  // big-endian
void AppendOrderedI64(int64_t v, std::string* out);   // big-endian, sign bit flipped
void AppendOrderedDouble(double v, std::string* out); // IEEE bits, sign-magnitude to ordered;
                                                      // -0.0 == +0.0; NaN sorts last
uint64_t DecodeOrderedU64(std::string_view eight_bytes);
int64_t DecodeOrderedI64(std::string_view eight_bytes);
double DecodeOrderedDouble(std::string_view eight_bytes);

// Strings longer than this many encoded bytes are truncated in index keys (LMDB's 511-byte
// limit minus room for the tag, terminator and the FileId suffix). Truncation is monotone
// (a <= b implies T(a) <= T(b)), so a range scan over truncated keys returns a superset of the
// exact answer; callers verify every candidate against the record.
inline constexpr size_t kMaxEncodedStringBytes = 440;

// The value part of a B-tree index key. Layout:
//   numbers (int64 and double alike, so 3 and 3.0 sort together):
//     0x02 ‖ ordered double (8) ‖ ordered int64 tie-break (8; for a double, its value
//     truncated toward zero and clamped to the int64 range)
//   strings:
//     0x03 ‖ escaped bytes (0x00 -> 0x00 0xFF) ‖ terminator
//     terminator = 0x00 0x01 for a complete string, 0x00 0x02 for a truncated one
// Numbers sort before strings.
void AppendIndexValue(const AttrValue& value, std::string* out);
// The prefix every key of a string starting with `prefix` begins with (tag ‖ escaped prefix,
// truncated like values, no terminator).
void AppendIndexStringPrefix(std::string_view prefix, std::string* out);
// A full B-tree entry key: AppendIndexValue(value) ‖ FileId key (12 bytes).
std::string IndexEntryKey(const AttrValue& value, FileId id);
// Splits an entry key into its value part and FileId. Corruption on malformed bytes.
Status SplitIndexEntryKey(std::string_view key, std::string_view* value_part, FileId* id);

// K-D tree points persisted in an ACG's `kd.<index>` database: key = FileId key,
// value = kNumInodeAxes (6) ordered int64s (48 bytes): size, mtime, ctime, atime, uid, gid.
// ACG edges in the `edges` database: key = FileId key(src) ‖ FileId key(dst) (24 bytes),
// value = ordered u64 weight (8 bytes: no generations, as every edge of format 2), or
// ordered u64 weight ‖ u32 big-endian src generation ‖ u32 big-endian dst generation
// (16 bytes, since format 3; written when either generation is known).
void AppendEdgeKey(FileId src, FileId dst, std::string* out);
Status DecodeEdgeKey(std::string_view key, FileId* src, FileId* dst);
struct EdgeValue {
  uint64_t weight = 0;
  uint32_t src_generation = 0;  // 0 = unknown
  uint32_t dst_generation = 0;
};
void AppendEdgeValue(const EdgeValue& value, std::string* out);
// Corruption unless `bytes` is 8 or 16 bytes.
Status DecodeEdgeValue(std::string_view bytes, EdgeValue* value);

}  // namespace propeller

#endif  // PROPELLER_SCHEMAS_KEYS_H_
