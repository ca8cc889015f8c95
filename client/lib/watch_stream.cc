#include "client/lib/watch_stream.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "common/query/query.h"
#include "schemas/wire_call.h"

namespace propeller {

Status RunWatchStreams(const std::vector<WatchPeer>& peers, const wire::WatchRequest& request,
                       int64_t frame_timeout_ms, const ClientWatchOptions& options,
                       const std::function<bool(const ClientWatchEvent&)>& on_event) {
  if (peers.empty()) return Status::Unavailable("no index node is up to watch");
  // What the stream threads hand to this one. The queue is bounded by the peers' own
  // bounds: a stream thread waits here (and its peer's queue fills) while the caller is slow.
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<ClientWatchEvent> events;
    size_t ready = 0;      // streams registered
    size_t heartbeats = 0; // idle frames since the last delivery
    bool ended = false;    // a stream ended
    Status error;
    // The user attributes no registered stream's node knows yet (intersected); unset before
    // the first registration.
    std::optional<std::set<std::string>> unknown_attrs;
  } shared;
  constexpr size_t kMaxWaiting = 10'000;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (const WatchPeer& peer : peers) {
    threads.emplace_back([&, peer] {
      bool registered = false;
      Status chunk_error;
      auto on_chunk = [&](std::string_view bytes) -> bool {
        if (stop.load()) return false;
        wire::WatchEventsChunk chunk;
        Status st = wire::Decode(bytes, &chunk);
        if (!st.ok()) {
          chunk_error = st.WithContext(peer.channel->endpoint() + ": watch events");
          return false;
        }
        std::vector<ClientWatchEvent> got;
        for (wire::WatchEvent& e : chunk.events) {
          Result<std::string> path = peer.host_path(e);
          if (!path.ok()) {
            chunk_error = path.status();
            return false;
          }
          got.push_back(ClientWatchEvent{wire::WatchKindSymbol(e.kind), std::move(*path),
                                         std::move(e.record), peer.node_id});
        }
        std::unique_lock<std::mutex> lock(shared.mu);
        if (!registered) {
          registered = true;
          ++shared.ready;
          std::set<std::string> unknown(chunk.unknown_attrs.begin(), chunk.unknown_attrs.end());
          if (shared.unknown_attrs) {
            std::erase_if(unknown, [&](const std::string& n) {
              return shared.unknown_attrs->count(n) == 0;
            });
          }
          shared.unknown_attrs = std::move(unknown);
        } else if (got.empty()) {
          ++shared.heartbeats;
        }
        shared.cv.wait(lock, [&] { return stop.load() || shared.events.size() < kMaxWaiting; });
        for (ClientWatchEvent& e : got) shared.events.push_back(std::move(e));
        shared.cv.notify_all();
        return !stop.load();
      };
      rpc::CallOptions co;
      co.timeout_ms = frame_timeout_ms;
      co.idempotent = false;
      wire::Empty done;
      Status st = wire::WireCall(*peer.channel, wire::MsgType::kWatch, request, &done, co,
                                 nullptr, on_chunk);
      if (!chunk_error.ok()) st = chunk_error;
      if (st.ok()) st = Status::Aborted(peer.channel->endpoint() + " ended the watch");
      std::lock_guard<std::mutex> lock(shared.mu);
      if (!stop.load() && shared.error.ok()) shared.error = st;
      shared.ended = true;
      shared.cv.notify_all();
    });
  }

  bool announced = false;
  Status result;
  for (;;) {
    std::deque<ClientWatchEvent> batch;
    size_t heartbeats = 0;
    {
      std::unique_lock<std::mutex> lock(shared.mu);
      shared.cv.wait(lock, [&] {
        return shared.ended || !shared.events.empty() || shared.heartbeats > 0 ||
               (!announced && shared.ready == peers.size());
      });
      if (shared.ended && shared.events.empty()) {  // what came before the end goes out
        result = shared.error;
        break;
      }
      batch.swap(shared.events);
      heartbeats = shared.heartbeats;
      shared.heartbeats = 0;
      shared.cv.notify_all();
      if (!announced && shared.ready == peers.size()) {
        announced = true;
        if (shared.unknown_attrs && !shared.unknown_attrs->empty()) {
          // No node knows it: a typo (`sise>1m`), refused as a search refuses it.
          ParseOptions po;
          po.now_ns = request.now_ns;
          result = UnknownAttrError(
              request.query,
              std::vector<std::string>(shared.unknown_attrs->begin(), shared.unknown_attrs->end()),
              po);
          if (!result.ok()) break;
        }
        lock.unlock();
        if (options.on_ready) options.on_ready();
      }
    }
    bool go_on = true;
    for (const ClientWatchEvent& e : batch) {
      if (!on_event(e)) {
        go_on = false;
        break;
      }
    }
    if (go_on && batch.empty() && heartbeats > 0 && options.on_idle) go_on = options.on_idle();
    if (!go_on) break;
  }
  {
    std::lock_guard<std::mutex> lock(shared.mu);
    stop.store(true);
    shared.cv.notify_all();
  }
  for (std::thread& t : threads) t.join();
  return result;
}

}  // namespace propeller
