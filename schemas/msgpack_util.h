// Private to schemas/: the msgpack building blocks shared by record_format.cc and messages.cc.
// Not part of any public API; other folders use record_format.h and messages.h.
//
// Writing: msgpack-c's packer writes integers and strings in their smallest msgpack form; a
// double is always written as float64 (PackFloat64) because the packer turns whole-number
// doubles into integers (docs/pitfalls.md MP-3).
//
// Reading untrusted bytes: ParseAndDecode first checks that the input is exactly one
// complete msgpack object (CheckMsgpack: one linear pass, no allocation), and only then lets
// msgpack-c build its object tree under tight unpack limits. The check matters because
// msgpack-c allocates an array's or map's elements when it reads the header: limits alone still
// let nested headers each claim up to the limit before the input runs out. Once the structure
// is known to be complete, every element has at least one byte behind it, so the tree costs at
// most ~24 bytes (one msgpack::object) per input byte. Every exception msgpack-c throws is
// caught and becomes Corruption.
#ifndef PROPELLER_SCHEMAS_MSGPACK_UTIL_H_
#define PROPELLER_SCHEMAS_MSGPACK_UTIL_H_

#include <msgpack.hpp>

#include <bit>
#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "common/record.h"
#include "common/status.h"

namespace propeller::msgpack_util {

// msgpack-c writes through any object with write(const char*, size_t).
class StringSink {
 public:
  explicit StringSink(std::string* out) : out_(out) {}
  void write(const char* data, size_t n) { out_->append(data, n); }

