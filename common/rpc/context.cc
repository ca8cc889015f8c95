// The process-wide ZeroMQ context and small helpers shared by server.cc, channel.cc, zap.cc.
#include <algorithm>
#include <climits>
#include <cstring>
#include <string>

#include "common/rpc/rpc_internal.h"

namespace propeller::rpc::internal {

zmq::context_t& Context() {
  // Deliberately leaked (see rpc_internal.h). The function-local static makes creation
  // thread-safe; a raw pointer has no destructor to run at exit.
  static zmq::context_t* const context = [] {
    auto* ctx = new zmq::context_t(/*io_threads=*/1);
    // The default (1023) is reachable by a client holding pools to many nodes plus servers.
    zmq_ctx_set(ctx->handle(), ZMQ_MAX_SOCKETS, 4096);
    return ctx;
  }();
  return *context;
}

void EncodeRequestId(uint64_t id, char out[kRequestIdBytes]) {
  for (size_t i = 0; i < kRequestIdBytes; ++i) {
    out[i] = static_cast<char>((id >> (8 * (kRequestIdBytes - 1 - i))) & 0xff);
  }
}

uint64_t DecodeRequestId(const void* bytes) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  uint64_t id = 0;
  for (size_t i = 0; i < kRequestIdBytes; ++i) id = (id << 8) | p[i];
  return id;
}

bool DecodeZ85Key(std::string_view key, std::string* binary) {
  if (key.size() != kZ85KeyChars) return false;
  // zmq_z85_decode wants a NUL-terminated string and rejects characters outside the alphabet.
  const std::string text(key);
  uint8_t out[kBinaryKeyBytes];
  if (zmq_z85_decode(out, text.c_str()) == nullptr) return false;
  if (binary != nullptr) binary->assign(reinterpret_cast<const char*>(out), sizeof out);
  return true;
}

std::string EncodeZ85Key(std::string_view binary) {
  char text[kZ85KeyChars + 1];
  if (binary.size() != kBinaryKeyBytes ||
      zmq_z85_encode(text, reinterpret_cast<const uint8_t*>(binary.data()), binary.size()) ==
          nullptr) {
    return std::string();
  }
  return std::string(text, kZ85KeyChars);
}

void SetCommonOptions(zmq::socket_t& socket, size_t max_message_bytes, int heartbeat_interval_ms,
                      int heartbeat_timeout_ms) {
  socket.set(zmq::sockopt::linger, 0);
  const int64_t max_size = max_message_bytes > static_cast<size_t>(INT64_MAX)
                               ? int64_t{-1}
                               : static_cast<int64_t>(max_message_bytes);
  socket.set(zmq::sockopt::maxmsgsize, max_size);
  if (heartbeat_interval_ms > 0) {
    socket.set(zmq::sockopt::heartbeat_ivl, heartbeat_interval_ms);
    if (heartbeat_timeout_ms > 0) {
      socket.set(zmq::sockopt::heartbeat_timeout, heartbeat_timeout_ms);
      // Tells the remote side to drop us as well when our pings stop (deciseconds on the wire;
      // ZeroMQ caps it at 6553599 ms).
      socket.set(zmq::sockopt::heartbeat_ttl, std::min(heartbeat_timeout_ms, 6553599));
    }
  }
}

Status ZmqStatus(StatusCode code, std::string_view context, const zmq::error_t& error) {
  std::string msg(context);
  msg += ": ";
  msg += error.what();
  return Status(code, msg);
}

}  // namespace propeller::rpc::internal
