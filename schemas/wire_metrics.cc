#include "schemas/wire_metrics.h"

#include <string>
#include <vector>

namespace propeller::wire {
namespace {

constexpr size_t kMaxTypeValue = 64;  // MsgType::kPing, the largest

}  // namespace

size_t TypeIndex(MsgType type) {
  const auto v = static_cast<size_t>(type);
  if (v > kMaxTypeValue || std::string_view(MsgTypeName(type)) == "unknown") return 0;
  return v;
}

metrics::CounterVec MakeTypeCounters() {
  std::vector<std::string> names(kMaxTypeValue + 1, "unknown");
  for (size_t v = 1; v <= kMaxTypeValue; ++v) {
    const std::string name = MsgTypeName(static_cast<MsgType>(v));
    // Values that are no message type stay "unknown"; TypeIndex never returns them.
    if (name != "unknown") names[v] = name;
  }
  return metrics::CounterVec("type", std::move(names));
}

metrics::CounterVec MakeCodeCounters() {
  std::vector<std::string> names;
  for (int c = 0; c <= static_cast<int>(StatusCode::kRedirect); ++c) {
    std::string name = StatusCodeName(static_cast<StatusCode>(c));
    for (char& ch : name) {
      if (ch == ' ') ch = '_';
    }
    names.push_back(std::move(name));
  }
  return metrics::CounterVec("code", std::move(names));
}

int PeekReplyCode(std::string_view reply) {
  // 0x95: a fixarray of 5; then the version, an unsigned integer (a positive fixint, or
  // 0xcc/0xcd/0xce and 1/2/4 bytes: 1000 is 0xcd 0x03 0xe8), then the code, a positive fixint.
  if (reply.size() < 3 || static_cast<unsigned char>(reply[0]) != 0x95) return -1;
  size_t pos = 2;
  switch (static_cast<unsigned char>(reply[1])) {
    case 0xcc: pos += 1; break;
    case 0xcd: pos += 2; break;
    case 0xce: pos += 4; break;
    default:
      if (static_cast<unsigned char>(reply[1]) > 0x7f) return -1;
  }
  if (pos >= reply.size()) return -1;
  const auto code = static_cast<unsigned char>(reply[pos]);
  return code > 0x7f ? -1 : code;
}

}  // namespace propeller::wire
