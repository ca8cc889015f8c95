// The data model of docs/architecture.md §3: file identity, the file record (the indexed document),
// and the updates that change it. Plain value types; thread-compatible. Their byte encodings (on
// disk and on the wire) live in schemas/record_format.h.
#ifndef PROPELLER_COMMON_RECORD_H_
#define PROPELLER_COMMON_RECORD_H_

#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/status.h"

namespace propeller {

// A file is (volume, inode number of the backing file system). Hard links share one id;
// renames keep it. A file system that reuses a deleted file's number tells the two files
// apart by the inode's generation (FileRecord::inode_generation; docs/capture.md "Identity").
struct FileId {
  uint32_t volume = 0;
  uint64_t ino = 0;
  auto operator<=>(const FileId&) const = default;
};

struct FileIdHash {
  size_t operator()(const FileId& id) const {
    uint64_t x = id.ino * 0x9E3779B97F4A7C15ull ^ (uint64_t{id.volume} << 29);
    return static_cast<size_t>(x ^ (x >> 31));
  }
};

// Single letters as in find -type and the query language (type=f).
enum class FileType : uint8_t {
  kRegular = 'f',
  kDirectory = 'd',
  kSymlink = 'l',
  kOther = 'o',  // fifo, socket, device
};

// A user attribute value: integer, floating point or string (docs/architecture.md §3).
using AttrValue = std::variant<int64_t, double, std::string>;

// A file time: nanoseconds since the Unix epoch, negative before 1970. 128 bits, so every
// time a file system can store (64-bit seconds plus nanoseconds; years 1 to 9999 and far
// beyond) is exact — 64 bits of nanoseconds end in 1677 and 2262. Stored as int64
// nanoseconds when it fits, else as seconds and nanoseconds (schemas/record_format.cc).
using FileTime = __int128;
inline constexpr int64_t kNanosPerSecond = 1'000'000'000;
inline FileTime FileTimeOf(int64_t sec, int64_t nsec) {
  return static_cast<FileTime>(sec) * kNanosPerSecond + nsec;
}
// Seconds (floor) and nanoseconds [0, 1e9) of a time.
inline int64_t FileTimeSeconds(FileTime t) {
  FileTime s = t / kNanosPerSecond;
  if (t % kNanosPerSecond < 0) --s;
  return static_cast<int64_t>(s);
}
inline int64_t FileTimeNanos(FileTime t) {
  const int64_t r = static_cast<int64_t>(t % kNanosPerSecond);
  return r < 0 ? r + kNanosPerSecond : r;
}
// The time clamped into int64 nanoseconds: the K-D tree's and the summaries' coordinate (a
// monotonic map, so ranges stay ranges; the exact time decides at verification).
inline int64_t ClampToInt64(FileTime t) {
  if (t > INT64_MAX) return INT64_MAX;
  if (t < INT64_MIN) return INT64_MIN;
  return static_cast<int64_t>(t);
}
// Decimal text of a time in nanoseconds (printf has no 128-bit conversion).
std::string FileTimeToString(FileTime t);

// The indexed document. Times are FileTime (nanoseconds since the Unix epoch).
struct FileRecord {
  FileId id;
  // Absolute paths within the volume ("/src/foo.c"; the root is "/"), one per hard link,
  // sorted, no duplicates. paths[0] is the primary path (its name is the record's name).
  std::vector<std::string> paths;
  uint64_t parent_ino = 0;  // of paths[0]
  FileType type = FileType::kRegular;
  uint64_t size = 0;
  FileTime mtime = 0;
  FileTime ctime = 0;
  FileTime atime = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t mode = 0;  // permission bits and S_IFMT bits as in st_mode
  uint32_t nlink = 1;
  std::map<std::string, AttrValue, std::less<>> attrs;  // user attributes by index name
  // The backing inode's generation (FS_IOC_GETVERSION: ext4, XFS, btrfs), which differs
  // between two files that had the same inode number one after the other; 0 = unknown (a file
  // system without one, or a record read without opening the file). A kPut with 0 keeps the
  // stored record's generation; a kPut with another non-zero generation than the stored one
  // is a new file: the old one's ACG edges go (docs/capture.md "Identity").
  uint32_t inode_generation = 0;

