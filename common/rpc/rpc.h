// rpc: the request/reply transport every Propeller process uses (docs/architecture.md §2, §10):
// ZeroMQ ROUTER (server) and DEALER (client) sockets moving opaque byte strings. What the bytes
// mean is schemas/messages.h's business; this layer only frames, routes, times out and secures
// them.
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
// Security (docs/security.md): with `curve` set, a Server is a CURVE server and admits only
// clients whose public key is in `allowed_clients` (a ZAP handler checks every handshake;
// without one CURVE would admit anyone who knows the server key). Without keys a tcp://
// endpoint authenticates nobody. On ipc:// endpoints the kernel's peer credentials
// (SO_PEERCRED) are reported in PeerInfo. Every request says which transport it came by
// (PeerInfo::transport), so a handler decides what a peer may do from what the transport can
// prove and never from the request's bytes.
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
// ReadKeyFile refuses a file with a secret key that is a symbolic link, is owned by neither
// root nor this process's user, or that group or others may read or write (InvalidArgument
// naming the fix), as ssh does with private keys.


// How a request reached the server.
enum class PeerTransport : uint8_t {
  kInProcess,  // inproc:// or direct://: this process, no socket
  kIpc,        // a unix socket: uid/gid/pid from the kernel
  kTcp,        // the network: only a CURVE key (curve_public_key) says who it is
};

// What the transport knows about the sender of one request.
struct PeerInfo {
  // Set by the server for every request; the default is what an in-process call gets.
  PeerTransport transport = PeerTransport::kInProcess;
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
  // REQUIRED. An ipc:// endpoint is refused while another process serves on it (ZeroMQ would
  // silently take the path over); a stale socket file left by a crash is replaced.
  std::string endpoint;
  // More endpoints for the same handler, in-process only: direct://NAME. A Channel to
  // direct://NAME in this process runs the handler on the calling thread — no socket, no
  // thread handoff (embedded mode; PeerInfo says kInProcess). Nothing else is accepted here
  // (InvalidArgument), so the socket binds one endpoint and a request's transport is never
  // ambiguous. endpoint() reports the main one.
  std::vector<std::string> extra_endpoints;
  // The mode of an ipc:// socket file (connecting needs write permission on it). The default
  // lets every local user connect: handlers authorize each request by its peer's credentials.
  uint32_t ipc_socket_mode = 0666;
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

// ---- Link security of daemons and clients (docs/security.md) ------------------------------
//
// tcp:// links are CURVE-authenticated unless a daemon is told --insecure. The simple setup is
// the cluster key: one key pair every member holds (master, index nodes, mounts in cluster
// mode, administrators' clients), made by the master at its first start — like ssh host keys
// — and copied to the other hosts as a file (mode 0600). Members offer it as clients, serve
// with it and admit it. The per-member setup gives each daemon its own pair, an allowlist of
// client keys and the server's public key (the curve/allow/server key files below).
// ipc:// links never use CURVE: the kernel names the peer. inproc:// and direct:// are
// in-process.

// $PROPELLER_CLUSTER_KEY, else /etc/propeller/cluster.key for root, else
// $XDG_CONFIG_HOME/propeller/cluster.key (~/.config/propeller/cluster.key).
std::string DefaultClusterKeyFile();
// Reads the cluster key pair at `path` (ReadKeyFile's checks). When it is missing and `create`
// is set, makes one first (mode 0600; missing parent directories 0700), never replacing a file
// another process made meanwhile; *created (may be null) says whether this call made it.
// NotFound when missing and not created.
Result<CurveKeys> LoadClusterKey(const std::string& path, bool create, bool* created);

struct LinkSecurityOptions {
  std::string cluster_key_file;  // "" = DefaultClusterKeyFile()
  // Per-member setup (instead of the cluster key): this member's key pair, the client keys a
  // server admits, and the public key of the server(s) this member dials.
  std::string curve_key_file;
  std::string allow_file;
  std::string server_key_file;
  // tcp:// without CURVE: every peer that reaches the port is a member. Never the default.
  bool insecure = false;
};

struct LinkSecurity {
  std::optional<CurveKeys> keys;          // this member's pair ("" secret never)
  std::vector<std::string> allowed;       // admitted client keys (serving)
  std::string server_public_key;          // expected server key (dialing)
  bool insecure = false;
  std::string cluster_key_file;           // the cluster key used, "" for none
  bool created = false;                   // the cluster key was made by this call
  // CURVE settings for a server on `options->endpoint` (tcp:// only) / a channel to it.
  void Apply(ServerOptions* options) const;
  void Apply(ChannelOptions* options) const;
};

// Resolves the keys of a process that serves on tcp:// (`serves_tcp`) and/or dials tcp://
// peers (`dials_tcp`); `create_cluster_key`: a master at its first start makes the cluster key
// when it is missing. Nothing is needed (an empty LinkSecurity) when neither is set.
// InvalidArgument, with what to do, when keys are needed and not given, unreadable or
// inconsistent; NotFound when the cluster key is missing.
Result<LinkSecurity> ResolveLinkSecurity(const LinkSecurityOptions& options, bool serves_tcp,
                                         bool dials_tcp, bool create_cluster_key);
bool IsTcpEndpoint(std::string_view endpoint);

}  // namespace propeller::rpc

#endif  // PROPELLER_COMMON_RPC_RPC_H_
