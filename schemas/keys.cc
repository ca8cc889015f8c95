// Order-preserving key encodings (see keys.h for the contract). Each layout is a byte table
// next to the code that writes it; golden bytes are pinned in keys_test.cc. Changing any
// layout here changes kAcgFormatVersion.
#include "schemas/keys.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace propeller {
namespace {

constexpr uint8_t kNumberTag = 0x02;
constexpr uint8_t kStringTag = 0x03;
constexpr uint8_t kEscapeByte = 0x00;
constexpr uint8_t kEscapedZero = 0xFF;       // 0x00 in a string is written 0x00 0xFF
constexpr uint8_t kCompleteTerminator = 0x01; // ... 0x00 0x01
constexpr uint8_t kTruncatedTerminator = 0x02; // ... 0x00 0x02
constexpr size_t kNumberValueSize = 1 + 8 + 8;

uint64_t LoadBigEndian64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

uint32_t LoadBigEndian32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

void AppendBigEndian32(uint32_t v, std::string* out) {
  char buf[4];
  for (int i = 3; i >= 0; --i) {
    buf[i] = static_cast<char>(v & 0xFF);
    v >>= 8;
  }
  out->append(buf, 4);
}

// The double nearest to v in the direction of zero (not the default round-to-nearest).
// Rounding toward zero keeps the (double, int64 tie-break) number key strictly ordered for
// all int64: with round-to-nearest, INT64_MAX would become 2^63 and its key would collide
// with the key of the double 2^63, which is a different (larger) number. Truncating the
// magnitude to its top 53 significant bits is exactly round-toward-zero, and the result
// converts to double without further rounding.
double Int64ToDoubleTowardZero(int64_t v) {
  const bool negative = v < 0;
  // Magnitude in uint64: well defined for INT64_MIN too (2^63).
  uint64_t mag = negative ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  if (mag >= (uint64_t{1} << 53)) {
    const int top_bit = 63 - __builtin_clzll(mag);
    const int drop = top_bit - 52;  // bits below the 53-bit significand
    mag &= ~((uint64_t{1} << drop) - 1);
  }
  const double d = static_cast<double>(mag);  // exact
  return negative ? -d : d;
}

// The int64 tie-break of a double: truncated toward zero, clamped; NaN -> INT64_MAX (NaN sorts
// after every number already through its double part, so any fixed value works).
int64_t DoubleTieBreak(double x) {
  if (std::isnan(x)) return std::numeric_limits<int64_t>::max();
  // 2^63 is exactly representable; every double below it truncates into range.
  constexpr double kTwo63 = 9223372036854775808.0;
  if (x >= kTwo63) return std::numeric_limits<int64_t>::max();
  if (x <= -kTwo63) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(std::trunc(x));
}

// Appends `s` with every 0x00 escaped as 0x00 0xFF, stopping before the first byte whose
// encoding would make the escaped part longer than kMaxEncodedStringBytes (an escape pair is
// never split). Returns true when the whole string fit.
bool AppendEscaped(std::string_view s, std::string* out) {
  size_t encoded = 0;
  for (char c : s) {
    const size_t width = (static_cast<uint8_t>(c) == kEscapeByte) ? 2 : 1;
    if (encoded + width > kMaxEncodedStringBytes) return false;
    encoded += width;
    if (width == 2) {
      out->push_back(static_cast<char>(kEscapeByte));
      out->push_back(static_cast<char>(kEscapedZero));
    } else {
      out->push_back(c);
    }
  }
  return true;
}

// Length of the index value at the start of `bytes`, or 0 when it is malformed.
size_t IndexValueLength(std::string_view bytes) {
  if (bytes.empty()) return 0;
  const uint8_t tag = static_cast<uint8_t>(bytes[0]);
  if (tag == kNumberTag) return bytes.size() >= kNumberValueSize ? kNumberValueSize : 0;
  if (tag != kStringTag) return 0;
  for (size_t i = 1; i + 1 < bytes.size(); ++i) {
    if (static_cast<uint8_t>(bytes[i]) != kEscapeByte) continue;
    const uint8_t next = static_cast<uint8_t>(bytes[i + 1]);
    if (next == kEscapedZero) {
      ++i;
      continue;
    }
    if (next == kCompleteTerminator || next == kTruncatedTerminator) {
      // Either way the body never exceeds the limit.
      return (i - 1 <= kMaxEncodedStringBytes) ? i + 2 : 0;
    }
    return 0;
  }
  return 0;
}

}  // namespace

