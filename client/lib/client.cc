// The Client of propeller.h: routing, placement requests, fan-out and merge.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "client/lib/apply_queue.h"
#include "client/lib/forgetter.h"
#include "client/lib/mount_registry.h"
#include "client/lib/propeller.h"
#include "client/lib/routing_cache.h"
#include "client/lib/watch_stream.h"
#include "common/logging.h"
#include "common/query/query.h"
#include "common/rpc/rpc.h"
#include "common/secure_dir.h"
#include "schemas/wire_call.h"

namespace propeller {
namespace {

// Attempts for an update group whose owner keeps changing (each redirect refreshes the route).
constexpr int kMaxRouteAttempts = 4;

// Client::Deadline of this thread (steady-clock nanoseconds; 0 = none).
thread_local int64_t t_deadline_ns = 0;

int64_t SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A thread that runs `fn` under the deadline of the thread that starts it.
template <typename Fn>
std::thread ThreadUnderDeadline(Fn fn) {
  return std::thread([deadline = t_deadline_ns, fn = std::move(fn)]() mutable {
    t_deadline_ns = deadline;
    fn();
  });
}

int64_t WallNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "/a/./b//c/../d" -> "/a/b/d". REQUIRES: path is absolute.
std::string NormalisePath(const std::string& path) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    std::string part = path.substr(i, j - i);
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(std::move(part));
    }
    i = j + 1;
  }
  std::string out;
  for (const std::string& p : parts) out += "/" + p;
  return out.empty() ? "/" : out;
}

// The host path of in-volume `path` under `root`.
std::string HostPath(const std::string& root, const std::string& path) {
  if (root == "/") return path;
  if (path == "/") return root;
  return root + path;
}

bool IsIdempotent(std::span<const Update> updates) {
  return std::none_of(updates.begin(), updates.end(),
                      [](const Update& u) { return u.op == UpdateOp::kAddEdge; });
}

std::string FileName(FileId id) {
  return "file (volume " + std::to_string(id.volume) + ", inode " + std::to_string(id.ino) + ")";
}


}  // namespace

class Client::Impl {
 public:
  explicit Impl(ClientOptions options) : options_(std::move(options)) {}

  Status Init() {
    if (options_.master_endpoint.empty()) options_.master_endpoint = DefaultMasterEndpoint();
    if (options_.timeout_ms <= 0) return Status::InvalidArgument("timeout_ms must be positive");
    if (options_.curve_key_file.empty() != options_.server_key_file.empty()) {
      return Status::InvalidArgument(
          "CURVE needs both this client's key file and the servers' public key file");
    }
    // A client that only searches inside a mount never calls the master: a tcp:// master
    // whose key this user cannot read is an error of the first call that needs it, not of
    // Connect (Master()).
    Result<std::unique_ptr<rpc::Channel>> master = NewChannel(options_.master_endpoint);
    if (!master.ok() && !rpc::IsTcpEndpoint(options_.master_endpoint)) return master.status();
    std::lock_guard<std::mutex> lock(master_mu_);
    if (master.ok()) master_ = std::move(master).value();
    return Status::OK();
  }

  // The master's channel, made on first use when Init could not.
  Result<rpc::Channel*> Master() {
    std::lock_guard<std::mutex> lock(master_mu_);
    if (!master_) {
      PROPELLER_ASSIGN_OR_RETURN(master_, NewChannel(options_.master_endpoint));
    }
    return master_.get();
  }

  const std::string& master_endpoint() const { return options_.master_endpoint; }

  // ---- plumbing ---------------------------------------------------------------------------

  Result<std::unique_ptr<rpc::Channel>> NewChannel(const std::string& endpoint) {
    rpc::ChannelOptions co;
    co.endpoint = endpoint;
    if (auto alias = options_.endpoint_aliases.find(endpoint);
        alias != options_.endpoint_aliases.end()) {
      co.endpoint = alias->second;
      return rpc::Channel::Connect(co);  // in-process: no handshake to secure
    }
    if (rpc::IsTcpEndpoint(endpoint)) {
      PROPELLER_ASSIGN_OR_RETURN(const rpc::LinkSecurity* link, Link());
      link->Apply(&co);
    }
    return rpc::Channel::Connect(co);
  }

  // The keys of tcp:// links, resolved on first use: a client that only talks to unix
  // sockets needs no cluster key (and an ordinary user cannot read it).
  Result<const rpc::LinkSecurity*> Link() {
    std::lock_guard<std::mutex> lock(link_mu_);
    if (!link_) {
      rpc::LinkSecurityOptions lo;
      lo.cluster_key_file = options_.cluster_key_file;
      lo.curve_key_file = options_.curve_key_file;
      lo.server_key_file = options_.server_key_file;
      lo.insecure = options_.insecure;
      Result<rpc::LinkSecurity> link = rpc::ResolveLinkSecurity(
          lo, /*serves_tcp=*/false, /*dials_tcp=*/true, /*create_cluster_key=*/false);
      if (!link.ok()) {
        return link.status().WithContext(
            "tcp:// endpoints need the cluster key (local users reach Propeller through its "
            "unix socket instead)");
      }
      link_ = std::move(link).value();
    }
    return &*link_;
  }

  rpc::CallOptions CallOpts(bool idempotent) const {
    rpc::CallOptions o;
    o.timeout_ms = options_.timeout_ms;
    o.idempotent = idempotent;
    if (t_deadline_ns != 0) {
      // Client::Deadline: wait at most what is left, and only once.
      const int64_t left_ms = (t_deadline_ns - SteadyNanos() + 999'999) / 1'000'000;
      o.timeout_ms = std::clamp<int64_t>(left_ms, 0, o.timeout_ms);
      o.retries = 0;
    }
    return o;
  }

  template <typename Req, typename Rep>
  Status MasterCall(wire::MsgType type, const Req& req, Rep* rep, bool idempotent = true) {
    PROPELLER_ASSIGN_OR_RETURN(rpc::Channel * master, Master());
    return wire::WireCall(*master, type, req, rep, CallOpts(idempotent));
  }

  // One per index node endpoint, created on first use and kept for the client's life.
  struct NodeLink {
    std::unique_ptr<rpc::Channel> channel;
    ApplyQueue queue;
  };

  Result<NodeLink*> NodeLinkOf(const std::string& endpoint) {
    if (endpoint.empty()) return Status::Unavailable("index node has no known endpoint");
    std::lock_guard<std::mutex> lock(channels_mu_);
    auto it = channels_.find(endpoint);
    if (it != channels_.end()) return it->second.get();
    auto link = std::make_unique<NodeLink>();
    PROPELLER_ASSIGN_OR_RETURN(link->channel, NewChannel(endpoint));
    NodeLink* raw = link.get();
    channels_.emplace(endpoint, std::move(link));
    return raw;
  }

  Result<rpc::Channel*> NodeChannel(const std::string& endpoint) {
    PROPELLER_ASSIGN_OR_RETURN(NodeLink * link, NodeLinkOf(endpoint));
    return link->channel.get();
  }

  ClientUpdateStats update_stats() {
    ClientUpdateStats stats;
    stats.apply_calls = apply_calls_.load(std::memory_order_relaxed);
    stats.updates_sent = updates_sent_.load(std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(channels_mu_);
    for (auto& [endpoint, link] : channels_) link->queue.AddStats(&stats);
    return stats;
  }

  // ---- volumes ----------------------------------------------------------------------------

  Result<std::vector<wire::VolumeInfo>> ListVolumes() {
    wire::VolumesReply rep;
    PROPELLER_RETURN_IF_ERROR(MasterCall(wire::MsgType::kListVolumes, wire::Empty{}, &rep));
    std::lock_guard<std::mutex> lock(volumes_mu_);
    volumes_ = rep.volumes;
    return rep.volumes;
  }

  Result<uint32_t> RegisterVolume(const std::string& root) {
    if (root.empty() || root[0] != '/') {
      return Status::InvalidArgument("volume root '" + root + "' must be an absolute path");
    }
    wire::RegisterVolumeRequest req;
    req.root = NormalisePath(root);
    wire::VolumeInfo rep;
    PROPELLER_RETURN_IF_ERROR(MasterCall(wire::MsgType::kRegisterVolume, req, &rep));
    std::lock_guard<std::mutex> lock(volumes_mu_);
    volumes_.erase(std::remove_if(volumes_.begin(), volumes_.end(),
                                  [&](const wire::VolumeInfo& v) { return v.volume == rep.volume; }),
                   volumes_.end());
    volumes_.push_back(rep);
    return rep.volume;
  }

  // The root of `volume`, asking the master when unknown.
  Result<std::string> VolumeRoot(uint32_t volume) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      {
        std::lock_guard<std::mutex> lock(volumes_mu_);
        for (const wire::VolumeInfo& v : volumes_) {
          if (v.volume == volume) return v.root;
        }
      }
      if (attempt == 0) PROPELLER_RETURN_IF_ERROR(ListVolumes().status());
    }
    return Status::NotFound("volume " + std::to_string(volume) + " is not registered");
  }