 private:
  std::string* out_;
};

using Packer = msgpack::packer<StringSink>;

// The packer holds no buffer of its own, so writes through it and direct appends to the same
// string (PackFloat64, nested PackRecord) stay in order.
inline void PackString(Packer& pk, std::string_view s) {
  pk.pack_str(static_cast<uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

inline void PackBin(Packer& pk, std::string_view s) {
  pk.pack_bin(static_cast<uint32_t>(s.size()));
  pk.pack_bin_body(s.data(), static_cast<uint32_t>(s.size()));
}

// Appends `d` as msgpack float64 (0xcb + 8 bytes big-endian), even when it is a whole number.
void PackFloat64(std::string* out, double d);

// The FileRecord array and the update array of record_format.cc (field tables there).
void PackRecord(const FileRecord& record, std::string* out);
void PackUpdate(const Update& update, std::string* out);
// Decode one FileRecord / update array. Corruption (naming the field) on anything else.
Status DecodeRecordObject(const msgpack::object& o, FileRecord* out);
Status DecodeUpdateObject(const msgpack::object& o, Update* out);

// Typed reads of one msgpack object; false when the type or range does not fit.
inline bool GetU64(const msgpack::object& o, uint64_t* v) {
  if (o.type != msgpack::type::POSITIVE_INTEGER) return false;
  *v = o.via.u64;
  return true;
}

inline bool GetU32(const msgpack::object& o, uint32_t* v) {
  uint64_t u;
  if (!GetU64(o, &u) || u > std::numeric_limits<uint32_t>::max()) return false;
  *v = static_cast<uint32_t>(u);
  return true;
}

inline bool GetI64(const msgpack::object& o, int64_t* v) {
  if (o.type == msgpack::type::NEGATIVE_INTEGER) {
    *v = o.via.i64;
    return true;
  }
  uint64_t u;
  if (!GetU64(o, &u) || u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return false;
  }
  *v = static_cast<int64_t>(u);
  return true;
}

inline bool GetString(const msgpack::object& o, std::string* s) {
  if (o.type != msgpack::type::STR) return false;
  s->assign(o.via.str.ptr, o.via.str.size);
  return true;
}

// True for an array of at least `min_size` elements; sets *elems (null when empty) and *size.
inline bool GetArray(const msgpack::object& o, size_t min_size, const msgpack::object** elems,
                     size_t* size) {
  if (o.type != msgpack::type::ARRAY || o.via.array.size < min_size) return false;
  *elems = o.via.array.ptr;
  *size = o.via.array.size;
  return true;
}

// Corruption "<what>: field '<field>' <problem>".
Status Bad(std::string_view what, std::string_view field, std::string_view problem);

// OK when `bytes` is exactly one complete msgpack object with no byte after it; otherwise
// Corruption("<what>: ..."). Fails as soon as the headers read so far claim more elements or
// bytes than are left. Linear time, no allocation. Nesting depth is left to the unpacker.
Status CheckMsgpack(std::string_view what, std::string_view bytes);

// A msgpack zone kept per thread and cleared when released: a zone of its own cost every
// parse a malloc of msgpack's 8 KiB first chunk, which glibc's per-thread arenas answered by
// growing and trimming their heap (mprotect, page faults): about a fifth of the message cost
// of an in-process (direct://) call. Each thread that decodes keeps one 8 KiB chunk. get() is
// null while another ThreadZone of this thread holds it (a decode that parses again).
class ThreadZone {
 public:
  ThreadZone();
  ~ThreadZone();
  ThreadZone(const ThreadZone&) = delete;
  ThreadZone& operator=(const ThreadZone&) = delete;
  msgpack::zone* get() const { return zone_; }

 private:
  msgpack::zone* zone_;
};

// Parses exactly one msgpack object spanning all of `bytes` and runs `decode` on it (a
// callable taking const msgpack::object& and returning Status). No array or map may hold more
// than `max_elements` elements, nor nest more than `max_depth` containers. Strings, bins and
// exts in the object point into `bytes` (not copied), so `decode` may keep string_views into
// `bytes` but nothing into the object.
template <typename Fn>
Status ParseAndDecode(std::string_view what, std::string_view bytes, size_t max_elements,
                      size_t max_depth, Fn&& decode) {
  PROPELLER_RETURN_IF_ERROR(CheckMsgpack(what, bytes));
  try {
    const size_t n = bytes.size();
    const size_t elems = max_elements < n ? max_elements : n;
    const msgpack::unpack_limit limit(/*array=*/elems, /*map=*/elems, /*str=*/n, /*bin=*/n,
                                      /*ext=*/n, /*depth=*/max_depth);
    // The object lives in this thread's shared zone (ThreadZone), or a zone of its own when
    // that one is in use by an outer decode on this thread.
    std::optional<msgpack::zone> own_zone;
    ThreadZone shared;
    msgpack::zone* zone = shared.get() != nullptr ? shared.get() : &own_zone.emplace();
    size_t offset = 0;
    const msgpack::unpack_reference_func reference_input =
        [](msgpack::type::object_type, size_t, void*) { return true; };
    const msgpack::object object = msgpack::unpack(*zone, bytes.data(), n, offset,
                                                   reference_input, /*user_data=*/nullptr, limit);
    if (offset != n) {  // CheckMsgpack rules this out; kept as a guard
      return Status::Corruption(std::string(what) + ": " + std::to_string(n - offset) +
                                " trailing bytes");
    }
    return decode(object);
  } catch (const std::exception& e) {
    return Status::Corruption(std::string(what) + ": malformed msgpack (" + e.what() + ")");
  } catch (...) {
    return Status::Corruption(std::string(what) + ": malformed msgpack");
  }
}

// Appends msgpack to a std::string directly, in exactly the forms msgpack-c's packer chooses
// (the smallest for every integer, string and array header), for the record encoder on the
// commit path, where the packer's one append per token cost more than the rest of encoding.
// record_format_test checks its bytes against msgpack-c's packer.
class Writer {
 public:
  explicit Writer(std::string* out) : out_(out) {}

  void Uint(uint64_t v) {
    if (v < 128) {
      Byte(static_cast<uint8_t>(v));
    } else if (v < 256) {
      Tagged(0xcc, v, 1);
    } else if (v < 65536) {
      Tagged(0xcd, v, 2);
    } else if (v <= 0xffffffffull) {
      Tagged(0xce, v, 4);
    } else {
      Tagged(0xcf, v, 8);
    }
  }
  void Int(int64_t v) {
    if (v >= 0) {
      Uint(static_cast<uint64_t>(v));
    } else if (v >= -32) {
      Byte(static_cast<uint8_t>(v));
    } else if (v >= -128) {
      Tagged(0xd0, static_cast<uint64_t>(v), 1);
    } else if (v >= -32768) {
      Tagged(0xd1, static_cast<uint64_t>(v), 2);
    } else if (v >= -2147483648ll) {
      Tagged(0xd2, static_cast<uint64_t>(v), 4);
    } else {
      Tagged(0xd3, static_cast<uint64_t>(v), 8);
    }
  }
  void Str(std::string_view s) {
    const uint64_t n = s.size();
    if (n < 32) {
      Byte(static_cast<uint8_t>(0xa0 | n));
    } else if (n < 256) {
      Tagged(0xd9, n, 1);
    } else if (n < 65536) {
      Tagged(0xda, n, 2);
    } else {
      Tagged(0xdb, n, 4);
    }
    out_->append(s);
  }
  void Array(uint64_t n) {
    if (n < 16) {
      Byte(static_cast<uint8_t>(0x90 | n));
    } else if (n < 65536) {
      Tagged(0xdc, n, 2);
    } else {
      Tagged(0xdd, n, 4);
    }
  }
  void Float64(double d) { Tagged(0xcb, std::bit_cast<uint64_t>(d), 8); }

 private:
  void Byte(uint8_t b) { out_->push_back(static_cast<char>(b)); }
  // A type byte followed by the low `width` bytes of v, big-endian.
  void Tagged(uint8_t tag, uint64_t v, int width) {
    char buf[9];
    buf[0] = static_cast<char>(tag);
    for (int i = width; i >= 1; --i) {
      buf[i] = static_cast<char>(v & 0xff);
      v >>= 8;
    }
    out_->append(buf, static_cast<size_t>(width) + 1);
  }

  std::string* out_;
};

// A bounds-checked forward reader over msgpack bytes, for decoders that read a known layout
// straight into their output (no object tree, no allocation of its own): the record decoder
// on the commit and search paths, where building msgpack-c's tree cost more than the rest of
// decoding. Every Read* returns false when the next object is not of the asked kind, does not
// fit, or runs past the end; the reader's position is then unspecified and the caller gives
// up. A header claiming more elements than bytes remain fails at once (each element takes at
// least one byte), so garbage never drives a long loop or a large allocation.
class Reader {
 public:
  explicit Reader(std::string_view bytes)
      : p_(reinterpret_cast<const uint8_t*>(bytes.data())), end_(p_ + bytes.size()) {}

  size_t remaining() const { return static_cast<size_t>(end_ - p_); }

  // Any integer form whose value is >= 0 (msgpack-c's POSITIVE_INTEGER).
  bool ReadUint(uint64_t* v) {
    int64_t i;
    bool negative;
    if (!ReadInteger(v, &i, &negative)) return false;
    return !negative;
  }
  bool ReadU32(uint32_t* v) {
    uint64_t u;
    if (!ReadUint(&u) || u > std::numeric_limits<uint32_t>::max()) return false;
    *v = static_cast<uint32_t>(u);
    return true;
  }
  // Any integer form whose value fits int64.
  bool ReadInt(int64_t* v) {
    uint64_t u;
    bool negative;
    if (!ReadInteger(&u, v, &negative)) return false;
    if (negative) return true;
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    *v = static_cast<int64_t>(u);
    return true;
  }
  bool ReadStr(std::string_view* s) {
    if (p_ == end_) return false;
    const uint8_t b = *p_;
    uint64_t len;
    if (b >= 0xa0 && b <= 0xbf) {
      len = b & 0x1fu;
      ++p_;
    } else if (b >= 0xd9 && b <= 0xdb) {
      ++p_;
      if (!ReadBigEndian(size_t{1} << (b - 0xd9), &len)) return false;
    } else {
      return false;
    }
    if (len > remaining()) return false;
    *s = std::string_view(reinterpret_cast<const char*>(p_), len);
    p_ += len;
    return true;
  }
  // An array header; *n elements follow.
  bool ReadArray(uint64_t* n) {
    if (p_ == end_) return false;
    const uint8_t b = *p_;
    if (b >= 0x90 && b <= 0x9f) {
      *n = b & 0x0fu;
      ++p_;
    } else if (b == 0xdc || b == 0xdd) {
      ++p_;
      if (!ReadBigEndian(b == 0xdc ? 2 : 4, n)) return false;
    } else {
      return false;
    }
    return *n <= remaining();
  }
  bool AtInteger() const {
    if (p_ == end_) return false;
    const uint8_t b = *p_;
    return b <= 0x7f || b >= 0xe0 || (b >= 0xcc && b <= 0xd3);
  }
  bool AtFloat() const { return p_ != end_ && (*p_ == 0xca || *p_ == 0xcb); }
  bool AtStr() const {
    return p_ != end_ && ((*p_ >= 0xa0 && *p_ <= 0xbf) || (*p_ >= 0xd9 && *p_ <= 0xdb));
  }
  // float32 or float64, as a double.
  bool ReadFloat(double* d) {
    if (p_ == end_) return false;
    const uint8_t b = *p_++;
    uint64_t bits;
    if (b == 0xca) {
      if (!ReadBigEndian(4, &bits)) return false;
      *d = std::bit_cast<float>(static_cast<uint32_t>(bits));
      return true;
    }
    if (b == 0xcb) {
      if (!ReadBigEndian(8, &bits)) return false;
      *d = std::bit_cast<double>(bits);
      return true;
    }
    return false;
  }
  // Skips one complete object of any type. `depth` is the nesting depth the object sits at
  // (1 = top level); a container deeper than max_depth fails, as msgpack-c's unpack limit.
  bool Skip(size_t depth, size_t max_depth);

 private:
  // An integer of any form: non-negative values in *u, negative ones in *i.
  bool ReadInteger(uint64_t* u, int64_t* i, bool* negative) {
    if (p_ == end_) return false;
    const uint8_t b = *p_++;
    if (b <= 0x7f) {
      *u = b;
      *negative = false;
      return true;
    }
    if (b >= 0xe0) {
      *i = static_cast<int8_t>(b);
      *negative = true;
      return true;
    }
    if (b >= 0xcc && b <= 0xcf) {  // uint 8/16/32/64
      *negative = false;
      return ReadBigEndian(size_t{1} << (b - 0xcc), u);
    }
    if (b >= 0xd0 && b <= 0xd3) {  // int 8/16/32/64: sign-extend
      const size_t width = size_t{1} << (b - 0xd0);
      uint64_t raw;
      if (!ReadBigEndian(width, &raw)) return false;
      int64_t v;
      switch (width) {
        case 1: v = static_cast<int8_t>(raw); break;
        case 2: v = static_cast<int16_t>(raw); break;
        case 4: v = static_cast<int32_t>(raw); break;
        default: v = static_cast<int64_t>(raw); break;
      }
      *negative = v < 0;
      if (*negative) {
        *i = v;
      } else {
        *u = static_cast<uint64_t>(v);
      }
      return true;
    }
    return false;
  }
  bool ReadBigEndian(size_t width, uint64_t* v) {
    if (remaining() < width) return false;
    uint64_t x = 0;
    for (size_t k = 0; k < width; ++k) x = (x << 8) | p_[k];
    p_ += width;
    *v = x;
    return true;
  }

  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace propeller::msgpack_util

#endif  // PROPELLER_SCHEMAS_MSGPACK_UTIL_H_
