// The process's ZAP handler (RFC 27, ZeroMQ authentication protocol).
//
// Without a handler bound on inproc://zeromq.zap.01, a CURVE server admits every client that
// knows its public key. libzmq sends each CURVE handshake here as a request carrying the
// server socket's ZAP domain and the client's 32-byte public key; we answer 200 when the key is
// in that domain's allowlist and 400 otherwise. The admitted key goes back as the ZAP user id,
// so the server reads it from every message of that connection ("User-Id" metadata).
//
// One handler per context is all ZeroMQ allows, hence one domain per Server. The handler
// thread is started on the first CURVE server and lives until the process exits (like the
// context): it only ever blocks in recv on a socket of the never-terminated context.
//
// NULL-mechanism connections reach the handler only on sockets with a ZAP domain, which only
// CURVE servers have; they are refused, as is any other mechanism.
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/logging.h"
#include "common/rpc/rpc_internal.h"

namespace propeller::rpc::internal {
namespace {

constexpr char kZapEndpoint[] = "inproc://zeromq.zap.01";
// A ZAP request has 7 frames for CURVE; anything longer is not from libzmq and is refused
// without keeping the excess.
constexpr size_t kMaxZapFrames = 16;

struct ZapRegistry {
  std::mutex mu;
  // domain -> admitted binary public keys. Under mu.
  std::map<std::string, std::set<std::string>> domains;
};

// Leaked like the context: the handler thread may read it until the process exits.
ZapRegistry& Registry() {
  static ZapRegistry* const registry = new ZapRegistry;
  return *registry;
}

bool IsAdmitted(const std::string& domain, const std::string& binary_key) {
  ZapRegistry& registry = Registry();
  std::lock_guard<std::mutex> lock(registry.mu);
  auto it = registry.domains.find(domain);
  return it != registry.domains.end() && it->second.count(binary_key) != 0;
}

std::string FrameString(const zmq::message_t& frame) {
  return std::string(static_cast<const char*>(frame.data()), frame.size());
}

// Builds the reply to one request (frames as received, at most kMaxZapFrames of them).
// Reply frames: version, request id, status code, status text, user id, metadata.
std::vector<std::string> Answer(const std::vector<zmq::message_t>& request) {
  std::string request_id = request.size() > 1 ? FrameString(request[1]) : std::string();
  auto refuse = [&](const char* why) {
    return std::vector<std::string>{"1.0", request_id, "400", why, "", ""};
  };
  // version, request id, domain, address, routing id, mechanism, credentials...
  if (request.size() < 6 || FrameString(request[0]) != "1.0") return refuse("bad ZAP request");
  const std::string domain = FrameString(request[2]);
  const std::string mechanism = FrameString(request[5]);
  if (mechanism != "CURVE") return refuse("only CURVE clients are admitted");
  if (request.size() != 7 || request[6].size() != kBinaryKeyBytes) {
    return refuse("bad CURVE credentials");
  }
  const std::string key = FrameString(request[6]);
  if (!IsAdmitted(domain, key)) return refuse("client key not allowed");
  return {"1.0", request_id, "200", "OK", EncodeZ85Key(key), ""};
}

void ServeZap(zmq::socket_t* socket) {
  for (;;) {
    try {
      std::vector<zmq::message_t> request;
      bool more = true;
      while (more) {
        zmq::message_t frame;
        if (!socket->recv(frame, zmq::recv_flags::none)) break;
        more = frame.more();
        if (request.size() < kMaxZapFrames) request.push_back(std::move(frame));
      }
      // A REP socket must answer every request before it can receive the next one.
      std::vector<std::string> reply = Answer(request);
      for (size_t i = 0; i < reply.size(); ++i) {
        const auto flags = i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
        (void)socket->send(zmq::buffer(reply[i]), flags);
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;  // cannot happen: the context is never terminated
      if (e.num() != EINTR) Log(LogLevel::kWarning, "rpc: ZAP handler: %s", e.what());
    }
  }
}

// Binds the handler socket and starts its thread, once. The result of the first attempt is
// kept: a second bind would fail the same way.
Status StartZapHandler() {
  static const Status started = []() -> Status {
    try {
      auto socket = std::make_unique<zmq::socket_t>(Context(), zmq::socket_type::rep);
      socket->set(zmq::sockopt::linger, 0);
      socket->bind(kZapEndpoint);
      std::thread(ServeZap, socket.release()).detach();
      return Status::OK();
    } catch (const zmq::error_t& e) {
      return ZmqStatus(StatusCode::kInternal, "cannot bind the ZAP handler", e);
    }
  }();
  return started;
}

}  // namespace

std::string NewZapDomain() {
  static std::atomic<uint64_t> next{1};
  return "propeller-rpc-" + std::to_string(next.fetch_add(1));
}

Status RegisterZapDomain(const std::string& domain, const std::vector<std::string>& z85_keys) {
  PROPELLER_RETURN_IF_ERROR(StartZapHandler());
  std::set<std::string> keys;
  for (const std::string& z85 : z85_keys) {
    std::string binary;
    if (!DecodeZ85Key(z85, &binary)) return Status::InvalidArgument("malformed client key");
    keys.insert(std::move(binary));
  }
  ZapRegistry& registry = Registry();
  std::lock_guard<std::mutex> lock(registry.mu);
  registry.domains[domain] = std::move(keys);
  return Status::OK();
}

void UnregisterZapDomain(const std::string& domain) {
  ZapRegistry& registry = Registry();
  std::lock_guard<std::mutex> lock(registry.mu);
  registry.domains.erase(domain);
}

}  // namespace propeller::rpc::internal