  Result<std::pair<uint32_t, std::string>> ResolvePath(const std::string& path) {
    if (path.empty() || path[0] != '/') {
      return Status::InvalidArgument("path '" + path + "' must be absolute");
    }
    const std::string norm = NormalisePath(path);
    PROPELLER_ASSIGN_OR_RETURN(std::vector<wire::VolumeInfo> volumes, ListVolumes());
    const wire::VolumeInfo* best = nullptr;
    for (const wire::VolumeInfo& v : volumes) {
      if (PathInScope(norm, v.root) && (best == nullptr || v.root.size() > best->root.size())) {
        best = &v;
      }
    }
    if (best == nullptr) {
      return Status::NotFound(norm + " is not inside an indexed volume (`propeller status` " +
                              "lists them; `propeller import DIR` adds one)");
    }
    std::string inner = best->root == "/" ? norm : norm.substr(best->root.size());
    if (inner.empty()) inner = "/";
    return std::make_pair(best->volume, inner);
  }

  // ---- search -----------------------------------------------------------------------------

  // `guess_nodes`: start with the nodes of the last search while the master confirms them
  // (below); false after the master named other nodes.
  Status Search(const std::string& query, const ClientSearchOptions& opts,
                const std::function<bool(const ClientHit&)>& on_hit,
                ClientSearchStats* stats_out, bool guess_nodes = true) {
    wire::SearchQuery q;
    q.query = query;
    q.now_ns = opts.now_ns != 0 ? opts.now_ns : WallNanos();
    bool path_predicates = false;
    {
      // Parse here too: a bad query is reported without a round trip, with its position.
      ParseOptions po;
      po.now_ns = q.now_ns;
      PROPELLER_ASSIGN_OR_RETURN(Query parsed, Query::Parse(query, po));
      path_predicates = HasPathPredicates(parsed);
    }
    PROPELLER_RETURN_IF_ERROR(CheckSortKey(opts.sort_by));
    if (!opts.volume && !opts.creds) {
      // A scope inside a Propeller mount: that mount's query engine answers, as the caller
      // the kernel names (docs/architecture.md §9, §10), with paths under the mount point. The
      // whole cluster ("/") is inside no mount, so it skips reading the mount table.
      const std::string scope = NormalisePath(opts.scope.empty() ? "/" : opts.scope);
      if (scope != "/") {
        PROPELLER_ASSIGN_OR_RETURN(std::optional<MountRecord> mount, FindMountFor(scope));
        if (mount) return SearchViaMount(*mount, scope, q, opts, on_hit, stats_out);
      }
    }
    q.limit = opts.limit;
    q.sort_by = opts.sort_by;
    q.descending = opts.descending;
    q.creds = OwnOrGivenCredentials(opts.creds);
    PROPELLER_RETURN_IF_ERROR(ResolveScope(opts.volume, opts.scope, &q.volume, &q.scope));
    // Path predicates see each volume's root (docs/query.md "Paths"). Without a scope, the
    // roots this client knows go with the request, and the master's list is checked while the
    // nodes work, as their list is below: a volume registered meanwhile restarts the search.
    bool roots_guessed = false;
    if (path_predicates) {
      if (!q.volume && guess_nodes) {
        std::lock_guard<std::mutex> lock(volumes_mu_);
        q.roots = volumes_;
        roots_guessed = !q.roots.empty();
      }
      if (!roots_guessed) {
        PROPELLER_ASSIGN_OR_RETURN(q.roots, PathRoots(q.volume, opts.paths_under));
      }
    }
    // (Volume roots are not fetched here: a volume's id and root never change, and hits of a
    // volume this client has not seen yet fetch them once, in VolumeRoot.)
    // The nodes to ask. Only the master's list, asked after the search started, makes the
    // answer complete: a node that took over ACGs since the last search must be asked too. But
    // asking the master first costs a round trip before any node starts (~90 us of ~400 here).
    // So the nodes of the last answer are asked at once, and the master's list is checked
    // against them while they work. Nothing is delivered before that check; when the lists
    // differ (a node joined, left or went down), the answers are dropped and the search starts
    // again with the master's list. (A guessed node that is gone holds that one search up to
    // the call timeout, as a node that died before the master noticed always did.)
    std::vector<wire::NodeInfo> nodes;
    if (guess_nodes) nodes = LastSearchTargets();
    const bool guessed = !nodes.empty();
    if (!guessed) {
      PROPELLER_ASSIGN_OR_RETURN(nodes, SearchTargets());
    }

    // Fan out: one thread per node decodes chunks into a queue; this thread delivers. (Also
    // for one node: the queue keeps a slow caller from holding the node's search open.)
    struct Shared {
      std::mutex mu;
      std::condition_variable cv;
      std::deque<std::vector<ClientHit>> ready;
      size_t running = 0;
      Status error;
      ClientSearchStats stats;
      NodeReports reports;
    } shared;
    std::atomic<bool> stop{false};
    shared.running = nodes.size();
    std::vector<std::thread> threads;
    for (const wire::NodeInfo& node : nodes) {
      threads.emplace_back([&, node] {
        Status st = SearchNode(node, q, stop, [&](std::vector<ClientHit>&& hits) {
          std::lock_guard<std::mutex> lock(shared.mu);
          shared.ready.push_back(std::move(hits));
          shared.cv.notify_one();
        }, &shared.stats, &shared.mu, &shared.reports);
        std::lock_guard<std::mutex> lock(shared.mu);
        if (!st.ok() && shared.error.ok() && !stop.load()) shared.error = st;
        --shared.running;
        shared.cv.notify_one();
      });
    }

    if (guessed) {
      Result<std::vector<wire::NodeInfo>> confirmed = SearchTargets();
      if (!confirmed.ok() || !SameNodes(*confirmed, nodes)) {
        stop = true;  // the node threads end at their next chunk
        for (std::thread& t : threads) t.join();
        if (!confirmed.ok()) return confirmed.status();
        return Search(query, opts, on_hit, stats_out, /*guess_nodes=*/false);
      }
    }
    if (roots_guessed) {
      Result<std::vector<wire::VolumeInfo>> fresh = ListVolumes();
      if (!fresh.ok() || *fresh != q.roots) {
        stop = true;
        for (std::thread& t : threads) t.join();
        if (!fresh.ok()) return fresh.status();
        return Search(query, opts, on_hit, stats_out, /*guess_nodes=*/false);
      }
    }

    const bool sorted = !opts.sort_by.empty();
    std::vector<ClientHit> collected;
    uint64_t delivered = 0;
    bool stopped = false;
    // While an ACG migrates, the old and the new node may both answer for it, with the same
    // records (both copies are frozen until the old one is gone): each file counts once.
    // Only needed with more than one node; a set of ids is cheap next to the hits themselves.
    // A hit is a path of a file (each hard link is its own hit), so it is (file, path).
    const bool dedup = nodes.size() > 1;
    std::set<std::pair<FileId, std::string>> seen;
    auto deliver = [&](std::vector<ClientHit>& batch) {
      for (ClientHit& hit : batch) {
        if (dedup && !seen.emplace(hit.record.id, hit.path).second) continue;
        if (sorted) {
          collected.push_back(std::move(hit));
          continue;
        }
        ++delivered;
        if (!on_hit(hit) || (opts.limit != 0 && delivered >= opts.limit)) {
          stop = true;
          stopped = true;
          break;
        }
      }
    };
    for (;;) {
      std::vector<ClientHit> batch;
      {
        std::unique_lock<std::mutex> lock(shared.mu);
        shared.cv.wait(lock, [&] { return !shared.ready.empty() || shared.running == 0; });
        if (shared.ready.empty()) break;
        batch = std::move(shared.ready.front());
        shared.ready.pop_front();
        if (!shared.error.ok()) stop = true;
      }
      if (stop.load()) continue;  // drain: an error or the caller ended the search
      deliver(batch);
    }
    for (std::thread& t : threads) t.join();
    if (!shared.error.ok() && !stopped) return shared.error;
    if (shared.reports.unknown_attrs && !shared.reports.unknown_attrs->empty()) {
      // No node knows it: a typo (`sise>1m`), refused as the parser words it. (Hits of the
      // query's other branches may have been delivered already.)
      ParseOptions po;
      po.now_ns = q.now_ns;
      const std::vector<std::string> unknown(shared.reports.unknown_attrs->begin(),
                                             shared.reports.unknown_attrs->end());
      PROPELLER_RETURN_IF_ERROR(UnknownAttrError(query, unknown, po));
    }
    // An ACG that moved away from a node before its request arrived there, to a node that had
    // not adopted it yet when its own request arrived, was searched nowhere: search it at the
    // node it went to (which may have passed it on: follow, a few hops at most).
    for (int hop = 0; hop < kMaxRouteAttempts && !stopped && shared.error.ok(); ++hop) {
      std::map<uint32_t, std::vector<uint64_t>> missed;  // node -> ACGs
      for (const auto& [acg, to] : shared.reports.moved) {
        if (shared.reports.adopted.count(acg) == 0) missed[to].push_back(acg);
      }
      if (missed.empty()) break;
      shared.reports = NodeReports{};
      for (const auto& [to, acgs] : missed) {
        wire::NodeInfo target;
        target.node_id = to;
        for (const wire::NodeInfo& n : nodes) {
          if (n.node_id == to) target = n;
        }
        if (target.endpoint.empty()) {
          cache_.ForgetAcg(acgs[0]);
          PROPELLER_ASSIGN_OR_RETURN(auto owner, LocateAcgs({acgs[0]}));
          target.endpoint = owner[acgs[0]].endpoint;
        }
        wire::SearchQuery only = q;
        only.acgs = acgs;
        std::vector<ClientHit> got;
        PROPELLER_RETURN_IF_ERROR(SearchNode(
            target, only, stop,
            [&](std::vector<ClientHit>&& hits) {
              for (ClientHit& h : hits) got.push_back(std::move(h));
            },
            &shared.stats, &shared.mu, &shared.reports));
        deliver(got);
        if (stopped) break;
      }
    }
    if (sorted) {
      std::sort(collected.begin(), collected.end(), [&](const ClientHit& a, const ClientHit& b) {
        return SortsBefore(opts.sort_by, opts.descending, a.path, a.record, b.path, b.record);
      });
      if (opts.limit != 0 && collected.size() > opts.limit) collected.resize(opts.limit);
      for (const ClientHit& hit : collected) {
        ++delivered;
        if (!on_hit(hit)) break;
      }
    }
    if (stats_out != nullptr) {
      *stats_out = shared.stats;
      stats_out->nodes = nodes.size();
      stats_out->hits = delivered;
    }
    return Status::OK();
  }

