// Private helpers shared by the rpc transport's implementation files (not part of the API).
//
// Threading: every function here may be called from any thread.
#ifndef PROPELLER_COMMON_RPC_RPC_INTERNAL_H_
#define PROPELLER_COMMON_RPC_RPC_INTERNAL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include <zmq.hpp>

#include "common/rpc/rpc.h"
#include "common/status.h"

namespace propeller::rpc::internal {

// Wire constants (see the frame layout in rpc.h).
inline constexpr size_t kRequestIdBytes = 8;
inline constexpr uint8_t kKindFinal = 0;
inline constexpr uint8_t kKindPartial = 1;
// Z85 text of a 32-byte CURVE key.
inline constexpr size_t kZ85KeyChars = 40;
inline constexpr size_t kBinaryKeyBytes = 32;

// The process-wide ZeroMQ context, created on first use and never destroyed: inproc://
// endpoints and the ZAP handler only work between sockets of one context, and terminating a
// context at static-destruction time would wait for every socket still open in other threads.
zmq::context_t& Context();

// Big-endian request ids.
void EncodeRequestId(uint64_t id, char out[kRequestIdBytes]);
uint64_t DecodeRequestId(const void* bytes);

// True when `key` is 40 valid Z85 characters (a 32-byte CURVE key). On success and when `binary`
// is not null, stores the 32 decoded bytes there.
bool DecodeZ85Key(std::string_view key, std::string* binary);
// The Z85 text of a 32-byte key.
std::string EncodeZ85Key(std::string_view binary);

// Sets the options every rpc socket gets: linger 0, ZMQ_MAXMSGSIZE and the heartbeats.
// Throws zmq::error_t (callers are inside the adapter's try blocks).
void SetCommonOptions(zmq::socket_t& socket, size_t max_message_bytes, int heartbeat_interval_ms,
                      int heartbeat_timeout_ms);

// A Status for a failed ZeroMQ call: "<context>: <zmq_strerror>".
Status ZmqStatus(StatusCode code, std::string_view context, const zmq::error_t& error);

// ZAP (ZeroMQ authentication protocol) registry, served by one handler thread per process
// bound on inproc://zeromq.zap.01 of Context(). Each CURVE server uses its own ZAP domain so
// servers with different allowlists can share the process.
//
// A fresh, process-unique domain name.
std::string NewZapDomain();
// Starts the handler if needed (once per process; it then lives until exit) and admits the
// clients whose Z85 public keys are listed for `domain`, replacing an earlier list.
// REQUIRES: every key valid Z85. Errors: Internal when the handler cannot be bound.
Status RegisterZapDomain(const std::string& domain, const std::vector<std::string>& z85_keys);
// Forgets `domain`: later handshakes for it are refused.
void UnregisterZapDomain(const std::string& domain);

// direct:// endpoints (rpc.h): a process-wide registry of handlers called on the caller's
// thread.
struct DirectTarget {
  Handler handler;
  std::shared_mutex mu;  // shared by running calls; exclusive to close
  bool closed = false;   // Under mu.
};
bool IsDirectEndpoint(std::string_view endpoint);
// IOError when the name is taken.
Status RegisterDirect(const std::string& endpoint, std::shared_ptr<DirectTarget> target);
// Removes the endpoint; returns after the calls running on it have returned.
void UnregisterDirect(const std::string& endpoint);
// Runs the handler of `endpoint` on this thread. Unavailable when nothing is registered there;
// Aborted when `on_chunk` returned false.
Result<std::string> CallDirect(const std::string& endpoint, std::string_view request,
                               const std::function<bool(std::string_view)>& on_chunk);

}  // namespace propeller::rpc::internal

#endif  // PROPELLER_COMMON_RPC_RPC_INTERNAL_H_
