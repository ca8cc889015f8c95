// rpc::Server: one I/O thread owns the ROUTER socket; worker threads run the handler.
//
// ZeroMQ sockets are not thread-safe, so only the I/O thread touches the ROUTER. Workers hand
// reply frames back through a mutex-protected queue and wake the I/O thread with an eventfd
// that it polls next to the ROUTER (zmq_poll accepts plain file descriptors). A queue is used
// rather than one inproc PUSH socket per worker because ReplyStream::Send may then be called
// from any thread the handler likes.
//
// Flow control, so that neither a flood of requests nor a slow reader grows memory without
// bound:
// - incoming: when the work queue holds kMaxQueuedRequests requests or kMaxQueuedBytes bytes,
//   the I/O thread stops reading the ROUTER; ZeroMQ's receive high-water mark and then TCP push
//   back on the senders.
// - outgoing: with ZMQ_ROUTER_MANDATORY a send to a peer whose pipe is full fails with EAGAIN
//   instead of silently dropping the frame (the ROUTER default). Such frames wait in a per-peer
//   FIFO (order kept) and are retried every millisecond; a peer that is gone (EHOSTUNREACH)
//   loses them and they are counted in replies_dropped. A handler streaming partial frames
//   blocks in Send while kStreamWindow of its frames are still waiting.
//
// CURVE applies to tcp:// and ipc:// only: inproc:// connections have no handshake, so every
// in-process client is admitted and PeerInfo.curve_public_key stays empty (checked by hand).
// PeerInfo.transport is the main endpoint's, the only one the ROUTER binds.
//
// Shutdown: the destructor sets stopping_, wakes everyone, joins the I/O thread (which closes
// the ROUTER with linger 0), then joins the workers once their current handler returns; queued
// requests that had not started are dropped.
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "common/rpc/rpc.h"
#include "common/rpc/rpc_internal.h"

namespace propeller::rpc {
namespace {

using internal::kKindFinal;
using internal::kKindPartial;
using internal::kRequestIdBytes;

// Partial frames one streamed reply may have waiting in the server before Send blocks.
constexpr int kStreamWindow = 64;
// Requests read from the ROUTER but not yet picked up by a worker.
constexpr size_t kMaxQueuedRequests = 4096;
constexpr size_t kMaxQueuedBytes = size_t{256} << 20;
// Messages ZeroMQ buffers per peer (its default is 1000). Past it sends fail with EAGAIN and
// wait in our per-peer queue, so nothing is lost either way; the bound is on memory (frames
// may be large), headroom for bursts of small frames only needs a few thousand.
constexpr int kRouterSendHwm = 4096;
// Messages read per loop turn, so replies are not starved by a flood of requests.
constexpr int kReceiveBatch = 256;
// The eventfd wakes the loop; this bound is only a safety net.
constexpr long kIdlePollMs = 100;
// While frames wait for a full peer pipe or the work queue is full.
constexpr long kRetryPollMs = 1;
// Bodies at least this large are handed to ZeroMQ without a copy.
constexpr size_t kZeroCopyBytes = 64 * 1024;

bool ParseUint32(std::string_view s, uint32_t* out) {
  if (s.empty() || s.size() > 10) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > UINT32_MAX) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

// libzmq (built with SO_PEERCRED) appends ":uid:gid:pid" to the "Peer-Address" of ipc://
// connections: "localhost:1000:1000:4242" on Linux. Checked in rpc_test (PeerCredentialsOnIpc).
void ParsePeerCredentials(std::string_view address, PeerInfo* peer) {
  uint32_t fields[3];
  for (int i = 2; i >= 0; --i) {
    const size_t colon = address.rfind(':');
    if (colon == std::string_view::npos) return;
    if (!ParseUint32(address.substr(colon + 1), &fields[i])) return;
    address = address.substr(0, colon);
  }
  peer->uid = fields[0];
  peer->gid = fields[1];
  peer->pid = fields[2];
}

// Refuses an ipc:// path another process serves on, and anything there that is not a socket:
// ZeroMQ unlinks whatever the path names before it binds.
Status CheckIpcPathFree(const std::string& endpoint) {
  if (endpoint.rfind("ipc://", 0) != 0 || endpoint.size() <= 6 || endpoint[6] == '@') {
    return Status::OK();  // not ipc, or the abstract namespace (no file)
  }
  const std::string path = endpoint.substr(6);
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return Status::OK();
  if (!S_ISSOCK(st.st_mode)) {
    return Status::IOError("cannot bind " + endpoint + ": " + path + " exists and is not a socket");
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return Status::InvalidArgument("cannot bind " + endpoint + ": the path is too long for a "
                                   "unix socket (at most 107 bytes)");
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IOError("socket", errno);
  const bool live = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  if (live) {
    return Status::IOError("cannot bind " + endpoint + ": another process serves there (stop it, "
                           "or choose another endpoint)");
  }
  return Status::OK();  // a stale socket from a process that is gone
}

Status ValidateOptions(const ServerOptions& options) {
  if (options.endpoint.empty()) return Status::InvalidArgument("server endpoint is empty");
  for (const std::string& extra : options.extra_endpoints) {
    if (!internal::IsDirectEndpoint(extra)) {
      return Status::InvalidArgument("extra endpoint " + extra + " must be direct://");
    }
  }
  if (options.worker_threads < 1) {
    return Status::InvalidArgument("worker_threads must be at least 1");
  }
  if (options.max_message_bytes == 0) {
    return Status::InvalidArgument("max_message_bytes must be positive");
  }
  if (!options.curve) {
    if (!options.allowed_clients.empty()) {
      return Status::InvalidArgument("allowed_clients given without CURVE server keys");
    }
    return Status::OK();
  }
  if (!internal::DecodeZ85Key(options.curve->secret_key, nullptr)) {
    return Status::InvalidArgument("CURVE server secret key missing or malformed");
  }
  if (options.allowed_clients.empty()) {
    return Status::InvalidArgument("a CURVE server needs at least one allowed client key");
  }
  for (const std::string& key : options.allowed_clients) {
    if (!internal::DecodeZ85Key(key, nullptr)) {
      return Status::InvalidArgument("malformed allowed client key '" + key + "'");
    }
  }
  if (!zmq_has("curve")) return Status::NotSupported("libzmq was built without CURVE");
  return Status::OK();
}

// Errors of zmq_bind that mean the endpoint string itself is wrong.
bool IsEndpointSyntaxError(int err) {
  return err == EINVAL || err == EPROTONOSUPPORT || err == ENOCOMPATPROTO;
}

void FreeString(void* /*data*/, void* hint) { delete static_cast<std::string*>(hint); }

}  // namespace

class Server::Impl {
 public:
  Impl(const ServerOptions& options, Handler handler)
      : options_(options),
        handler_(std::move(handler)),
        transport_(options.endpoint.rfind("ipc://", 0) == 0   ? PeerTransport::kIpc
                   : options.endpoint.rfind("tcp://", 0) == 0 ? PeerTransport::kTcp
                                                               : PeerTransport::kInProcess) {}

