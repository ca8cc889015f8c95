// kWatch: a live query served by an index node (node_service.h; schemas/watch_messages.h).
#include <set>
#include <string>
#include <vector>

#include "indexnode/server/node_service.h"
#include "schemas/watch_messages.h"

namespace propeller {
namespace {

size_t EstimateEventBytes(const WatchEvent& e) {
  size_t n = 64 + e.path.size();
  for (const std::string& p : e.record.paths) n += p.size() + 2;
  return n;
}

}  // namespace

std::string NodeService::HandleWatch(std::string_view body, CallerAccess& caller,
                                     rpc::ReplyStream& out) {
  wire::WatchRequest q;
  Status st = wire::Decode(body, &q);
  if (!st.ok()) return BadRequest("watch", st);

  WatchSpec spec;
  spec.query = std::move(q.query);
  spec.scope = std::move(q.scope);
  spec.volume = q.volume;
  spec.now_ns = q.now_ns;
  spec.max_queued = static_cast<size_t>(q.max_queued);
  for (wire::VolumeInfo& v : q.roots) spec.volume_roots[v.volume] = std::move(v.root);
  std::optional<Credentials> claimed;
  if (q.creds) claimed = Credentials{q.creds->uid, q.creds->gid, std::move(q.creds->groups)};
  // Only a member's claim counts; an admin or user is who the kernel says (as for searches).
  spec.creds = caller.SearchCredentials(std::move(claimed));
  if (caller.filtered()) {
    // Decided now, for the volumes that exist now: the engine asks while it applies updates,
    // where no call to the master may be made. A volume registered later stays invisible to
    // this watch (start it again).
    Result<std::map<uint32_t, std::string>> roots = volume_roots_.All(/*refresh=*/true);
    if (!roots.ok()) {
      return wire::EncodeReply(
          Status::Unavailable("cannot check which volumes you may see: " +
                              roots.status().ToString()),
          {});
    }
    auto visible = std::make_shared<std::set<uint32_t>>();
    for (const auto& [volume, root] : *roots) {
      if (caller.VolumeVisible(volume)) visible->insert(volume);
    }
    spec.volume_visible = [visible](uint32_t volume) { return visible->count(volume) != 0; };
  }

  // Admission: each watch holds a worker thread of the node's server.
  const bool user = caller.filtered();
  const uint32_t uid = spec.creds ? spec.creds->uid : 0;
  {
    MutexLock lock(&watches_mu_);
    if (watches_ >= options_.max_watches) {
      return wire::EncodeReply(
          Status::ResourceExhausted("this index node runs " + std::to_string(watches_) +
                                    " watches, its limit; try again later"),
          {});
    }
    if (user && user_watches_[uid] >= options_.max_watches_per_user) {
      return wire::EncodeReply(
          Status::ResourceExhausted("uid " + std::to_string(uid) + " runs " +
                                    std::to_string(user_watches_[uid]) +
                                    " watches on this index node, the most a user may"),
          {});
    }
    ++watches_;
    if (user) ++user_watches_[uid];
  }
  struct Release {
    NodeService* self;
    bool user;
    uint32_t uid;
    ~Release() {
      MutexLock lock(&self->watches_mu_);
      --self->watches_;
      if (user && --self->user_watches_[uid] == 0) self->user_watches_.erase(uid);
    }
  } release{this, user, uid};

  // Names another node may know: reported in the first frame, as searches report them.
  std::vector<std::string> unknown_attrs;
  spec.report_unknown_attrs = &unknown_attrs;
  Result<std::unique_ptr<EngineWatch>> watch = engine_->Watch(spec);
  if (!watch.ok()) return wire::EncodeReply(watch.status(), {});

  // The first (empty) frame says the watch is registered; later empty ones are heartbeats.
  wire::WatchEventsChunk chunk;
  chunk.unknown_attrs = std::move(unknown_attrs);
  std::string frame;
  size_t chunk_bytes = 0;
  auto flush = [&]() -> bool {
    frame.clear();
    wire::Encode(chunk, &frame);
    chunk.events.clear();
    chunk.unknown_attrs.clear();
    chunk_bytes = 0;
    return out.Send(frame);
  };
  if (!flush()) return wire::EncodeReply(Status::Aborted("watch: the client went away"), {});
  std::vector<WatchEvent> events;
  for (;;) {
    events.clear();
    st = (*watch)->Next(&events, options_.watch_heartbeat_ms * 1'000'000);
    if (!st.ok()) return wire::EncodeReply(st, {});
    for (WatchEvent& e : events) {
      chunk_bytes += EstimateEventBytes(e);
      chunk.events.push_back(wire::WatchEvent{
          e.kind == '+'   ? wire::WatchKind::kAdded
          : e.kind == '-' ? wire::WatchKind::kRemoved
                          : wire::WatchKind::kChanged,
          std::move(e.path), std::move(e.record), e.acg});
      // A frame is bounded as a search chunk is (NodeServiceOptions::max_chunk_*).
      if (chunk.events.size() >= options_.max_chunk_hits ||
          chunk_bytes >= options_.max_chunk_bytes) {
        if (!flush()) return wire::EncodeReply(Status::Aborted("watch: the client went away"), {});
      }
    }
    if ((!chunk.events.empty() || events.empty()) && !flush()) {
      return wire::EncodeReply(Status::Aborted("watch: the client went away"), {});
    }
  }
}

}  // namespace propeller
