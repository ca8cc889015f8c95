#include "client/lib/query_engine.h"

#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <mutex>

#include "client/lib/mount_registry.h"
#include "common/credentials.h"
#include "common/rpc/rpc.h"
#include "common/secure_dir.h"
#include "schemas/messages.h"
#include "schemas/watch_messages.h"

namespace propeller {
namespace {

std::string ErrorReply(const Status& st) { return wire::EncodeReply(st, {}); }

}  // namespace

class QueryEngine::Impl {
 public:
  explicit Impl(const QueryEngineOptions& o) : options_(o) {}

  Status Start() {
    std::string endpoint = options_.endpoint;
    if (endpoint.empty()) {
      PROPELLER_RETURN_IF_ERROR(MakeRegistryDirs());
      // Beside the registry, outside every mount.
      endpoint = "ipc://" + DefaultRuntimeDir() + "/engine-" + std::to_string(::getpid()) + ".sock";
    }
    rpc::ServerOptions so;
    so.endpoint = endpoint;
    so.worker_threads = options_.worker_threads + static_cast<int>(kMaxWatches);
    so.ipc_socket_mode = 0666;  // every user may ask; each request runs as its caller
    PROPELLER_ASSIGN_OR_RETURN(
        server_, rpc::Server::Start(so, [this](std::string_view request, const rpc::PeerInfo& peer,
                                               rpc::ReplyStream& out) {
          return Handle(request, peer, out);
        }));
    return Status::OK();
  }

  ~Impl() { server_.reset(); }  // ZeroMQ removes the socket file it made

  const std::string& endpoint() const { return server_->endpoint(); }

 private:
  std::string Handle(std::string_view request, const rpc::PeerInfo& peer, rpc::ReplyStream& out) {
    wire::RequestEnvelope env;
    Status st = wire::DecodeRequest(request, &env);
    if (!st.ok()) return ErrorReply(st);
    if (env.type == wire::MsgType::kPing) {
      wire::Ping ping;
      st = wire::Decode(env.body, &ping);
      return st.ok() ? wire::EncodeOkReply(ping) : ErrorReply(st);
    }
    if (env.type == wire::MsgType::kMountStatus && options_.mount_status) {
      return wire::EncodeOkReply(options_.mount_status());
    }
    if (env.type == wire::MsgType::kWatch) return HandleWatch(env.body, peer, out);
    if (env.type != wire::MsgType::kSearch) {
      return ErrorReply(Status::NotSupported(std::string("a mount's query engine serves searches "
                                                         "and watches only, not ") +
                                             wire::MsgTypeName(env.type)));
    }
    wire::SearchQuery q;
    st = wire::Decode(env.body, &q);
    if (!st.ok()) return ErrorReply(st.WithContext("bad search request"));
    Result<Credentials> caller = CallerOf(peer, "search");
    if (!caller.ok()) return ErrorReply(caller.status());
    ClientSearchOptions so;
    so.volume = options_.volume;
    so.scope = q.scope.empty() ? "/" : q.scope;
    so.creds = std::move(*caller);
    so.paths_under = options_.mountpoint;  // path predicates see what results print
    if (options_.before_search) {
      if (Status gate = options_.before_search(so.scope); !gate.ok()) return ErrorReply(gate);
    }
    so.limit = static_cast<size_t>(q.limit);
    so.sort_by = q.sort_by;
    so.descending = q.descending;
    so.now_ns = q.now_ns;
    wire::SearchHitsChunk chunk;
    std::string bytes;
    bool gone = false;
    auto flush = [&]() {
      if (chunk.hits.empty()) return;
      bytes.clear();
      wire::Encode(chunk, &bytes);
      if (!out.Send(bytes)) gone = true;
      chunk.hits.clear();
    };
    ClientSearchStats stats;
    st = options_.client->Search(q.query, so, [&](const ClientHit& hit) {
      wire::WireHit h;
      h.path = InVolume(hit.path);
      h.record = hit.record;
      h.acg = hit.acg;
      chunk.hits.push_back(std::move(h));
      if (chunk.hits.size() >= 256) flush();
      return !gone;
    }, &stats);
    if (!st.ok()) return ErrorReply(st);
    flush();
    wire::SearchDone done;
    done.acgs_total = stats.acgs_total;
    done.hits = stats.hits;
    // Counts of files the caller may not see stay here (docs/security.md).
    done.candidates = so.creds->uid == 0 ? stats.candidates : stats.hits;
    done.acgs_skipped = so.creds->uid == 0 ? stats.acgs_skipped : 0;
    return wire::EncodeOkReply(done);
  }

