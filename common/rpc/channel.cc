// rpc::Channel: a pool of DEALER sockets to one server endpoint.
//
// A call borrows a socket, sends [request id][body] and reads frames until the final one with
// its id. Sockets are not thread-safe, so each concurrent call has its own; idle ones are kept
// (up to kMaxIdleSockets) because a new socket costs a connection and a handshake.
//
// A socket is returned to the pool only after a call that ended cleanly (final frame read).
// After a timeout or an abandoned stream the server may still send frames for that request, so
// the socket is closed instead: with linger 0 nothing of it survives, and the next call gets a
// fresh socket (and connection). Request ids are still checked, and foreign frames skipped, so
// a stray frame can never be taken for the answer to another request.
//
// ZMQ_IMMEDIATE keeps requests from being queued on a connection that does not exist yet, so
// "cannot send within the timeout" means "no connection": Unavailable. That does not hold for
// inproc:// endpoints, where ZeroMQ queues for a server not bound yet (the call then times out).
#include <algorithm>
#include <atomic>
#include <climits>
#include <chrono>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/rpc/rpc.h"
#include "common/rpc/rpc_internal.h"

namespace propeller::rpc {
namespace {

using internal::kKindFinal;
using internal::kKindPartial;
using internal::kRequestIdBytes;

constexpr size_t kMaxIdleSockets = 8;

using Clock = std::chrono::steady_clock;

// Milliseconds left until `deadline`, at least 0.
long MillisLeft(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<long>(left) : 0;
}

Status ValidateOptions(const ChannelOptions& options) {
  if (options.endpoint.empty()) return Status::InvalidArgument("channel endpoint is empty");
  if (options.max_message_bytes == 0) {
    return Status::InvalidArgument("max_message_bytes must be positive");
  }
  if (!options.curve) {
    if (!options.server_public_key.empty()) {
      return Status::InvalidArgument("server_public_key given without CURVE client keys");
    }
    return Status::OK();
  }
  if (!internal::DecodeZ85Key(options.curve->public_key, nullptr) ||
      !internal::DecodeZ85Key(options.curve->secret_key, nullptr)) {
    return Status::InvalidArgument("CURVE client key pair missing or malformed");
  }
  if (!internal::DecodeZ85Key(options.server_public_key, nullptr)) {
    return Status::InvalidArgument("CURVE server public key missing or malformed");
  }
  if (!zmq_has("curve")) return Status::NotSupported("libzmq was built without CURVE");
  return Status::OK();
}

}  // namespace

class Channel::Impl {
 public:
  explicit Impl(const ChannelOptions& options) : options_(options) {}

  // Validates the options and the endpoint (by opening the first socket, which is kept).
  Status Open() {
    if (internal::IsDirectEndpoint(options_.endpoint)) {
      if (options_.curve) return Status::InvalidArgument("CURVE does not apply to direct://");
      direct_ = true;
      return Status::OK();
    }
    PROPELLER_RETURN_IF_ERROR(ValidateOptions(options_));
    PROPELLER_ASSIGN_OR_RETURN(std::unique_ptr<zmq::socket_t> socket, NewSocket());
    idle_.push_back(std::move(socket));
    return Status::OK();
  }

  const std::string& endpoint() const { return options_.endpoint; }

  Result<std::string> Call(std::string_view request, const CallOptions& options,
                           const std::function<bool(std::string_view)>& on_chunk) {
    if (request.size() > options_.max_message_bytes) {
      return Status::ResourceExhausted("request of " + std::to_string(request.size()) +
                                       " bytes exceeds the limit of " +
                                       std::to_string(options_.max_message_bytes));
    }
    if (direct_) return internal::CallDirect(options_.endpoint, request, on_chunk);
    const int retries = options.idempotent ? std::max(options.retries, 0) : 0;
    for (int attempt = 0;; ++attempt) {
      PROPELLER_ASSIGN_OR_RETURN(std::unique_ptr<zmq::socket_t> socket, Acquire());
      bool got_partial = false;
      Result<std::string> result = Status::Internal("unset");
      try {
        result = Attempt(*socket, request, options.timeout_ms, on_chunk, &got_partial);
      } catch (const zmq::error_t& e) {
        result = internal::ZmqStatus(StatusCode::kInternal, "call to " + endpoint(), e);
      }
      if (result.ok()) {
        Release(std::move(socket));
        return result;
      }
      // Dropping the socket (linger 0) discards whatever the server still sends for it.
      socket.reset();
      const bool retry = result.status().code() == StatusCode::kTimeout && !got_partial &&
                         attempt < retries;
      if (!retry) return result;
    }
  }

 private:
  Result<std::unique_ptr<zmq::socket_t>> NewSocket() {
    try {
      auto socket = std::make_unique<zmq::socket_t>(internal::Context(), zmq::socket_type::dealer);
      internal::SetCommonOptions(*socket, options_.max_message_bytes,
                                 options_.heartbeat_interval_ms, options_.heartbeat_timeout_ms);
      socket->set(zmq::sockopt::immediate, 1);
      if (options_.curve) {
        socket->set(zmq::sockopt::curve_serverkey, options_.server_public_key);
        socket->set(zmq::sockopt::curve_publickey, options_.curve->public_key);
        socket->set(zmq::sockopt::curve_secretkey, options_.curve->secret_key);
      }
      try {
        socket->connect(options_.endpoint);
      } catch (const zmq::error_t& e) {
        const bool syntax = e.num() == EINVAL || e.num() == EPROTONOSUPPORT ||
                            e.num() == ENOCOMPATPROTO;
        return internal::ZmqStatus(
            syntax ? StatusCode::kInvalidArgument : StatusCode::kIOError,
            "cannot connect to " + options_.endpoint, e);
      }
      return socket;
    } catch (const zmq::error_t& e) {
      return internal::ZmqStatus(StatusCode::kInternal, "cannot create DEALER socket", e);
    }
  }