  // A search's or watch's volume and in-volume scope: `volume` with `scope` as given (in the
  // volume), else the volume holding the host path `scope` (none for "/": every volume).
  Status ResolveScope(std::optional<uint32_t> volume, const std::string& scope,
                      std::optional<uint32_t>* out_volume, std::string* out_scope) {
    if (volume) {
      *out_volume = *volume;
      *out_scope = scope;
    } else if (NormalisePath(scope.empty() ? "/" : scope) != "/") {
      PROPELLER_ASSIGN_OR_RETURN(auto resolved, ResolvePath(scope));
      *out_volume = resolved.first;
      *out_scope = resolved.second;
    }
    return Status::OK();
  }

  // The in-volume scope of the host path `scope` inside `mount`.
  static std::string InMount(const MountRecord& mount, const std::string& scope) {
    if (mount.mountpoint == "/") return scope;
    return scope.size() > mount.mountpoint.size() ? scope.substr(mount.mountpoint.size()) : "/";
  }

  // The channel to the query engine of `mount` (a local unix socket: no CURVE).
  Result<rpc::Channel*> MountChannel(const MountRecord& mount) {
    std::lock_guard<std::mutex> lock(channels_mu_);
    auto it = channels_.find(mount.engine_endpoint);
    if (it == channels_.end()) {
      rpc::ChannelOptions co;
      co.endpoint = mount.engine_endpoint;
      auto link = std::make_unique<NodeLink>();
      PROPELLER_ASSIGN_OR_RETURN(link->channel, rpc::Channel::Connect(co));
      it = channels_.emplace(mount.engine_endpoint, std::move(link)).first;
    }
    return it->second->channel.get();
  }

  // The roots path predicates see (docs/query.md "Paths"): `volume`'s (`under`, or its
  // registered root), or every volume's as the master lists them now.
  Result<std::vector<wire::VolumeInfo>> PathRoots(std::optional<uint32_t> volume,
                                                  const std::string& under) {
    if (volume) {
      if (!under.empty()) return std::vector<wire::VolumeInfo>{{*volume, under}};
      PROPELLER_ASSIGN_OR_RETURN(std::string root, VolumeRoot(*volume));
      return std::vector<wire::VolumeInfo>{{*volume, root}};
    }
    return ListVolumes();
  }

  // ---- live queries (watch_stream.h) --------------------------------------------------------