  // Who `peer` is, as the kernel says: only a unix socket tells (never the body;
  // docs/security.md), and results are paths under the mount point, so a caller who cannot
  // walk to it may not `verb` ("search", "watch") here. PermissionDenied otherwise.
  Result<Credentials> CallerOf(const rpc::PeerInfo& peer, const char* verb) const {
    if (peer.transport != rpc::PeerTransport::kIpc || !peer.uid || !peer.gid) {
      return Status::PermissionDenied("the query engine needs a local (ipc) peer");
    }
    Credentials creds = PeerCredentials(*peer.uid, *peer.gid, peer.pid);
    if (!HostPathWalkable(options_.mountpoint, creds)) {
      return Status::PermissionDenied(std::string("you may not ") + verb + " " +
                                      options_.mountpoint +
                                      ": a directory above it denies you access");
    }
    return creds;
  }

  // The in-volume path of a hit or event path the client reports (under the backing root).
  std::string InVolume(const std::string& host_path) const {
    std::string p = host_path.size() >= options_.backing.size()
                        ? host_path.substr(options_.backing == "/" ? 0 : options_.backing.size())
                        : host_path;
    return p.empty() ? "/" : p;
  }

  // kWatch as the peer the kernel names: the cluster's watch (Client::Watch) of this volume,
  // relayed frame by frame (an empty frame once registered, and for every idle second).
  std::string HandleWatch(std::string_view body, const rpc::PeerInfo& peer,
                          rpc::ReplyStream& out) {
    wire::WatchRequest q;
    Status st = wire::Decode(body, &q);
    if (!st.ok()) return ErrorReply(st.WithContext("bad watch request"));
    Result<Credentials> caller = CallerOf(peer, "watch");
    if (!caller.ok()) return ErrorReply(caller.status());
    ClientWatchOptions wo;
    wo.volume = options_.volume;
    wo.scope = q.scope.empty() ? "/" : q.scope;
    wo.creds = std::move(*caller);
    wo.max_queued = static_cast<size_t>(q.max_queued);
    wo.now_ns = q.now_ns;
    wo.paths_under = options_.mountpoint;
    // Each watch holds a worker of this server (Start reserves kMaxWatches of them).
    const uint32_t uid = *peer.uid;
    {
      std::lock_guard<std::mutex> lock(watch_mu_);
      if (watches_ >= kMaxWatches || (uid != 0 && user_watches_[uid] >= kMaxWatchesPerUser)) {
        return ErrorReply(Status::ResourceExhausted(
            "too many watches on the mount at " + options_.mountpoint + " (" +
            std::to_string(kMaxWatches) + " in all, " + std::to_string(kMaxWatchesPerUser) +
            " per user)"));
      }
      ++watches_;
      ++user_watches_[uid];
    }
    struct Release {
      Impl* self;
      uint32_t uid;
      ~Release() {
        std::lock_guard<std::mutex> lock(self->watch_mu_);
        --self->watches_;
        if (--self->user_watches_[uid] == 0) self->user_watches_.erase(uid);
      }
    } release{this, uid};
    std::string frame;
    bool gone = false;
    auto send = [&](const wire::WatchEventsChunk& chunk) {
      frame.clear();
      wire::Encode(chunk, &frame);
      if (!out.Send(frame)) gone = true;
      return !gone;
    };
    wo.on_ready = [&] { send(wire::WatchEventsChunk{}); };
    wo.on_idle = [&] { return send(wire::WatchEventsChunk{}); };
    st = options_.client->Watch(q.query, wo, [&](const ClientWatchEvent& e) {
      wire::WatchEventsChunk chunk;
      chunk.events.push_back(wire::WatchEvent{
          e.kind == '+'   ? wire::WatchKind::kAdded
          : e.kind == '-' ? wire::WatchKind::kRemoved
                          : wire::WatchKind::kChanged,
          InVolume(e.path), e.record, 0});
      return send(chunk);
    });
    if (gone) return ErrorReply(Status::Aborted("watch: the client went away"));
    return ErrorReply(st.ok() ? Status::Aborted("the watch ended") : st);
  }

  static constexpr size_t kMaxWatches = 16;
  static constexpr size_t kMaxWatchesPerUser = 4;
  const QueryEngineOptions options_;
  std::unique_ptr<rpc::Server> server_;
  std::mutex watch_mu_;
  size_t watches_ = 0;                       // Under watch_mu_.
  std::map<uint32_t, size_t> user_watches_;  // Under watch_mu_.

};

QueryEngine::QueryEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
QueryEngine::~QueryEngine() = default;

Result<std::unique_ptr<QueryEngine>> QueryEngine::Start(const QueryEngineOptions& options) {
  if (options.client == nullptr || options.volume == 0) {
    return Status::InvalidArgument("the query engine needs a client and a volume");
  }
  auto impl = std::make_unique<Impl>(options);
  PROPELLER_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<QueryEngine>(new QueryEngine(std::move(impl)));
}

const std::string& QueryEngine::endpoint() const { return impl_->endpoint(); }

}  // namespace propeller