  bool operator==(const FileRecord&) const = default;
};

// The last component of a path: "/a/b.txt" -> "b.txt", "/" -> "".
std::string_view PathBaseName(std::string_view path);
// The parent of a path: "/a/b.txt" -> "/a", "/a" -> "/", "/" -> "/".
std::string_view PathParent(std::string_view path);
// The extension of a name, lowercased, without the dot: "x.TAR.gz" -> "gz"; "" when none
// (a leading dot alone, as in ".bashrc", is not an extension).
std::string NameExtension(std::string_view name);
// True when `path` equals `scope` or lies below it ("/a" contains "/a" and "/a/b", not "/ab").
bool PathInScope(std::string_view path, std::string_view scope);
// The keyword tokens of a path (docs/architecture.md §3 `keyword` index): maximal runs of ASCII
// letters and digits, lowercased, deduplicated, in first-seen order. Other bytes (including UTF-8
// multibyte sequences) are kept inside tokens when they are >= 0x80, so non-ASCII words survive.
// "/home/Ann/firefox-bin/x.tar.gz" -> {home, ann, firefox, bin, x, tar, gz}.
std::vector<std::string> PathKeywords(std::string_view path);
// Whether byte `c` belongs to a keyword token: an ASCII letter or digit, or >= 0x80.
inline bool IsPathTokenByte(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || u >= 0x80;
}
// Calls fn(token) for each token of `path` as written, repeats included, without allocating
// (PathKeywords lowercases and deduplicates them).
template <class Fn>
void ForEachPathToken(std::string_view path, Fn&& fn) {
  size_t i = 0;
  while (i < path.size()) {
    if (!IsPathTokenByte(path[i])) {
      ++i;
      continue;
    }
    size_t end = i + 1;
    while (end < path.size() && IsPathTokenByte(path[end])) ++end;
    fn(path.substr(i, end - i));
    i = end;
  }
}
// Whether `token` is one of PathKeywords(path), without building the list (query verification
// runs it once per candidate). A token with upper-case ASCII letters never matches.
bool PathHasKeyword(std::string_view path, std::string_view token);
// Checks a path is acceptable for a record: absolute, no empty, "." or ".." components, no
// NUL, no trailing slash (except the root), at most 65536 bytes (more than PATH_MAX: a deep
// file's path is taken by no system call whole). Empty string when valid, otherwise the
// reason.
std::string ValidatePath(std::string_view path);

// Whether the query language gives `name` a meaning of its own (size, mtime, user, perm,
// iname, path, ... : common/query/query.h): a user attribute or index of that name could never
// be asked for, so none may take it.
bool IsBuiltinAttrName(std::string_view name);

// "" when `name` can name a user attribute: [a-z][a-z0-9_.-]{0,63} and not built in; else
// why not, in words for a message.
std::string CheckUserAttrName(std::string_view name);

// "" when a new user index may take `name` (CheckUserAttrName, worded for an index; `path` and
// `keyword` pass, as the built-in indexes the caller refuses as existing); else why not.
std::string CheckNewIndexName(std::string_view name);

// Search result order (docs/architecture.md §9 `--sort`). Keys: "" (unordered), size, mtime, ctime,
// atime, uid, gid, path, name. CheckSortKey: InvalidArgument naming the valid keys otherwise.
Status CheckSortKey(std::string_view key);
// True when the hit (path_a, a) comes before (path_b, b) in the order of `key`; ties (and the
// empty key) order by path, so every node and the merging client agree on one total order.
bool SortsBefore(std::string_view key, bool descending, std::string_view path_a,
                 const FileRecord& a, std::string_view path_b, const FileRecord& b);

// The three index structures (docs/architecture.md §3). The numbers are stable: they are stored in
// ACG metadata and sent on the wire.
enum class IndexType : uint8_t { kBTree = 1, kHash = 2, kKdTree = 3 };
const char* IndexTypeName(IndexType type);  // "btree", "hash", "kdtree"
// Parses "btree" / "hash" / "kdtree"; InvalidArgument otherwise.
Result<IndexType> ParseIndexType(std::string_view name);

// One change to the index, as logged in the WAL and applied to an ACG (docs/architecture.md §4,
// §6).
enum class UpdateOp : uint8_t {
  kPut = 1,         // insert or replace the whole record `record` (create, close, rename, setattr)
  kDelete = 2,      // remove the record with id `record.id`; see DeleteApplies
  kSetAttrs = 3,    // merge `record.attrs` into the existing record's attributes
  kRemoveAttrs = 4, // remove the attributes named by the keys of `record.attrs`
  kAddEdge = 5,     // ACG edge record.id -> edge_dst, weight += edge_weight
};

struct Update {
  UpdateOp op = UpdateOp::kPut;
  uint64_t acg = 0;  // the ACG partition this update belongs to
  FileRecord record;
  FileId edge_dst;          // kAddEdge only
  uint32_t edge_weight = 0; // kAddEdge only
  // kAddEdge only: the inode generations of the edge's ends when it was captured: the source's
  // is record.inode_generation, the destination's this (0 = unknown). An edge whose end's
  // generation is not the file's any more belonged to a deleted file.
  uint32_t edge_dst_generation = 0;

  bool operator==(const Update&) const = default;
};

// One ACG edge as an index node stores it: processes read `src`, then wrote `dst`; `weight`
// counts them. With the two files' inode generations when it was captured (0 = unknown), so
// an edge of a deleted file is not taken for one of the file that reused its number.
struct StoredEdge {
  FileId src;
  FileId dst;
  uint64_t weight = 0;
  uint32_t src_generation = 0;
  uint32_t dst_generation = 0;
  bool operator==(const StoredEdge&) const = default;
};

// Whether a kDelete carrying `cond` removes the stored record `stored`. A kDelete with no
// paths is unconditional (other fields ignored). With paths it is conditional: it removes the
// record only if the record still has one of those paths or its ctime is older than
// cond.ctime. A client deleting a file it unlinked sends the unlinked path and the ctime it
// saw before the unlink, so a delete that races with the reuse of the inode number by a new
// file elsewhere (newer ctime, another path) leaves the new file alone, while a stale record
// of the old file (an older ctime) still goes.
bool DeleteApplies(const FileRecord& stored, const FileRecord& cond);

// The state of a file after update `op` with record `rec` (Update::record) — what a commit
// makes of it, inode generations aside: *state is the record before (nullopt = not indexed)
// and becomes the record after. kAddEdge changes no record.
void ApplyToState(UpdateOp op, const FileRecord& rec, std::optional<FileRecord>* state);

}  // namespace propeller

#endif  // PROPELLER_COMMON_RECORD_H_
