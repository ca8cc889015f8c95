// rpc: the request/reply transport every Propeller process uses (DESIGN §2, §10): ZeroMQ
// ROUTER (server) and DEALER (client) sockets moving opaque byte strings. What the bytes mean
// is schemas/messages.h's business; this layer only frames, routes, times out and secures them.
//
// Endpoints are ZeroMQ addresses, handled by the same code: "tcp://127.0.0.1:7470" (port 0 =
// any free port; Server::endpoint() reports the one bound), "ipc:///run/propeller/q.sock",
// "inproc://name" (same process only).
//
// Frames on the wire (after ZeroMQ's own routing-id frame on the ROUTER side):
//   request: [request id: 8 bytes, big-endian] [body]
//   reply:   [request id: 8 bytes] [kind: 1 byte, 0 = final, 1 = partial] [body]
// A streamed reply is any number of partial frames followed by exactly one final frame. Frames
// that do not have this shape are dropped (and counted); a peer cannot crash or stall a server
// with them. Messages beyond max_message_bytes make ZeroMQ disconnect the sender.
//
// Security (DESIGN §10): with `curve` set, a Server is a CURVE server and admits only clients
// whose public key is in `allowed_clients` (a ZAP handler checks every handshake; without one
// CURVE would admit anyone who knows the server key). Without keys the transport authenticates
// nobody, so daemons bind loopback unless told otherwise. On ipc:// endpoints the kernel's peer
// credentials (SO_PEERCRED) are reported in PeerInfo.
//
// Threading: a Server runs one I/O thread plus `worker_threads` handler threads; the handler is
// called concurrently from the workers. A Channel may be used by any number of threads at once
// (each call takes a socket from a small pool). All ZeroMQ sockets have linger 0, so closing
// never hangs on an absent peer. No exception from cppzmq escapes this component.
#ifndef PROPELLER_COMMON_RPC_RPC_H_
#define PROPELLER_COMMON_RPC_RPC_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace propeller::rpc {

inline constexpr size_t kDefaultMaxMessageBytes = 64u << 20;

// A CURVE key pair in Z85 text (40 characters each). secret_key may be empty for a peer's
// public key alone.
struct CurveKeys {
  std::string public_key;
  std::string secret_key;
};

// A fresh key pair. NotSupported when libzmq was built without CURVE.
Result<CurveKeys> GenerateCurveKeys();
// Key files are text: "public <z85>\n" and, for a key pair, "secret <z85>\n"; '#' starts a
// comment line. Written with mode 0600. ReadKeyFile: NotFound, InvalidArgument (malformed, with
// the line number).
Status WriteKeyFile(const std::string& path, const CurveKeys& keys);
Result<CurveKeys> ReadKeyFile(const std::string& path);
// An allowlist file: one "public <z85>" line per admitted client (key-pair files work too:
// their secret line is ignored).
Result<std::vector<std::string>> ReadAllowlistFile(const std::string& path);

// What the transport knows about the sender of one request.
struct PeerInfo {
  std::string curve_public_key;  // Z85; empty without CURVE
  // From the kernel on ipc:// endpoints (SO_PEERCRED); unset on tcp:// and inproc://.
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  std::optional<uint32_t> pid;
};

// Lets a handler send the partial frames of a streamed reply before it returns the final one.
class ReplyStream {
 public:
  virtual ~ReplyStream() = default;
  // Queues `chunk` as a partial reply frame; blocks while 64 of this request's frames wait
  // for a slow client. Returns false when the server is stopping or the client has gone away
  // (the handler should then return quickly; its final reply is discarded).
  virtual bool Send(std::string_view chunk) = 0;
};

// Handles one request; returns the final reply body. Called on a worker thread; must not throw.
using Handler =
    std::function<std::string(std::string_view request, const PeerInfo& peer, ReplyStream& out)>;

struct ServerOptions {
  std::string endpoint;  // REQUIRED
  // More endpoints for the same handler, e.g. an inproc:// alias, or a direct://NAME one: a
  // Channel to direct://NAME in this process runs the handler on the calling thread — no
  // socket, no thread handoff (embedded mode; PeerInfo is empty, as for inproc://).
  // endpoint() reports the main one.
  std::vector<std::string> extra_endpoints;
  int worker_threads = 4;
  size_t max_message_bytes = kDefaultMaxMessageBytes;
  std::optional<CurveKeys> curve;            // server key pair (secret required)
  std::vector<std::string> allowed_clients;  // Z85 public keys; with `curve`, required non-empty
  // ZeroMQ-level heartbeats (ZMQ_HEARTBEAT_*): a silent peer connection is dropped.
  int heartbeat_interval_ms = 1000;
  int heartbeat_timeout_ms = 5000;
};

// Counters for tests and status pages.
struct ServerStats {
  uint64_t requests = 0;
  uint64_t malformed_frames = 0;  // dropped without a reply
  uint64_t replies_dropped = 0;   // the peer had gone away
};

class Server {
 public:
  // Binds options.endpoint and starts serving. Errors: InvalidArgument (bad options or
  // endpoint), IOError (bind failed: address in use, permission), NotSupported (CURVE).
  static Result<std::unique_ptr<Server>> Start(const ServerOptions& options, Handler handler);
  // Stops accepting, waits for running handlers to return, closes the socket.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The bound endpoint, with a wildcard port resolved ("tcp://127.0.0.1:41234").
  const std::string& endpoint() const;
  ServerStats stats() const;

 private:
  class Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct ChannelOptions {
  std::string endpoint;  // REQUIRED: the server's
  size_t max_message_bytes = kDefaultMaxMessageBytes;
  std::optional<CurveKeys> curve;  // this client's key pair; enables CURVE
  std::string server_public_key;   // REQUIRED with `curve`
  int heartbeat_interval_ms = 1000;
  int heartbeat_timeout_ms = 5000;
};

struct CallOptions {
  // How long to wait for the next frame of the reply (a streamed reply may take longer in
  // total as long as frames keep coming).
  int64_t timeout_ms = 5000;
  // A request that is safe to run twice is re-sent after a timeout, on a fresh socket, at
  // most `retries` times. Non-idempotent requests are never re-sent.
  bool idempotent = false;
  int retries = 2;
};

class Channel {
 public:
  // Creates a channel to options.endpoint. Does not wait for the connection (ZeroMQ connects
  // in the background and reconnects by itself). InvalidArgument for bad options.
  static Result<std::unique_ptr<Channel>> Connect(const ChannelOptions& options);
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Sends `request` and waits for its reply. Partial frames go to `on_chunk` in order (return
  // false from it to abandon the call: the result is then Aborted); the final frame's body is
  // returned. Errors: Timeout (no frame within timeout_ms, after the allowed retries),
  // Unavailable (no connection to the server could be made), Aborted. A call that timed out
  // may still have run on the server. Replies to earlier, abandoned calls are discarded.
  Result<std::string> Call(std::string_view request, const CallOptions& options = {},
                           const std::function<bool(std::string_view chunk)>& on_chunk = nullptr);

  const std::string& endpoint() const;

 private:
  class Impl;
  explicit Channel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace propeller::rpc

#endif  // PROPELLER_COMMON_RPC_RPC_H_