  ~Impl() {
    for (const std::string& d : direct_) internal::UnregisterDirect(d);
    stopping_.store(true);
    {
      std::lock_guard<std::mutex> lock(work_mu_);
    }
    work_cv_.notify_all();
    {
      std::lock_guard<std::mutex> lock(out_mu_);
    }
    out_cv_.notify_all();
    Signal();
    if (io_thread_.joinable()) io_thread_.join();
    for (std::thread& t : workers_) t.join();
    router_.reset();  // only left here when Start failed before the I/O thread ran
    if (event_fd_ >= 0) ::close(event_fd_);
    if (!zap_domain_.empty()) internal::UnregisterZapDomain(zap_domain_);
  }

  Status Start() {
    PROPELLER_RETURN_IF_ERROR(ValidateOptions(options_));
    if (options_.curve) {
      // Registered before the bind so the first handshake already finds the allowlist.
      zap_domain_ = internal::NewZapDomain();
      PROPELLER_RETURN_IF_ERROR(
          internal::RegisterZapDomain(zap_domain_, options_.allowed_clients));
    }
    event_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (event_fd_ < 0) return Status::IOError("eventfd", errno);
    try {
      router_ = std::make_unique<zmq::socket_t>(internal::Context(), zmq::socket_type::router);
      internal::SetCommonOptions(*router_, options_.max_message_bytes,
                                 options_.heartbeat_interval_ms, options_.heartbeat_timeout_ms);
      router_->set(zmq::sockopt::router_mandatory, 1);
      router_->set(zmq::sockopt::sndhwm, kRouterSendHwm);
      if (options_.curve) {
        router_->set(zmq::sockopt::curve_server, 1);
        router_->set(zmq::sockopt::curve_secretkey, options_.curve->secret_key);
        router_->set(zmq::sockopt::zap_domain, zap_domain_);
      }
    } catch (const zmq::error_t& e) {
      return internal::ZmqStatus(StatusCode::kInternal, "cannot create ROUTER socket", e);
    }
    PROPELLER_RETURN_IF_ERROR(CheckIpcPathFree(options_.endpoint));
    try {
      router_->bind(options_.endpoint);
    } catch (const zmq::error_t& e) {
      return internal::ZmqStatus(
          IsEndpointSyntaxError(e.num()) ? StatusCode::kInvalidArgument : StatusCode::kIOError,
          "cannot bind " + options_.endpoint, e);
    }
    if (transport_ == PeerTransport::kIpc && options_.endpoint[6] != '@') {
      const std::string path = options_.endpoint.substr(6);
      if (::chmod(path.c_str(), options_.ipc_socket_mode) != 0) {
        return Status::IOError("chmod " + path, errno);
      }
    }
    try {
      endpoint_ = router_->get(zmq::sockopt::last_endpoint);
    } catch (const zmq::error_t&) {
      endpoint_ = options_.endpoint;
    }
    for (const std::string& extra : options_.extra_endpoints) {
      auto target = std::make_shared<internal::DirectTarget>();
      target->handler = handler_;
      PROPELLER_RETURN_IF_ERROR(internal::RegisterDirect(extra, std::move(target)));
      direct_.push_back(extra);
    }
    io_thread_ = std::thread([this] { IoLoop(); });
    workers_.reserve(static_cast<size_t>(options_.worker_threads));
    for (int i = 0; i < options_.worker_threads; ++i) {
      workers_.emplace_back([this] { WorkerLoop(); });
    }
    return Status::OK();
  }

