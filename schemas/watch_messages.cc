// msgpack codecs of the live-query messages (contract in watch_messages.h; how to read the
// field tables: messages.cc).
#include "schemas/watch_messages.h"

#include "schemas/wire_codec.h"

namespace propeller::wire {

char WatchKindSymbol(WatchKind kind) {
  switch (kind) {
    case WatchKind::kAdded: return '+';
    case WatchKind::kRemoved: return '-';
    case WatchKind::kChanged: return '~';
  }
  return '?';
}

namespace codec {

// WatchRequest (kWatch)
//   index field                  type               R  meaning                          since
//   0     query                  str                R  query text (docs/query.md)       1.5
//   1     scope                  str                   default "/"                      1.5
//   2     volume                 uint32?               nil = every volume               1.5
//   3     creds                  WireCredentials?      nil = none given                 1.5
//   4     now_ns                 int64                 0 = the node's clock             1.5
//   5     max_queued             uint                  0 = the node's default           1.5
//   6     roots                  [VolumeInfo]          as SearchQuery's                 1.5
void Put(Writer& w, const WatchRequest& m) {
  PutFields(w, m.query, m.scope, m.volume, m.creds, m.now_ns, m.max_queued, m.roots);
}
Status Get(const msgpack::object& o, WatchRequest* m) {
  return GetFields(o, 1, {"query", "scope", "volume", "creds", "now_ns", "max_queued", "roots"},
                   &m->query, &m->scope, &m->volume, &m->creds, &m->now_ns, &m->max_queued,
                   &m->roots);
}

// WatchEvent (inside WatchEventsChunk)
//   index field                  type               R  meaning                          since
//   0     kind                   uint 1..3          R  1 added, 2 removed, 3 changed    1.5
//   1     path                   str                R  in-volume path                   1.5
//   2     record                 FileRecord         R  record_format.cc array           1.5
//   3     acg                    uint                                                   1.5
void Put(Writer& w, const WatchEvent& m) {
  PutFields(w, static_cast<uint32_t>(m.kind), m.path, m.record, m.acg);
}
Status Get(const msgpack::object& o, WatchEvent* m) {
  uint32_t kind = 0;
  PROPELLER_RETURN_IF_ERROR(
      GetFields(o, 3, {"kind", "path", "record", "acg"}, &kind, &m->path, &m->record, &m->acg));
  if (kind < static_cast<uint32_t>(WatchKind::kAdded) ||
      kind > static_cast<uint32_t>(WatchKind::kChanged)) {
    return Status::Corruption("field 'kind' is not a watch kind (1 added, 2 removed, 3 changed)");
  }
  m->kind = static_cast<WatchKind>(kind);
  return Status::OK();
}

// WatchEventsChunk (kWatch partial frames, no envelope)
//   index field                  type               R  meaning                          since
//   0     events                 [WatchEvent]       R  empty: registered / heartbeat    1.5
//   1     unknown_attrs          [str]                 first frame: names unknown here  1.6
void Put(Writer& w, const WatchEventsChunk& m) { PutFields(w, m.events, m.unknown_attrs); }
Status Get(const msgpack::object& o, WatchEventsChunk* m) {
  return GetFields(o, 1, {"events", "unknown_attrs"}, &m->events, &m->unknown_attrs);
}

}  // namespace codec

void Encode(const WatchRequest& msg, std::string* out) { codec::EncodeMessage(msg, out); }
Status Decode(std::string_view bytes, WatchRequest* msg) {
  return codec::DecodeMessage("WatchRequest", bytes, msg);
}
void Encode(const WatchEventsChunk& msg, std::string* out) { codec::EncodeMessage(msg, out); }
Status Decode(std::string_view bytes, WatchEventsChunk* msg) {
  return codec::DecodeMessage("WatchEventsChunk", bytes, msg);
}

}  // namespace propeller::wire