  Status Watch(const std::string& query, const ClientWatchOptions& opts,
               const std::function<bool(const ClientWatchEvent&)>& on_event) {
    wire::WatchRequest q;
    q.query = query;
    q.now_ns = opts.now_ns != 0 ? opts.now_ns : WallNanos();
    q.max_queued = opts.max_queued;
    bool path_predicates = false;
    {
      ParseOptions po;
      po.now_ns = q.now_ns;
      PROPELLER_ASSIGN_OR_RETURN(Query parsed, Query::Parse(query, po));
      path_predicates = HasPathPredicates(parsed);
    }
    const std::string scope = NormalisePath(opts.scope.empty() ? "/" : opts.scope);
    std::vector<WatchPeer> peers;
    if (!opts.volume && !opts.creds && scope != "/") {
      PROPELLER_ASSIGN_OR_RETURN(std::optional<MountRecord> mount, FindMountFor(scope));
      if (mount) {
        // The mount's query engine watches as the caller the kernel names.
        q.scope = InMount(*mount, scope);
        PROPELLER_ASSIGN_OR_RETURN(rpc::Channel * ch, MountChannel(*mount));
        auto host_path = [mp = mount->mountpoint](const wire::WatchEvent& e) {
          return Result<std::string>(HostPath(mp, e.path));
        };
        peers.push_back(WatchPeer{ch, 0, host_path});
        return RunWatchStreams(peers, q, options_.timeout_ms, opts, on_event);
      }
    }
    q.creds = OwnOrGivenCredentials(opts.creds);
    PROPELLER_RETURN_IF_ERROR(ResolveScope(opts.volume, opts.scope, &q.volume, &q.scope));
    if (path_predicates) {
      PROPELLER_ASSIGN_OR_RETURN(q.roots, PathRoots(q.volume, opts.paths_under));
    }
    PROPELLER_ASSIGN_OR_RETURN(std::vector<wire::NodeInfo> nodes, UpNodes());
    for (const wire::NodeInfo& node : nodes) {
      PROPELLER_ASSIGN_OR_RETURN(rpc::Channel * ch, NodeChannel(node.endpoint));
      peers.push_back(WatchPeer{ch, node.node_id,
                                [this](const wire::WatchEvent& e) -> Result<std::string> {
                                  PROPELLER_ASSIGN_OR_RETURN(std::string root,
                                                             VolumeRoot(e.record.id.volume));
                                  return HostPath(root, e.path);
                                }});
    }
    return RunWatchStreams(peers, q, options_.timeout_ms, opts, on_event);
  }

  // Search through the query engine of `mount` (`scope` is inside it).
  Status SearchViaMount(const MountRecord& mount, const std::string& scope, wire::SearchQuery q,
                        const ClientSearchOptions& opts,
                        const std::function<bool(const ClientHit&)>& on_hit,
                        ClientSearchStats* stats_out) {
    q.scope = InMount(mount, scope);
    q.limit = opts.limit;
    q.sort_by = opts.sort_by;
    q.descending = opts.descending;
    q.creds.reset();  // the engine uses the kernel's word, not ours
    PROPELLER_ASSIGN_OR_RETURN(rpc::Channel * ch, MountChannel(mount));
    const std::string prefix = mount.mountpoint == "/" ? "" : mount.mountpoint;
    Status chunk_error;
    bool stopped = false;
    uint64_t delivered = 0;
    auto on_chunk = [&](std::string_view bytes) -> bool {
      wire::SearchHitsChunk chunk;
      Status st = wire::Decode(bytes, &chunk);
      if (!st.ok()) {
        chunk_error = st.WithContext("query engine of " + mount.mountpoint);
        return false;
      }
      for (wire::WireHit& h : chunk.hits) {
        ClientHit hit;
        hit.path = h.path == "/" ? (prefix.empty() ? "/" : prefix) : prefix + h.path;
        hit.record = std::move(h.record);
        hit.acg = h.acg;
        ++delivered;
        if (!on_hit(hit)) {
          stopped = true;
          return false;
        }
      }
      return true;
    };
    wire::SearchDone done;
    Status st = wire::WireCall(*ch, wire::MsgType::kSearch, q, &done, CallOpts(true), nullptr,
                               on_chunk);
    if (!chunk_error.ok()) return chunk_error;
    if (!st.ok() && !(stopped && st.code() == StatusCode::kAborted)) {
      if ((st.code() == StatusCode::kTimeout || st.code() == StatusCode::kUnavailable) &&
          !IsIndexCatchingUp(st)) {
        return st.WithContext("the query engine of the mount at " + mount.mountpoint +
                              " (pid " + std::to_string(mount.pid) + ") does not answer");
      }
      return st;
    }
    if (stats_out != nullptr) {
      *stats_out = ClientSearchStats{};
      stats_out->nodes = 1;
      stats_out->acgs_total = done.acgs_total;
      stats_out->acgs_skipped = done.acgs_skipped;
      stats_out->candidates = done.candidates;
      stats_out->hits = delivered;
    }
    return Status::OK();
  }

  std::optional<wire::WireCredentials> OwnOrGivenCredentials(
      const std::optional<ClientCredentials>& given) {
    wire::WireCredentials c;
    if (given) {
      c.uid = given->uid;
      c.gid = given->gid;
      c.groups = given->groups;
      return c;
    }
    c.uid = ::geteuid();
    c.gid = ::getegid();
    int n = ::getgroups(0, nullptr);
    if (n > 0) {
      std::vector<gid_t> groups(static_cast<size_t>(n));
      n = ::getgroups(n, groups.data());
      for (int i = 0; i < n; ++i) c.groups.push_back(groups[static_cast<size_t>(i)]);
    }
    return c;
  }

  // The nodes a search must reach (UpNodes), remembered for the next search (Search).
  Result<std::vector<wire::NodeInfo>> SearchTargets() {
    Result<std::vector<wire::NodeInfo>> targets = UpNodes();
    std::lock_guard<std::mutex> lock(targets_mu_);
    last_targets_ = targets.ok() ? *targets : std::vector<wire::NodeInfo>{};
    return targets;
  }

  // Every up node. A down node that holds ACGs makes a search's answer incomplete, so that is
  // an error.
  Result<std::vector<wire::NodeInfo>> UpNodes() {
    wire::NodesReply rep;
    PROPELLER_RETURN_IF_ERROR(MasterCall(wire::MsgType::kListNodes, wire::Empty{}, &rep));
    std::vector<wire::NodeInfo> targets;
    for (const wire::NodeInfo& n : rep.nodes) {
      if (n.up) {
        targets.push_back(n);
      } else if (n.acgs > 0) {
        return Status::Unavailable("index node " + std::to_string(n.node_id) + " (" + n.endpoint +
                                   ") is down: search results would be incomplete");
      }
    }
    return targets;
  }

  std::vector<wire::NodeInfo> LastSearchTargets() {
    std::lock_guard<std::mutex> lock(targets_mu_);
    return last_targets_;
  }

