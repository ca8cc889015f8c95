// Shared msgpack helpers of schemas/ (contract in msgpack_util.h).
#include "schemas/msgpack_util.h"

#include <cstring>

namespace propeller::msgpack_util {

void PackFloat64(std::string* out, double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof(bits));
  char buf[9];
  buf[0] = static_cast<char>(0xcb);
  for (int i = 8; i >= 1; --i) {
    buf[i] = static_cast<char>(bits & 0xFF);
    bits >>= 8;
  }
  out->append(buf, sizeof(buf));
}

namespace {
thread_local msgpack::zone t_zone;
thread_local bool t_zone_held = false;
}  // namespace

ThreadZone::ThreadZone() : zone_(t_zone_held ? nullptr : &t_zone) {
  if (zone_ != nullptr) t_zone_held = true;
}

ThreadZone::~ThreadZone() {
  if (zone_ == nullptr) return;
  zone_->clear();  // keeps the first chunk for the next parse, frees the rest
  t_zone_held = false;
}

Status Bad(std::string_view what, std::string_view field, std::string_view problem) {
  std::string msg(what);
  msg += ": field '";
  msg += field;
  msg += "' ";
  msg += problem;
  return Status::Corruption(msg);
}

// Walks the msgpack byte layout (type byte, then length/count bytes, then payload) keeping only
// the number of objects still owed by the containers opened so far: every owed object needs at
// least one more byte, which bounds the count by the input size and rejects huge claims at
// their header.
bool Reader::Skip(size_t depth, size_t max_depth) {
  if (p_ == end_) return false;
  const uint8_t b = *p_;
  uint64_t children = 0;  // elements of a container (a map's keys and values both count)
  uint64_t len = 0;
  if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
    ++p_;  // fixint, negative fixint, nil, false, true
    return true;
  }
  if (b <= 0x8f) {
    ++p_;
    children = 2 * uint64_t{b & 0x0fu};
    if (children > remaining()) return false;
  } else if (b <= 0x9f || b == 0xdc || b == 0xdd) {
    if (!ReadArray(&children)) return false;
  } else if (b <= 0xbf || (b >= 0xd9 && b <= 0xdb)) {
    std::string_view unused;
    return ReadStr(&unused);
  } else {
    ++p_;
    switch (b) {
      case 0xc4: case 0xc5: case 0xc6:  // bin 8/16/32
        if (!ReadBigEndian(size_t{1} << (b - 0xc4), &len)) return false;
        break;
      case 0xc7: case 0xc8: case 0xc9:  // ext 8/16/32: length, type byte, data
        if (!ReadBigEndian(size_t{1} << (b - 0xc7), &len)) return false;
        len += 1;
        break;
      case 0xca: len = 4; break;  // float32
      case 0xcb: len = 8; break;  // float64
      case 0xcc: case 0xcd: case 0xce: case 0xcf:  // uint 8/16/32/64
        len = size_t{1} << (b - 0xcc);
        break;
      case 0xd0: case 0xd1: case 0xd2: case 0xd3:  // int 8/16/32/64
        len = size_t{1} << (b - 0xd0);
        break;
      case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8:  // fixext 1/2/4/8/16 + type
        len = (size_t{1} << (b - 0xd4)) + 1;
        break;
      case 0xde: case 0xdf:  // map 16/32
        if (!ReadBigEndian(b == 0xde ? 2 : 4, &children)) return false;
        children *= 2;
        if (children > remaining()) return false;
        break;
      default:  // 0xc1, never used by msgpack
        return false;
    }
    if (b != 0xde && b != 0xdf) {
      if (len > remaining()) return false;
      p_ += len;
      return true;
    }
  }
  // A container: its elements one level deeper.
  if (depth > max_depth) return false;
  for (uint64_t k = 0; k < children; ++k) {
    if (!Skip(depth + 1, max_depth)) return false;
  }
  return true;
}

Status CheckMsgpack(std::string_view what, std::string_view bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  size_t pos = 0;
  uint64_t pending = 1;  // objects still to read; starts with the top-level one
  auto fail = [&](std::string_view problem) {
    return Status::Corruption(std::string(what) + ": malformed msgpack (" + std::string(problem) +
                              " at byte " + std::to_string(pos) + ")");
  };
  // Reads a k-byte big-endian length at pos.
  auto read_len = [&](size_t k, uint64_t* len) {
    if (n - pos < k) return false;
    uint64_t v = 0;
    for (size_t i = 0; i < k; ++i) v = (v << 8) | p[pos + i];
    pos += k;
    *len = v;
    return true;
  };
  while (pending > 0) {
    if (pos >= n) return fail("truncated");
    const uint8_t b = p[pos++];
    --pending;
    uint64_t skip = 0;      // payload bytes after the header
    uint64_t children = 0;  // objects the header opens
    uint64_t len = 0;
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
      // fixint, negative fixint, nil, false, true: the type byte is the whole object
    } else if (b <= 0x8f) {
      children = 2 * uint64_t{b & 0x0fu};
    } else if (b <= 0x9f) {
      children = b & 0x0fu;
    } else if (b <= 0xbf) {
      skip = b & 0x1fu;
    } else {
      switch (b) {
        case 0xc4: case 0xc5: case 0xc6:  // bin 8/16/32
        case 0xd9: case 0xda: case 0xdb: {  // str 8/16/32
          const size_t width = (b <= 0xc6) ? (size_t{1} << (b - 0xc4)) : (size_t{1} << (b - 0xd9));
          if (!read_len(width, &len)) return fail("truncated length");
          skip = len;
          break;
        }
        case 0xc7: case 0xc8: case 0xc9:  // ext 8/16/32: length, type byte, data
          if (!read_len(size_t{1} << (b - 0xc7), &len)) return fail("truncated length");
          skip = len + 1;
          break;
        case 0xca: skip = 4; break;  // float32
        case 0xcb: skip = 8; break;  // float64
        case 0xcc: case 0xcd: case 0xce: case 0xcf:  // uint 8/16/32/64
          skip = size_t{1} << (b - 0xcc);
          break;
        case 0xd0: case 0xd1: case 0xd2: case 0xd3:  // int 8/16/32/64
          skip = size_t{1} << (b - 0xd0);
          break;
        case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8:  // fixext 1/2/4/8/16 + type
          skip = (size_t{1} << (b - 0xd4)) + 1;
          break;
        case 0xdc: case 0xdd:  // array 16/32
          if (!read_len(b == 0xdc ? 2 : 4, &len)) return fail("truncated count");
          children = len;
          break;
        case 0xde: case 0xdf:  // map 16/32
          if (!read_len(b == 0xde ? 2 : 4, &len)) return fail("truncated count");
          children = 2 * len;
          break;
        default:  // 0xc1, never used by msgpack
          return fail("invalid type byte 0xc1");
      }
    }
    if (skip > n - pos) return fail("length beyond the end");
    pos += skip;
    // Every object still owed needs at least one byte (no overflow: children < 2^33).
    if (pending + children > n - pos) return fail("count beyond the end");
    pending += children;
  }
  if (pos != n) {
    return Status::Corruption(std::string(what) + ": " + std::to_string(n - pos) +
                              " trailing bytes");
  }
  return Status::OK();
}

}  // namespace propeller::msgpack_util