// FileId key, 12 bytes:
//   offset size field
//   0      4    volume, u32 big-endian
//   4      8    ino, u64 big-endian
void AppendFileIdKey(FileId id, std::string* out) {
  AppendBigEndian32(id.volume, out);
  AppendOrderedU64(id.ino, out);
}

Status DecodeFileIdKey(std::string_view bytes, FileId* id) {
  if (bytes.size() != kFileIdKeySize) {
    return Status::Corruption("file id key: expected 12 bytes, got " +
                              std::to_string(bytes.size()));
  }
  id->volume = LoadBigEndian32(bytes.data());
  id->ino = LoadBigEndian64(bytes.data() + 4);
  return Status::OK();
}

// u64: 8 bytes big-endian.
std::string AcgKeyPrefix(uint64_t id) {
  std::string out(kAcgKeyPrefixSize, '\0');
  for (size_t i = 0; i < kAcgKeyPrefixSize; ++i) {
    out[i] = static_cast<char>((id >> (8 * (kAcgKeyPrefixSize - 1 - i))) & 0xff);
  }
  return out;
}

void AppendOrderedU64(uint64_t v, std::string* out) {
  char buf[8];
  for (int i = 7; i >= 0; --i) {
    buf[i] = static_cast<char>(v & 0xFF);
    v >>= 8;
  }
  out->append(buf, 8);
}

// i64: 8 bytes big-endian of (v as u64) XOR 2^63, so INT64_MIN -> 00.., -1 -> 7F FF..,
// 0 -> 80 00.., INT64_MAX -> FF...
void AppendOrderedI64(int64_t v, std::string* out) {
  AppendOrderedU64(static_cast<uint64_t>(v) ^ (uint64_t{1} << 63), out);
}

// double: 8 bytes big-endian of the IEEE-754 bits b, transformed so that unsigned order is
// numeric order: b with the sign bit set (negative) -> ~b; otherwise b | 2^63.
//   -inf -> 00 0F FF FF FF FF FF FF    -0.0 and +0.0 -> 80 00 00 00 00 00 00 00
//   +inf -> FF F0 00 00 00 00 00 00    every NaN     -> FF F8 00 00 00 00 00 00 (last)
// -0.0 is written as +0.0 and every NaN as the positive quiet NaN, so equal values (and all
// NaNs) share one encoding.
void AppendOrderedDouble(double v, std::string* out) {
  if (v == 0.0) v = 0.0;  // folds -0.0
  uint64_t bits;
  if (std::isnan(v)) {
    bits = 0x7FF8000000000000ull;
  } else {
    std::memcpy(&bits, &v, sizeof(bits));
  }
  if (bits >> 63) {
    bits = ~bits;
  } else {
    bits |= uint64_t{1} << 63;
  }
  AppendOrderedU64(bits, out);
}

uint64_t DecodeOrderedU64(std::string_view eight_bytes) {
  return eight_bytes.size() < 8 ? 0 : LoadBigEndian64(eight_bytes.data());
}

int64_t DecodeOrderedI64(std::string_view eight_bytes) {
  return static_cast<int64_t>(DecodeOrderedU64(eight_bytes) ^ (uint64_t{1} << 63));
}