  // Whether two answers of SearchTargets name the same nodes at the same endpoints.
  static bool SameNodes(const std::vector<wire::NodeInfo>& a,
                        const std::vector<wire::NodeInfo>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].node_id != b[i].node_id || a[i].endpoint != b[i].endpoint) return false;
    }
    return true;
  }

  // What the nodes of one search reported beside their hits (SearchDone): ACGs migrating
  // (.moved, .adopted) and user attributes they do not know (.unknown_attrs).
  struct NodeReports {
    std::vector<std::pair<uint64_t, uint32_t>> moved;  // ACG, the node it went to
    std::set<uint64_t> adopted;
    // The user attributes of the query that no node answering so far knows (SearchDone
    // .unknown_attrs, intersected); unset before the first answer.
    std::optional<std::set<std::string>> unknown_attrs;
  };

  Status SearchNode(const wire::NodeInfo& node, const wire::SearchQuery& q,
                    const std::atomic<bool>& stop,
                    const std::function<void(std::vector<ClientHit>&&)>& emit,
                    ClientSearchStats* stats, std::mutex* stats_mu, NodeReports* reports) {
    PROPELLER_ASSIGN_OR_RETURN(rpc::Channel * ch, NodeChannel(node.endpoint));
    Status chunk_error;
    auto on_chunk = [&](std::string_view bytes) -> bool {
      if (stop.load()) return false;
      wire::SearchHitsChunk chunk;
      Status st = wire::Decode(bytes, &chunk);
      if (!st.ok()) {
        chunk_error = st.WithContext(node.endpoint + ": search results");
        return false;
      }
      std::vector<ClientHit> hits;
      hits.reserve(chunk.hits.size());
      for (wire::WireHit& h : chunk.hits) {
        Result<std::string> root = VolumeRoot(h.record.id.volume);
        if (!root.ok()) {
          chunk_error = root.status();
          return false;
        }
        ClientHit hit;
        hit.path = HostPath(*root, h.path);
        hit.record = std::move(h.record);
        hit.acg = h.acg;
        hit.node_id = node.node_id;
        hits.push_back(std::move(hit));
      }
      emit(std::move(hits));
      return true;
    };
    wire::SearchDone done;
    // A search has no side effects: retry it on a timeout (before any hit arrived).
    Status st = wire::WireCall(*ch, wire::MsgType::kSearch, q, &done, CallOpts(true), nullptr,
                               on_chunk);
    if (!chunk_error.ok()) return chunk_error;
    if (!st.ok()) return st;
    std::lock_guard<std::mutex> lock(*stats_mu);
    stats->acgs_total += done.acgs_total;
    stats->acgs_skipped += done.acgs_skipped;
    stats->candidates += done.candidates;
    for (const wire::AcgLocation& m : done.moved) reports->moved.emplace_back(m.acg, m.node_id);
    reports->adopted.insert(done.adopted.begin(), done.adopted.end());
    std::set<std::string> unknown(done.unknown_attrs.begin(), done.unknown_attrs.end());
    if (reports->unknown_attrs) {
      std::erase_if(unknown, [&](const std::string& n) {
        return reports->unknown_attrs->count(n) == 0;
      });
    }
    reports->unknown_attrs = std::move(unknown);
    return Status::OK();
  }

  // ---- updates ----------------------------------------------------------------------------

  // Fills (*routes)[i] for every update; acg 0 marks an update to drop (delete of an unknown
  // file). A created file (FileUpdate::created) is always placed afresh by the master, whatever
  // the cache says: the cached route can only be that of a deleted file with its number.
  Status RouteFiles(std::span<const FileUpdate> updates, std::vector<FileRoute>* routes) {
    routes->assign(updates.size(), FileRoute{});
    wire::AssignFilesRequest assign;
    wire::FilesRequest lookup;
    std::set<FileId> asked;  // only for batches: one update never asks twice
    for (size_t i = 0; i < updates.size(); ++i) {
      const FileUpdate& u = updates[i];
      if (u.op == UpdateOp::kDelete && (u.acg != 0 || u.generation == kNotIndexed)) {
        (*routes)[i] = FileRoute{u.acg, u.generation};  // resolved before the name went
        continue;
      }
      const bool fresh = u.created && u.op == UpdateOp::kPut;
      if (!fresh) {
        if (auto route = cache_.FileRouteOf(u.record.id)) {
          (*routes)[i] = *route;
          continue;
        }
      }
      if (updates.size() > 1 && !asked.insert(u.record.id).second) {
        if (fresh) {  // the same file again, now known to be new: ask for a fresh placement
          for (wire::AssignItem& item : assign.items) item.fresh |= item.file == u.record.id;
        }
        continue;
      }
      // A forget of this number queued by an earlier delete must not overtake this request
      // (a non-fresh answer would be the mapping it forgets); a fresh one makes it moot.
      forgetter_.Settle(u.record.id, /*wait=*/!fresh);
      if (u.op == UpdateOp::kPut || u.op == UpdateOp::kAddEdge) {
        wire::AssignItem item;
        item.file = u.record.id;
        item.app = u.app;
        item.producers = u.producers;
        item.fresh = fresh;
        assign.items.push_back(std::move(item));
      } else {
        lookup.files.push_back(u.record.id);
      }
    }
    if (assign.items.empty() && lookup.files.empty()) return Status::OK();
    std::map<FileId, FileRoute> found;
    auto remember = [&](const std::vector<wire::FileLocation>& locations) {
      for (const wire::FileLocation& loc : locations) {
        if (loc.acg == 0) continue;
        found[loc.file] = FileRoute{loc.acg, loc.generation};
        cache_.PutFile(loc.file, loc.acg, loc.generation);
        if (loc.node_id != 0) cache_.PutAcg(loc.acg, NodeAddress{loc.node_id, loc.endpoint});
      }
    };
    if (!assign.items.empty()) {
      wire::LocationsReply rep;
      // Assigning twice gives the same answer (a mapped file keeps its ACG), and a fresh
      // placement resent after a timeout only renews the generation: retry is safe.
      PROPELLER_RETURN_IF_ERROR(MasterCall(wire::MsgType::kAssignFiles, assign, &rep));
      remember(rep.locations);
    }
    if (!lookup.files.empty()) {
      wire::LocationsReply rep;
      PROPELLER_RETURN_IF_ERROR(MasterCall(wire::MsgType::kLookupFiles, lookup, &rep));
      remember(rep.locations);
    }
    for (size_t i = 0; i < updates.size(); ++i) {
      if ((*routes)[i].acg != 0) continue;
      auto it = found.find(updates[i].record.id);
      if (it != found.end()) {
        (*routes)[i] = it->second;
      } else if (updates[i].op == UpdateOp::kSetAttrs || updates[i].op == UpdateOp::kRemoveAttrs) {
        return Status::NotFound(FileName(updates[i].record.id) + " is not indexed");
      } else if (updates[i].op != UpdateOp::kDelete) {
        return Status::Internal("the master did not place " + FileName(updates[i].record.id));
      }
    }
    return Status::OK();
  }

  // The node of every ACG in `acgs`, asking the master for the unknown ones.
  Result<std::map<uint64_t, NodeAddress>> LocateAcgs(const std::set<uint64_t>& acgs) {
    std::map<uint64_t, NodeAddress> out;
    wire::LocateAcgsRequest req;
    for (uint64_t acg : acgs) {
      if (auto node = cache_.AcgNode(acg)) {
        out[acg] = *node;
      } else {
        req.acgs.push_back(acg);
      }
    }
    if (req.acgs.empty()) return out;
    wire::AcgLocationsReply rep;
    PROPELLER_RETURN_IF_ERROR(MasterCall(wire::MsgType::kLocateAcgs, req, &rep));
    for (const wire::AcgLocation& loc : rep.locations) {
      if (loc.node_id == 0) {
        return Status::NotFound("the master knows no node for ACG " + std::to_string(loc.acg));
      }
      NodeAddress addr{loc.node_id, loc.endpoint};
      cache_.PutAcg(loc.acg, addr);
      out[loc.acg] = addr;
    }
    return out;
  }

  Status SendUpdates(std::span<const FileUpdate> updates) {
    if (updates.empty()) return Status::OK();
    std::vector<FileRoute> routes;
    PROPELLER_RETURN_IF_ERROR(RouteFiles(updates, &routes));
    std::vector<propeller::Update> pending;
    std::vector<std::pair<FileId, uint64_t>> deleted;  // file, generation of its mapping
    pending.reserve(updates.size());
    for (size_t i = 0; i < updates.size(); ++i) {
      if (routes[i].acg == 0) continue;  // delete of a file nobody indexed: nothing to do
      propeller::Update& u = pending.emplace_back();
      u.op = updates[i].op;
      u.acg = routes[i].acg;
      u.record = updates[i].record;
      u.edge_dst = updates[i].edge_dst;
      u.edge_weight = updates[i].edge_weight;
      u.edge_dst_generation = updates[i].edge_dst_generation;
      if (u.op == UpdateOp::kDelete) deleted.emplace_back(u.record.id, routes[i].generation);
    }
    for (int attempt = 0; !pending.empty(); ++attempt) {
      if (attempt == kMaxRouteAttempts) {
        return Status::Unavailable("updates for ACG " + std::to_string(pending[0].acg) +
                                   " keep being redirected; the cluster is reconfiguring");
      }
      const bool one_acg = std::all_of(pending.begin(), pending.end(), [&](const auto& u) {
        return u.acg == pending[0].acg;
      });
      PROPELLER_RETURN_IF_ERROR(one_acg ? SendToOneAcg(&pending, attempt)
                                        : SendGrouped(&pending, attempt));
    }
    for (const auto& [id, gen] : deleted) {
      // The records are gone; the master's map entries only steer placement and ACG sizes.
      // Forget them in the background (Forgetter), conditional on the generation seen here.
      cache_.ForgetFile(id);
      forgetter_.Add(id, gen);
    }
    return Status::OK();
  }

  // What to do after a failed Apply of `batch`: OK = resend it (routes refreshed), else the
  // error to return. Unavailable = nothing was sent (no connection): the node may have moved
  // to another endpoint (restart) — ask the master again. A Timeout may have been applied, so
  // it is only the caller's to retry.
  Status AfterFailedApply(const Status& result, std::vector<propeller::Update>* batch,
                          const std::vector<wire::AcgLocation>& redirects, int attempt) {
    const bool moved = result.code() == StatusCode::kUnavailable;
    if (result.code() != StatusCode::kRedirect && !moved) return result;
    if (moved && attempt + 1 == kMaxRouteAttempts) return result;
    // The node does not own some of these ACGs: forget the routes, learn what it told us, and
    // resend the whole group (it applied none of it).
    for (const propeller::Update& u : *batch) cache_.ForgetAcg(u.acg);
    for (const wire::AcgLocation& loc : redirects) {
      // An endpoint-less location (an ACG that migrated: the node knows where to, not how to
      // reach it) is looked up again at the master.
      if (loc.node_id != 0 && !loc.endpoint.empty()) {
        cache_.PutAcg(loc.acg, NodeAddress{loc.node_id, loc.endpoint});
      }
    }
    if (result.code() == StatusCode::kRedirect) {
      // An update may have followed a split's route on the node into an ACG that migrated
      // since: the master maps the file to that ACG, so ask it for the files' ACGs too.
      PROPELLER_RETURN_IF_ERROR(RefreshFileAcgs(batch));
    }
    return Status::OK();
  }

  // Sets each update's ACG to the one the master maps its file to (when it maps it).
  Status RefreshFileAcgs(std::vector<propeller::Update>* batch) {
    wire::FilesRequest req;
    for (const propeller::Update& u : *batch) req.files.push_back(u.record.id);
    wire::LocationsReply rep;
    PROPELLER_RETURN_IF_ERROR(MasterCall(wire::MsgType::kLookupFiles, req, &rep));
    if (rep.locations.size() != batch->size()) {
      return Status::Unavailable("the master answered " + std::to_string(rep.locations.size()) +
                                 " locations for " + std::to_string(batch->size()) + " files");
    }
    for (size_t i = 0; i < batch->size(); ++i) {
      const wire::FileLocation& loc = rep.locations[i];
      if (loc.acg == 0) continue;
      (*batch)[i].acg = loc.acg;
      cache_.PutFile(loc.file, loc.acg, loc.generation);
    }
    return Status::OK();
  }

  // The common case (one update, or a batch of one ACG): no grouping, no threads, no copies.
  // On return *pending holds what must be resent (after a redirect), else nothing.
  Status SendToOneAcg(std::vector<propeller::Update>* pending, int attempt) {
    const uint64_t acg = (*pending)[0].acg;
    std::optional<NodeAddress> owner = cache_.AcgNode(acg);
    if (!owner) {
      PROPELLER_ASSIGN_OR_RETURN(auto owners, LocateAcgs({acg}));
      owner = owners[acg];
    }
    PROPELLER_ASSIGN_OR_RETURN(NodeLink * link, NodeLinkOf(owner->endpoint));
    ApplyQueue::Outcome out = ApplyOnNode(link, pending);
    if (out.status.ok()) {
      pending->clear();
      return out.status;
    }
    return AfterFailedApply(out.status, pending, out.redirects, attempt);
  }

  // Sends *batch to the node of `link` through its ApplyQueue (shared with concurrent
  // callers); *batch is intact on return.
  ApplyQueue::Outcome ApplyOnNode(NodeLink* link, std::vector<propeller::Update>* batch) {
    auto send = [this, link](std::vector<propeller::Update>* updates) {
      if (options_.before_apply_for_test) options_.before_apply_for_test();
      apply_calls_.fetch_add(1, std::memory_order_relaxed);
      updates_sent_.fetch_add(updates->size(), std::memory_order_relaxed);
      wire::ApplyRequest req;
      req.updates = std::move(*updates);
      wire::Empty rep;
      ApplyQueue::Outcome out;
      out.status = wire::WireCall(*link->channel, wire::MsgType::kApply, req, &rep,
                                  CallOpts(IsIdempotent(req.updates)), &out.redirects);
      *updates = std::move(req.updates);
      return out;
    };
    return link->queue.Send(batch, send);
  }

  // Updates of several ACGs: one Apply per owning node, in parallel.
  Status SendGrouped(std::vector<propeller::Update>* pending, int attempt) {
    std::set<uint64_t> acg_set;
    for (const propeller::Update& u : *pending) acg_set.insert(u.acg);
    PROPELLER_ASSIGN_OR_RETURN(auto owners, LocateAcgs(acg_set));
    std::map<std::string, std::vector<propeller::Update>> groups;  // by node endpoint
    for (propeller::Update& u : *pending) groups[owners[u.acg].endpoint].push_back(std::move(u));
    pending->clear();
    std::vector<std::string> endpoints;
    std::vector<std::vector<propeller::Update>*> batches;
    for (auto& [endpoint, batch] : groups) {
      endpoints.push_back(endpoint);
      batches.push_back(&batch);
    }
    std::vector<Status> results(batches.size());
    std::vector<std::vector<wire::AcgLocation>> redirects(batches.size());
    auto send = [&](size_t g) {
      Result<NodeLink*> link = NodeLinkOf(endpoints[g]);
      if (!link.ok()) {
        results[g] = link.status();
        return;
      }
      ApplyQueue::Outcome out = ApplyOnNode(*link, batches[g]);
      results[g] = std::move(out.status);
      redirects[g] = std::move(out.redirects);
    };
    if (batches.size() == 1) {
      send(0);
    } else {
      std::vector<std::thread> threads;
      for (size_t g = 0; g < batches.size(); ++g) {
        threads.push_back(ThreadUnderDeadline([&send, g] { send(g); }));
      }
      for (std::thread& t : threads) t.join();
    }
    for (size_t g = 0; g < batches.size(); ++g) {
      if (results[g].ok()) continue;
      PROPELLER_RETURN_IF_ERROR(AfterFailedApply(results[g], batches[g], redirects[g], attempt));
      for (propeller::Update& u : *batches[g]) pending->push_back(std::move(u));
    }
    return Status::OK();
  }

  Status ResolveRoutes(std::span<FileUpdate> updates) {
    std::vector<FileUpdate> deletes;
    std::vector<size_t> at;
    for (size_t i = 0; i < updates.size(); ++i) {
      if (updates[i].op != UpdateOp::kDelete || updates[i].acg != 0) continue;
      FileUpdate d;
      d.op = UpdateOp::kDelete;
      d.record.id = updates[i].record.id;
      deletes.push_back(std::move(d));
      at.push_back(i);
    }
    if (deletes.empty()) return Status::OK();
    std::vector<FileRoute> routes;
    PROPELLER_RETURN_IF_ERROR(RouteFiles(deletes, &routes));
    for (size_t k = 0; k < at.size(); ++k) {
      updates[at[k]].acg = routes[k].acg;
      updates[at[k]].generation = routes[k].acg != 0 ? routes[k].generation : kNotIndexed;
    }
    return Status::OK();
  }

  Status FlushForgets() { return forgetter_.Flush(); }

  Result<FileRecord> Get(FileId id) {
    for (int attempt = 0; attempt < kMaxRouteAttempts; ++attempt) {
      std::optional<uint64_t> acg = cache_.FileAcg(id);
      if (!acg) {
        wire::FilesRequest req;
        req.files = {id};
        wire::LocationsReply rep;
        PROPELLER_RETURN_IF_ERROR(MasterCall(wire::MsgType::kLookupFiles, req, &rep));
        if (rep.locations.size() != 1 || rep.locations[0].acg == 0) {
          return Status::NotFound(FileName(id) + " is not indexed");
        }
        const wire::FileLocation& loc = rep.locations[0];
        cache_.PutFile(id, loc.acg, loc.generation);
        if (loc.node_id != 0) cache_.PutAcg(loc.acg, NodeAddress{loc.node_id, loc.endpoint});
        acg = loc.acg;
      }
      PROPELLER_ASSIGN_OR_RETURN(auto owners, LocateAcgs({*acg}));
      PROPELLER_ASSIGN_OR_RETURN(rpc::Channel * ch, NodeChannel(owners[*acg].endpoint));
      wire::GetRecordRequest req;
      req.acg = *acg;
      req.file = id;
      wire::RecordReply rep;
      std::vector<wire::AcgLocation> redirects;
      Status st = wire::WireCall(*ch, wire::MsgType::kGetRecord, req, &rep, CallOpts(true),
                                 &redirects);
      if (st.ok()) return std::move(rep.record);
      if (st.code() != StatusCode::kRedirect) return st;
      cache_.ForgetAcg(*acg);
      cache_.ForgetFile(id);
    }
    return Status::Unavailable(FileName(id) + ": its ACG keeps being redirected");
  }

  Status AttrUpdate(UpdateOp op, FileId id, const std::string& name, const AttrValue& value) {
    if (op == UpdateOp::kSetAttrs) {
      // The index node refuses it too; here it is said without a round trip.
      const std::string why = CheckUserAttrName(name);
      if (!why.empty()) {
        return Status::InvalidArgument("bad user attribute name '" + name + "': " + why);
      }
    }
    FileUpdate u;
    u.op = op;
    u.record.id = id;
    u.record.attrs[name] = value;
    return SendUpdates(std::span<const FileUpdate>(&u, 1));
  }

  // ---- indexes and status -----------------------------------------------------------------

  // Runs `call` against every up node in parallel; the first error wins.
  Status ForEachUpNode(const std::function<Status(rpc::Channel&)>& call) {
    wire::NodesReply nodes;
    PROPELLER_RETURN_IF_ERROR(MasterCall(wire::MsgType::kListNodes, wire::Empty{}, &nodes));
    std::vector<Status> results(nodes.nodes.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < nodes.nodes.size(); ++i) {
      if (!nodes.nodes[i].up) continue;
      threads.emplace_back([&, i] {
        Result<rpc::Channel*> ch = NodeChannel(nodes.nodes[i].endpoint);
        results[i] = ch.ok() ? call(**ch) : ch.status();
      });
    }
    for (std::thread& t : threads) t.join();
    for (const Status& st : results) PROPELLER_RETURN_IF_ERROR(st);
    return Status::OK();
  }

  Status CreateIndex(const std::string& name, IndexType type) {
    wire::IndexDef def;
    def.name = name;
    def.type = type;
    wire::Empty rep;
    PROPELLER_RETURN_IF_ERROR(MasterCall(wire::MsgType::kCreateIndex, def, &rep, false));
    // Build it everywhere now, so attributes set next are indexed at once (a node that misses
    // this gets it from its next heartbeat).
    return ForEachUpNode([&](rpc::Channel& ch) {
      wire::Empty r;
      Status st = wire::WireCall(ch, wire::MsgType::kCreateIndex, def, &r, CallOpts(true));
      return st.code() == StatusCode::kAlreadyExists ? Status::OK() : st;
    });
  }

  Status DropIndex(const std::string& name) {
    wire::IndexName req;
    req.name = name;
    wire::Empty rep;
    PROPELLER_RETURN_IF_ERROR(MasterCall(wire::MsgType::kDropIndex, req, &rep, false));
    return ForEachUpNode([&](rpc::Channel& ch) {
      wire::Empty r;
      Status st = wire::WireCall(ch, wire::MsgType::kDropIndex, req, &r, CallOpts(true));
      return st.IsNotFound() ? Status::OK() : st;
    });
  }

  Result<std::vector<wire::IndexDef>> ListIndexes() {
    wire::IndexesReply rep;
    PROPELLER_RETURN_IF_ERROR(MasterCall(wire::MsgType::kListIndexes, wire::Empty{}, &rep));
    return std::move(rep.indexes);
  }

  Result<ClusterStatus> GetStatus() {
    wire::ClusterStatusReply rep;
    PROPELLER_RETURN_IF_ERROR(MasterCall(wire::MsgType::kClusterStatus, wire::Empty{}, &rep));
    ClusterStatus out;
    out.master_endpoint = options_.master_endpoint;
    out.acgs = rep.acgs;
    out.files = rep.files;
    out.indexes = std::move(rep.indexes);
    out.volumes = std::move(rep.volumes);
    out.nodes.resize(rep.nodes.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < rep.nodes.size(); ++i) {
      out.nodes[i].info = rep.nodes[i];
      if (!rep.nodes[i].up) {
        out.nodes[i].error = "down (missed heartbeats)";
        continue;
      }
      threads.emplace_back([&, i] {
        NodeStatus& ns = out.nodes[i];
        Result<rpc::Channel*> ch = NodeChannel(ns.info.endpoint);
        wire::NodeStatusReply r;
        Status st = ch.ok() ? wire::WireCall(**ch, wire::MsgType::kNodeStatus, wire::Empty{}, &r,
                                             CallOpts(true))
                            : ch.status();
        if (st.ok()) {
          ns.node = std::move(r);
        } else {
          ns.error = st.ToString();
        }
      });
    }
    for (std::thread& t : threads) t.join();
    return out;
  }

  Result<wire::MigrateAcgReply> MoveAcg(uint64_t acg, uint32_t to_node, int64_t timeout_ms) {
    cache_.ForgetAcg(acg);
    PROPELLER_ASSIGN_OR_RETURN(auto owners, LocateAcgs({acg}));
    const NodeAddress owner = owners[acg];
    if (owner.node_id == to_node) {
      return Status::InvalidArgument("ACG " + std::to_string(acg) + " is on node " +
                                     std::to_string(to_node) + " already");
    }
    PROPELLER_ASSIGN_OR_RETURN(rpc::Channel * ch, NodeChannel(owner.endpoint));
    rpc::CallOptions call = CallOpts(/*idempotent=*/false);
    call.timeout_ms = timeout_ms;
    wire::MigrateAcgReply reply;
    PROPELLER_RETURN_IF_ERROR(wire::WireCall(*ch, wire::MsgType::kMigrateAcg,
                                             wire::MigrateAcgRequest{acg, to_node}, &reply,
                                             call));
    cache_.ForgetAcg(acg);
    return reply;
  }

  Result<std::vector<AcgEdge>> ListEdges() {
    PROPELLER_ASSIGN_OR_RETURN(std::vector<wire::NodeInfo> nodes, SearchTargets());
    std::vector<AcgEdge> out;
    for (const wire::NodeInfo& node : nodes) {
      PROPELLER_ASSIGN_OR_RETURN(rpc::Channel * ch, NodeChannel(node.endpoint));
      wire::EdgesReply r;
      PROPELLER_RETURN_IF_ERROR(wire::WireCall(*ch, wire::MsgType::kListEdges,
                                               wire::ListEdgesRequest{}, &r, CallOpts(true))
                                    .WithContext(node.endpoint));
      if (r.truncated) {
        return Status::ResourceExhausted(node.endpoint + " holds more than " +
                                         std::to_string(wire::kMaxEdgesPerReply) +
                                         " edges; list them per ACG");
      }
      for (const wire::WireEdge& e : r.edges) {
        out.push_back(AcgEdge{e.acg, e.src, e.dst, e.weight, e.src_generation, e.dst_generation});
      }
    }
    return out;
  }

 private:
  ClientOptions options_;
  std::mutex link_mu_;
  std::optional<rpc::LinkSecurity> link_;  // Under link_mu_; constant once set.

  std::mutex master_mu_;
  std::unique_ptr<rpc::Channel> master_;  // Under master_mu_; constant once set; thread-safe.
  RoutingCache cache_;
  // Destroyed before master_ (declared after it): its destructor still sends.
  Forgetter forgetter_{[this](const wire::FilesRequest& req) {
    wire::Empty rep;
    return MasterCall(wire::MsgType::kForgetFiles, req, &rep);
  }};

  std::mutex channels_mu_;
  std::unordered_map<std::string, std::unique_ptr<NodeLink>> channels_;  // Under channels_mu_.

  std::atomic<uint64_t> apply_calls_{0};
  std::atomic<uint64_t> updates_sent_{0};

  std::mutex targets_mu_;
  std::vector<wire::NodeInfo> last_targets_;  // SearchTargets' last answer. Under targets_mu_.
  std::mutex volumes_mu_;
  std::vector<wire::VolumeInfo> volumes_;  // Under volumes_mu_.
};

