// msgpack encodings of FileRecord and Update batches (contract in record_format.h). The field
// tables below are the format; golden bytes are pinned in record_format_test.cc.
//
// msgpack-c is used in two ways (helpers in msgpack_util.h): its packer writes ints and strings
// (always in the smallest msgpack form), and its unpacker parses untrusted input under tight
// limits. Doubles are NOT written with packer::pack_double, which turns whole-number doubles
// into msgpack integers (2.0 -> 0x02, docs/pitfalls.md MP-3): a double is always written as float64
// (0xcb + 8 bytes big-endian) so that the reader, in any language, gets back a double. Every
// exception msgpack-c throws is caught and becomes Corruption. The record and update arrays are
// also nested inside wire messages (messages.cc), hence their codecs live in msgpack_util.
#include "schemas/record_format.h"

#include <msgpack.hpp>

#include <functional>
#include <limits>
#include <utility>

#include "common/crc32c.h"
#include "schemas/msgpack_util.h"

namespace propeller {
namespace msgpack_util {
namespace {

// Deepest nesting of the current formats is 6 (batch, update list, update, record, attrs,
// attr pair); the slack leaves room for appended fields that nest a little.
constexpr size_t kMaxDepth = 16;

// FileRecord, a msgpack array, version 2 (a record whose times all fit version 1 is written
// as version 1, byte for byte as before, so older readers read it):
//   index field       msgpack type              notes
//   0     version     uint                      1 or 2 (kRecordFormatVersion); 0 is invalid
//   1     volume      uint <= 2^32-1
//   2     ino         uint
//   3     paths       array of str              as in the record (sorted, no duplicates)
//   4     parent_ino  uint
//   5     type        uint                      'f' 0x66, 'd' 0x64, 'l' 0x6c or 'o' 0x6f
//   6     size        uint
//   7     mtime       time                      nanoseconds since the epoch (FileTime)
//   8     ctime       time
//   9     atime       time
//   10    uid         uint <= 2^32-1
//   11    gid         uint <= 2^32-1
//   12    mode        uint <= 2^32-1
//   13    nlink       uint <= 2^32-1
//   14    attrs       array of attr             sorted by name, names unique
//   15    generation  uint <= 2^32-1            inode_generation; written only when not 0
//                                               (a reader of fewer fields takes 0)
//   16..  appended by later versions            ignored by this reader
// attr, a msgpack array:
//   0     name        str
//   1     value       int (int64) | float64 | str
//   2..   ignored
// time: int (int64 nanoseconds; versions 1 and 2), or, version 2 only, for a time outside
// int64 nanoseconds (before 1677-09-21 or after 2262-04-11): an array [seconds int (int64),
// nanoseconds uint < 10^9], the time being seconds * 10^9 + nanoseconds.
// "int" means any msgpack integer form; the writer uses the smallest. A reader also accepts
// float32 for a double value.
constexpr size_t kRecordFields = 15;

}  // namespace

namespace {

bool FitsInt64(FileTime t) { return t >= INT64_MIN && t <= INT64_MAX; }

void PackTime(Writer& w, FileTime t) {
  if (FitsInt64(t)) {
    w.Int(static_cast<int64_t>(t));
    return;
  }
  w.Array(2);
  w.Int(FileTimeSeconds(t));
  w.Uint(static_cast<uint64_t>(FileTimeNanos(t)));
}

}  // namespace

// A time element of a record of version `version` (also used by the fast decoder below).
bool ReadTime(Reader& in, uint64_t version, FileTime* t) {
  if (in.AtInteger()) {
    int64_t ns;
    if (!in.ReadInt(&ns)) return false;
    *t = ns;
    return true;
  }
  uint64_t n, nsec;
  int64_t sec;
  if (version < 2 || !in.ReadArray(&n) || n != 2 || !in.ReadInt(&sec) || !in.ReadUint(&nsec) ||
      nsec >= static_cast<uint64_t>(kNanosPerSecond)) {
    return false;
  }
  *t = FileTimeOf(sec, static_cast<int64_t>(nsec));
  return true;
}

void PackRecord(const FileRecord& r, std::string* out) {
  // Writer, not msgpack-c's packer: same bytes (the golden tests pin them), a fraction of the
  // cost on the commit path, which encodes every record it writes.
  size_t bytes = 48;
  for (const std::string& p : r.paths) bytes += p.size() + 3;
  out->reserve(out->size() + bytes);
  Writer w(out);
  w.Array(r.inode_generation != 0 ? kRecordFields + 1 : kRecordFields);
  const bool v1 = FitsInt64(r.mtime) && FitsInt64(r.ctime) && FitsInt64(r.atime);
  w.Uint(v1 ? 1 : kRecordFormatVersion);
  w.Uint(r.id.volume);
  w.Uint(r.id.ino);
  w.Array(r.paths.size());
  for (const std::string& p : r.paths) w.Str(p);
  w.Uint(r.parent_ino);
  w.Uint(static_cast<uint8_t>(r.type));
  w.Uint(r.size);
  PackTime(w, r.mtime);
  PackTime(w, r.ctime);
  PackTime(w, r.atime);
  w.Uint(r.uid);
  w.Uint(r.gid);
  w.Uint(r.mode);
  w.Uint(r.nlink);
  w.Array(r.attrs.size());
  for (const auto& [name, value] : r.attrs) {
    w.Array(2);
    w.Str(name);
    if (const auto* i = std::get_if<int64_t>(&value)) {
      w.Int(*i);
    } else if (const auto* d = std::get_if<double>(&value)) {
      w.Float64(*d);  // always float64, even for whole numbers (docs/pitfalls.md MP-3)
    } else {
      w.Str(std::get<std::string>(value));
    }
  }
  if (r.inode_generation != 0) w.Uint(r.inode_generation);
}

namespace {

// Update batch, a msgpack array, version 1:
//   index field       msgpack type              notes
//   0     version     uint                      1 (kUpdateBatchFormatVersion); 0 is invalid
//   1     updates     array of update
//   2..   ignored
// update, a msgpack array:
//   0     op          uint 1..5                 UpdateOp
//   1     acg         uint
//   2     record      FileRecord array (above)  the whole record, for every op: a kDelete
//                                               written with only record.id set costs ~20
//                                               bytes, and decoding gives back exactly the
//                                               Update that was encoded
//   3     dst volume  uint <= 2^32-1            edge_dst.volume
//   4     dst ino     uint                      edge_dst.ino
//   5     weight      uint <= 2^32-1            edge_weight
//   6     dst gen     uint <= 2^32-1            edge_dst_generation; written only when not 0
//   7..   ignored
constexpr size_t kBatchFields = 2;
constexpr size_t kUpdateFields = 6;

// ---- decoding ----

// Checks the version field (element 0) of a top-level array.
Status CheckVersion(std::string_view what, const msgpack::object& o, uint32_t ours) {
  uint64_t version;
  if (!GetU64(o, &version)) return Bad(what, "version", "is not an unsigned integer");
  if (version == 0 || version > ours) {
    return Status::Corruption(std::string(what) + ": unsupported version " +
                              std::to_string(version));
  }
  return Status::OK();
}

Status DecodeAttrValue(const msgpack::object& o, AttrValue* value) {
  switch (o.type) {
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER: {
      int64_t i;
      if (!GetI64(o, &i)) return Bad("record", "attrs", "has an integer beyond int64");
      *value = i;
      return Status::OK();
    }
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      *value = o.via.f64;
      return Status::OK();
    case msgpack::type::STR:
      *value = std::string(o.via.str.ptr, o.via.str.size);
      return Status::OK();
    default:
      return Bad("record", "attrs", "has a value that is not int, float or str");
  }
}

}  // namespace

namespace {

// A time element (see the table above) of a record of version `version`.
bool GetTime(const msgpack::object& o, uint64_t version, FileTime* t) {
  int64_t ns;
  if (GetI64(o, &ns)) {
    *t = ns;
    return true;
  }
  size_t n;
  const msgpack::object* parts = nullptr;
  int64_t sec;
  uint64_t nsec;
  if (version < 2 || !GetArray(o, 2, &parts, &n) || n != 2 || !GetI64(parts[0], &sec) ||
      !GetU64(parts[1], &nsec) || nsec >= static_cast<uint64_t>(kNanosPerSecond)) {
    return false;
  }
  *t = FileTimeOf(sec, static_cast<int64_t>(nsec));
  return true;
}

}  // namespace

Status DecodeRecordObject(const msgpack::object& o, FileRecord* out) {
  constexpr std::string_view kWhat = "record";
  size_t n;
  const msgpack::object* f = nullptr;
  if (!GetArray(o, kRecordFields, &f, &n)) {
    return Status::Corruption("record: not an array of at least 15 fields");
  }
  PROPELLER_RETURN_IF_ERROR(CheckVersion(kWhat, f[0], kRecordFormatVersion));
  uint64_t version = 0;
  GetU64(f[0], &version);
  FileRecord r;
  if (!GetU32(f[1], &r.id.volume)) return Bad(kWhat, "volume", "is not a uint32");
  if (!GetU64(f[2], &r.id.ino)) return Bad(kWhat, "ino", "is not a uint64");
  size_t num_paths;
  const msgpack::object* paths = nullptr;
  if (!GetArray(f[3], 0, &paths, &num_paths)) return Bad(kWhat, "paths", "is not an array");
  // Grown element by element (not resized up front) so garbage claiming many elements fails
  // at the first bad one before anything large is allocated.
  for (size_t i = 0; i < num_paths; ++i) {
    std::string path;
    if (!GetString(paths[i], &path)) return Bad(kWhat, "paths", "has a non-string");
    r.paths.push_back(std::move(path));
  }
  if (!GetU64(f[4], &r.parent_ino)) return Bad(kWhat, "parent_ino", "is not a uint64");
  uint64_t type;
  if (!GetU64(f[5], &type)) return Bad(kWhat, "type", "is not an unsigned integer");
  switch (type) {
    case 'f':
    case 'd':
    case 'l':
    case 'o':
      r.type = static_cast<FileType>(type);
      break;
    default:
      return Bad(kWhat, "type", "is not one of f, d, l, o");
  }
  if (!GetU64(f[6], &r.size)) return Bad(kWhat, "size", "is not a uint64");
  if (!GetTime(f[7], version, &r.mtime)) return Bad(kWhat, "mtime", "is not a time");
  if (!GetTime(f[8], version, &r.ctime)) return Bad(kWhat, "ctime", "is not a time");
  if (!GetTime(f[9], version, &r.atime)) return Bad(kWhat, "atime", "is not a time");
  if (!GetU32(f[10], &r.uid)) return Bad(kWhat, "uid", "is not a uint32");
  if (!GetU32(f[11], &r.gid)) return Bad(kWhat, "gid", "is not a uint32");
  if (!GetU32(f[12], &r.mode)) return Bad(kWhat, "mode", "is not a uint32");
  if (!GetU32(f[13], &r.nlink)) return Bad(kWhat, "nlink", "is not a uint32");
  size_t num_attrs;
  const msgpack::object* attrs = nullptr;
  if (!GetArray(f[14], 0, &attrs, &num_attrs)) return Bad(kWhat, "attrs", "is not an array");
  for (size_t i = 0; i < num_attrs; ++i) {
    size_t pair_size;
    const msgpack::object* pair = nullptr;
    if (!GetArray(attrs[i], 2, &pair, &pair_size)) {
      return Bad(kWhat, "attrs", "has an entry that is not [name, value]");
    }
    std::string name;
    if (!GetString(pair[0], &name)) return Bad(kWhat, "attrs", "has a non-string name");
    AttrValue value;
    PROPELLER_RETURN_IF_ERROR(DecodeAttrValue(pair[1], &value));
    if (!r.attrs.emplace(std::move(name), std::move(value)).second) {
      return Bad(kWhat, "attrs", "has a duplicate name");
    }
  }
  if (n > kRecordFields && !GetU32(f[kRecordFields], &r.inode_generation)) {
    return Bad(kWhat, "generation", "is not a uint32");
  }
  *out = std::move(r);
  return Status::OK();
}

Status DecodeUpdateObject(const msgpack::object& o, Update* out) {
  constexpr std::string_view kWhat = "update";
  size_t n;
  const msgpack::object* f = nullptr;
  if (!GetArray(o, kUpdateFields, &f, &n)) {
    return Status::Corruption("update: not an array of at least 6 fields");
  }
  Update u;
  uint64_t op;
  if (!GetU64(f[0], &op) || op < static_cast<uint64_t>(UpdateOp::kPut) ||
      op > static_cast<uint64_t>(UpdateOp::kAddEdge)) {
    return Bad(kWhat, "op", "is not 1..5");
  }
  u.op = static_cast<UpdateOp>(op);
  if (!GetU64(f[1], &u.acg)) return Bad(kWhat, "acg", "is not a uint64");
  PROPELLER_RETURN_IF_ERROR(DecodeRecordObject(f[2], &u.record));
  if (!GetU32(f[3], &u.edge_dst.volume)) return Bad(kWhat, "edge_dst.volume", "is not a uint32");
  if (!GetU64(f[4], &u.edge_dst.ino)) return Bad(kWhat, "edge_dst.ino", "is not a uint64");
  if (!GetU32(f[5], &u.edge_weight)) return Bad(kWhat, "edge_weight", "is not a uint32");
  if (n > kUpdateFields && !GetU32(f[kUpdateFields], &u.edge_dst_generation)) {
    return Bad(kWhat, "edge_dst_generation", "is not a uint32");
  }
  *out = std::move(u);
  return Status::OK();
}

namespace {

// One update; `record` is EncodeRecord(u.record) when the caller has it, else empty.
void PackUpdateWith(const Update& u, std::string_view record, std::string* out) {
  Writer w(out);
  w.Array(u.edge_dst_generation != 0 ? kUpdateFields + 1 : kUpdateFields);
  w.Uint(static_cast<uint8_t>(u.op));
  w.Uint(u.acg);
  if (record.empty()) {
    PackRecord(u.record, out);
  } else {
    out->append(record);
  }
  w.Uint(u.edge_dst.volume);
  w.Uint(u.edge_dst.ino);
  w.Uint(u.edge_weight);
  if (u.edge_dst_generation != 0) w.Uint(u.edge_dst_generation);
}

}  // namespace

void PackUpdate(const Update& u, std::string* out) { PackUpdateWith(u, {}, out); }

namespace {

void PackBatch(std::span<const Update> updates,
               const std::function<std::string_view(size_t)>* records, std::string* out) {
  Writer w(out);
  w.Array(kBatchFields);
  w.Uint(kUpdateBatchFormatVersion);
  w.Array(updates.size());
  for (size_t i = 0; i < updates.size(); ++i) {
    PackUpdateWith(updates[i], records != nullptr ? (*records)(i) : std::string_view(), out);
  }
}

Status DecodeBatchObject(const msgpack::object& o, std::vector<Update>* updates) {
  size_t n;
  const msgpack::object* f = nullptr;
  if (!GetArray(o, kBatchFields, &f, &n)) {
    return Status::Corruption("update batch: not an array of at least 2 fields");
  }
  PROPELLER_RETURN_IF_ERROR(CheckVersion("update batch", f[0], kUpdateBatchFormatVersion));
  size_t count;
  const msgpack::object* list = nullptr;
  if (!GetArray(f[1], 0, &list, &count)) {
    return Bad("update batch", "updates", "is not an array");
  }
  std::vector<Update> result;  // grown as updates decode, like paths above
  for (size_t i = 0; i < count; ++i) {
    Update u;
    Status s = DecodeUpdateObject(list[i], &u);
    if (!s.ok()) return s.WithContext("update batch: update " + std::to_string(i));
    result.push_back(std::move(u));
  }
  *updates = std::move(result);
  return Status::OK();
}

}  // namespace
}  // namespace msgpack_util

void EncodeRecord(const FileRecord& record, std::string* out) {
  msgpack_util::PackRecord(record, out);
}

// The top-level record is decoded with msgpack_util::Reader, straight into *record (reusing
// its strings' capacity), instead of msgpack-c's object tree: every commit reads each updated
// file's old record and every search decodes its hits, and the tree (a validating pass, a zone,
// an object per element, then a copy) cost ~3x this. It accepts exactly what the tree-based
// DecodeRecordObject accepts and decodes it the same (record_format_test compares the two on
// valid and corrupted encodings); records nested in wire messages still go through the tree.
namespace {

// DecodeRecord, or with whole = false DecodeRecordHead (record_format.h); on_path, when set, is
// called with each path.
Status DecodeRecordFields(std::string_view bytes, FileRecord* record, bool whole,
                          const PathVisitor* on_path = nullptr) {
  using msgpack_util::Bad;
  constexpr std::string_view kWhat = "record";
  constexpr size_t kRecordDepth = 1;  // the record array; its fields sit at depth 2
  msgpack_util::Reader in(bytes);
  FileRecord& r = *record;
  uint64_t fields;
  if (!in.ReadArray(&fields) || fields < msgpack_util::kRecordFields) {
    // Either malformed msgpack or another shape: the tree decoder words both.
    Status s = msgpack_util::ParseAndDecode(
        kWhat, bytes, bytes.size(), msgpack_util::kMaxDepth,
        [record](const msgpack::object& o) { return msgpack_util::DecodeRecordObject(o, record); });
    if (s.ok() && on_path != nullptr) {
      for (const std::string& p : r.paths) (*on_path)(p);
    }
    if (!whole) {
      r.paths.clear();
      r.attrs.clear();
      r.inode_generation = 0;
    }
    return s;
  }
  uint64_t version;
  if (!in.ReadUint(&version)) return Bad(kWhat, "version", "is not an unsigned integer");
  if (version == 0 || version > kRecordFormatVersion) {
    return Status::Corruption("record: unsupported version " + std::to_string(version));
  }
  if (!in.ReadU32(&r.id.volume)) return Bad(kWhat, "volume", "is not a uint32");
  if (!in.ReadUint(&r.id.ino)) return Bad(kWhat, "ino", "is not a uint64");
  uint64_t num_paths;
  if (!in.ReadArray(&num_paths)) return Bad(kWhat, "paths", "is not an array");
  // Existing strings are overwritten in place (their capacity reused); the count is bounded by
  // the bytes left (ReadArray), so garbage cannot make this allocate much.
  size_t kept = 0;
  for (uint64_t i = 0; i < num_paths; ++i) {
    std::string_view path;
    if (!in.ReadStr(&path)) return Bad(kWhat, "paths", "has a non-string");
    if (on_path != nullptr) (*on_path)(path);
    if (!whole) continue;
    if (kept < r.paths.size()) {
      r.paths[kept].assign(path);
    } else {
      r.paths.emplace_back(path);
    }
    ++kept;
  }
  r.paths.resize(kept);
  if (!in.ReadUint(&r.parent_ino)) return Bad(kWhat, "parent_ino", "is not a uint64");
  uint64_t type;
  if (!in.ReadUint(&type)) return Bad(kWhat, "type", "is not an unsigned integer");
  switch (type) {
    case 'f':
    case 'd':
    case 'l':
    case 'o':
      r.type = static_cast<FileType>(type);
      break;
    default:
      return Bad(kWhat, "type", "is not one of f, d, l, o");
  }
  if (!in.ReadUint(&r.size)) return Bad(kWhat, "size", "is not a uint64");
  if (!msgpack_util::ReadTime(in, version, &r.mtime)) return Bad(kWhat, "mtime", "is not a time");
  if (!msgpack_util::ReadTime(in, version, &r.ctime)) return Bad(kWhat, "ctime", "is not a time");
  if (!msgpack_util::ReadTime(in, version, &r.atime)) return Bad(kWhat, "atime", "is not a time");
  if (!in.ReadU32(&r.uid)) return Bad(kWhat, "uid", "is not a uint32");
  if (!in.ReadU32(&r.gid)) return Bad(kWhat, "gid", "is not a uint32");
  if (!in.ReadU32(&r.mode)) return Bad(kWhat, "mode", "is not a uint32");
  if (!in.ReadU32(&r.nlink)) return Bad(kWhat, "nlink", "is not a uint32");
  r.attrs.clear();
  r.inode_generation = 0;
  if (!whole) return Status::OK();
  uint64_t num_attrs;
  if (!in.ReadArray(&num_attrs)) return Bad(kWhat, "attrs", "is not an array");
  for (uint64_t i = 0; i < num_attrs; ++i) {
    uint64_t pair_size;
    if (!in.ReadArray(&pair_size) || pair_size < 2) {
      return Bad(kWhat, "attrs", "has an entry that is not [name, value]");
    }
    std::string_view name;
    if (!in.ReadStr(&name)) return Bad(kWhat, "attrs", "has a non-string name");
    AttrValue value;
    if (in.AtInteger()) {
      int64_t v;
      if (!in.ReadInt(&v)) return Bad(kWhat, "attrs", "has an integer beyond int64");
      value = v;
    } else if (in.AtFloat()) {
      double d;
      if (!in.ReadFloat(&d)) return Status::Corruption("record: malformed msgpack (truncated)");
      value = d;
    } else if (in.AtStr()) {
      std::string_view str;
      if (!in.ReadStr(&str)) return Status::Corruption("record: malformed msgpack (truncated)");
      value = std::string(str);
    } else {
      return Bad(kWhat, "attrs", "has a value that is not int, float or str");
    }
    for (uint64_t k = 2; k < pair_size; ++k) {  // appended pair elements: ignored
      if (!in.Skip(kRecordDepth + 2, msgpack_util::kMaxDepth)) {
        return Status::Corruption("record: malformed msgpack in an attr");
      }
    }
    if (!r.attrs.emplace(std::string(name), std::move(value)).second) {
      return Bad(kWhat, "attrs", "has a duplicate name");
    }
  }
  uint64_t k = msgpack_util::kRecordFields;
  if (k < fields) {
    if (!in.ReadU32(&r.inode_generation)) return Bad(kWhat, "generation", "is not a uint32");
    ++k;
  }
  for (; k < fields; ++k) {  // appended fields: ignored
    if (!in.Skip(kRecordDepth + 1, msgpack_util::kMaxDepth)) {
      return Status::Corruption("record: malformed msgpack in an appended field");
    }
  }
  if (in.remaining() != 0) {
    return Status::Corruption("record: " + std::to_string(in.remaining()) + " trailing bytes");
  }
  return Status::OK();
}

}  // namespace

Status DecodeRecord(std::string_view bytes, FileRecord* record) {
  return DecodeRecordFields(bytes, record, /*whole=*/true);
}

Status DecodeRecordHead(std::string_view bytes, FileRecord* record) {
  return DecodeRecordFields(bytes, record, /*whole=*/false);
}

Status DecodeRecordHead(std::string_view bytes, FileRecord* record, const PathVisitor& on_path) {
  return DecodeRecordFields(bytes, record, /*whole=*/false, &on_path);
}

void EncodeUpdateBatch(std::span<const Update> updates, std::string* out) {
  msgpack_util::PackBatch(updates, nullptr, out);
}

void EncodeUpdateBatch(std::span<const Update> updates,
                       const std::function<std::string_view(size_t)>& records,
                       std::string* out) {
  msgpack_util::PackBatch(updates, &records, out);
}

Status DecodeUpdateBatch(std::string_view bytes, std::vector<Update>* updates) {
  return msgpack_util::ParseAndDecode(
      "update batch", bytes, bytes.size(), msgpack_util::kMaxDepth,
      [updates](const msgpack::object& o) {
        return msgpack_util::DecodeBatchObject(o, updates);
      });
}

void EncodeStoredRecord(std::string_view record, std::string* out) {
  const uint32_t crc = Crc32cMask(Crc32c(record));
  out->push_back(kStoredRecordMark);
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  out->append(record);
}

Status UnwrapStoredRecord(std::string_view stored, std::string_view* record) {
  if (stored.empty() || stored[0] != kStoredRecordMark) {
    *record = stored;  // format 1: no checksum
    return Status::OK();
  }
  if (stored.size() < kStoredRecordHeader) {
    return Status::Corruption("stored record of " + std::to_string(stored.size()) +
                              " bytes is too short for its checksum");
  }
  uint32_t crc = 0;
  for (int i = 3; i >= 0; --i) crc = (crc << 8) | static_cast<unsigned char>(stored[1 + i]);
  *record = stored.substr(kStoredRecordHeader);
  if (Crc32cMask(Crc32c(*record)) != crc) {
    return Status::Corruption("stored record fails its checksum");
  }
  return Status::OK();
}

}  // namespace propeller