double DecodeOrderedDouble(std::string_view eight_bytes) {
  uint64_t bits = DecodeOrderedU64(eight_bytes);
  if (bits >> 63) {
    bits &= ~(uint64_t{1} << 63);
  } else {
    bits = ~bits;
  }
  double v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

// Index value (the part of a B-tree key before the FileId):
//
//   number (int64 or double), 17 bytes:
//     offset size field
//     0      1    0x02
//     1      8    ordered double: the value itself for a double; for an int64, the double
//                 nearest to it toward zero (Int64ToDoubleTowardZero)
//     9      8    ordered int64 tie-break: the int64 itself; for a double, its value
//                 truncated toward zero and clamped to [INT64_MIN, INT64_MAX] (NaN: MAX)
//   Equal numbers get equal bytes whatever their type (3 and 3.0: 02 C0 08 00.. 80 ..03), and
//   distinct numbers distinct bytes, ordered numerically (NaN last).
//
//   string, 3 to 443 bytes:
//     0      1    0x03
//     1      n    the bytes, 0x00 escaped as 0x00 0xFF, at most 440 (kMaxEncodedStringBytes);
//                 an escape pair is never split
//     1+n    2    0x00 0x01 when the string is complete, 0x00 0x02 when it was truncated
//   The escape is prefix-free and the terminator sorts below every escaped byte, so a string
//   sorts before its extensions; a truncated key sorts after the complete key of its prefix,
//   which keeps truncation monotone.
void AppendIndexValue(const AttrValue& value, std::string* out) {
  if (const auto* s = std::get_if<std::string>(&value)) {
    out->push_back(static_cast<char>(kStringTag));
    const bool complete = AppendEscaped(*s, out);
    out->push_back(static_cast<char>(kEscapeByte));
    out->push_back(static_cast<char>(complete ? kCompleteTerminator : kTruncatedTerminator));
    return;
  }
  out->push_back(static_cast<char>(kNumberTag));
  if (const auto* i = std::get_if<int64_t>(&value)) {
    AppendOrderedDouble(Int64ToDoubleTowardZero(*i), out);
    AppendOrderedI64(*i, out);
  } else {
    const double d = std::get<double>(value);
    AppendOrderedDouble(d, out);
    AppendOrderedI64(DoubleTieBreak(d), out);
  }
}

void AppendIndexStringPrefix(std::string_view prefix, std::string* out) {
  out->push_back(static_cast<char>(kStringTag));
  AppendEscaped(prefix, out);  // a truncated prefix selects a superset, as documented
}

// B-tree entry key: index value ‖ FileId key (12 bytes); at most 443 + 12 = 455 bytes, under
// LMDB's 511-byte key limit.
std::string IndexEntryKey(const AttrValue& value, FileId id) {
  std::string key;
  AppendIndexValue(value, &key);
  AppendFileIdKey(id, &key);
  return key;
}

Status SplitIndexEntryKey(std::string_view key, std::string_view* value_part, FileId* id) {
  const size_t value_len = IndexValueLength(key);
  if (value_len == 0 || key.size() != value_len + kFileIdKeySize) {
    return Status::Corruption("malformed index entry key");
  }
  *value_part = key.substr(0, value_len);
  return DecodeFileIdKey(key.substr(value_len), id);
}

// Edge key, 24 bytes:
//   offset size field
//   0      12   FileId key of the source
//   12     12   FileId key of the destination
void AppendEdgeKey(FileId src, FileId dst, std::string* out) {
  AppendFileIdKey(src, out);
  AppendFileIdKey(dst, out);
}

void AppendEdgeValue(const EdgeValue& value, std::string* out) {
  AppendOrderedU64(value.weight, out);
  if (value.src_generation == 0 && value.dst_generation == 0) return;
  for (uint32_t g : {value.src_generation, value.dst_generation}) {
    for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(g >> shift));
  }
}

Status DecodeEdgeValue(std::string_view bytes, EdgeValue* value) {
  if (bytes.size() != 8 && bytes.size() != 16) {
    return Status::Corruption("edge value: expected 8 or 16 bytes, got " +
                              std::to_string(bytes.size()));
  }
  value->weight = DecodeOrderedU64(bytes.substr(0, 8));
  value->src_generation = value->dst_generation = 0;
  if (bytes.size() == 16) {
    auto u32 = [&](size_t at) {
      uint32_t g = 0;
      for (size_t i = 0; i < 4; ++i) g = g << 8 | static_cast<uint8_t>(bytes[at + i]);
      return g;
    };
    value->src_generation = u32(8);
    value->dst_generation = u32(12);
  }
  return Status::OK();
}

Status DecodeEdgeKey(std::string_view key, FileId* src, FileId* dst) {
  if (key.size() != 2 * kFileIdKeySize) {
    return Status::Corruption("edge key: expected 24 bytes, got " + std::to_string(key.size()));
  }
  PROPELLER_RETURN_IF_ERROR(DecodeFileIdKey(key.substr(0, kFileIdKeySize), src));
  return DecodeFileIdKey(key.substr(kFileIdKeySize), dst);
}

}  // namespace propeller
