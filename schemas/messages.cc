// msgpack codecs of the wire messages (contract in messages.h). The field tables below are the
// protocol; golden bytes are pinned in messages_test.cc.
//
// How to read a field table:
//   index   position in the message's msgpack array
//   field   the struct member
//   type    msgpack type on the wire. "uint" / "int" = any msgpack integer form (writers use
//           the smallest); "uint32" = uint <= 2^32-1; "int64" = an integer in the int64 range;
//           "float64" = written as float64 (0xcb) even for whole numbers (docs/pitfalls.md MP-3),
//           read from float32, float64 or any integer; "T?" = nil (std::nullopt) or T; "[T]" =
//           array of T; struct names = that struct's array (its own table); FileId = [volume:
//           uint32, ino: uint]; FileRecord and Update = the arrays of record_format.cc.
//   R       "R" = required: a shorter array is Corruption. Fields without R take the struct's
//           default when the array ends before them (an older writer). Required fields are
//           those without which the message means nothing or something dangerous (e.g. a
//           HeartbeatReply without its index list would make the node drop every index).
//   since   protocol version (kProtocolVersion) that introduced the field.
// Every decoder ignores elements after the last field it knows (a newer writer), converts no
// types (an int where a str is expected is Corruption naming the field) and range-checks
// integers (a negative or > 2^32-1 value in a uint32 field is Corruption).
//
// Design choices:
// - ApplyRequest carries its updates inline as an array of record_format.cc update arrays (one
//   msgpack parse, and the same limits apply to every byte), not as an embedded update-batch
//   bin. The record arrays inside keep their own format version.
// - A reply's status code outside the StatusCode list (a newer peer) decodes as kInternal with
//   message "unknown status code N: <message>", so the number is not lost.
// - DecodeRequest accepts any uint16 message type: answering a type the daemon does not serve
//   (or does not know: MsgTypeName gives "unknown") with NotSupported is the dispatcher's job.
#include "schemas/messages.h"

#include <string>
#include <utility>

#include "schemas/wire_codec.h"