std::string DefaultMasterEndpoint() {
  if (const char* env = std::getenv("PROPELLER_MASTER"); env != nullptr && *env != '\0') {
    return env;
  }
  // Working inside a Propeller mount: the service that holds it (an embedded mount's master
  // listens on a socket of its own, not on master.sock).
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof(cwd)) != nullptr) {
    Result<std::optional<MountRecord>> mount = FindMountFor(cwd);
    if (mount.ok() && *mount && !(*mount)->master_endpoint.empty()) {
      return (*mount)->master_endpoint;
    }
  }
  for (const std::string& dir : {DefaultRuntimeDir(), std::string("/run/propeller")}) {
    const std::string socket = dir + "/master.sock";
    struct stat st;
    if (::stat(socket.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) return "ipc://" + socket;
  }
  // No `propeller up`: the one service every mount of this host uses, if they share one.
  std::set<std::string> masters;
  for (const MountRecord& m : ListMounts()) {
    if (!m.master_endpoint.empty()) masters.insert(m.master_endpoint);
  }
  if (masters.size() == 1) return *masters.begin();
  return kDefaultMasterEndpoint;
}

Result<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  PROPELLER_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Status Client::Search(const std::string& query, const ClientSearchOptions& options,
                      const std::function<bool(const ClientHit&)>& on_hit,
                      ClientSearchStats* stats) {
  return impl_->Search(query, options, on_hit, stats);
}