  Result<std::unique_ptr<zmq::socket_t>> Acquire() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        std::unique_ptr<zmq::socket_t> socket = std::move(idle_.back());
        idle_.pop_back();
        return socket;
      }
    }
    return NewSocket();
  }

  void Release(std::unique_ptr<zmq::socket_t> socket) {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < kMaxIdleSockets) idle_.push_back(std::move(socket));
  }

  // One try on `socket`. Sets *got_partial once a partial frame of this request arrived (the
  // request then must not be re-sent: its handler already produced output). Throws
  // zmq::error_t on unexpected socket errors.
  Result<std::string> Attempt(zmq::socket_t& socket, std::string_view request, int64_t timeout_ms,
                              const std::function<bool(std::string_view)>& on_chunk,
                              bool* got_partial) {
    // Clamped so deadline arithmetic cannot overflow: 0 (fail at once) to ~24 days.
    const auto timeout =
        std::chrono::milliseconds(std::clamp<int64_t>(timeout_ms, 0, int64_t{INT32_MAX}));
    Clock::time_point deadline = Clock::now() + timeout;
    const uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
    char id_bytes[kRequestIdBytes];
    internal::EncodeRequestId(id, id_bytes);

    // With ZMQ_IMMEDIATE the socket is writable only once a connection is up.
    zmq_pollitem_t item = {socket.handle(), 0, ZMQ_POLLOUT, 0};
    for (;;) {
      const int rc = zmq_poll(&item, 1, MillisLeft(deadline));
      if (rc < 0 && zmq_errno() != EINTR) throw zmq::error_t();
      if (rc > 0) break;
      if (MillisLeft(deadline) == 0) {
        return Status::Unavailable("no connection to " + endpoint());
      }
    }
    if (!socket.send(zmq::buffer(id_bytes, kRequestIdBytes),
                     zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      return Status::Unavailable("no connection to " + endpoint());
    }
    // A DEALER accepts the rest of a message whose first frame it took.
    (void)socket.send(zmq::buffer(request.data(), request.size()), zmq::send_flags::dontwait);

    item.events = ZMQ_POLLIN;
    for (;;) {
      const long left = MillisLeft(deadline);
      item.revents = 0;
      const int rc = left > 0 ? zmq_poll(&item, 1, left) : 0;
      if (rc < 0) {
        if (zmq_errno() == EINTR) continue;
        throw zmq::error_t();
      }
      if (rc == 0) {
        return Status::Timeout("no reply from " + endpoint() + " within " +
                               std::to_string(timeout_ms) + " ms");
      }
      // Read one whole message: [request id][kind][body]. Anything else is skipped.
      zmq::message_t frames[3];
      size_t count = 0;
      bool more = true;
      while (more) {
        zmq::message_t part;
        if (!socket.recv(part, zmq::recv_flags::dontwait)) break;
        more = part.more();
        if (count < 3) frames[count] = std::move(part);
        ++count;
      }
      if (count != 3 || frames[0].size() != kRequestIdBytes || frames[1].size() != 1 ||
          internal::DecodeRequestId(frames[0].data()) != id) {
        continue;  // a stale or malformed message: keep waiting within the same deadline
      }
      const uint8_t kind = *static_cast<const uint8_t*>(frames[1].data());
      const std::string_view body(static_cast<const char*>(frames[2].data()), frames[2].size());
      if (kind == kKindFinal) return std::string(body);
      if (kind != kKindPartial) continue;
      *got_partial = true;
      if (on_chunk && !on_chunk(body)) {
        return Status::Aborted("reply stream from " + endpoint() + " abandoned by the caller");
      }
      deadline = Clock::now() + timeout;  // the timeout is per frame
    }
  }

  const ChannelOptions options_;
  bool direct_ = false;  // direct:// endpoint: no sockets (rpc.h)
  // Process-wide so ids stay unique even if a socket were ever shared between channels.
  static std::atomic<uint64_t> next_id_;

  std::mutex mu_;
  std::vector<std::unique_ptr<zmq::socket_t>> idle_;  // Under mu_.
};

std::atomic<uint64_t> Channel::Impl::next_id_{1};

Result<std::unique_ptr<Channel>> Channel::Connect(const ChannelOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  PROPELLER_RETURN_IF_ERROR(impl->Open());
  return std::unique_ptr<Channel>(new Channel(std::move(impl)));
}

Channel::Channel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Channel::~Channel() = default;

Result<std::string> Channel::Call(std::string_view request, const CallOptions& options,
                                  const std::function<bool(std::string_view chunk)>& on_chunk) {
  return impl_->Call(request, options, on_chunk);
}

const std::string& Channel::endpoint() const { return impl_->endpoint(); }

}  // namespace propeller::rpc