namespace propeller::wire {
namespace codec {

void Put(Writer& w, bool v) {
  if (v) {
    w.pk().pack_true();
  } else {
    w.pk().pack_false();
  }
}
void Put(Writer& w, uint32_t v) { w.pk().pack_uint32(v); }
void Put(Writer& w, uint64_t v) { w.pk().pack_uint64(v); }
void Put(Writer& w, int64_t v) { w.pk().pack_int64(v); }
void Put(Writer& w, double v) { msgpack_util::PackFloat64(w.out(), v); }
void Put(Writer& w, const std::string& v) { msgpack_util::PackString(w.pk(), v); }
void Put(Writer& w, IndexType v) { w.pk().pack_uint8(static_cast<uint8_t>(v)); }
void Put(Writer& w, const FileId& v) { PutFields(w, v.volume, v.ino); }
void Put(Writer& w, const FileRecord& v) { msgpack_util::PackRecord(v, w.out()); }
void Put(Writer& w, const Update& v) { msgpack_util::PackUpdate(v, w.out()); }

Status Get(const msgpack::object& o, bool* v) {
  if (o.type != msgpack::type::BOOLEAN) return Wrong("a bool");
  *v = o.via.boolean;
  return Status::OK();
}
Status Get(const msgpack::object& o, uint32_t* v) {
  return GetU32(o, v) ? Status::OK() : Wrong("a uint32");
}
Status Get(const msgpack::object& o, uint64_t* v) {
  return GetU64(o, v) ? Status::OK() : Wrong("a uint64");
}
Status Get(const msgpack::object& o, int64_t* v) {
  return GetI64(o, v) ? Status::OK() : Wrong("an int64");
}
Status Get(const msgpack::object& o, double* v) {
  switch (o.type) {
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      *v = o.via.f64;
      return Status::OK();
    case msgpack::type::POSITIVE_INTEGER:  // other writers may pack whole numbers as integers
      *v = static_cast<double>(o.via.u64);
      return Status::OK();
    case msgpack::type::NEGATIVE_INTEGER:
      *v = static_cast<double>(o.via.i64);
      return Status::OK();
    default:
      return Wrong("a number");
  }
}
Status Get(const msgpack::object& o, std::string* v) {
  return msgpack_util::GetString(o, v) ? Status::OK() : Wrong("a string");
}
Status Get(const msgpack::object& o, IndexType* v) {
  uint64_t u;
  if (!GetU64(o, &u) || u < static_cast<uint64_t>(IndexType::kBTree) ||
      u > static_cast<uint64_t>(IndexType::kKdTree)) {
    return Wrong("an index type (1 btree, 2 hash, 3 kdtree)");
  }
  *v = static_cast<IndexType>(u);
  return Status::OK();
}
// FileId: [volume: uint32 R, ino: uint R]
Status Get(const msgpack::object& o, FileId* v) {
  return GetFields(o, 2, {"volume", "ino"}, &v->volume, &v->ino);
}
Status Get(const msgpack::object& o, FileRecord* v) {
  return msgpack_util::DecodeRecordObject(o, v);
}
Status Get(const msgpack::object& o, Update* v) { return msgpack_util::DecodeUpdateObject(o, v); }

// ---- the messages --------------------------------------------------------------------------

// Empty: []
//   (no fields; a non-empty array is a newer Empty and is accepted)
void Put(Writer& w, const Empty&) { PutFields(w); }
Status Get(const msgpack::object& o, Empty*) {
  return o.type == msgpack::type::ARRAY ? Status::OK() : Wrong("an array");
}

// RegisterNodeRequest (kRegisterNode)
//   index field                  type               R  meaning                          since
//   0     node_id                uint32             R  0 = new node, else previous id   1.0
//   1     endpoint               str                R  where clients reach the node     1.0
void Put(Writer& w, const RegisterNodeRequest& m) { PutFields(w, m.node_id, m.endpoint); }
Status Get(const msgpack::object& o, RegisterNodeRequest* m) {
  return GetFields(o, 2, {"node_id", "endpoint"}, &m->node_id, &m->endpoint);
}

// RegisterNodeReply (kRegisterNode)
//   index field                  type               R  meaning                          since
//   0     node_id                uint32             R  the id assigned / confirmed      1.0
//   1     heartbeat_interval_ms  uint32                default 1000                     1.0
void Put(Writer& w, const RegisterNodeReply& m) {
  PutFields(w, m.node_id, m.heartbeat_interval_ms);
}
Status Get(const msgpack::object& o, RegisterNodeReply* m) {
  return GetFields(o, 1, {"node_id", "heartbeat_interval_ms"}, &m->node_id,
                   &m->heartbeat_interval_ms);
}

// AcgLoad (inside HeartbeatRequest, NodeStatusReply)
//   index field                  type               R  meaning                          since
//   0     acg                    uint               R  ACG id                           1.0
//   1     files                  uint                  files in it                      1.0
void Put(Writer& w, const AcgLoad& m) { PutFields(w, m.acg, m.files); }
Status Get(const msgpack::object& o, AcgLoad* m) {
  return GetFields(o, 1, {"acg", "files"}, &m->acg, &m->files);
}

// HeartbeatRequest (kHeartbeat)
//   index field                  type               R  meaning                          since
//   0     node_id                uint32             R  the sender                       1.0
//   1     acgs                   [AcgLoad]             ACGs the node holds              1.0
//   2     free_disk_bytes        uint                                                   1.0
//   3     load                   float64               1-minute load average            1.0
//   4     cached_updates         uint                  updates not yet committed        1.0
//   5     indexes                [str]                 user indexes built               1.0
void Put(Writer& w, const HeartbeatRequest& m) {
  PutFields(w, m.node_id, m.acgs, m.free_disk_bytes, m.load, m.cached_updates, m.indexes);
}
Status Get(const msgpack::object& o, HeartbeatRequest* m) {
  return GetFields(o, 1,
                   {"node_id", "acgs", "free_disk_bytes", "load", "cached_updates", "indexes"},
                   &m->node_id, &m->acgs, &m->free_disk_bytes, &m->load, &m->cached_updates,
                   &m->indexes);
}

// IndexDef (kCreateIndex; inside HeartbeatReply, IndexesReply, ClusterStatusReply)
//   index field                  type               R  meaning                          since
//   0     name                   str                R  index (= attribute) name         1.0
//   1     type                   uint 1..3          R  IndexType: 1 btree, 2 hash,      1.0
//                                                      3 kdtree; others are Corruption
void Put(Writer& w, const IndexDef& m) { PutFields(w, m.name, m.type); }
Status Get(const msgpack::object& o, IndexDef* m) {
  return GetFields(o, 2, {"name", "type"}, &m->name, &m->type);
}

// HeartbeatReply (kHeartbeat)
//   index field                  type               R  meaning                          since
//   0     reregister             bool               R  unknown node id: register again  1.0
//   1     indexes                [IndexDef]         R  the user-index catalogue (a      1.0
//                                                      missing list must not read as
//                                                      "drop every index")
//   2     merges                 [AcgMerge]            small ACGs to merge here         1.2
//   3     not_yours              [AcgLocation]         reported, owned elsewhere        1.3
//   4     moves                  [AcgLocation]         ACGs to move to node_id          1.4
void Put(Writer& w, const HeartbeatReply& m) {
  PutFields(w, m.reregister, m.indexes, m.merges, m.not_yours, m.moves);
}
Status Get(const msgpack::object& o, HeartbeatReply* m) {
  return GetFields(o, 2, {"reregister", "indexes", "merges", "not_yours", "moves"},
                   &m->reregister, &m->indexes, &m->merges, &m->not_yours, &m->moves);
}

// AcgMerge (inside HeartbeatReply)
//   index field                  type               R  meaning                          since
//   0     source                 uint               R  the ACG folded into target       1.2
//   1     target                 uint               R                                   1.2
void Put(Writer& w, const AcgMerge& m) { PutFields(w, m.source, m.target); }
Status Get(const msgpack::object& o, AcgMerge* m) {
  return GetFields(o, 2, {"source", "target"}, &m->source, &m->target);
}

// NodeInfo (inside NodesReply, ClusterStatusReply)
//   index field                  type               R  meaning                          since
//   0     node_id                uint32             R                                   1.0
//   1     endpoint               str                R                                   1.0
//   2     up                     bool               R                                   1.0
//   3     acgs                   uint                  ACGs on the node                 1.0
//   4     files                  uint                                                   1.0
//   5     free_disk_bytes        uint                                                   1.0
//   6     load                   float64                                                1.0
//   7     last_heartbeat_ns      int64                 master's wall clock; 0 = never   1.0
void Put(Writer& w, const NodeInfo& m) {
  PutFields(w, m.node_id, m.endpoint, m.up, m.acgs, m.files, m.free_disk_bytes, m.load,
            m.last_heartbeat_ns);
}
Status Get(const msgpack::object& o, NodeInfo* m) {
  return GetFields(o, 3,
                   {"node_id", "endpoint", "up", "acgs", "files", "free_disk_bytes", "load",
                    "last_heartbeat_ns"},
                   &m->node_id, &m->endpoint, &m->up, &m->acgs, &m->files, &m->free_disk_bytes,
                   &m->load, &m->last_heartbeat_ns);
}

// NodesReply (kListNodes, kIndexHolders)
//   index field                  type               R  meaning                          since
//   0     nodes                  [NodeInfo]         R                                   1.0
void Put(Writer& w, const NodesReply& m) { PutFields(w, m.nodes); }
Status Get(const msgpack::object& o, NodesReply* m) {
  return GetFields(o, 1, {"nodes"}, &m->nodes);
}

// FilesRequest (kLookupFiles, kForgetFiles)
//   index field                  type               R  meaning                          since
//   0     files                  [FileId]           R                                   1.0
//   1     generations            [uint]                forget: one per file, or empty   1.1
void Put(Writer& w, const FilesRequest& m) { PutFields(w, m.files, m.generations); }
Status Get(const msgpack::object& o, FilesRequest* m) {
  return GetFields(o, 1, {"files", "generations"}, &m->files, &m->generations);
}

// AssignItem (inside AssignFilesRequest)
//   index field                  type               R  meaning                          since
//   0     file                   FileId             R                                   1.0
//   1     app                    str                   creating executable; "" unknown  1.0
//   2     producers              [FileId]              files read before, heaviest      1.0
//                                                      edge first
//   3     fresh                  bool                  just created: place afresh       1.1
// (absent when false, so 1.0 bytes are unchanged)
void Put(Writer& w, const AssignItem& m) {
  if (!m.fresh) return PutFields(w, m.file, m.app, m.producers);
  PutFields(w, m.file, m.app, m.producers, m.fresh);
}
Status Get(const msgpack::object& o, AssignItem* m) {
  return GetFields(o, 1, {"file", "app", "producers", "fresh"}, &m->file, &m->app, &m->producers,
                   &m->fresh);
}

// AssignFilesRequest (kAssignFiles)
//   index field                  type               R  meaning                          since
//   0     items                  [AssignItem]       R                                   1.0
void Put(Writer& w, const AssignFilesRequest& m) { PutFields(w, m.items); }
Status Get(const msgpack::object& o, AssignFilesRequest* m) {
  return GetFields(o, 1, {"items"}, &m->items);
}

// FileLocation (inside LocationsReply)
//   index field                  type               R  meaning                          since
//   0     file                   FileId             R                                   1.0
//   1     acg                    uint               R  0 = not mapped                   1.0
//   2     node_id                uint32             R                                   1.0
//   3     endpoint               str                   of node_id; "" = unknown node    1.0
//   4     generation             uint                  of the mapping; 0 = none         1.1
// (absent when 0, so 1.0 bytes are unchanged)
void Put(Writer& w, const FileLocation& m) {
  if (m.generation == 0) return PutFields(w, m.file, m.acg, m.node_id, m.endpoint);
  PutFields(w, m.file, m.acg, m.node_id, m.endpoint, m.generation);
}
Status Get(const msgpack::object& o, FileLocation* m) {
  return GetFields(o, 3, {"file", "acg", "node_id", "endpoint", "generation"}, &m->file, &m->acg,
                   &m->node_id, &m->endpoint, &m->generation);
}

// LocationsReply (kLookupFiles, kAssignFiles)
//   index field                  type               R  meaning                          since
//   0     locations              [FileLocation]     R  one per requested file, in order 1.0
void Put(Writer& w, const LocationsReply& m) { PutFields(w, m.locations); }
Status Get(const msgpack::object& o, LocationsReply* m) {
  return GetFields(o, 1, {"locations"}, &m->locations);
}

// AcgLocation (inside AcgLocationsReply and the reply envelope's redirects)
//   index field                  type               R  meaning                          since
//   0     acg                    uint               R                                   1.0
//   1     node_id                uint32             R  0 = unknown ACG                  1.0
//   2     endpoint               str                                                    1.0
void Put(Writer& w, const AcgLocation& m) { PutFields(w, m.acg, m.node_id, m.endpoint); }
Status Get(const msgpack::object& o, AcgLocation* m) {
  return GetFields(o, 2, {"acg", "node_id", "endpoint"}, &m->acg, &m->node_id, &m->endpoint);
}

// LocateAcgsRequest (kLocateAcgs)
//   index field                  type               R  meaning                          since
//   0     acgs                   [uint]             R                                   1.0
void Put(Writer& w, const LocateAcgsRequest& m) { PutFields(w, m.acgs); }
Status Get(const msgpack::object& o, LocateAcgsRequest* m) {
  return GetFields(o, 1, {"acgs"}, &m->acgs);
}

// AcgLocationsReply (kLocateAcgs)
//   index field                  type               R  meaning                          since
//   0     locations              [AcgLocation]      R  in request order                 1.0
void Put(Writer& w, const AcgLocationsReply& m) { PutFields(w, m.locations); }
Status Get(const msgpack::object& o, AcgLocationsReply* m) {
  return GetFields(o, 1, {"locations"}, &m->locations);
}

// NewAcgRequest (kNewAcg)
//   index field                  type               R  meaning                          since
//   0     node_id                uint32             R  the asking node                  1.2
//   1     source                 uint               R  the ACG being split              1.2
void Put(Writer& w, const NewAcgRequest& m) { PutFields(w, m.node_id, m.source); }
Status Get(const msgpack::object& o, NewAcgRequest* m) {
  return GetFields(o, 2, {"node_id", "source"}, &m->node_id, &m->source);
}

// NewAcgReply (kNewAcg)
//   index field                  type               R  meaning                          since
//   0     acg                    uint               R  the new ACG's id                 1.2
void Put(Writer& w, const NewAcgReply& m) { PutFields(w, m.acg); }
Status Get(const msgpack::object& o, NewAcgReply* m) { return GetFields(o, 1, {"acg"}, &m->acg); }

// SplitDoneRequest (kSplitDone)
//   index field                  type               R  meaning                          since
//   0     node_id                uint32             R  owner of both ACGs               1.2
//   1     source                 uint               R                                   1.2
//   2     target                 uint               R                                   1.2
//   3     files                  [FileId]           R  moved from source to target      1.2
//   4     merged                 bool                  all of source: retire it         1.2
void Put(Writer& w, const SplitDoneRequest& m) {
  PutFields(w, m.node_id, m.source, m.target, m.files, m.merged);
}
Status Get(const msgpack::object& o, SplitDoneRequest* m) {
  return GetFields(o, 4, {"node_id", "source", "target", "files", "merged"}, &m->node_id,
                   &m->source, &m->target, &m->files, &m->merged);
}

// SplitDoneReply (kSplitDone)
//   index field                  type               R  meaning                          since
//   0     remapped               uint               R  files now mapped to target       1.2
void Put(Writer& w, const SplitDoneReply& m) { PutFields(w, m.remapped); }
Status Get(const msgpack::object& o, SplitDoneReply* m) {
  return GetFields(o, 1, {"remapped"}, &m->remapped);
}

// MoveAcgRequest (kMoveAcg)
//   index field                  type               R  meaning                          since
//   0     acg                    uint               R                                   1.3
//   1     from_node              uint32             R  its owner before the move        1.3
//   2     to_node                uint32             R  the asking node                   1.3
void Put(Writer& w, const MoveAcgRequest& m) { PutFields(w, m.acg, m.from_node, m.to_node); }
Status Get(const msgpack::object& o, MoveAcgRequest* m) {
  return GetFields(o, 3, {"acg", "from_node", "to_node"}, &m->acg, &m->from_node, &m->to_node);
}

// MigrateAcgRequest (kMigrateAcg)
//   index field                  type               R  meaning                          since
//   0     acg                    uint               R                                   1.3
//   1     to_node                uint32             R  the destination node             1.3
void Put(Writer& w, const MigrateAcgRequest& m) { PutFields(w, m.acg, m.to_node); }
Status Get(const msgpack::object& o, MigrateAcgRequest* m) {
  return GetFields(o, 2, {"acg", "to_node"}, &m->acg, &m->to_node);
}

// MigrateAcgReply (kMigrateAcg)
//   index field                  type               R  meaning                          since
//   0     bytes                  uint                  of the copy sent                 1.3
//   1     files                  uint                                                   1.3
//   2     micros                 uint                  freeze to drop                   1.3
void Put(Writer& w, const MigrateAcgReply& m) { PutFields(w, m.bytes, m.files, m.micros); }
Status Get(const msgpack::object& o, MigrateAcgReply* m) {
  return GetFields(o, 0, {"bytes", "files", "micros"}, &m->bytes, &m->files, &m->micros);
}

// AdoptAcgChunk (kAdoptAcg)
//   index field                  type               R  meaning                          since
//   0     acg                    uint               R                                   1.3
//   1     from_node              uint32             R  the ACG's owner                  1.3
//   2     offset                 uint               R  of `data` in the copy            1.3
//   3     total_bytes            uint               R  of the copy                      1.3
//   4     data                   bin                R                                   1.3
//   5     crc                    uint32                masked CRC-32C (last part)       1.3
void Put(Writer& w, const AdoptAcgChunk& m) {
  w.pk().pack_array(6);
  Put(w, m.acg);
  Put(w, m.from_node);
  Put(w, m.offset);
  Put(w, m.total_bytes);
  msgpack_util::PackBin(w.pk(), m.data);
  Put(w, m.crc);
}
Status Get(const msgpack::object& o, AdoptAcgChunk* m) {
  if (o.type != msgpack::type::ARRAY || o.via.array.size < 5) {
    return Wrong("an array of at least 5 fields");
  }
  const msgpack::object* f = o.via.array.ptr;
  if (!GetU64(f[0], &m->acg) || !GetU32(f[1], &m->from_node) || !GetU64(f[2], &m->offset) ||
      !GetU64(f[3], &m->total_bytes) || f[4].type != msgpack::type::BIN ||
      (o.via.array.size > 5 && !GetU32(f[5], &m->crc))) {
    return Wrong("an ACG copy part (acg, from_node, offset, total_bytes, bin data, crc)");
  }
  m->data.assign(f[4].via.bin.ptr, f[4].via.bin.size);
  return Status::OK();
}

// ReleaseAcgRequest (kReleaseAcg)
//   index field                  type               R  meaning                          since
//   0     acg                    uint               R                                   1.3
void Put(Writer& w, const ReleaseAcgRequest& m) { PutFields(w, m.acg); }
Status Get(const msgpack::object& o, ReleaseAcgRequest* m) {
  return GetFields(o, 1, {"acg"}, &m->acg);
}

// IndexName (kDropIndex, kIndexHolders)
//   index field                  type               R  meaning                          since
//   0     name                   str                R                                   1.0
void Put(Writer& w, const IndexName& m) { PutFields(w, m.name); }
Status Get(const msgpack::object& o, IndexName* m) { return GetFields(o, 1, {"name"}, &m->name); }

// IndexesReply (kListIndexes)
//   index field                  type               R  meaning                          since
//   0     indexes                [IndexDef]         R  user-defined indexes, by name    1.0
void Put(Writer& w, const IndexesReply& m) { PutFields(w, m.indexes); }
Status Get(const msgpack::object& o, IndexesReply* m) {
  return GetFields(o, 1, {"indexes"}, &m->indexes);
}

// RegisterVolumeRequest (kRegisterVolume)
//   index field                  type               R  meaning                          since
//   0     root                   str                R  absolute path of the volume root 1.0
void Put(Writer& w, const RegisterVolumeRequest& m) { PutFields(w, m.root); }
Status Get(const msgpack::object& o, RegisterVolumeRequest* m) {
  return GetFields(o, 1, {"root"}, &m->root);
}

// VolumeInfo (kRegisterVolume reply; inside VolumesReply, ClusterStatusReply)
//   index field                  type               R  meaning                          since
//   0     volume                 uint32             R  volume id (from 1)               1.0
//   1     root                   str                R                                   1.0
void Put(Writer& w, const VolumeInfo& m) { PutFields(w, m.volume, m.root); }
Status Get(const msgpack::object& o, VolumeInfo* m) {
  return GetFields(o, 2, {"volume", "root"}, &m->volume, &m->root);
}

// VolumesReply (kListVolumes)
//   index field                  type               R  meaning                          since
//   0     volumes                [VolumeInfo]       R                                   1.0
void Put(Writer& w, const VolumesReply& m) { PutFields(w, m.volumes); }
Status Get(const msgpack::object& o, VolumesReply* m) {
  return GetFields(o, 1, {"volumes"}, &m->volumes);
}

// ClusterStatusReply (kClusterStatus)
//   index field                  type               R  meaning                          since
//   0     nodes                  [NodeInfo]         R                                   1.0
//   1     acgs                   uint                  ACGs mapped by the master        1.0
//   2     files                  uint                  files mapped by the master       1.0
//   3     indexes                [IndexDef]                                             1.0
//   4     volumes                [VolumeInfo]                                           1.0
void Put(Writer& w, const ClusterStatusReply& m) {
  PutFields(w, m.nodes, m.acgs, m.files, m.indexes, m.volumes);
}
Status Get(const msgpack::object& o, ClusterStatusReply* m) {
  return GetFields(o, 1, {"nodes", "acgs", "files", "indexes", "volumes"}, &m->nodes, &m->acgs,
                   &m->files, &m->indexes, &m->volumes);
}

// ApplyRequest (kApply)
//   index field                  type               R  meaning                          since
//   0     updates                [Update]           R  record_format.cc update arrays,  1.0
//                                                      inline (not a nested batch bin)
void Put(Writer& w, const ApplyRequest& m) { PutFields(w, m.updates); }
Status Get(const msgpack::object& o, ApplyRequest* m) {
  return GetFields(o, 1, {"updates"}, &m->updates);
}

// WireCredentials (inside SearchQuery)
//   index field                  type               R  meaning                          since
//   0     uid                    uint32             R                                   1.0
//   1     gid                    uint32             R                                   1.0
//   2     groups                 [uint32]              supplementary groups             1.0
void Put(Writer& w, const WireCredentials& m) { PutFields(w, m.uid, m.gid, m.groups); }
Status Get(const msgpack::object& o, WireCredentials* m) {
  return GetFields(o, 2, {"uid", "gid", "groups"}, &m->uid, &m->gid, &m->groups);
}

// SearchQuery (kSearch)
//   index field                  type               R  meaning                          since
//   0     query                  str                R  query text (docs/query.md)       1.0
//   1     scope                  str                   default "/"                      1.0
//   2     volume                 uint32?               nil = every volume               1.0
//   3     creds                  WireCredentials?      nil = none given                 1.0
//   4     limit                  uint                  0 = none                         1.0
//   5     sort_by                str                   "" or a sort key                 1.0
//   6     descending             bool                                                   1.0
//   7     now_ns                 int64                 0 = the node's clock             1.0
//   8     acgs                   [uint]                only these; empty = all          1.3
//   9     roots                  [VolumeInfo]          paths shown under these roots    1.5
void Put(Writer& w, const SearchQuery& m) {
  PutFields(w, m.query, m.scope, m.volume, m.creds, m.limit, m.sort_by, m.descending, m.now_ns,
            m.acgs, m.roots);
}
Status Get(const msgpack::object& o, SearchQuery* m) {
  return GetFields(o, 1,
                   {"query", "scope", "volume", "creds", "limit", "sort_by", "descending",
                    "now_ns", "acgs", "roots"},
                   &m->query, &m->scope, &m->volume, &m->creds, &m->limit, &m->sort_by,
                   &m->descending, &m->now_ns, &m->acgs, &m->roots);
}

// WireHit (inside SearchHitsChunk)
//   index field                  type               R  meaning                          since
//   0     path                   str                R  the matching path                1.0
//   1     record                 FileRecord         R  record_format.cc array           1.0
//   2     acg                    uint                                                   1.0
void Put(Writer& w, const WireHit& m) { PutFields(w, m.path, m.record, m.acg); }
Status Get(const msgpack::object& o, WireHit* m) {
  return GetFields(o, 2, {"path", "record", "acg"}, &m->path, &m->record, &m->acg);
}

// SearchHitsChunk (kSearch partial frames, no envelope)
//   index field                  type               R  meaning                          since
//   0     hits                   [WireHit]          R                                   1.0
void Put(Writer& w, const SearchHitsChunk& m) { PutFields(w, m.hits); }
Status Get(const msgpack::object& o, SearchHitsChunk* m) {
  return GetFields(o, 1, {"hits"}, &m->hits);
}

// SearchDone (kSearch final reply)
//   index field                  type               R  meaning                          since
//   0     acgs_total             uint                  ACGs considered                  1.0
//   1     acgs_skipped           uint                  pruned by summaries              1.0
//   2     candidates             uint                  records examined                 1.0
//   3     hits                   uint                  hits sent                        1.0
//   4     moved                  [AcgLocation]         moved away lately, not searched  1.3
//   5     adopted                [uint]                adopted lately, searched         1.3
//   6     unknown_attrs          [str]                 user attributes unknown here     1.4
void Put(Writer& w, const SearchDone& m) {
  PutFields(w, m.acgs_total, m.acgs_skipped, m.candidates, m.hits, m.moved, m.adopted,
            m.unknown_attrs);
}
Status Get(const msgpack::object& o, SearchDone* m) {
  return GetFields(o, 0,
                   {"acgs_total", "acgs_skipped", "candidates", "hits", "moved", "adopted",
                    "unknown_attrs"},
                   &m->acgs_total, &m->acgs_skipped, &m->candidates, &m->hits, &m->moved,
                   &m->adopted, &m->unknown_attrs);
}

// GetRecordRequest (kGetRecord)
//   index field                  type               R  meaning                          since
//   0     acg                    uint               R                                   1.0
//   1     file                   FileId             R                                   1.0
void Put(Writer& w, const GetRecordRequest& m) { PutFields(w, m.acg, m.file); }
Status Get(const msgpack::object& o, GetRecordRequest* m) {
  return GetFields(o, 2, {"acg", "file"}, &m->acg, &m->file);
}

// RecordReply (kGetRecord)
//   index field                  type               R  meaning                          since
//   0     record                 FileRecord         R  record_format.cc array           1.0
void Put(Writer& w, const RecordReply& m) { PutFields(w, m.record); }
Status Get(const msgpack::object& o, RecordReply* m) {
  return GetFields(o, 1, {"record"}, &m->record);
}

// NodeStatusReply (kNodeStatus)
//   index field                  type               R  meaning                          since
//   0     node_id                uint32             R                                   1.0
//   1     acgs                   uint                                                   1.0
//   2     files                  uint                                                   1.0
//   3     cached_updates         uint                                                   1.0
//   4     wal_bytes              uint                                                   1.0
//   5     disk_bytes             uint                                                   1.0
//   6     index_memory_bytes     uint                                                   1.0
//   7     acg_list               [AcgLoad]                                              1.0
//   8     commit_error           str                   "" = commits succeed             1.5
//   9     failing_since_ns       int                   wall clock; 0 = not failing      1.5
//   10    damaged_acgs           [str]                 "ACG <id>: why", not rebuilt     1.6
void Put(Writer& w, const NodeStatusReply& m) {
  PutFields(w, m.node_id, m.acgs, m.files, m.cached_updates, m.wal_bytes, m.disk_bytes,
            m.index_memory_bytes, m.acg_list, m.commit_error, m.failing_since_ns,
            m.damaged_acgs);
}
Status Get(const msgpack::object& o, NodeStatusReply* m) {
  return GetFields(o, 1,
                   {"node_id", "acgs", "files", "cached_updates", "wal_bytes", "disk_bytes",
                    "index_memory_bytes", "acg_list", "commit_error", "failing_since_ns",
                    "damaged_acgs"},
                   &m->node_id, &m->acgs, &m->files, &m->cached_updates, &m->wal_bytes,
                   &m->disk_bytes, &m->index_memory_bytes, &m->acg_list, &m->commit_error,
                   &m->failing_since_ns, &m->damaged_acgs);
}

// MountStatusReply (kMountStatus)
//   index field                  type               R  meaning                          since
//   0     pending                uint               R  updates in the mount's queue     1.6
//   1     degraded_since_ns      int                   wall clock; 0 = not degraded     1.6
//   2     last_error             str                                                    1.6
//   3     sent                   uint                                                   1.6
//   4     queued                 uint                                                   1.6
//   5     delivered              uint                                                   1.6
//   6     refused                uint                                                   1.6
//   7     errors                 uint                                                   1.6
//   8     admit_refusals         uint                                                   1.6
void Put(Writer& w, const MountStatusReply& m) {
  PutFields(w, m.pending, m.degraded_since_ns, m.last_error, m.sent, m.queued, m.delivered,
            m.refused, m.errors, m.admit_refusals);
}
Status Get(const msgpack::object& o, MountStatusReply* m) {
  return GetFields(o, 1,
                   {"pending", "degraded_since_ns", "last_error", "sent", "queued", "delivered",
                    "refused", "errors", "admit_refusals"},
                   &m->pending, &m->degraded_since_ns, &m->last_error, &m->sent, &m->queued,
                   &m->delivered, &m->refused, &m->errors, &m->admit_refusals);
}

// Ping (kPing, echoed)
//   index field                  type               R  meaning                          since
//   0     payload                str                   echoed back; default ""          1.0
void Put(Writer& w, const Ping& m) { PutFields(w, m.payload); }
Status Get(const msgpack::object& o, Ping* m) { return GetFields(o, 0, {"payload"}, &m->payload); }

// ListEdgesRequest (kListEdges)
//   index field                  type               R  meaning                          since
//   0     acg                    uint                  0 = every ACG of the node        1.0
void Put(Writer& w, const ListEdgesRequest& m) { PutFields(w, m.acg); }
Status Get(const msgpack::object& o, ListEdgesRequest* m) {
  return GetFields(o, 0, {"acg"}, &m->acg);
}

// WireEdge (inside EdgesReply): the ACG edge src -> dst (src was read before dst was written)
//   index field                  type               R  meaning                          since
//   0     acg                    uint               R  the ACG holding the edge         1.0
//   1     src                    FileId             R                                   1.0
//   2     dst                    FileId             R                                   1.0
//   3     weight                 uint               R  executions that made it          1.0
//   4     src_generation         uint32                src's inode generation; 0 = none 1.7
//   5     dst_generation         uint32                dst's inode generation; 0 = none 1.7
void Put(Writer& w, const WireEdge& m) {
  PutFields(w, m.acg, m.src, m.dst, m.weight, m.src_generation, m.dst_generation);
}
Status Get(const msgpack::object& o, WireEdge* m) {
  return GetFields(o, 4, {"acg", "src", "dst", "weight", "src_generation", "dst_generation"},
                   &m->acg, &m->src, &m->dst, &m->weight, &m->src_generation,
                   &m->dst_generation);
}

// EdgesReply (kListEdges)
//   index field                  type               R  meaning                          since
//   0     edges                  [WireEdge]         R                                   1.0
//   1     truncated              bool                  more than kMaxEdgesPerReply      1.0
void Put(Writer& w, const EdgesReply& m) { PutFields(w, m.edges, m.truncated); }
Status Get(const msgpack::object& o, EdgesReply* m) {
  return GetFields(o, 1, {"edges", "truncated"}, &m->edges, &m->truncated);
}

}  // namespace codec

namespace {

using namespace codec;

Status OtherMajor(uint32_t version) {
  return Status::NotSupported("protocol version " + std::to_string(version) + ", expected " +
                              std::to_string(kProtocolVersion));
}

bool SameMajor(uint32_t version) { return version / 1000 == kProtocolVersion / 1000; }

Status GetBin(const msgpack::object& o, std::string_view* v) {
  if (o.type != msgpack::type::BIN) return Wrong("a bin");
  *v = std::string_view(o.via.bin.ptr, o.via.bin.size);  // points into the input (see header)
  return Status::OK();
}

// Reads field `i` of an envelope array into *v with `get`; Corruption names the field.
template <typename T, typename GetFn>
Status EnvelopeField(const char* what, const msgpack::object& o, size_t i, const char* name,
                     T* v, GetFn get) {
  if (i >= o.via.array.size) return Status::OK();  // missing optional field: default
  Status s = get(o.via.array.ptr[i], v);
  if (!s.ok()) {
    return Status::Corruption(std::string(what) + ": field '" + name + "' " + s.message());
  }
  return Status::OK();
}

// Reads the version (field 0) of an envelope with at least `required` fields.
Status EnvelopeVersion(const char* what, const msgpack::object& o, size_t required,
                       uint32_t* version) {
  if (o.type != msgpack::type::ARRAY) {
    return Status::Corruption(std::string(what) + ": not an array");
  }
  if (o.via.array.size < 1) return Status::Corruption(std::string(what) + ": empty array");
  PROPELLER_RETURN_IF_ERROR(EnvelopeField(what, o, 0, "version", version,
                                          [](const msgpack::object& f, uint32_t* v) {
                                            return Get(f, v);
                                          }));
  // A different major version may lay the rest out differently: only a same-major envelope
  // must have every required field.
  if (SameMajor(*version) && o.via.array.size < required) {
    return Status::Corruption(std::string(what) + ": " + std::to_string(o.via.array.size) +
                              " fields, needs at least " + std::to_string(required));
  }
  return Status::OK();
}

}  // namespace

const char* MsgTypeName(MsgType type) {
  switch (type) {
    case MsgType::kRegisterNode: return "register-node";
    case MsgType::kHeartbeat: return "heartbeat";
    case MsgType::kLookupFiles: return "lookup-files";
    case MsgType::kAssignFiles: return "assign-files";
    case MsgType::kForgetFiles: return "forget-files";
    case MsgType::kLocateAcgs: return "locate-acgs";
    case MsgType::kListNodes: return "list-nodes";
    case MsgType::kCreateIndex: return "create-index";
    case MsgType::kDropIndex: return "drop-index";
    case MsgType::kListIndexes: return "list-indexes";
    case MsgType::kClusterStatus: return "cluster-status";
    case MsgType::kRegisterVolume: return "register-volume";
    case MsgType::kListVolumes: return "list-volumes";
    case MsgType::kIndexHolders: return "index-holders";
    case MsgType::kNewAcg: return "new-acg";
    case MsgType::kSplitDone: return "split-done";
    case MsgType::kApply: return "apply";
    case MsgType::kSearch: return "search";
    case MsgType::kGetRecord: return "get-record";
    case MsgType::kNodeStatus: return "node-status";
    case MsgType::kMountStatus: return "mount-status";
    case MsgType::kRemoveVolume: return "remove-volume";
    case MsgType::kPing: return "ping";
    case MsgType::kListEdges: return "list-edges";
    case MsgType::kMoveAcg: return "move-acg";
    case MsgType::kMigrateAcg: return "migrate-acg";
    case MsgType::kAdoptAcg: return "adopt-acg";
    case MsgType::kReleaseAcg: return "release-acg";
    case MsgType::kWatch: return "watch";
  }
  return "unknown";
}

#define PROPELLER_WIRE_MESSAGE(T)                                                            \
  void Encode(const T& msg, std::string* out) { EncodeMessage(msg, out); }                  \
  Status Decode(std::string_view bytes, T* msg) { return DecodeMessage(#T, bytes, msg); }
PROPELLER_WIRE_MESSAGE(Empty)
PROPELLER_WIRE_MESSAGE(RegisterNodeRequest)
PROPELLER_WIRE_MESSAGE(RegisterNodeReply)
PROPELLER_WIRE_MESSAGE(HeartbeatRequest)
PROPELLER_WIRE_MESSAGE(HeartbeatReply)
PROPELLER_WIRE_MESSAGE(NodesReply)
PROPELLER_WIRE_MESSAGE(FilesRequest)
PROPELLER_WIRE_MESSAGE(AssignFilesRequest)
PROPELLER_WIRE_MESSAGE(LocationsReply)
PROPELLER_WIRE_MESSAGE(LocateAcgsRequest)
PROPELLER_WIRE_MESSAGE(AcgLocationsReply)
PROPELLER_WIRE_MESSAGE(NewAcgRequest)
PROPELLER_WIRE_MESSAGE(NewAcgReply)
PROPELLER_WIRE_MESSAGE(SplitDoneRequest)
PROPELLER_WIRE_MESSAGE(SplitDoneReply)
PROPELLER_WIRE_MESSAGE(IndexDef)
PROPELLER_WIRE_MESSAGE(IndexName)
PROPELLER_WIRE_MESSAGE(IndexesReply)
PROPELLER_WIRE_MESSAGE(RegisterVolumeRequest)
PROPELLER_WIRE_MESSAGE(VolumeInfo)
PROPELLER_WIRE_MESSAGE(VolumesReply)
PROPELLER_WIRE_MESSAGE(ClusterStatusReply)
PROPELLER_WIRE_MESSAGE(ApplyRequest)
PROPELLER_WIRE_MESSAGE(SearchQuery)
PROPELLER_WIRE_MESSAGE(SearchHitsChunk)
PROPELLER_WIRE_MESSAGE(SearchDone)
PROPELLER_WIRE_MESSAGE(GetRecordRequest)
PROPELLER_WIRE_MESSAGE(RecordReply)
PROPELLER_WIRE_MESSAGE(NodeStatusReply)
PROPELLER_WIRE_MESSAGE(MountStatusReply)
PROPELLER_WIRE_MESSAGE(Ping)
PROPELLER_WIRE_MESSAGE(ListEdgesRequest)
PROPELLER_WIRE_MESSAGE(EdgesReply)
PROPELLER_WIRE_MESSAGE(MoveAcgRequest)
PROPELLER_WIRE_MESSAGE(MigrateAcgRequest)
PROPELLER_WIRE_MESSAGE(MigrateAcgReply)
PROPELLER_WIRE_MESSAGE(AdoptAcgChunk)
PROPELLER_WIRE_MESSAGE(ReleaseAcgRequest)
#undef PROPELLER_WIRE_MESSAGE

// Request envelope
//   index field                  type               R  meaning                          since
//   0     version                uint32             R  kProtocolVersion of the sender   1.0
//   1     type                   uint <= 0xffff     R  MsgType (any number accepted)    1.0
//   2     body                   bin                R  the request message's encoding   1.0
// With another major version only field 0 is checked: NotSupported, with the fields that did
// decode filled in.
std::string EncodeRequest(MsgType type, std::string_view body) {
  std::string out;
  out.reserve(body.size() + 16);
  StringSink sink(&out);
  Packer pk(sink);
  pk.pack_array(3);
  pk.pack_uint32(kProtocolVersion);
  pk.pack_uint16(static_cast<uint16_t>(type));
  msgpack_util::PackBin(pk, body);
  return out;
}

Status DecodeRequest(std::string_view bytes, RequestEnvelope* envelope) {
  constexpr const char* kWhat = "request envelope";
  return msgpack_util::ParseAndDecode(
      kWhat, bytes, kMaxWireArray, kMaxDepth,
      [envelope](const msgpack::object& o) -> Status {
        RequestEnvelope e;
        PROPELLER_RETURN_IF_ERROR(EnvelopeVersion(kWhat, o, 3, &e.version));
        uint32_t type = 0;
        Status st = EnvelopeField(kWhat, o, 1, "type", &type,
                                  [](const msgpack::object& f, uint32_t* v) {
                                    if (!GetU32(f, v) || *v > 0xffff) return Wrong("a uint16");
                                    return Status::OK();
                                  });
        if (st.ok()) {
          e.type = static_cast<MsgType>(type);
          st = EnvelopeField(kWhat, o, 2, "body", &e.body, GetBin);
        }
        if (!SameMajor(e.version)) {
          *envelope = e;
          return OtherMajor(e.version);
        }
        if (!st.ok()) return st;
        *envelope = e;
        return Status::OK();
      });
}

// Reply envelope
//   index field                  type               R  meaning                          since
//   0     version                uint32             R  kProtocolVersion of the sender   1.0
//   1     code                   int                R  StatusCode; unknown numbers      1.0
//                                                      decode as kInternal
//   2     message                str                   status message ("" when OK)      1.0
//   3     redirects              [AcgLocation]         owners, with kRedirect           1.0
//   4     body                   bin                   reply message when OK, else ""   1.0
std::string EncodeReply(const Status& status, std::string_view body,
                        const std::vector<AcgLocation>& redirects) {
  std::string out;
  out.reserve((status.ok() ? body.size() : status.message().size()) + 16);
  Writer w(&out);
  w.pk().pack_array(5);
  w.pk().pack_uint32(kProtocolVersion);
  w.pk().pack_int32(static_cast<int32_t>(status.code()));
  msgpack_util::PackString(w.pk(), status.message());
  Put(w, redirects);
  msgpack_util::PackBin(w.pk(), status.ok() ? body : std::string_view());
  return out;
}

Status DecodeReply(std::string_view bytes, ReplyEnvelope* envelope) {
  constexpr const char* kWhat = "reply envelope";
  return msgpack_util::ParseAndDecode(
      kWhat, bytes, kMaxWireArray, kMaxDepth,
      [envelope](const msgpack::object& o) -> Status {
        ReplyEnvelope e;
        PROPELLER_RETURN_IF_ERROR(EnvelopeVersion(kWhat, o, 2, &e.version));
        int64_t code = 0;
        std::string message;
        Status st = EnvelopeField(kWhat, o, 1, "code", &code,
                                  [](const msgpack::object& f, int64_t* v) { return Get(f, v); });
        if (st.ok()) {
          st = EnvelopeField(kWhat, o, 2, "message", &message,
                             [](const msgpack::object& f, std::string* v) { return Get(f, v); });
        }
        if (st.ok()) {
          st = EnvelopeField(
              kWhat, o, 3, "redirects", &e.redirects,
              [](const msgpack::object& f, std::vector<AcgLocation>* v) { return Get(f, v); });
        }
        if (st.ok()) st = EnvelopeField(kWhat, o, 4, "body", &e.body, GetBin);
        if (code == 0) {
          e.status = Status::OK();
        } else if (code > 0 && code <= static_cast<int64_t>(StatusCode::kRedirect)) {
          e.status = Status(static_cast<StatusCode>(code), message);
        } else {
          e.status = Status::Internal("unknown status code " + std::to_string(code) + ": " +
                                      message);
        }
        if (!SameMajor(e.version)) {
          *envelope = std::move(e);
          return OtherMajor(envelope->version);
        }
        if (!st.ok()) return st;
        *envelope = std::move(e);
        return Status::OK();
      });
}

void SearchHitsChunkEncoder::Add(const std::string& path, const FileRecord& record,
                                 uint64_t acg) {
  // As Put(WireHit) writes the struct.
  codec::Writer w(&body_);
  w.pk().pack_array(3);
  codec::Put(w, path);
  codec::Put(w, record);
  codec::Put(w, acg);
  ++hits_;
}

void SearchHitsChunkEncoder::Finish(std::string* frame) {
  // As Put(SearchHitsChunk): the struct's one field, the array of hits.
  frame->clear();
  codec::Writer w(frame);
  w.pk().pack_array(1);
  w.pk().pack_array(static_cast<uint32_t>(hits_));
  frame->append(body_);
  body_.clear();
  hits_ = 0;
}

}  // namespace propeller::wire