  const std::string& endpoint() const { return endpoint_; }

  ServerStats stats() const {
    ServerStats s;
    s.requests = requests_.load(std::memory_order_relaxed);
    s.malformed_frames = malformed_.load(std::memory_order_relaxed);
    s.replies_dropped = dropped_.load(std::memory_order_relaxed);
    return s;
  }

 private:
  struct Request {
    std::string routing_id;
    uint64_t request_id = 0;
    zmq::message_t body;  // its metadata carries the peer's User-Id and Peer-Address
  };

  // Bookkeeping of one reply (all its frames). Under out_mu_.
  struct Stream {
    int queued = 0;     // frames handed to the I/O thread and not yet sent or dropped
    bool dead = false;  // the peer is gone: further frames are pointless
  };

  struct Outgoing {
    std::string routing_id;
    char request_id[kRequestIdBytes];
    uint8_t kind;
    std::string body;
    std::shared_ptr<Stream> stream;
  };

  enum class SendResult { kSent, kBlocked, kGone };

  class Sender final : public ReplyStream {
   public:
    Sender(Impl* impl, const Request& request, std::shared_ptr<Stream> stream)
        : impl_(impl), request_(request), stream_(std::move(stream)) {}

    bool Send(std::string_view chunk) override {
      if (impl_->stopping_.load()) return false;
      if (!impl_->Enqueue(request_, kKindPartial, std::string(chunk), stream_)) return false;
      std::unique_lock<std::mutex> lock(impl_->out_mu_);
      ++impl_->senders_waiting_;
      impl_->out_cv_.wait(lock, [this] {
        return impl_->stopping_.load() || stream_->dead || stream_->queued < kStreamWindow;
      });
      --impl_->senders_waiting_;
      return !impl_->stopping_.load() && !stream_->dead;
    }

   private:
    Impl* const impl_;
    const Request& request_;
    const std::shared_ptr<Stream> stream_;
  };

  void Signal() {
    if (event_fd_ < 0) return;
    const uint64_t one = 1;
    // Cannot fail short of a closed fd; EAGAIN would mean the counter is already huge (awake).
    (void)!::write(event_fd_, &one, sizeof one);
  }

  // Hands one frame to the I/O thread. False (and counted as dropped) when the peer is
  // already known to be gone.
  bool Enqueue(const Request& request, uint8_t kind, std::string body,
               const std::shared_ptr<Stream>& stream) {
    Outgoing out;
    out.routing_id = request.routing_id;
    internal::EncodeRequestId(request.request_id, out.request_id);
    out.kind = kind;
    out.body = std::move(body);
    out.stream = stream;
    bool was_empty;
    {
      std::lock_guard<std::mutex> lock(out_mu_);
      if (stream->dead) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
      ++stream->queued;
      was_empty = out_.empty();
      out_.push_back(std::move(out));
    }
    // The I/O thread reads the eventfd before it takes the queue, so one wake-up per
    // empty-to-non-empty transition is enough.
    if (was_empty) Signal();
    return true;
  }

