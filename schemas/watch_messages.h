// The wire messages of live queries (docs/cli.md `propeller watch`; docs/architecture.md §9):
// a client sends kWatch to every index node (or to a mount's query engine) and reads the
// stream of changes to the query's set of matches until it stops reading.
//
//   kWatch: WatchRequest -> WatchEventsChunk* (partial frames, no envelope), then a final reply
//           whose status says why the watch ended (its body is Empty).
//
// The first partial frame is an empty chunk sent once the watch is registered: every update
// the node acknowledges after it is reported. Later empty chunks are heartbeats (about one a
// second), so the client's per-frame timeout holds and a server learns when its client went
// away. A watcher that does not read fast enough is told so: the stream ends with
// ResourceExhausted ("fell behind") instead of silently skipping changes.
//
// Same encoding rules as messages.h (field tables in watch_messages.cc).
#ifndef PROPELLER_SCHEMAS_WATCH_MESSAGES_H_
#define PROPELLER_SCHEMAS_WATCH_MESSAGES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/record.h"
#include "common/status.h"
#include "schemas/messages.h"

namespace propeller::wire {

struct WatchRequest {
  std::string query;                     // query text (docs/query.md)
  std::string scope = "/";               // in-volume, with `volume`; "/" = everything
  std::optional<uint32_t> volume;        // nil = every volume
  std::optional<WireCredentials> creds;  // honoured only from members (docs/security.md)
  int64_t now_ns = 0;                    // instant for ages; 0 = the node's clock
  uint64_t max_queued = 0;               // events the node may hold for this watcher; 0 = default
  std::vector<VolumeInfo> roots;         // as SearchQuery::roots
};

// How a file's match changed. The numbers are stable (they are on the wire).
enum class WatchKind : uint8_t {
  kAdded = 1,    // '+': the path started matching (created, renamed here, changed to match)
  kRemoved = 2,  // '-': it stopped matching (deleted, renamed away, changed not to match)
  kChanged = 3,  // '~': it matches before and after, and its record changed
};
char WatchKindSymbol(WatchKind kind);  // '+', '-', '~'

struct WatchEvent {
  WatchKind kind = WatchKind::kAdded;
  std::string path;   // in-volume
  FileRecord record;  // the record after the change (before it, for kRemoved)
  uint64_t acg = 0;
};
struct WatchEventsChunk {
  std::vector<WatchEvent> events;  // in the order the node applied the changes
  // In the first frame only: user attributes of the query this node does not know (as
  // SearchDone::unknown_attrs); a client refuses the watch when no node knows one.
  std::vector<std::string> unknown_attrs;
};

void Encode(const WatchRequest& msg, std::string* out);
Status Decode(std::string_view bytes, WatchRequest* msg);
void Encode(const WatchEventsChunk& msg, std::string* out);
Status Decode(std::string_view bytes, WatchEventsChunk* msg);

}  // namespace propeller::wire

#endif  // PROPELLER_SCHEMAS_WATCH_MESSAGES_H_