Result<std::vector<ClientHit>> Client::SearchAll(const std::string& query,
                                                 const ClientSearchOptions& options,
                                                 ClientSearchStats* stats) {
  std::vector<ClientHit> hits;
  PROPELLER_RETURN_IF_ERROR(impl_->Search(
      query, options,
      [&](const ClientHit& h) {
        hits.push_back(h);
        return true;
      },
      stats));
  return hits;
}

Status Client::Watch(const std::string& query, const ClientWatchOptions& options,
                     const std::function<bool(const ClientWatchEvent&)>& on_event) {
  return impl_->Watch(query, options, on_event);
}

Result<uint32_t> Client::RegisterVolume(const std::string& root) {
  return impl_->RegisterVolume(root);
}
Result<std::vector<wire::VolumeInfo>> Client::ListVolumes() { return impl_->ListVolumes(); }

Status Client::RemoveVolume(uint32_t volume, const std::string& root, uint64_t* removed) {
  if (removed != nullptr) *removed = 0;
  // Every record first (their routes come from the master's map, which goes last).
  ClientSearchOptions so;
  so.volume = volume;
  so.scope = "/";
  PROPELLER_ASSIGN_OR_RETURN(std::vector<ClientHit> hits, SearchAll("size>=0", so));
  std::vector<FileUpdate> batch;
  std::unordered_set<FileId, FileIdHash> done;
  for (const ClientHit& h : hits) {
    if (!done.insert(h.record.id).second) continue;  // one hit per link
    FileUpdate u;
    u.op = UpdateOp::kDelete;
    u.record.id = h.record.id;  // unconditional
    batch.push_back(std::move(u));
    if (batch.size() >= 1000) {
      PROPELLER_RETURN_IF_ERROR(Update(batch));
      batch.clear();
    }
  }
  if (!batch.empty()) PROPELLER_RETURN_IF_ERROR(Update(batch));
  if (removed != nullptr) *removed = done.size();
  wire::Empty rep;
  PROPELLER_RETURN_IF_ERROR(
      impl_->MasterCall(wire::MsgType::kRemoveVolume, wire::VolumeInfo{volume, root}, &rep));
  return ListVolumes().status();  // the cached list forgets it
}
Result<std::pair<uint32_t, std::string>> Client::ResolvePath(const std::string& path) {
  return impl_->ResolvePath(path);
}
Result<FileId> Client::FileIdOf(const std::string& path) {
  PROPELLER_ASSIGN_OR_RETURN(auto resolved, impl_->ResolvePath(path));
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return Status::IOError("stat " + path, errno);
  return FileId{resolved.first, static_cast<uint64_t>(st.st_ino)};
}
Status Client::Update(std::span<const FileUpdate> updates) { return impl_->SendUpdates(updates); }