  void WorkerLoop() {
    for (;;) {
      Request request;
      {
        std::unique_lock<std::mutex> lock(work_mu_);
        work_cv_.wait(lock, [this] { return stopping_.load() || !work_.empty(); });
        if (stopping_.load()) return;
        request = std::move(work_.front());
        work_.pop_front();
        queued_bytes_ -= request.body.size();
      }
      Serve(request);
    }
  }

  // The transport is the main endpoint's: the ROUTER binds nothing else (extra endpoints are
  // direct://, served without it). The peer address is parsed on ipc:// only: on tcp:// an
  // IPv6 address could read as ":uid:gid:pid".
  PeerInfo PeerOf(const zmq::message_t& body) const {
    PeerInfo peer;
    peer.transport = transport_;
    if (options_.curve) {
      const char* user = zmq_msg_gets(body.handle(), "User-Id");
      if (user != nullptr) peer.curve_public_key = user;
    }
    if (transport_ == PeerTransport::kIpc) {
      const char* address = zmq_msg_gets(body.handle(), "Peer-Address");
      if (address != nullptr) ParsePeerCredentials(address, &peer);
    }
    return peer;
  }

  void Serve(const Request& request) {
    auto stream = std::make_shared<Stream>();
    Sender sender(this, request, stream);
    const PeerInfo peer = PeerOf(request.body);
    const std::string_view body(static_cast<const char*>(request.body.data()),
                                request.body.size());
    std::string reply;
    try {
      reply = handler_(body, peer, sender);
    } catch (const std::exception& e) {
      // The contract forbids it; keep serving the others and let this caller time out.
      Log(LogLevel::kError, "rpc: handler on %s threw: %s", endpoint_.c_str(), e.what());
      return;
    } catch (...) {
      Log(LogLevel::kError, "rpc: handler on %s threw", endpoint_.c_str());
      return;
    }
    if (stopping_.load()) return;
    (void)Enqueue(request, kKindFinal, std::move(reply), stream);
  }

  bool WorkQueueFull() {
    std::lock_guard<std::mutex> lock(work_mu_);
    return work_.size() >= kMaxQueuedRequests || queued_bytes_ >= kMaxQueuedBytes;
  }

  void IoLoop() {
    zmq_pollitem_t items[2] = {{router_->handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, event_fd_, ZMQ_POLLIN, 0}};
    while (!stopping_.load()) {
      const bool throttled = WorkQueueFull();
      items[0].events = throttled ? 0 : ZMQ_POLLIN;
      const long timeout = (throttled || !blocked_.empty()) ? kRetryPollMs : kIdlePollMs;
      if (zmq_poll(items, 2, timeout) < 0) {
        if (zmq_errno() != EINTR) {
          Log(LogLevel::kWarning, "rpc: poll on %s: %s", endpoint_.c_str(),
              zmq_strerror(zmq_errno()));
        }
        continue;
      }
      if (stopping_.load()) break;
      if (items[1].revents & ZMQ_POLLIN) {
        uint64_t count;
        (void)!::read(event_fd_, &count, sizeof count);
      }
      try {
        SendReplies();
        if (!throttled) ReceiveRequests();
      } catch (const zmq::error_t& e) {
        Log(LogLevel::kWarning, "rpc: server %s: %s", endpoint_.c_str(), e.what());
      }
    }
    // Pending frames are abandoned; linger 0 makes the close immediate.
    router_.reset();
  }

