// RunWatchStreams: the client's half of a live query (Client::Watch; schemas/watch_messages.h).
// One kWatch stream per peer — every index node, or a mount's query engine — each read on its
// own thread; this thread delivers their events, in each peer's order.
//
// The watch ends when `on_event` or `on_idle` returns false (OK: the streams are abandoned,
// which closes their sockets, and the peers notice at their next heartbeat), or when any
// stream ends (its status: a peer whose watch ended can no longer report everything).
#ifndef PROPELLER_CLIENT_LIB_WATCH_STREAM_H_
#define PROPELLER_CLIENT_LIB_WATCH_STREAM_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "client/lib/propeller.h"
#include "common/rpc/rpc.h"
#include "common/status.h"
#include "schemas/watch_messages.h"

namespace propeller {

struct WatchPeer {
  rpc::Channel* channel = nullptr;  // not owned; outlives the call
  uint32_t node_id = 0;             // reported in ClientWatchEvent::node_id
  // The path an event prints (e.g. the volume's root + the in-volume path).
  std::function<Result<std::string>(const wire::WatchEvent&)> host_path;
};

// `frame_timeout_ms`: how long a stream may stay silent (peers send heartbeats each second).
Status RunWatchStreams(const std::vector<WatchPeer>& peers, const wire::WatchRequest& request,
                       int64_t frame_timeout_ms, const ClientWatchOptions& options,
                       const std::function<bool(const ClientWatchEvent&)>& on_event);

}  // namespace propeller

#endif  // PROPELLER_CLIENT_LIB_WATCH_STREAM_H_