Client::Deadline::Deadline(int64_t ms) : saved_ns_(t_deadline_ns) {
  const int64_t at = SteadyNanos() + std::max<int64_t>(ms, 0) * 1'000'000;
  t_deadline_ns = saved_ns_ != 0 ? std::min(saved_ns_, at) : at;
}
Client::Deadline::~Deadline() { t_deadline_ns = saved_ns_; }
Status Client::ResolveRoutes(std::span<FileUpdate> updates) {
  return impl_->ResolveRoutes(updates);
}
Status Client::FlushForgets() { return impl_->FlushForgets(); }
Result<FileRecord> Client::Get(FileId id) { return impl_->Get(id); }
Status Client::SetAttr(FileId id, const std::string& name, const AttrValue& value) {
  return impl_->AttrUpdate(UpdateOp::kSetAttrs, id, name, value);
}
Status Client::RemoveAttr(FileId id, const std::string& name) {
  return impl_->AttrUpdate(UpdateOp::kRemoveAttrs, id, name, int64_t{0});
}
Status Client::CreateIndex(const std::string& name, IndexType type) {
  return impl_->CreateIndex(name, type);
}
Status Client::DropIndex(const std::string& name) { return impl_->DropIndex(name); }
Result<std::vector<wire::IndexDef>> Client::ListIndexes() { return impl_->ListIndexes(); }
Result<ClusterStatus> Client::GetStatus() { return impl_->GetStatus(); }
Result<std::vector<AcgEdge>> Client::ListEdges() { return impl_->ListEdges(); }
Result<wire::MigrateAcgReply> Client::MoveAcg(uint64_t acg, uint32_t to_node,
                                              int64_t timeout_ms) {
  return impl_->MoveAcg(acg, to_node, timeout_ms);
}
const std::string& Client::master_endpoint() const { return impl_->master_endpoint(); }
ClientUpdateStats Client::update_stats() { return impl_->update_stats(); }

}  // namespace propeller