  void ReceiveRequests() {
    for (int i = 0; i < kReceiveBatch; ++i) {
      zmq::message_t routing_id;
      if (!router_->recv(routing_id, zmq::recv_flags::dontwait)) return;
      // ZeroMQ delivers all frames of a message at once, so the rest is already here. Frames
      // beyond the expected two are read (they must be) and discarded at once.
      size_t frames = 0;
      zmq::message_t id;
      zmq::message_t body;
      bool more = routing_id.more();
      while (more) {
        zmq::message_t part;
        if (!router_->recv(part, zmq::recv_flags::dontwait)) break;
        more = part.more();
        ++frames;
        if (frames == 1) {
          id = std::move(part);
        } else if (frames == 2) {
          body = std::move(part);
        }
      }
      if (frames != 2 || id.size() != kRequestIdBytes) {
        malformed_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      requests_.fetch_add(1, std::memory_order_relaxed);
      Request request;
      request.routing_id = routing_id.to_string();
      request.request_id = internal::DecodeRequestId(id.data());
      request.body = std::move(body);
      {
        std::lock_guard<std::mutex> lock(work_mu_);
        queued_bytes_ += request.body.size();
        work_.push_back(std::move(request));
      }
      work_cv_.notify_one();
    }
  }

  SendResult TrySend(Outgoing& out) {
    // With ZMQ_ROUTER_MANDATORY the routing-id frame decides: EAGAIN (pipe full) or
    // EHOSTUNREACH (no such peer). Once it is accepted the other frames cannot fail.
    try {
      if (!router_->send(zmq::buffer(out.routing_id),
                         zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
        return SendResult::kBlocked;
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == EHOSTUNREACH) return SendResult::kGone;
      throw;
    }
    (void)router_->send(zmq::buffer(out.request_id, kRequestIdBytes),
                        zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    (void)router_->send(zmq::buffer(&out.kind, 1),
                        zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    if (out.body.size() >= kZeroCopyBytes) {
      auto* owned = new std::string(std::move(out.body));
      zmq::message_t body(owned->data(), owned->size(), &FreeString, owned);
      (void)router_->send(body, zmq::send_flags::dontwait);
    } else {
      (void)router_->send(zmq::buffer(out.body), zmq::send_flags::dontwait);
    }
    return SendResult::kSent;
  }

  void SendReplies() {
    std::vector<Outgoing> batch;
    {
      std::lock_guard<std::mutex> lock(out_mu_);
      batch.swap(out_);
    }
    std::vector<std::shared_ptr<Stream>> settled;  // frames sent or dropped
    std::vector<std::shared_ptr<Stream>> dead;
    auto drop = [&](Outgoing& out) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      settled.push_back(out.stream);
      dead.push_back(std::move(out.stream));
    };
    for (Outgoing& out : batch) {
      auto it = blocked_.find(out.routing_id);
      if (it != blocked_.end()) {
        it->second.push_back(std::move(out));  // behind the frames already waiting: keep order
        continue;
      }
      switch (TrySend(out)) {
        case SendResult::kSent: settled.push_back(std::move(out.stream)); break;
        case SendResult::kGone: drop(out); break;
        case SendResult::kBlocked: {
          std::string peer = out.routing_id;
          blocked_[peer].push_back(std::move(out));
          break;
        }
      }
    }
    for (auto it = blocked_.begin(); it != blocked_.end();) {
      std::deque<Outgoing>& queue = it->second;
      while (!queue.empty()) {
        const SendResult result = TrySend(queue.front());
        if (result == SendResult::kBlocked) break;
        if (result == SendResult::kSent) {
          settled.push_back(std::move(queue.front().stream));
          queue.pop_front();
        } else {
          for (Outgoing& out : queue) drop(out);
          queue.clear();
        }
      }
      it = queue.empty() ? blocked_.erase(it) : std::next(it);
    }
    if (settled.empty()) return;
    bool wake;
    {
      std::lock_guard<std::mutex> lock(out_mu_);
      for (const auto& stream : settled) --stream->queued;
      for (const auto& stream : dead) stream->dead = true;
      wake = senders_waiting_ > 0;
    }
    if (wake) out_cv_.notify_all();
  }

  // Constant after Start().
  const ServerOptions options_;
  const Handler handler_;
  const PeerTransport transport_;
  std::string endpoint_;
  std::vector<std::string> direct_;  // registered direct:// endpoints
  std::string zap_domain_;  // empty without CURVE
  int event_fd_ = -1;
  std::thread io_thread_;
  std::vector<std::thread> workers_;

  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> malformed_{0};
  std::atomic<uint64_t> dropped_{0};

  // Owned by the I/O thread once it runs.
  std::unique_ptr<zmq::socket_t> router_;
  std::map<std::string, std::deque<Outgoing>> blocked_;  // per peer, waiting for its pipe

  // Lock order: work_mu_ and out_mu_ are never held together.
  std::mutex work_mu_;
  std::condition_variable work_cv_;  // work_ became non-empty, or stopping
  std::deque<Request> work_;         // Under work_mu_.
  size_t queued_bytes_ = 0;          // Under work_mu_.

  std::mutex out_mu_;
  std::condition_variable out_cv_;  // a stream's queued count fell, or stopping
  std::vector<Outgoing> out_;       // Under out_mu_.
  int senders_waiting_ = 0;         // Under out_mu_.
};

Result<std::unique_ptr<Server>> Server::Start(const ServerOptions& options, Handler handler) {
  if (!handler) return Status::InvalidArgument("server handler is empty");
  auto impl = std::make_unique<Impl>(options, std::move(handler));
  PROPELLER_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() = default;

const std::string& Server::endpoint() const { return impl_->endpoint(); }

ServerStats Server::stats() const { return impl_->stats(); }

}  // namespace propeller::rpc
